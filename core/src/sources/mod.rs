//! Sources: file lists, TFRecord files (in order, or globally shuffled through record
//! indexes), in-memory elements and `range`.

pub mod files;
pub mod global_shuffle;
pub mod memory;
pub mod permutation;
pub mod record_index;
pub mod tfrecord;
