//! `sluice-core`: the Sluice pipeline runtime.
//!
//! **Status: not yet implemented.** This crate will hold the host runtime (sources, stages,
//! the parallel executor, deterministic randomness and per-stage statistics). Until then it
//! only re-exports the TFRecord and `tf.train.Example` layer from [`sluice_proto`], which is
//! complete and usable today:
//!
//! ```
//! use sluice_core::proto::tfrecord::{Compression, TfRecordReader, TfRecordWriter};
//!
//! let mut out = Vec::new();
//! let mut w = TfRecordWriter::new(&mut out, Compression::None).unwrap();
//! w.write_record(b"hello").unwrap();
//! w.finish().unwrap();
//! let records: Vec<_> = TfRecordReader::new(&out[..], "<memory>", Default::default())
//!     .collect::<Result<_, _>>()
//!     .unwrap();
//! assert_eq!(&records[0].data[..], b"hello");
//! ```
#![forbid(unsafe_code)]

pub use sluice_proto as proto;
