//! The error type of `sluice-image`.

use sluice_tensor::DType;

use crate::decode::ImageFormat;

/// What can go wrong decoding or processing an image, one variant per kind of failure, so a
/// caller can tell bad data (skip the record) from a bad argument (fix the pipeline).
///
/// Every variant's message is a whole sentence naming what was wrong and the values
/// involved: the `message` fields hold it, the other fields give the same facts to code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are neither a JPEG nor a PNG (also: too few bytes for an image header).
    #[error("unknown image format (only JPEG and PNG are decoded): {seen}")]
    UnknownFormat {
        /// What the bytes look like: `empty input`, `a GIF image`, `bytes starting 68 65 ...`.
        seen: String,
    },
    /// A JPEG or PNG cannot be decoded: truncated, corrupt, a feature the decoder does not
    /// support, a zero width or height, or over the decoder's own memory limits.
    #[error("{message}")]
    Decode {
        /// The image's format (from its magic bytes).
        format: ImageFormat,
        /// What kind of failure.
        kind: DecodeErrorKind,
        /// The whole message (`invalid JPEG data: truncated (...)`, ...).
        message: String,
    },
    /// The image's header gives more pixels than [`DecodeLimits::max_pixels`]
    /// (checked before anything is allocated for them).
    ///
    /// [`DecodeLimits::max_pixels`]: crate::decode::DecodeLimits::max_pixels
    #[error(
        "{format} image is {width}x{height} = {} pixels, over the limit of {limit} pixels",
        height.saturating_mul(*width)
    )]
    TooLarge {
        /// The image's format.
        format: ImageFormat,
        /// Its height, from the header.
        height: u64,
        /// Its width, from the header.
        width: u64,
        /// The largest `width × height` allowed.
        limit: u64,
    },
    /// An argument is out of its range or does not fit the image: a probability outside
    /// `[0, 1]`, a crop larger than the image, `channels` not 1, 3 or 4, an empty range, a
    /// parameter list of the wrong length, an output too large to allocate, ...
    #[error("{message}")]
    InvalidArgument {
        /// The op that refused it (`random_crop`, `normalize`, `decode`, ...).
        op: &'static str,
        /// The whole message.
        message: String,
    },
    /// The input's shape is not one the op takes: not `[height, width, channels]` (or a
    /// batch of them), an empty image or batch, not 3 channels for an RGB-only op, or batch
    /// rows that came out with different shapes.
    #[error("{message}")]
    Shape {
        /// The op that refused it (`hwc` when only the rank was checked).
        op: &'static str,
        /// The whole message.
        message: String,
    },
    /// The input's dtype is not one the op takes (most take `u8` or `f32`).
    #[error("{message}")]
    DType {
        /// The op that refused it.
        op: &'static str,
        /// The dtype it was given.
        found: DType,
        /// The whole message.
        message: String,
    },
    /// A tensor could not be built or combined (see [`sluice_tensor::Error`]).
    #[error(transparent)]
    Tensor(#[from] sluice_tensor::Error),
}

/// The kind of an [`Error::Decode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The data ends early (a JPEG without its end-of-image marker, a PNG without its IEND
    /// chunk, entropy-coded data that runs out).
    Truncated,
    /// The data is damaged or not valid for the format (bad markers, tables, chunk order,
    /// pixel data).
    Corrupt,
    /// Valid data using something the decoder does not support (e.g. a CMYK JPEG for
    /// `decode_jpeg_scaled`, a PNG given to `decode_jpeg_scaled`).
    Unsupported,
    /// The header gives a zero width or height.
    ZeroSize,
    /// The decoder's own memory limits were exceeded.
    Limits,
}

impl Error {
    /// An [`Error::InvalidArgument`].
    pub fn invalid(op: &'static str, message: impl Into<String>) -> Error {
        Error::InvalidArgument {
            op,
            message: message.into(),
        }
    }

    /// An [`Error::Shape`].
    pub fn shape(op: &'static str, message: impl Into<String>) -> Error {
        Error::Shape {
            op,
            message: message.into(),
        }
    }

    /// An [`Error::Decode`].
    pub fn decode(format: ImageFormat, kind: DecodeErrorKind, message: impl Into<String>) -> Error {
        Error::Decode {
            format,
            kind,
            message: message.into(),
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
