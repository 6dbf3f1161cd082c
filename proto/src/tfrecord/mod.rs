//! TFRecord files, byte-compatible with TensorFlow.
//!
//! A TFRecord stream is a sequence of records, each
//!
//! ```text
//! u64 length (little-endian) | u32 masked CRC32C of the 8 length bytes | data | u32 masked CRC32C of data
//! ```
//!
//! where `mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8` (wrapping). A file may be
//! compressed as a whole with GZIP or ZLIB. [`TfRecordReader`] reads all three (or detects
//! which), verifies both checksums and reports damage with TensorFlow's exact messages;
//! [`TfRecordWriter`] writes all three.
//!
//! ```
//! use sluice_proto::tfrecord::{Compression, ReaderOptions, TfRecordReader, TfRecordWriter};
//!
//! let mut bytes = Vec::new();
//! let mut w = TfRecordWriter::new(&mut bytes, Compression::None)?;
//! w.write_record(b"abc")?;
//! w.finish()?;
//! // One 3-byte record takes 12 + 3 + 4 bytes.
//! assert_eq!(bytes.len(), 19);
//!
//! // Damage the data: TensorFlow's message, with the stream's name in front.
//! bytes[13] ^= 1;
//! let err = TfRecordReader::new(&bytes[..], "x.tfrecord", ReaderOptions::default())
//!     .next()
//!     .unwrap()
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "x.tfrecord: corrupted record at 12");
//! # Ok::<(), sluice_proto::Error>(())
//! ```

mod chunks;
mod compression;
mod crc;
mod reader;
mod writer;

pub use compression::Compression;
pub use crc::{mask, masked_crc32c, unmask};
pub use reader::{
    BoxedTfRecordReader, CorruptionPolicy, DEFAULT_BUFFER_SIZE, DEFAULT_MAX_RECORD_LEN, FOOTER_LEN,
    HEADER_LEN, ReaderOptions, Record, SKIPPED_LOG_LIMIT, SkippedRecord, TfRecordReader,
};
pub use writer::TfRecordWriter;
