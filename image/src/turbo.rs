//! libjpeg-turbo decoding, behind the `turbojpeg` cargo feature (off by default): the
//! system's libturbojpeg (Debian's `libturbojpeg0-dev`, found with pkg-config) through the
//! `turbojpeg` crate, to compare with the zune-jpeg decoding that every op uses
//! (`image/benches/turbo.rs`). No op decodes with it: its pixels are not zune-jpeg's (the
//! two decoders' IDCT and chroma upsampling round differently), so switching would change
//! the outputs.
//!
//! - [`decode_rgb`]: the whole image, RGB `u8` `[H, W, 3]`.
//! - [`decode_crop_rgb`]: a window, by decoding the whole image and copying the window out
//!   (the TurboJPEG 2.x API that Debian ships has no partial decode).
//! - [`decode_rgb_scaled`]: DCT-scaled decoding at 1/2, 1/4 or 1/8 (the IDCT makes the
//!   smaller image directly; the entropy decoding is the same as at full size).
//!
//! ```
//! # fn main() -> sluice_image::Result<()> {
//! let pixels: Vec<u8> = (0..32 * 16 * 3).map(|i| (i % 251) as u8).collect();
//! let mut jpeg = Vec::new();
//! image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
//!     .encode(&pixels, 32, 16, image::ExtendedColorType::Rgb8)
//!     .unwrap();
//! let full = sluice_image::turbo::decode_rgb(&jpeg)?;
//! assert_eq!(full.shape(), &[16, 32, 3]);
//! let half = sluice_image::turbo::decode_rgb_scaled(&jpeg, 2)?;
//! assert_eq!(half.shape(), &[8, 16, 3]);
//! let crop = sluice_image::turbo::decode_crop_rgb(&jpeg, (4, 8, 8, 16))?;
//! assert_eq!(crop.shape(), &[8, 16, 3]);
//! assert_eq!(&crop.as_u8().unwrap()[..48], &full.as_u8().unwrap()[(4 * 32 + 8) * 3..][..48]);
//! # Ok(())
//! # }
//! ```

use std::cell::RefCell;

use sluice_tensor::{Tensor, TensorData};

use crate::decode::ImageFormat;
use crate::error::{DecodeErrorKind, Error, Result};

thread_local! {
    /// One TurboJPEG decompressor per thread (making one allocates its state).
    static DECOMPRESSOR: RefCell<Option<turbojpeg::Decompressor>> = const { RefCell::new(None) };
}

fn corrupt(e: turbojpeg::Error) -> Error {
    Error::decode(ImageFormat::Jpeg, DecodeErrorKind::Corrupt, e.to_string())
}

/// Runs `f` with this thread's decompressor.
fn with_decompressor<R>(f: impl FnOnce(&mut turbojpeg::Decompressor) -> Result<R>) -> Result<R> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(turbojpeg::Decompressor::new().map_err(corrupt)?);
        }
        f(slot.as_mut().expect("made above"))
    })
}

/// Decodes `data` at `1/denom` of its size (`denom` 1 for the whole image) into RGB rows,
/// returning the pixels and the decoded height and width (each side rounded up, as
/// libjpeg-turbo scales).
fn decode_into(data: &[u8], denom: usize) -> Result<(Vec<u8>, usize, usize)> {
    if !matches!(denom, 1 | 2 | 4 | 8) {
        return Err(Error::invalid(
            "turbo::decode_rgb_scaled",
            format!("the scale is 1/1, 1/2, 1/4 or 1/8, not 1/{denom}"),
        ));
    }
    with_decompressor(|d| {
        let header = d.read_header(data).map_err(corrupt)?;
        if header.width == 0 || header.height == 0 {
            return Err(Error::decode(
                ImageFormat::Jpeg,
                DecodeErrorKind::ZeroSize,
                "a zero-sized JPEG",
            ));
        }
        let (h, w) = (header.height.div_ceil(denom), header.width.div_ceil(denom));
        let mut pixels = vec![0u8; h * w * 3];
        let image = turbojpeg::Image {
            pixels: &mut pixels[..],
            width: w,
            pitch: w * 3,
            height: h,
            format: turbojpeg::PixelFormat::RGB,
        };
        d.decompress(data, image).map_err(corrupt)?;
        Ok((pixels, h, w))
    })
}

fn rgb(pixels: Vec<u8>, h: usize, w: usize) -> Result<Tensor> {
    Ok(Tensor::new(&[h, w, 3], TensorData::U8(pixels.into()))?)
}

/// The whole JPEG `data` decoded by libjpeg-turbo: RGB `u8` `[H, W, 3]`.
pub fn decode_rgb(data: &[u8]) -> Result<Tensor> {
    let (pixels, h, w) = decode_into(data, 1)?;
    rgb(pixels, h, w)
}

/// The JPEG `data` decoded by libjpeg-turbo at `1/denom` of its size (`denom` 1, 2, 4 or 8;
/// each side rounded up): RGB `u8`.
pub fn decode_rgb_scaled(data: &[u8], denom: usize) -> Result<Tensor> {
    let (pixels, h, w) = decode_into(data, denom)?;
    rgb(pixels, h, w)
}

/// The window `(y, x, height, width)` of the JPEG `data`, decoded whole by libjpeg-turbo and
/// copied out: RGB `u8` `[height, width, 3]`.
pub fn decode_crop_rgb(data: &[u8], window: (usize, usize, usize, usize)) -> Result<Tensor> {
    let (y, x, height, width) = window;
    let (pixels, h, w) = decode_into(data, 1)?;
    if y + height > h || x + width > w {
        return Err(Error::invalid(
            "turbo::decode_crop_rgb",
            format!("the window {window:?} is not inside the {h}x{w} image"),
        ));
    }
    let mut out = Vec::with_capacity(height * width * 3);
    for row in pixels.chunks_exact(w * 3).skip(y).take(height) {
        out.extend_from_slice(&row[x * 3..(x + width) * 3]);
    }
    rgb(out, height, width)
}
