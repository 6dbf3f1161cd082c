//! Decoding JPEG and PNG bytes into `u8` HWC image tensors, as `tf.io.decode_image`,
//! `tf.io.decode_and_crop_jpeg` and a DCT-scaled JPEG decode.
//!
//! ```
//! use sluice_image::decode::{decode_and_crop, decode_image};
//!
//! # fn main() -> sluice_image::Result<()> {
//! // A 4×2 RGB PNG.
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
//! let rgb = decode_image(&png, None)?;
//! assert_eq!(rgb.shape(), &[2, 4, 3]);
//! assert_eq!(rgb.as_u8().unwrap(), &pixels[..]);
//! let rgba = decode_image(&png, Some(4))?; // opaque alpha added
//! assert_eq!(rgba.shape(), &[2, 4, 4]);
//! let crop = decode_and_crop(&png, (1, 2, 1, 2), None)?; // (y, x, height, width)
//! assert_eq!(crop.as_u8().unwrap(), &pixels[18..24]);
//! assert!(decode_image(b"GIF89a...", None).is_err()); // only JPEG and PNG
//! # Ok(())
//! # }
//! ```
//!
//! What is decoded and how it compares with TensorFlow:
//!
//! - **Formats** are recognised by their magic bytes (`FF D8 FF` for JPEG, the 8-byte PNG
//!   signature); anything else is an [`Error::UnknownFormat`] naming what the bytes look like.
//! - **JPEG** is decoded by zune-jpeg (the decoder of the `image` crate) in strict mode, so a
//!   truncated or corrupt stream is an error, as in TensorFlow (unless its
//!   `try_recover_truncated`); a stream without its end-of-image marker counts as truncated.
//!   Strict mode also refuses some damage libjpeg only warns about (extraneous bytes before a
//!   marker), which TensorFlow decodes.
//!   Pixels are not libjpeg-turbo's: TensorFlow's default `dct_method=""` is libjpeg's
//!   INTEGER_FAST IDCT, which rounds low, so our mean pixel is about one level higher than
//!   TensorFlow's (+0.97 to +1.04 on the fixture JPEGs; libjpeg-turbo's accurate IDCT is
//!   +0.8 higher too); shapes are equal. `channels = 1` on a colour JPEG takes the luma (Y)
//!   plane, as libjpeg does for `JCS_GRAYSCALE` output (what `tf.io.decode_jpeg(channels=1)`
//!   returns); grey → RGB replicates. `channels = 4` adds an opaque alpha (TensorFlow's
//!   `decode_jpeg` refuses 4). CMYK / YCCK JPEGs decode to RGB.
//! - **PNG** is decoded by the `png` crate with palette and low bit depths expanded and `tRNS`
//!   turned into alpha, as TensorFlow's libpng setup does: results match TensorFlow byte for
//!   byte. 16-bit samples keep their high byte (libpng's `png_set_strip_16`). Conversions:
//!   grey → RGB replicates, alpha is dropped or added (opaque), and RGB → grey uses libpng's
//!   `rgb_to_gray` fixed-point arithmetic with weights 0.2989 / 0.587 / 0.114 (an RGB pixel
//!   whose three values are equal keeps that value; not checked against TensorFlow, whose
//!   fixtures here are all RGB). A file cut anywhere before the end of its IEND chunk is
//!   truncated.
//! - **Limits**: the dimensions are read from the header and checked against
//!   [`DecodeLimits::max_pixels`] (default 2^28) before any pixel buffer is allocated. Zero
//!   width or height is an error. Nothing here panics on any input.
//! - The decoded buffer becomes the tensor's `TensorData::U8` without a copy (a channel
//!   conversion, 16-bit PNG or crop builds its one new buffer).
//!
//! [`decode_and_crop`] (and a `random_crop` or `center_crop` right after `decode` in
//! `sluice-core`'s `image_ops` stage) decodes only what the crop
//! needs where it can: for a baseline JPEG whose single scan holds every component,
//! zune-jpeg (with Sluice's window patch, `vendor/zune-jpeg/SLUICE-PATCH.md`) stops entropy
//! decoding after the crop's last MCU row, skips the IDCT of blocks the crop does not depend
//! on (keeping two chroma samples of margin for upsampling) and colour-converts only the
//! crop's pixels. The result is bit-identical to cropping a full decode. A 224×224 crop costs
//! 80 % (centre) to 72 % (top) of the full decode of a 256×256 JPEG, 48 % to 22 % of a
//! 1024×768 one (`benches/decode.rs`). Decoding that stops early does not see corruption in
//! the data below the crop (the end of the file is still checked, so truncation is an
//! error).
//!
//! [`decode_jpeg_scaled`] decodes at 1/2, 1/4 or 1/8 of the size in the DCT domain
//! (jpeg-decoder): that saves IDCT and colour-conversion work but not entropy decoding, and
//! jpeg-decoder's entropy decoding is slower than zune-jpeg's, so a 1/4 decode is only about
//! as fast as zune-jpeg's full decode on detailed images (numbers in `benches/decode.rs`).

use std::io::Cursor;

use bytes::Bytes;
use image::ImageDecoder as _;
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use sluice_tensor::{Tensor, TensorData, pool};

use crate::error::{DecodeErrorKind, Error, Result};

/// Default for [`DecodeLimits::max_pixels`]: 2^28 pixels (16384 × 16384).
pub const DEFAULT_MAX_PIXELS: u64 = 1 << 28;

/// The 8-byte signature that starts every PNG file.
const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// The IEND chunk that ends every PNG file: empty, so always these 12 bytes.
const IEND: [u8; 12] = [0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82];

/// Limits checked against an image's header before anything is allocated for its pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The largest `width × height` accepted; larger images are an [`Error::TooLarge`].
    pub max_pixels: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_pixels: DEFAULT_MAX_PIXELS,
        }
    }
}

impl DecodeLimits {
    /// Limits allowing at most `max_pixels` pixels.
    pub fn with_max_pixels(max_pixels: u64) -> Self {
        DecodeLimits { max_pixels }
    }

    fn check(&self, format: ImageFormat, height: u64, width: u64) -> Result<()> {
        if height == 0 || width == 0 {
            return Err(Error::decode(
                format,
                DecodeErrorKind::ZeroSize,
                format!("{format} image has zero size ({width}x{height})"),
            ));
        }
        if height.saturating_mul(width) > self.max_pixels {
            return Err(Error::TooLarge {
                format,
                height,
                width,
                limit: self.max_pixels,
            });
        }
        Ok(())
    }
}

/// An image format recognised from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// JPEG (`FF D8 FF`).
    Jpeg,
    /// PNG (the 8-byte PNG signature).
    Png,
}

impl std::fmt::Display for ImageFormat {
    /// `JPEG` or `PNG`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::Png => "PNG",
        })
    }
}

/// The format of `data`, from its magic bytes; an [`Error::UnknownFormat`] naming what was seen when
/// it is neither JPEG nor PNG.
pub fn detect_format(data: &[u8]) -> Result<ImageFormat> {
    if data.starts_with(&[0xff, 0xd8, 0xff]) {
        return Ok(ImageFormat::Jpeg);
    }
    if data.starts_with(&PNG_SIGNATURE) {
        return Ok(ImageFormat::Png);
    }
    let seen = if data.is_empty() {
        "empty input".to_string()
    } else if data.starts_with(b"GIF8") {
        "a GIF image".to_string()
    } else if data.starts_with(b"BM") {
        "a BMP image".to_string()
    } else if data.starts_with(b"RIFF") && data.get(8..12) == Some(b"WEBP") {
        "a WebP image".to_string()
    } else if data.starts_with(&[0xff, 0xd8]) || PNG_SIGNATURE.starts_with(data) {
        format!("{} bytes, too few for an image header", data.len())
    } else {
        let head: Vec<String> = data.iter().take(8).map(|b| format!("{b:02x}")).collect();
        format!("bytes starting {}", head.join(" "))
    };
    Err(Error::UnknownFormat { seen })
}

/// Decodes a JPEG or PNG image into a `u8` tensor `[height, width, channels]`, like
/// `tf.io.decode_image(data, channels, expand_animations=False)`.
///
/// `channels`: `None` keeps the stored channels (1 grey, 2 grey + alpha (PNG only), 3 RGB,
/// 4 RGBA); `Some(1 | 3 | 4)` converts (see the [module docs](self) for how). Errors:
/// [`Error::UnknownFormat`]; [`Error::Decode`] for truncated or corrupt data or a zero size;
/// [`Error::TooLarge`] for more than [`DEFAULT_MAX_PIXELS`] pixels; [`Error::InvalidArgument`]
/// for another `channels` value.
pub fn decode_image(data: &[u8], channels: Option<usize>) -> Result<Tensor> {
    decode_image_with_limits(data, channels, &DecodeLimits::default())
}

/// [`decode_image`] with explicit [`DecodeLimits`].
pub fn decode_image_with_limits(
    data: &[u8],
    channels: Option<usize>,
    limits: &DecodeLimits,
) -> Result<Tensor> {
    check_channels(channels)?;
    let (h, w, c, pixels) = match detect_format(data)? {
        ImageFormat::Jpeg => {
            let mut pixels = Vec::new();
            let (h, w, c) = decode_jpeg(data, channels, limits, None, &mut pixels)?;
            (h, w, c, pixels)
        }
        ImageFormat::Png => decode_png(data, channels, limits)?,
    };
    to_tensor(h, w, c, pixels)
}

/// Decodes the window `crop = (y, x, height, width)` of a JPEG or PNG image, like
/// `tf.io.decode_and_crop_jpeg(data, [y, x, height, width], channels)`: the window is in the
/// full image's coordinates and must lie inside it with a non-zero size, otherwise
/// [`Error::InvalidArgument`].
///
/// For a baseline JPEG whose single scan holds all components (what most encoders write),
/// only what the window needs is decoded: entropy decoding stops after its last MCU row, and
/// blocks and pixels outside it are neither transformed nor colour-converted. The pixels are
/// exactly those of [`decode_image`] cropped. Corruption in the entropy-coded data below the
/// window goes unnoticed (a truncated file is still an error). Progressive JPEGs and PNGs are
/// decoded whole and then cropped.
pub fn decode_and_crop(
    data: &[u8],
    crop: (usize, usize, usize, usize),
    channels: Option<usize>,
) -> Result<Tensor> {
    decode_and_crop_with_limits(data, crop, channels, &DecodeLimits::default())
}

/// [`decode_and_crop`] with explicit [`DecodeLimits`].
pub fn decode_and_crop_with_limits(
    data: &[u8],
    crop: (usize, usize, usize, usize),
    channels: Option<usize>,
    limits: &DecodeLimits,
) -> Result<Tensor> {
    decode_window(data, crop, channels, false, limits)
}

/// [`decode_and_crop_with_limits`], mirrored left-right when `mirror` (in the same copy).
pub(crate) fn decode_window(
    data: &[u8],
    crop: (usize, usize, usize, usize),
    channels: Option<usize>,
    mirror: bool,
    limits: &DecodeLimits,
) -> Result<Tensor> {
    let (y, x, height, width) = crop;
    decode_window_with(data, channels, limits, &mut |h, w| {
        let inside = height > 0
            && width > 0
            && y.checked_add(height).is_some_and(|end| end <= h)
            && x.checked_add(width).is_some_and(|end| end <= w);
        if inside {
            Ok(Window {
                y,
                x,
                height,
                width,
                mirror,
            })
        } else {
            Err(Error::invalid(
                "decode_and_crop",
                format!(
                    "crop window (y {y}, x {x}, height {height}, width {width}) is empty or not \
                     inside the {w}x{h} image"
                ),
            ))
        }
    })
}

/// A window of an image, chosen by [`decode_window_with`]'s caller once the image's size is
/// known: rows `y..y + height`, columns `x..x + width`, mirrored left-right if `mirror`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The first row.
    pub y: usize,
    /// The first column.
    pub x: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Mirrored left-right (as `flip_left_right` of the crop).
    pub mirror: bool,
}

thread_local! {
    /// The full-width rows a window is copied out of: reused from image to image on each
    /// thread, so a crop decode allocates only its output.
    static DECODE_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Decodes the window that `choose` picks given the image's (height, width), read from the
/// header (for a JPEG, before any pixel is decoded; `choose` must return a window inside
/// the image). For a baseline JPEG only the rows down to the window's bottom are decoded.
/// The window's pixels come out in a recycled buffer.
///
/// ```
/// use sluice_image::decode::{DecodeLimits, Window, decode_window_with};
///
/// # fn main() -> sluice_image::Result<()> {
/// let pixels: Vec<u8> = (0..24).collect();
/// let mut png = Vec::new();
/// image::write_buffer_with_format(
///     &mut std::io::Cursor::new(&mut png),
///     &pixels,
///     4,
///     2,
///     image::ExtendedColorType::Rgb8,
///     image::ImageFormat::Png,
/// )
/// .unwrap();
/// // The right half of the bottom row, mirrored.
/// let crop = decode_window_with(&png, None, &DecodeLimits::default(), &mut |h, w| {
///     Ok(Window { y: h - 1, x: w / 2, height: 1, width: w / 2, mirror: true })
/// })?;
/// assert_eq!(crop.as_u8().unwrap(), &[21, 22, 23, 18, 19, 20]);
/// # Ok(())
/// # }
/// ```
pub fn decode_window_with(
    data: &[u8],
    channels: Option<usize>,
    limits: &DecodeLimits,
    choose: &mut dyn FnMut(usize, usize) -> Result<Window>,
) -> Result<Tensor> {
    decode_window_then(
        data,
        channels,
        limits,
        choose,
        |choose, h, w| choose(h, w),
        |_, view| view.to_tensor(),
    )
}

/// Full-width decoded rows and a window in them, as [`decode_window_then`] hands them over:
/// what a consumer can read the window's pixels from without copying them out first (as
/// [`PointChain::apply_view_into`](crate::PointChain::apply_view_into) does).
#[derive(Debug, Clone, Copy)]
pub struct WindowView<'a> {
    /// Rows `0..` of the image, `w * c` values each (at least down to the window's bottom).
    pixels: &'a [u8],
    /// The image's width.
    w: usize,
    /// Channels.
    c: usize,
    /// The window.
    win: Window,
}

impl<'a> WindowView<'a> {
    /// The view of `win` in `pixels`, checked to lie inside them.
    pub(crate) fn new(pixels: &'a [u8], w: usize, c: usize, win: Window) -> Result<Self> {
        let row = w * c;
        let inside = win
            .y
            .checked_add(win.height)
            .and_then(|end| end.checked_mul(row))
            .is_some_and(|end| end <= pixels.len())
            && win.x.checked_add(win.width).is_some_and(|end| end <= w);
        if !inside {
            return Err(Error::invalid(
                "decode_and_crop",
                format!(
                    "crop window (y {}, x {}, height {}, width {}) is outside the decoded \
                     {w}-wide image",
                    win.y, win.x, win.height, win.width
                ),
            ));
        }
        Ok(WindowView { pixels, w, c, win })
    }

    /// The window's shape `[height, width, channels]`.
    #[inline]
    pub fn shape(&self) -> [usize; 3] {
        [self.win.height, self.win.width, self.c]
    }

    /// Channels.
    pub(crate) fn channels(&self) -> usize {
        self.c
    }

    /// The longest run of the window's values from `pos` (in `[height, width, channels]`
    /// order, as if the window were a contiguous image) that lies in one row, at most `max`
    /// long: the source values and whether they are in mirrored pixel order (then the run
    /// is those pixels in reverse order, each pixel's channels kept). `pos` and `max` must be
    /// multiples of the channel count, `pos` inside the window.
    #[inline(always)]
    pub(crate) fn run(&self, pos: usize, max: usize) -> (&'a [u8], bool) {
        let c = self.c;
        let line = self.win.width * c;
        debug_assert!(pos.is_multiple_of(c) && max.is_multiple_of(c));
        let (r, off) = (pos / line, pos % line);
        let n = (line - off).min(max);
        let first = (self.win.y + r) * self.w * c + self.win.x * c;
        let src = &self.pixels[first..first + line];
        if self.win.mirror {
            // Output pixel `p` of the row is source pixel `width - 1 - p`.
            (&src[line - off - n..line - off], true)
        } else {
            (&src[off..off + n], false)
        }
    }

    /// Values `start..start + out.len()` of the window (mirrored if it says so) as if it
    /// were a contiguous `[height, width, channels]` image, into `out`. `start` and
    /// `out.len()` must be multiples of the channel count and inside the window.
    pub(crate) fn gather(&self, start: usize, out: &mut [u8]) {
        let mut done = 0;
        while done < out.len() {
            let (src, mirrored) = self.run(start + done, out.len() - done);
            let dst = &mut out[done..done + src.len()];
            if mirrored {
                mirror_copy(src, dst, self.c);
            } else {
                dst.copy_from_slice(src);
            }
            done += src.len();
        }
    }

    /// The window's pixels as a tensor, in a recycled buffer.
    fn to_tensor(self) -> Result<Tensor> {
        let [height, width, c] = self.shape();
        let mut out: Vec<u8> = pool::take(height * width * c);
        out.resize(height * width * c, 0);
        self.gather(0, &mut out);
        Ok(Tensor::new(
            &[height, width, c],
            TensorData::U8(pool::recycled_bytes(out)),
        )?)
    }
}

/// `src`'s `c`-value pixels in reverse order into `dst` (same length), keeping each pixel's
/// channels.
#[inline(always)]
pub(crate) fn mirror_copy(src: &[u8], dst: &mut [u8], c: usize) {
    match c {
        1 => dst
            .iter_mut()
            .zip(src.iter().rev())
            .for_each(|(d, s)| *d = *s),
        3 => {
            // 16 pixels at a time as one fixed permutation of 48 bytes (which the compiler
            // turns into byte shuffles), then the rest pixel by pixel.
            const BLOCK: usize = 48;
            const IDX: [usize; BLOCK] = {
                let mut idx = [0; BLOCK];
                let mut i = 0;
                while i < BLOCK {
                    idx[i] = (15 - i / 3) * 3 + i % 3;
                    i += 1;
                }
                idx
            };
            let len = dst.len();
            let blocks = len / BLOCK;
            for b in 0..blocks {
                let s: &[u8; BLOCK] = src[len - (b + 1) * BLOCK..len - b * BLOCK]
                    .try_into()
                    .expect("a block");
                let d: &mut [u8; BLOCK] = (&mut dst[b * BLOCK..(b + 1) * BLOCK])
                    .try_into()
                    .expect("a block");
                *d = std::array::from_fn(|i| s[IDX[i]]);
            }
            let rest = len - blocks * BLOCK;
            let (d, _) = dst[blocks * BLOCK..].as_chunks_mut::<3>();
            let (s, _) = src[..rest].as_chunks::<3>();
            d.iter_mut().zip(s.iter().rev()).for_each(|(d, s)| *d = *s);
        }
        4 => {
            let (d, _) = dst.as_chunks_mut::<4>();
            let (s, _) = src.as_chunks::<4>();
            d.iter_mut().zip(s.iter().rev()).for_each(|(d, s)| *d = *s);
        }
        _ => {
            dst.copy_from_slice(src);
            mirror_row(dst, c);
        }
    }
}

/// Decodes the image, asks `choose` (given `state`, the image's height and width, read from
/// the header before any pixel is decoded) for a window, and hands `then` the state and a
/// view of the window in the decoded rows, which live in a per-thread buffer until `then`
/// returns. For a baseline JPEG only the rows down to the window's bottom are decoded.
///
/// `then` may fail with an error of its own type `E` (this crate's errors convert into it),
/// so a caller's pipeline errors pass through unchanged. A [`PointChain`](crate::PointChain)
/// reads the view in place ([`PointChain::apply_view_into`](crate::PointChain::apply_view_into)).
pub fn decode_window_then<S: ?Sized, R, E: From<Error>>(
    data: &[u8],
    channels: Option<usize>,
    limits: &DecodeLimits,
    state: &mut S,
    mut choose: impl FnMut(&mut S, usize, usize) -> Result<Window>,
    then: impl FnOnce(&mut S, WindowView<'_>) -> Result<R, E>,
) -> Result<R, E> {
    check_channels(channels)?;
    match detect_format(data)? {
        ImageFormat::Jpeg => DECODE_SCRATCH.with(|scratch| {
            // A re-entrant call (none today) would find the scratch borrowed: use a fresh one.
            let mut fresh = Vec::new();
            let mut guard = scratch.try_borrow_mut();
            let pixels = match guard.as_deref_mut() {
                Ok(v) => v,
                Err(_) => &mut fresh,
            };
            let mut window = None;
            let mut chosen = |h: usize, w: usize| -> Result<Window> {
                let win = choose(state, h, w)?;
                window = Some(win);
                Ok(win)
            };
            let (_, w, c) = decode_jpeg(data, channels, limits, Some(&mut chosen), pixels)?;
            let window = window.ok_or_else(no_frame_header)?;
            then(state, WindowView::new(pixels, w, c, window)?)
        }),
        ImageFormat::Png => {
            let (h, w, c, pixels) = decode_png(data, channels, limits)?;
            let window = choose(state, h, w)?;
            then(state, WindowView::new(&pixels, w, c, window)?)
        }
    }
}

/// Reverses the order of the `c`-value pixels of `row`, keeping each pixel's channels.
fn mirror_row(row: &mut [u8], c: usize) {
    match c {
        1 => row.reverse(),
        3 => row.as_chunks_mut::<3>().0.reverse(),
        4 => row.as_chunks_mut::<4>().0.reverse(),
        _ => {
            row.reverse();
            row.chunks_exact_mut(c).for_each(<[u8]>::reverse);
        }
    }
}

/// Decodes a JPEG at the smallest DCT scale (1/8, 1/4, 1/2 or 1) whose output is at least
/// `min_height × min_width`, into a `u8` tensor `[height, width, channels]` with the stored
/// channels (1 or 3). An output dimension at scale `1/d` is `ceil(dimension / d)`.
///
/// Scaling happens inside the inverse DCT (jpeg-decoder's `scale`), so a 1/4 scale skips most
/// of the transform and colour-conversion work, but none of the entropy decoding (see the
/// [module docs](self) for what that buys).
/// The pixels are a box-filtered-like reduction, not those of a full decode followed by a
/// resize. Requests larger than the image decode at full size. Errors as [`decode_image`];
/// CMYK JPEGs are not supported here.
pub fn decode_jpeg_scaled(data: &[u8], min_height: usize, min_width: usize) -> Result<Tensor> {
    decode_jpeg_scaled_with_limits(data, min_height, min_width, &DecodeLimits::default())
}

/// [`decode_jpeg_scaled`] with explicit [`DecodeLimits`].
pub fn decode_jpeg_scaled_with_limits(
    data: &[u8],
    min_height: usize,
    min_width: usize,
    limits: &DecodeLimits,
) -> Result<Tensor> {
    match detect_format(data)? {
        ImageFormat::Jpeg => {}
        ImageFormat::Png => {
            return Err(Error::decode(
                ImageFormat::Png,
                DecodeErrorKind::Unsupported,
                "decode_jpeg_scaled takes a JPEG image, got a PNG",
            ));
        }
    }
    let jpeg_err = |e: jpeg_decoder::Error| {
        let kind = match &e {
            jpeg_decoder::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                DecodeErrorKind::Truncated
            }
            jpeg_decoder::Error::Unsupported(_) => DecodeErrorKind::Unsupported,
            _ => DecodeErrorKind::Corrupt,
        };
        Error::decode(ImageFormat::Jpeg, kind, format!("invalid JPEG data: {e}"))
    };
    let mut decoder = jpeg_decoder::Decoder::new(data);
    decoder.read_info().map_err(jpeg_err)?;
    let info = decoder.info().ok_or_else(no_frame_header)?;
    let (full_h, full_w) = (usize::from(info.height), usize::from(info.width));
    limits.check(ImageFormat::Jpeg, full_h as u64, full_w as u64)?;
    let channels = match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => 1,
        jpeg_decoder::PixelFormat::RGB24 => 3,
        other => {
            return Err(Error::decode(
                ImageFormat::Jpeg,
                DecodeErrorKind::Unsupported,
                format!("decode_jpeg_scaled does not support {other:?} JPEGs"),
            ));
        }
    };
    let denominator = [8usize, 4, 2]
        .into_iter()
        .find(|d| full_h.div_ceil(*d) >= min_height && full_w.div_ceil(*d) >= min_width)
        .unwrap_or(1);
    let (want_h, want_w) = (full_h.div_ceil(denominator), full_w.div_ceil(denominator));
    let (out_w, out_h) = if denominator == 1 {
        (full_w, full_h)
    } else {
        // Both dimensions fit in u16: they are at most the header's.
        let (w, h) = decoder
            .scale(want_w as u16, want_h as u16)
            .map_err(jpeg_err)?;
        (usize::from(w), usize::from(h))
    };
    decoder.set_max_decoding_buffer_size(out_h.saturating_mul(out_w).saturating_mul(4).max(1));
    let pixels = decoder.decode().map_err(jpeg_err)?;
    if pixels.len() != out_h * out_w * channels {
        return Err(Error::decode(
            ImageFormat::Jpeg,
            DecodeErrorKind::Corrupt,
            format!(
                "invalid JPEG data: decoded {} bytes for a {out_w}x{out_h}x{channels} image",
                pixels.len()
            ),
        ));
    }
    to_tensor(out_h, out_w, channels, pixels)
}

fn check_channels(channels: Option<usize>) -> Result<()> {
    match channels {
        None | Some(1 | 3 | 4) => Ok(()),
        Some(other) => Err(Error::invalid(
            "decode",
            format!("channels must be 1, 3 or 4 (or unset: as stored), got {other}"),
        )),
    }
}

fn to_tensor(h: usize, w: usize, c: usize, pixels: Vec<u8>) -> Result<Tensor> {
    Ok(Tensor::new(
        &[h, w, c],
        TensorData::U8(Bytes::from(pixels)),
    )?)
}

/// A decoded image: height, width, channels and the pixels (row-major HWC). A crop decode may
/// hold fewer than `height` rows.
type Decoded = (usize, usize, usize, Vec<u8>);

fn zune_err(e: zune_jpeg::errors::DecodeErrors) -> Error {
    use zune_core::bytestream::ZByteIoError;
    use zune_jpeg::errors::DecodeErrors;
    let kind = match &e {
        DecodeErrors::ExhaustedData | DecodeErrors::IoErrors(ZByteIoError::NotEnoughBytes(..)) => {
            DecodeErrorKind::Truncated
        }
        DecodeErrors::Unsupported(_) => DecodeErrorKind::Unsupported,
        DecodeErrors::ZeroError => DecodeErrorKind::ZeroSize,
        _ => DecodeErrorKind::Corrupt,
    };
    Error::decode(ImageFormat::Jpeg, kind, format!("invalid JPEG data: {e}"))
}

/// A JPEG whose frame header was not found where the decoder had to have read it.
fn no_frame_header() -> Error {
    Error::decode(
        ImageFormat::Jpeg,
        DecodeErrorKind::Corrupt,
        "invalid JPEG data: no frame header",
    )
}

/// For a crop: given the image's (height, width), checks (or chooses) the window.
type CropWindow<'a> = &'a mut dyn FnMut(usize, usize) -> Result<Window>;

/// Decodes a JPEG into `out` (its length set to the full image's bytes), returning
/// (height, width, channels).
///
/// For a crop the window is chosen once the headers are read and zune-jpeg is told it
/// (`set_window`, Sluice's patch in `vendor/zune-jpeg`): only the window's pixels are then
/// valid in `out`.
fn decode_jpeg(
    data: &[u8],
    channels: Option<usize>,
    limits: &DecodeLimits,
    crop: Option<CropWindow<'_>>,
    out: &mut Vec<u8>,
) -> Result<(usize, usize, usize)> {
    let options = DecoderOptions::new_safe()
        .set_strict_mode(true)
        .set_max_width(usize::from(u16::MAX))
        .set_max_height(usize::from(u16::MAX));
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(data), options);
    decoder.decode_headers().map_err(zune_err)?;
    check_jpeg_end(data)?;
    let (w, h) = decoder.dimensions().ok_or_else(no_frame_header)?;
    limits.check(ImageFormat::Jpeg, h as u64, w as u64)?;
    let Some(choose) = crop else {
        return decode_frame(&mut decoder, options, channels, h, w, out, &mut false);
    };
    let win = choose(h, w)?;
    decoder.set_window(win.x, win.y, win.width, win.height);
    let mut restarted = false;
    let decoded = decode_frame(&mut decoder, options, channels, h, w, out, &mut restarted)?;
    if !restarted {
        return Ok(decoded);
    }
    // A second scan after the first one ended early (damaged or unusual streams): the
    // window cannot follow its rows, so the whole image is decoded and the window's pixels
    // are the whole decode's (fuzz findings image-window-after-second-sos and
    // image-window-second-sos-upsampled).
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(data), options);
    decode_frame(&mut decoder, options, channels, h, w, out, &mut false)
}

/// Decodes the frame of `decoder` (`height × width` as its header says) into `out` with
/// the channels asked for, returning (height, width, channels). The decoder is borrowed,
/// not moved: it holds its Huffman tables inline (~54 KB), and a move copies them.
fn decode_frame(
    decoder: &mut JpegDecoder<ZCursor<&[u8]>>,
    options: DecoderOptions,
    channels: Option<usize>,
    height: usize,
    width: usize,
    out: &mut Vec<u8>,
    restarted: &mut bool,
) -> Result<(usize, usize, usize)> {
    decoder.decode_headers().map_err(zune_err)?;
    let input = decoder.input_colorspace().ok_or_else(no_frame_header)?;
    let grey_input = input == ColorSpace::Luma;
    // What zune-jpeg is asked for, and what is left to convert here.
    let (out_space, out_channels, then) = match channels {
        None if grey_input => (ColorSpace::Luma, 1, None),
        None => (ColorSpace::RGB, 3, None),
        Some(1) if grey_input || input == ColorSpace::YCbCr => (ColorSpace::Luma, 1, None),
        // RGB / CMYK / YCCK input to grey: via RGB.
        Some(1) => (ColorSpace::RGB, 3, Some(1)),
        // zune-jpeg's RGBA output does not set alpha everywhere: add it here.
        Some(4) if grey_input => (ColorSpace::Luma, 1, Some(4)),
        Some(4) => (ColorSpace::RGB, 3, Some(4)),
        Some(_) => (ColorSpace::RGB, 3, None),
    };
    decoder.set_options(options.jpeg_set_out_colorspace(out_space));
    if !decode_into(decoder, height * width * out_channels, out)? {
        *restarted = true;
        return Ok((height, width, out_channels));
    }
    Ok(match then {
        Some(to) => {
            *out = convert_channels(std::mem::take(out), out_channels, to);
            (height, width, to)
        }
        None => (height, width, out_channels),
    })
}

/// A JPEG whose data stops before its EOI marker is truncated: zune-jpeg pads a stream that
/// ends inside the last MCU row instead of failing, so the end is checked here (TensorFlow
/// fails on a stream that ends early unless `try_recover_truncated`). Bytes after EOI are
/// allowed. Inside entropy-coded data `FF` is only followed by `00` or a restart marker, so an
/// `FF D9` after the first scan header is the real EOI.
fn check_jpeg_end(data: &[u8]) -> Result<()> {
    let scan = first_scan(data).unwrap_or(2);
    let has_end = data
        .get(scan..)
        .is_some_and(|rest| rest.windows(2).rev().any(|m| m == [0xff, 0xd9]));
    if has_end {
        Ok(())
    } else {
        Err(Error::decode(
            ImageFormat::Jpeg,
            DecodeErrorKind::Truncated,
            format!(
                "invalid JPEG data: truncated ({} bytes, no end-of-image marker after the scan \
                 data)",
                data.len()
            ),
        ))
    }
}

/// Offset of the first SOS marker, found by walking the marker segments from SOI.
fn first_scan(data: &[u8]) -> Option<usize> {
    let mut pos = 2;
    loop {
        if *data.get(pos)? != 0xff {
            return None;
        }
        match *data.get(pos + 1)? {
            0xff => pos += 1,
            0xda => return Some(pos),
            0xd0..=0xd7 | 0x01 => pos += 2,
            _ => {
                let len = u16::from_be_bytes([*data.get(pos + 2)?, *data.get(pos + 3)?]);
                pos += 2 + usize::from(len);
            }
        }
    }
}

/// Decodes into `out`, made `len` bytes long; `false` when a window decode stopped at a
/// second scan (`zune_jpeg::SLUICE_WINDOW_RESTART`: decode the whole image instead). A
/// reused buffer is not zeroed first: the decoder writes every byte, rows a damaged stream
/// ends before as zeros (Sluice's patch of zune-jpeg: fuzz finding `image-window-differs`).
fn decode_into(
    decoder: &mut JpegDecoder<ZCursor<&[u8]>>,
    len: usize,
    out: &mut Vec<u8>,
) -> Result<bool> {
    decoder.decode_headers().map_err(zune_err)?;
    if decoder.output_buffer_size() != Some(len) {
        return Err(Error::decode(
            ImageFormat::Jpeg,
            DecodeErrorKind::Corrupt,
            format!(
                "invalid JPEG data: the decoder wants {:?} bytes for {len} expected",
                decoder.output_buffer_size()
            ),
        ));
    }
    if out.len() < len {
        out.resize(len, 0);
    } else {
        out.truncate(len);
    }
    match decoder.decode_into(out) {
        Ok(()) => Ok(true),
        Err(zune_jpeg::errors::DecodeErrors::FormatStatic(m))
            if m == zune_jpeg::SLUICE_WINDOW_RESTART =>
        {
            Ok(false)
        }
        Err(e) => Err(zune_err(e)),
    }
}

fn png_err(e: image::ImageError) -> Error {
    let png = |kind, message| Error::decode(ImageFormat::Png, kind, message);
    match e {
        image::ImageError::Limits(l) => png(
            DecodeErrorKind::Limits,
            format!("PNG image over the limits: {l}"),
        ),
        other => {
            let kind = match &other {
                image::ImageError::IoError(io)
                    if io.kind() == std::io::ErrorKind::UnexpectedEof =>
                {
                    DecodeErrorKind::Truncated
                }
                image::ImageError::Unsupported(_) => DecodeErrorKind::Unsupported,
                _ => DecodeErrorKind::Corrupt,
            };
            png(kind, format!("invalid PNG data: {other}"))
        }
    }
}

fn decode_png(data: &[u8], channels: Option<usize>, limits: &DecodeLimits) -> Result<Decoded> {
    // IHDR is the first chunk: its width and height are checked before the decoder is made.
    let header = data.get(8..24).ok_or_else(|| {
        Error::decode(
            ImageFormat::Png,
            DecodeErrorKind::Truncated,
            "invalid PNG data: truncated before IHDR",
        )
    })?;
    if &header[4..8] != b"IHDR" {
        return Err(Error::decode(
            ImageFormat::Png,
            DecodeErrorKind::Corrupt,
            "invalid PNG data: the first chunk is not IHDR",
        ));
    }
    let width = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
    let height = u32::from_be_bytes([header[12], header[13], header[14], header[15]]);
    limits.check(ImageFormat::Png, u64::from(height), u64::from(width))?;

    // The png crate stops reading after the last image data; a file cut anywhere before the
    // end of its IEND chunk is truncated all the same (libpng's `png_read_end`, which
    // TensorFlow calls, fails on it).
    if !data.windows(IEND.len()).rev().any(|chunk| chunk == IEND) {
        return Err(Error::decode(
            ImageFormat::Png,
            DecodeErrorKind::Truncated,
            format!(
                "invalid PNG data: truncated ({} bytes, no complete IEND chunk)",
                data.len()
            ),
        ));
    }

    let mut image_limits = image::Limits::default();
    // The largest buffer: 16-bit RGBA, plus the decoder's own row buffers.
    image_limits.max_alloc = Some(limits.max_pixels.saturating_mul(8).saturating_add(1 << 20));
    let decoder = image::codecs::png::PngDecoder::with_limits(Cursor::new(data), image_limits)
        .map_err(png_err)?;
    let (w, h) = decoder.dimensions();
    let (w, h) = (w as usize, h as usize);
    limits.check(ImageFormat::Png, h as u64, w as u64)?;
    let color = decoder.color_type();
    let stored = usize::from(color.channel_count());
    let sixteen = color.bytes_per_pixel() == 2 * color.channel_count();
    let total = usize::try_from(decoder.total_bytes()).map_err(|_| {
        Error::decode(
            ImageFormat::Png,
            DecodeErrorKind::Limits,
            "PNG image too large",
        )
    })?;
    let mut buf = vec![0u8; total];
    decoder.read_image(&mut buf).map_err(png_err)?;
    let pixels = if sixteen {
        // Native-endian u16 samples: keep the high byte.
        buf.chunks_exact(2)
            .map(|s| (u16::from_ne_bytes([s[0], s[1]]) >> 8) as u8)
            .collect()
    } else {
        buf
    };
    if pixels.len() != h * w * stored {
        return Err(Error::decode(
            ImageFormat::Png,
            DecodeErrorKind::Corrupt,
            format!(
                "invalid PNG data: decoded {} bytes for a {w}x{h}x{stored} image",
                pixels.len()
            ),
        ));
    }
    Ok(match channels {
        Some(to) if to != stored => (h, w, to, convert_channels(pixels, stored, to)),
        _ => (h, w, stored, pixels),
    })
}

/// libpng's `rgb_to_gray` coefficients for `png_set_rgb_to_gray(png, 1, 0.2989, 0.587)`,
/// in 1/32768.
const GREY_R: u32 = 29890 * 32768 / 100_000;
const GREY_G: u32 = 58700 * 32768 / 100_000;
const GREY_B: u32 = 32768 - GREY_R - GREY_G;

fn grey(r: u8, g: u8, b: u8) -> u8 {
    if r == g && g == b {
        r
    } else {
        ((GREY_R * u32::from(r) + GREY_G * u32::from(g) + GREY_B * u32::from(b)) >> 15) as u8
    }
}

/// Converts HWC pixels between 1 (grey), 2 (grey + alpha), 3 (RGB) and 4 (RGBA) channels.
fn convert_channels(pixels: Vec<u8>, from: usize, to: usize) -> Vec<u8> {
    if from == to {
        return pixels;
    }
    let n = pixels.len() / from;
    let mut out = Vec::with_capacity(n * to);
    for p in pixels.chunks_exact(from) {
        let (r, g, b, a) = match from {
            1 => (p[0], p[0], p[0], 255),
            2 => (p[0], p[0], p[0], p[1]),
            3 => (p[0], p[1], p[2], 255),
            _ => (p[0], p[1], p[2], p[3]),
        };
        match to {
            1 if from <= 2 => out.push(r),
            1 => out.push(grey(r, g, b)),
            3 => out.extend_from_slice(&[r, g, b]),
            _ => out.extend_from_slice(&[r, g, b, a]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_conversions() {
        assert_eq!(convert_channels(vec![7, 9], 1, 3), vec![7, 7, 7, 9, 9, 9]);
        assert_eq!(convert_channels(vec![7, 9], 2, 4), vec![7, 7, 7, 9]);
        assert_eq!(convert_channels(vec![1, 2, 3, 4], 4, 3), vec![1, 2, 3]);
        assert_eq!(convert_channels(vec![1, 2, 3], 3, 4), vec![1, 2, 3, 255]);
        assert_eq!(convert_channels(vec![50, 50, 50], 3, 1), vec![50]);
        assert_eq!(convert_channels(vec![255, 0, 0], 3, 1), vec![76]);
        assert_eq!(convert_channels(vec![255, 255, 254], 3, 1), vec![254]);
    }

    #[test]
    fn formats_are_named() {
        let err = detect_format(b"GIF89a").unwrap_err().to_string();
        assert!(err.contains("GIF"), "{err}");
        let err = detect_format(&[1, 2, 3]).unwrap_err().to_string();
        assert!(err.contains("01 02 03"), "{err}");
        let err = detect_format(&[]).unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
    }
}
