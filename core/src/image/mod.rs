//! Built-in image ops: decoding ([`decode`]), geometry ([`geometry`]), colour and
//! normalization ([`color`]), and fused colour passes ([`pointwise`]). The
//! [`image_ops`](crate::stages::image_ops) stage runs them in a pipeline.
//!
//! An image is a [`Tensor`] of shape `[height, width, channels]` (HWC, row-major), of dtype
//! `u8` (pixels as decoded) or `f32` (after `cast` / `normalize`). A batch of images is
//! `[batch, height, width, channels]`. Random ops take the element's RNG (keyed by seed,
//! epoch, stage and element id), so augmentation is reproducible at any parallelism.

mod channel_sums;

pub mod decode;

pub use decode::{DecodeLimits, decode_and_crop, decode_image, decode_jpeg_scaled};

pub mod color;

pub use color::{
    adjust_brightness, adjust_brightness_contrast, adjust_contrast, adjust_hue, adjust_saturation,
    cast, denormalize, from_unit_f32, normalize, random_brightness, random_contrast, random_hue,
    random_saturation, to_unit_f32,
};

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// `(height, width, channels)` of an HWC image tensor.
pub fn hwc(t: &Tensor) -> Result<(usize, usize, usize)> {
    match t.shape() {
        [h, w, c] => Ok((*h, *w, *c)),
        other => Err(Error::Image(format!(
            "expected an image of shape [height, width, channels], got {other:?}"
        ))),
    }
}

pub mod pointwise;

pub use pointwise::{PointChain, PointLoad, PointOp};

pub mod geometry;

pub use geometry::{
    PadMode, ResizeMethod, center_crop, crop, cutout, flip_left_right, flip_up_down, from_chw,
    map_batch, map_batch_with_rngs, pad, random_crop, random_flip_left_right, random_flip_up_down,
    random_resized_crop, random_resized_crop_window, random_rotate, resize, rotate, to_chw,
};
