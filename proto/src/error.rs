//! The one error type of this crate.

use std::io;

/// Which of a record's two checksums failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// The masked CRC32C of the 8 length bytes. The rest of the file cannot be trusted.
    Length,
    /// The masked CRC32C of the record's data. The record's framing is intact.
    Data,
}

/// Everything that can go wrong in `sluice-proto`.
///
/// A message says its cause once: an I/O, decompression or protobuf error is part of the
/// message and is not also returned as `source()`.
///
/// Errors about a record name the file (or the name given to a stream), and the
/// TensorFlow-compatible variants ([`Error::CorruptedRecord`], [`Error::TruncatedRecord`])
/// display exactly TensorFlow's `DataLossError` message after the file name, for example
/// `train.tfrecord: corrupted record at 268`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A masked CRC32C did not match. `offset` is where TensorFlow says the damage is: the
    /// record's start for a bad length checksum, start + 12 for a bad data checksum.
    #[error("{file}: corrupted record at {offset}")]
    CorruptedRecord {
        /// File (or stream) name.
        file: String,
        /// TensorFlow's offset for the error (see above).
        offset: u64,
        /// Index of the record in the file (records before it, including skipped ones).
        index: u64,
        /// Which checksum failed.
        checksum: Checksum,
    },
    /// The stream ended inside a record; `offset` is the record's start. (TensorFlow ends a
    /// file quietly when fewer than 12 bytes follow the last record; Sluice reports those
    /// bytes as a truncated record too, so nothing is dropped silently.)
    #[error("{file}: truncated record at {offset}")]
    TruncatedRecord {
        /// File (or stream) name.
        file: String,
        /// TensorFlow's offset for the error.
        offset: u64,
        /// Index of the record in the file.
        index: u64,
    },
    /// A record header claims a length above [`crate::tfrecord::ReaderOptions::max_record_len`].
    #[error(
        "{file}: record {index} at {offset} claims {length} bytes, more than the limit of \
         {limit} bytes (raise ReaderOptions::max_record_len if this is real)"
    )]
    RecordTooLarge {
        /// File (or stream) name.
        file: String,
        /// Start of the record.
        offset: u64,
        /// Index of the record in the file.
        index: u64,
        /// The length the header claims.
        length: u64,
        /// The configured limit.
        limit: u64,
    },
    /// Reading the underlying file or stream failed.
    #[error("{file}: I/O error at uncompressed offset {offset}: {error}")]
    Io {
        /// File (or stream) name.
        file: String,
        /// Offset in the (uncompressed) record stream where the read was attempted.
        offset: u64,
        /// The I/O error.
        error: io::Error,
    },
    /// A GZIP or ZLIB stream could not be decompressed.
    #[error("{file}: {compression} stream is damaged at uncompressed offset {offset}: {error}")]
    Decompress {
        /// File (or stream) name.
        file: String,
        /// `gzip` or `zlib`.
        compression: &'static str,
        /// Offset in the uncompressed record stream where decompression failed.
        offset: u64,
        /// The decoder's error.
        error: io::Error,
    },
    /// Writing failed.
    #[error("{file}: write failed: {error}")]
    Write {
        /// File (or stream) name.
        file: String,
        /// The I/O error.
        error: io::Error,
    },
    /// A compression name that is not one of `auto`, `none`, `gzip`, `zlib`.
    #[error("unknown compression {0:?}: expected one of auto, none (or \"\"), gzip, zlib")]
    UnknownCompression(String),
    /// `auto` was given where a concrete compression is needed (writing).
    #[error("compression `auto` is only valid for reading; choose none, gzip or zlib")]
    AutoCompressionForWriter,
    /// A record is not a valid protobuf message of the expected type.
    #[error("{file}: record {index} at offset {offset} is not a valid {message}: {error}")]
    Decode {
        /// File (or stream) name.
        file: String,
        /// Index of the record in the file.
        index: u64,
        /// Start of the record.
        offset: u64,
        /// `tensorflow.Example` or `tensorflow.SequenceExample`.
        message: &'static str,
        /// prost's error.
        error: prost::DecodeError,
    },
    /// A JSON document is not a valid canonical-JSON message of the expected type.
    #[error("invalid {message} JSON: {error}")]
    Json {
        /// `tensorflow.Example` or `tensorflow.SequenceExample`.
        message: &'static str,
        /// serde_json's error.
        error: serde_json::Error,
    },
}

impl Error {
    /// TensorFlow's own message for this error (as in `DataLossError: <message>`), without
    /// the file name, for the errors TensorFlow reports on damaged TFRecord files.
    pub fn tensorflow_message(&self) -> Option<String> {
        match self {
            Error::CorruptedRecord { offset, .. } => Some(format!("corrupted record at {offset}")),
            Error::TruncatedRecord { offset, .. } => Some(format!("truncated record at {offset}")),
            _ => None,
        }
    }

    /// The file (or stream) name the error is about, if it is about one.
    pub fn file(&self) -> Option<&str> {
        match self {
            Error::CorruptedRecord { file, .. }
            | Error::TruncatedRecord { file, .. }
            | Error::RecordTooLarge { file, .. }
            | Error::Io { file, .. }
            | Error::Decompress { file, .. }
            | Error::Write { file, .. }
            | Error::Decode { file, .. } => Some(file),
            _ => None,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
