//! The executor: worker threads, bounded channels, ordered reassembly, shutdown.

pub(crate) mod gate;
pub(crate) mod parallel;
pub(crate) mod prefetch;
pub(crate) mod shutdown;
