//! Pieces shared by the subcommands.

use clap::ValueEnum;
use sluice_proto::Error;
use sluice_proto::tfrecord::Compression;

/// `--compression`: how the input files are compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum CompressionArg {
    /// Detect from the first bytes of each file.
    #[default]
    Auto,
    /// Uncompressed.
    None,
    /// The whole file is GZIP-compressed (TensorFlow's "GZIP").
    Gzip,
    /// The whole file is ZLIB-compressed (TensorFlow's "ZLIB").
    Zlib,
}

impl From<CompressionArg> for Compression {
    fn from(arg: CompressionArg) -> Self {
        match arg {
            CompressionArg::Auto => Compression::Auto,
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Zlib => Compression::Zlib,
        }
    }
}

/// What went wrong, without the file name in front: TensorFlow's own message where it has
/// one (`corrupted record at 268`), otherwise Sluice's message.
pub(crate) fn message_without_file(err: &Error) -> String {
    if let Some(message) = err.tensorflow_message() {
        return message;
    }
    let message = err.to_string();
    match err.file() {
        Some(file) => message
            .strip_prefix(file)
            .and_then(|rest| rest.strip_prefix(": "))
            .map_or_else(|| message.clone(), str::to_string),
        None => message,
    }
}

/// Where in the (uncompressed) stream an error is, as the error itself reports it.
pub(crate) fn error_offset(err: &Error) -> Option<u64> {
    match err {
        Error::CorruptedRecord { offset, .. }
        | Error::TruncatedRecord { offset, .. }
        | Error::RecordTooLarge { offset, .. }
        | Error::Io { offset, .. }
        | Error::Decompress { offset, .. }
        | Error::Decode { offset, .. } => Some(*offset),
        _ => None,
    }
}
