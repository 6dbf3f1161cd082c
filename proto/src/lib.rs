//! `sluice-proto`: TensorFlow's `tf.train.Example` and `SequenceExample` messages, their
//! canonical JSON, and TFRecord files read and written byte for byte as TensorFlow does.
//!
//! ```
//! use sluice_proto::tfrecord::{Compression, ReaderOptions, TfRecordReader, TfRecordWriter};
//! use sluice_proto::{Example, TfMessage};
//!
//! // Write two Examples to a GZIP-compressed TFRecord stream...
//! let mut file = Vec::new();
//! let mut writer = TfRecordWriter::new(&mut file, Compression::Gzip)?;
//! for label in ["1", "2"] {
//!     let json = format!(r#"{{"features":{{"feature":{{"label":{{"int64List":{{"value":["{label}"]}}}}}}}}}}"#);
//!     writer.write_record(&Example::from_json(&json)?.to_bytes())?;
//! }
//! writer.finish()?;
//!
//! // ...and read them back, detecting the compression.
//! let mut labels = Vec::new();
//! for record in TfRecordReader::new(&file[..], "labels.tfrecord.gz", ReaderOptions::default()) {
//!     let record = record?;
//!     let example = Example::from_record("labels.tfrecord.gz", &record)?;
//!     labels.push(example.to_json_value()["features"]["feature"]["label"]["int64List"]["value"][0].clone());
//! }
//! assert_eq!(labels, ["1", "2"]);
//! # Ok::<(), sluice_proto::Error>(())
//! ```
//!
//! - [`example`]: the generated messages (prost), with serde implementations of the
//!   canonical protobuf JSON mapping (pbjson).
//! - [`TfMessage`]: decoding from records and bytes, JSON in both directions.
//! - [`tfrecord`]: the reader and writer.
//! - [`event`]: TensorBoard's `Event` records (an event file is a TFRecord file of them).
#![forbid(unsafe_code)]

mod error;
pub mod event;
pub mod example;
mod message;
pub mod tfrecord;

pub use error::{Checksum, Error, Result};
pub use example::{Example, SequenceExample};
pub use message::TfMessage;
