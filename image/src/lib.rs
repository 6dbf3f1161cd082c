//! `sluice-image`: Sluice's image library — decoding ([`decode`]), geometry ([`geometry`]),
//! colour and normalization ([`color`]), and fused colour passes ([`pointwise`]), with
//! `tf.image` semantics. `sluice-core`'s `image_ops` stage runs them in a pipeline.
//!
//! ```
//! use sluice_image::{ResizeMethod, decode_and_crop, decode_image, flip_left_right, resize};
//! use sluice_tensor::DType;
//!
//! # fn main() -> sluice_image::Result<()> {
//! // A 4×2 RGB PNG in memory.
//! let pixels: Vec<u8> = (0..24).collect();
//! let mut png = Vec::new();
//! image::write_buffer_with_format(
//!     &mut std::io::Cursor::new(&mut png),
//!     &pixels,
//!     4,
//!     2,
//!     image::ExtendedColorType::Rgb8,
//!     image::ImageFormat::Png,
//! )
//! .unwrap();
//!
//! let img = decode_image(&png, Some(3))?;
//! assert_eq!(img.shape(), &[2, 4, 3]); // [height, width, channels]
//! // The window (y 1, x 2, height 1, width 2), decoded directly (for a JPEG, only what the
//! // window needs is decoded).
//! let crop = decode_and_crop(&png, (1, 2, 1, 2), None)?;
//! assert_eq!(crop.as_u8().unwrap(), &pixels[18..24]);
//! let flipped = flip_left_right(&crop)?;
//! assert_eq!(flipped.as_u8().unwrap(), &[21, 22, 23, 18, 19, 20]);
//! let big = resize(&crop, 2, 4, ResizeMethod::Bilinear)?; // f32, as tf.image.resize
//! assert_eq!((big.shape(), big.dtype()), (&[2, 4, 3][..], DType::F32));
//!
//! // Failures say what kind they are.
//! let err = decode_and_crop(&png, (0, 0, 3, 3), None).unwrap_err();
//! assert!(matches!(err, sluice_image::Error::InvalidArgument { op: "decode_and_crop", .. }));
//! assert!(matches!(
//!     decode_image(&png[..png.len() - 4], None),
//!     Err(sluice_image::Error::Decode { kind: sluice_image::DecodeErrorKind::Truncated, .. })
//! ));
//! # Ok(())
//! # }
//! ```
//!
//! An image is a [`Tensor`](sluice_tensor::Tensor) of shape `[height, width, channels]` (HWC,
//! row-major), of dtype `u8` (pixels as decoded) or `f32` (after `cast` / `normalize`). A
//! batch of images is `[batch, height, width, channels]`. Random ops take any [`rand::Rng`]
//! (`&mut R` with `R: RngCore + ?Sized`) and always make the same draws in the same order
//! for the same arguments, so an RNG keyed by (seed, epoch, stage, element id), as
//! `sluice-core` passes, makes augmentation reproducible at any parallelism.
//!
//! Errors ([`Error`]) are by kind: [`Error::UnknownFormat`], [`Error::Decode`] (with a
//! [`DecodeErrorKind`]: truncated, corrupt, unsupported, ...), [`Error::TooLarge`],
//! [`Error::InvalidArgument`], [`Error::Shape`], [`Error::DType`] and [`Error::Tensor`].
// The only `unsafe` code: calls of the AVX2 / AVX-512 builds of the SIMD kernels after
// checking the CPU has the features (pointwise.rs, channel_sums.rs), each block allowed on
// its own with its SAFETY comment.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod channel_sums;
pub mod color;
pub mod decode;
mod error;
pub mod geometry;
pub mod pointwise;
mod stream_store;
#[cfg(feature = "turbojpeg")]
pub mod turbo;

pub use color::{
    adjust_brightness, adjust_brightness_contrast, adjust_contrast, adjust_hue, adjust_saturation,
    cast, denormalize, from_unit_f32, normalize, random_brightness, random_contrast, random_hue,
    random_saturation, to_unit_f32,
};
pub use decode::{DecodeLimits, ImageFormat, decode_and_crop, decode_image, decode_jpeg_scaled};
pub use error::{DecodeErrorKind, Error, Result};
pub use geometry::{
    PadMode, ResizeMethod, center_crop, crop, cutout, flip_left_right, flip_up_down, from_chw, hwc,
    map_batch, map_batch_with_rngs, pad, random_crop, random_flip_left_right, random_flip_up_down,
    random_resized_crop, random_resized_crop_window, random_rotate, resize, rotate, to_chw,
};
pub use pointwise::{PointChain, PointLoad, PointOp};
