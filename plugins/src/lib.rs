//! `sluice-plugins`: the native (cdylib) plugin host.
//!
//! **Status: not yet implemented.** Nothing in this crate works yet; it exists so the
//! workspace layout is in place. It will load plugins built against `sluice-sdk` with
//! `libloading`.
#![forbid(unsafe_code)]
