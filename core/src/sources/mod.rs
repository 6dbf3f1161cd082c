//! Sources: file lists, TFRecord files, in-memory elements and `range`.

pub mod files;
pub mod memory;
pub mod tfrecord;
