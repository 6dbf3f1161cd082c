//! Pieces shared by the subcommands.

use clap::ValueEnum;
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
