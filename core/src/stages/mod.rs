//! The built-in stages, one per file, each a serde `*Spec` (what the user writes) that is
//! also the [`Stage`](crate::Stage) whose `build` starts it.

pub mod batch;
pub mod cache;
pub mod concatenate;
pub mod image_ops;
pub mod image_ops_batch;
mod image_ops_validate;
pub mod interleave;
pub mod map;
pub mod map_chunks;
pub mod padded_batch;
pub mod parse_example;
pub mod prefetch;
pub mod repeat;
pub mod sample_from;
pub mod shard;
pub mod shuffle;
pub mod skip;
pub mod take;
pub mod unbatch;
pub mod zip;

use crate::error::{Error, Result};
use crate::run::Input;

/// The one input of a single-input stage.
pub(crate) fn single_input<'a>(inputs: &'a [Input], stage: &str) -> Result<&'a Input> {
    match inputs {
        [one] => Ok(one),
        _ => Err(Error::invalid(format!(
            "{stage} takes exactly one input, got {}",
            inputs.len()
        ))),
    }
}
