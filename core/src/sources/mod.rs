//! Sources: file lists, TFRecord files (in order, or globally shuffled through record
//! indexes), in-memory elements and `range`.

#[cfg(feature = "columnar")]
pub(crate) mod arrow_ipc;
#[cfg(feature = "columnar")]
pub(crate) mod columnar;
pub(crate) mod csv;
pub(crate) mod files;
pub(crate) mod fixed_length;
pub(crate) mod format;
pub(crate) mod format_batch;
pub(crate) mod global_shuffle;
pub(crate) mod image_folder;
#[cfg(feature = "columnar")]
pub(crate) mod ipc_checked;
pub(crate) mod memory;
pub(crate) mod numpy;
#[cfg(feature = "columnar")]
pub(crate) mod parquet;
pub(crate) mod permutation;
pub(crate) mod record_index;
pub(crate) mod sql;
pub(crate) mod storage;
pub(crate) mod text_lines;
pub mod tfds;
pub(crate) mod tfrecord;
