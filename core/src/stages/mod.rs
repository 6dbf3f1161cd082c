//! The built-in stages, one per file, each a serde `*Spec` (what the user writes) that is
//! also the [`Stage`](crate::Stage) whose `build` starts it.

pub(crate) mod batch;
pub(crate) mod bucket_by_sequence_length;
pub(crate) mod cache;
pub(crate) mod choose_from;
pub(crate) mod concatenate;
pub(crate) mod enumerate;
pub(crate) mod filter;
pub(crate) mod group_by_window;
pub(crate) mod image_ops;
pub(crate) mod image_ops_batch;
mod image_ops_validate;
pub(crate) mod interleave;
pub(crate) mod map;
pub(crate) mod map_chunks;
pub(crate) mod padded_batch;
pub(crate) mod parse_example;
pub(crate) mod prefetch;
pub(crate) mod preprocessing;
pub(crate) mod rejection_resample;
pub(crate) mod repeat;
pub(crate) mod sample_from;
pub(crate) mod scan;
pub(crate) mod shard;
pub(crate) mod shuffle;
pub(crate) mod skip;
pub(crate) mod take;
pub(crate) mod unbatch;
pub(crate) mod window;
pub(crate) mod zip;

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
