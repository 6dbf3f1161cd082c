//! Colour ops with `tf.image`'s semantics: dtype conversion, brightness, contrast,
//! saturation, hue, and per-channel normalization.
//!
//! Every op takes an image `[height, width, channels]` or a batch of images `[batch,
//! height, width, channels]` of dtype `u8` or `f32`, and returns a tensor of the same shape.
//!
//! # The two dtypes
//!
//! - **`f32`** images are taken to be in `[0, 1]` (as after [`to_unit_f32`]) and the result
//!   is `f32`, computed as TensorFlow's CPU kernels compute it (same operations in the same
//!   order, so agreement is to the last bit or within a few ulps; contrast's means are the
//!   exception, see below) and **not clipped**: like `tf.image`, brightness and contrast may
//!   leave `[0, 1]`.
//! - **`u8`** images are handled as `tf.image` handles them: converted to `f32` in `[0, 1]`
//!   (`x * (1/255)`), adjusted, and converted back with `convert_image_dtype`'s rounding
//!   (`trunc(clamp(y * 255.5, 0, 255))`), so the result is `u8`. Where the result depends on
//!   one value only (brightness, contrast once the means are known), this goes through a
//!   256-entry lookup table.
//!
//! # Randomness
//!
//! `random_*` ops draw exactly one `f32` uniform in `[0, 1)` from the given RNG per
//! parameter (after checking their arguments, which draws nothing) and map it to `[lo, hi)`
//! as TensorFlow's `random_uniform` does (`u * (hi - lo) + lo`). TensorFlow's uniform float
//! has 23 random bits and ours 24; the same RNG state always gives the same output.
//!
//! # Differences from `tf.image`
//!
//! - Only `u8` and `f32` images (TensorFlow also takes other integer and float dtypes), of
//!   rank 3 or 4 (TensorFlow takes any rank ≥ 3 for contrast, saturation and hue, and any
//!   rank for brightness).
//! - Converting to `u8` always saturates. `tf.image.adjust_saturation` and `adjust_hue`
//!   convert back without saturating, which only differs for values outside `[0, 1]` (where
//!   TensorFlow's result is undefined); for values inside it the results are identical.
//! - `NaN` values map to 0 when converted to `u8` (undefined in TensorFlow).
//! - Contrast's per-channel means are summed in a streaming order of our own (pairwise in
//!   `f32` over runs of 16 values per lane, then in `f64`; see `channel_sums.rs`), not by
//!   TensorFlow's in-place halving, which needs half an image of scratch and sixteen passes
//!   over it. The sum is at least as accurate as TensorFlow's (the error bound is 4 units in
//!   the last place against TensorFlow's 16 for a 224² image), so the means agree to about
//!   one unit in the last place and the outputs to about 1e-7; on the test vectors taken
//!   from TensorFlow they agree exactly for `u8` and within 1e-6 for `f32`. The order is
//!   fixed, so results do not depend on thread count or vector width. The fused
//!   [`PointChain`](super::PointChain) gets the same bits as the op, except that a contrast
//!   straight after loading `u8` pixels (plus at most one brightness) takes the exact mean
//!   from integer sums (see its docs).
//! - [`normalize`] and [`denormalize`] have no `tf.image` counterpart (`tf.image` only has
//!   `per_image_standardization`); they are the usual `(x - mean) / std` per channel.

use std::array;

use bytes::Bytes;
use rand::{Rng, RngCore};

use sluice_tensor::{DType, Tensor, TensorData, pool};

use crate::channel_sums::channel_means;
use crate::error::{Error, Result};

/// `1 / 255` as `f32`: TensorFlow's scale from `u8` to `[0, 1]` (`1. / 255` rounded to
/// `float32`, the same value).
pub(super) const INV_255: f32 = 1.0 / 255.0;

/// TensorFlow's scale from `[0, 1]` to `u8` (`dtype.max + 0.5`, "to avoid rounding
/// problems in the cast").
const TO_U8: f32 = 255.5;

/// Values handled per block by the per-channel loops: a multiple of every channel count
/// that divides it (1, 2, 3, 4, 6, 8, 12, 16, 24, 48), so a block starts at channel 0 and
/// the per-channel parameters can be laid out once as a block-long pattern (which the
/// compiler vectorizes).
pub(super) const BLOCK: usize = 48;

/// `[0, 1]` float to `u8` as TensorFlow's `convert_image_dtype(..., saturate=True)`:
/// `trunc(clamp(y * 255.5, 0, 255))` (`as` saturates and truncates; `NaN` gives 0).
#[inline(always)]
fn unit_to_u8(y: f32) -> u8 {
    (y * TO_U8) as u8
}

/// `u8` to `[0, 1]` float as TensorFlow's `convert_image_dtype`: `x * (1/255)`.
#[inline(always)]
fn u8_to_unit(x: u8) -> f32 {
    f32::from(x) * INV_255
}

/// An image's (or a batch's) geometry.
#[derive(Clone, Copy)]
struct Dims {
    /// Pixels per image (`height * width`).
    pixels: usize,
    /// Channels per pixel.
    channels: usize,
}

fn dims(img: &Tensor, op: &'static str) -> Result<Dims> {
    let (h, w, c) = match *img.shape() {
        [h, w, c] | [_, h, w, c] => (h, w, c),
        ref other => {
            return Err(Error::shape(
                op,
                format!(
                    "{op}: expected an image [height, width, channels] or a batch [batch, \
                     height, width, channels], got shape {other:?}"
                ),
            ));
        }
    };
    match img.dtype() {
        DType::U8 | DType::F32 => {}
        other => {
            return Err(Error::DType {
                op,
                found: other,
                message: format!("{op}: expected a u8 or f32 image, got {other}"),
            });
        }
    }
    Ok(Dims {
        pixels: h * w,
        channels: c,
    })
}

fn rgb_dims(img: &Tensor, op: &'static str) -> Result<Dims> {
    let d = dims(img, op)?;
    if d.channels != 3 {
        return Err(Error::shape(
            op,
            format!(
                "{op}: expected an RGB image (3 channels), got {} channels",
                d.channels
            ),
        ));
    }
    Ok(d)
}

fn f32_image(shape: &[usize], values: Vec<f32>) -> Result<Tensor> {
    Ok(Tensor::new(shape, TensorData::F32(values.into()))?)
}

fn u8_image(shape: &[usize], values: Vec<u8>) -> Result<Tensor> {
    Ok(Tensor::new(shape, TensorData::U8(Bytes::from(values)))?)
}

/// `u8` values through a lookup table.
fn map_lut(src: &[u8], lut: &[u8; 256]) -> Vec<u8> {
    let mut out = pool::take(src.len());
    out.extend(src.iter().map(|&x| lut[usize::from(x)]));
    out
}

/// Appends `f(x, a[k], b[k])` for each value `x` of `src`, `k` its channel.
#[inline(always)]
fn map_channels<T: Copy>(
    src: &[T],
    a: &[f32],
    b: &[f32],
    out: &mut Vec<f32>,
    f: impl Fn(T, f32, f32) -> f32,
) {
    let c = a.len();
    debug_assert_eq!(b.len(), c);
    if c == 0 {
        return;
    }
    if BLOCK.is_multiple_of(c) {
        let pa: [f32; BLOCK] = array::from_fn(|i| a[i % c]);
        let pb: [f32; BLOCK] = array::from_fn(|i| b[i % c]);
        let mut blocks = src.chunks_exact(BLOCK);
        for block in &mut blocks {
            let block: &[T; BLOCK] = block.try_into().expect("a block");
            out.extend(
                block
                    .iter()
                    .zip(pa.iter().zip(&pb))
                    .map(|(&x, (&a, &b))| f(x, a, b)),
            );
        }
        let rest = blocks.remainder();
        out.extend(
            rest.iter()
                .zip(pa.iter().zip(&pb))
                .map(|(&x, (&a, &b))| f(x, a, b)),
        );
    } else {
        for px in src.chunks_exact(c) {
            out.extend(
                px.iter()
                    .zip(a.iter().zip(b))
                    .map(|(&x, (&a, &b))| f(x, a, b)),
            );
        }
    }
}

/// Appends `luts[k][x]` for each value `x` of `src`, `k` its channel.
fn map_channels_lut(src: &[u8], luts: &[[u8; 256]], out: &mut Vec<u8>) {
    let c = luts.len();
    if c == 0 {
        return;
    }
    if BLOCK.is_multiple_of(c) {
        let pattern: [&[u8; 256]; BLOCK] = array::from_fn(|i| &luts[i % c]);
        let mut blocks = src.chunks_exact(BLOCK);
        for block in &mut blocks {
            let block: &[u8; BLOCK] = block.try_into().expect("a block");
            out.extend(
                block
                    .iter()
                    .zip(&pattern)
                    .map(|(&x, lut)| lut[usize::from(x)]),
            );
        }
        let rest = blocks.remainder();
        out.extend(
            rest.iter()
                .zip(&pattern)
                .map(|(&x, lut)| lut[usize::from(x)]),
        );
    } else {
        for px in src.chunks_exact(c) {
            out.extend(px.iter().zip(luts).map(|(&x, lut)| lut[usize::from(x)]));
        }
    }
}

// ---------------------------------------------------------------------------------------
// dtype conversion

/// Casts an image between `u8` and `f32` **keeping the values** (`tf.cast` /
/// `tf.saturate_cast`): `u8 → f32` gives values in `0..=255`; `f32 → u8` clamps to
/// `[0, 255]` and truncates toward zero (as `tf.saturate_cast`; `NaN` gives 0). Casting to
/// the image's own dtype returns it unchanged (sharing the values).
///
/// For the `[0, 1]` scaling of `tf.image.convert_image_dtype`, see [`to_unit_f32`] and
/// [`from_unit_f32`].
pub fn cast(img: &Tensor, dtype: DType) -> Result<Tensor> {
    dims(img, "cast")?;
    match (img.data(), dtype) {
        (TensorData::U8(_), DType::U8) | (TensorData::F32(_), DType::F32) => Ok(img.clone()),
        (TensorData::U8(v), DType::F32) => {
            let mut out = pool::take(v.len());
            out.extend(v.iter().map(|&x| f32::from(x)));
            f32_image(img.shape(), out)
        }
        (TensorData::F32(v), DType::U8) => {
            let mut out = pool::take(v.len());
            out.extend(v.iter().map(|&x| x as u8));
            u8_image(img.shape(), out)
        }
        (_, other) => Err(Error::invalid(
            "cast",
            format!("cast: can cast an image to u8 or f32, not {other}"),
        )),
    }
}

/// `tf.image.convert_image_dtype(img, tf.float32)`: a `u8` image to `f32` in `[0, 1]`
/// (`x * (1/255)`, bit-identical to TensorFlow). An `f32` image is returned unchanged.
pub fn to_unit_f32(img: &Tensor) -> Result<Tensor> {
    dims(img, "to_unit_f32")?;
    match img.data() {
        TensorData::U8(v) => {
            let mut out = pool::take(v.len());
            out.extend(v.iter().map(|&x| u8_to_unit(x)));
            f32_image(img.shape(), out)
        }
        _ => Ok(img.clone()),
    }
}

/// `tf.image.convert_image_dtype(img, tf.uint8, saturate=True)`: an `f32` image in `[0, 1]`
/// to `u8`, as `trunc(clamp(x * 255.5, 0, 255))` (bit-identical to TensorFlow). A `u8`
/// image is returned unchanged.
///
/// Difference: TensorFlow's default `saturate=False` leaves values outside `[0, 1]`
/// undefined; this always saturates.
pub fn from_unit_f32(img: &Tensor) -> Result<Tensor> {
    dims(img, "from_unit_f32")?;
    match img.data() {
        TensorData::F32(v) => {
            let mut out = pool::take(v.len());
            out.extend(v.iter().map(|&x| unit_to_u8(x)));
            u8_image(img.shape(), out)
        }
        _ => Ok(img.clone()),
    }
}

// ---------------------------------------------------------------------------------------
// Random parameters

/// One uniform `f32` in `[lo, hi)` from one draw, mapped as TensorFlow's `random_uniform`.
pub(super) fn uniform<R: RngCore + ?Sized>(rng: &mut R, lo: f32, hi: f32) -> f32 {
    let u: f32 = rng.random();
    u * (hi - lo) + lo
}

pub(super) fn check_range(op: &'static str, lower: f32, upper: f32) -> Result<()> {
    if upper.is_nan() || lower.is_nan() || upper <= lower {
        return Err(Error::invalid(
            op,
            format!("{op}: upper ({upper}) must be > lower ({lower})"),
        ));
    }
    if lower < 0.0 {
        return Err(Error::invalid(
            op,
            format!("{op}: lower ({lower}) must be non-negative"),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Brightness

/// `tf.image.adjust_brightness`: adds `delta` to every value. `f32`: `x + delta`, not
/// clipped. `u8`: `x/255 + delta`, converted back with saturation (see the module docs).
pub fn adjust_brightness(img: &Tensor, delta: f32) -> Result<Tensor> {
    dims(img, "adjust_brightness")?;
    match img.data() {
        TensorData::U8(v) => {
            let lut: [u8; 256] = array::from_fn(|x| unit_to_u8(u8_to_unit(x as u8) + delta));
            u8_image(img.shape(), map_lut(v, &lut))
        }
        TensorData::F32(v) => {
            let mut out = pool::take(v.len());
            out.extend(v.iter().map(|&x| x + delta));
            f32_image(img.shape(), out)
        }
        _ => unreachable!("dims checked the dtype"),
    }
}

/// `tf.image.random_brightness`: [`adjust_brightness`] by a `delta` uniform in
/// `[-max_delta, max_delta)` (one draw). `max_delta` must be non-negative.
pub fn random_brightness<R: RngCore + ?Sized>(
    img: &Tensor,
    max_delta: f32,
    rng: &mut R,
) -> Result<Tensor> {
    dims(img, "random_brightness")?;
    let delta = draw_brightness(max_delta, rng)?;
    adjust_brightness(img, delta)
}

/// The delta [`random_brightness`] draws: checks `max_delta`, then one draw (for a fused
/// [`PointChain`](crate::PointChain) that draws what the op would).
pub fn draw_brightness<R: RngCore + ?Sized>(max_delta: f32, rng: &mut R) -> Result<f32> {
    if max_delta.is_nan() || max_delta < 0.0 {
        return Err(Error::invalid(
            "random_brightness",
            format!("random_brightness: max_delta ({max_delta}) must be non-negative"),
        ));
    }
    Ok(uniform(rng, -max_delta, max_delta))
}

/// The factor [`random_contrast`] draws: checks the range, then one draw (for a fused
/// [`PointChain`](crate::PointChain) that draws what the op would).
pub fn draw_contrast<R: RngCore + ?Sized>(lower: f32, upper: f32, rng: &mut R) -> Result<f32> {
    check_range("random_contrast", lower, upper)?;
    Ok(uniform(rng, lower, upper))
}

// ---------------------------------------------------------------------------------------
// Contrast

/// `tf.image.adjust_contrast`: per image and channel, `mean + factor * (x - mean)`, with
/// `mean` the channel's mean over the image (summed in a fixed order of our own, at least
/// as accurately as TensorFlow: see the module docs). `f32`: not clipped. `u8`: computed on `x/255`, converted back with
/// saturation (see the module docs).
pub fn adjust_contrast(img: &Tensor, factor: f32) -> Result<Tensor> {
    let d = dims(img, "adjust_contrast")?;
    let plane = d.pixels * d.channels;
    let c = d.channels;
    match img.data() {
        TensorData::U8(v) => {
            let mut out = pool::take(v.len());
            for image in v.chunks_exact(plane.max(1)) {
                let means = channel_means(image, d.pixels, c, u8_to_unit);
                let luts: Vec<[u8; 256]> = means
                    .iter()
                    .map(|&m| {
                        array::from_fn(|x| unit_to_u8(m + factor * (u8_to_unit(x as u8) - m)))
                    })
                    .collect();
                map_channels_lut(image, &luts, &mut out);
            }
            u8_image(img.shape(), out)
        }
        TensorData::F32(v) => {
            let mut out = pool::take(v.len());
            let factors = vec![factor; c];
            for image in v.chunks_exact(plane.max(1)) {
                let means = channel_means(image, d.pixels, c, |x| x);
                map_channels(image, &means, &factors, &mut out, |x, m, f| m + f * (x - m));
            }
            f32_image(img.shape(), out)
        }
        _ => unreachable!("dims checked the dtype"),
    }
}

/// [`random_brightness`] then [`random_contrast`] in one pass (same draws, in that order, and
/// the same result as the two ops one after the other).
pub fn random_brightness_contrast<R: RngCore + ?Sized>(
    img: &Tensor,
    max_delta: f32,
    lower: f32,
    upper: f32,
    rng: &mut R,
) -> Result<Tensor> {
    check_range("random_contrast", lower, upper)?;
    dims(img, "random_brightness_contrast")?;
    let delta = draw_brightness(max_delta, rng)?;
    let factor = draw_contrast(lower, upper, rng)?;
    adjust_brightness_contrast(img, delta, factor)
}

/// [`adjust_brightness`] then [`adjust_contrast`], fused: on `f32` images the result is
/// bit-identical to the two ops but reads the image twice
/// and writes it once, instead of three reads and two writes. On `u8` images it is the two
/// ops in sequence (TensorFlow rounds to `u8` in between, which a fused pass would not).
pub fn adjust_brightness_contrast(img: &Tensor, delta: f32, factor: f32) -> Result<Tensor> {
    let d = dims(img, "adjust_brightness_contrast")?;
    let TensorData::F32(v) = img.data() else {
        return adjust_contrast(&adjust_brightness(img, delta)?, factor);
    };
    let plane = d.pixels * d.channels;
    let mut out = pool::take(v.len());
    let factors = vec![factor; d.channels];
    for image in v.chunks_exact(plane.max(1)) {
        let means = channel_means(image, d.pixels, d.channels, |x| x + delta);
        map_channels(image, &means, &factors, &mut out, |x, m, f| {
            m + f * ((x + delta) - m)
        });
    }
    f32_image(img.shape(), out)
}

/// `tf.image.random_contrast`: [`adjust_contrast`] by a factor uniform in `[lower, upper)`
/// (one draw). Requires `0 <= lower < upper`.
pub fn random_contrast<R: RngCore + ?Sized>(
    img: &Tensor,
    lower: f32,
    upper: f32,
    rng: &mut R,
) -> Result<Tensor> {
    dims(img, "random_contrast")?;
    let factor = draw_contrast(lower, upper, rng)?;
    adjust_contrast(img, factor)
}

// ---------------------------------------------------------------------------------------
// Saturation (TensorFlow's `AdjustSaturation` CPU kernel)

/// Which of `[c, x, 0]` TensorFlow's `hsv_to_rgb` puts in r, g and b, by hue sextant
/// (its `switch`; 6 and 7 are its `default`, all 0: a hue of exactly 1 lands there).
const SAT_SLOTS: [[usize; 3]; 8] = [
    [0, 1, 2],
    [1, 0, 2],
    [2, 0, 1],
    [2, 1, 0],
    [1, 2, 0],
    [0, 2, 1],
    [2, 2, 2],
    [2, 2, 2],
];

/// One pixel through TensorFlow's `AdjustSaturation` kernel (`rgb_to_hsv`, clip
/// `s * factor` to `[0, 1]`, `hsv_to_rgb`), giving the same values, written without
/// data-dependent branches (its `switch` and loops become table look-ups and closed forms;
/// the unit tests check it against a literal port of the kernel, `tf_port`).
#[inline(always)]
fn saturate_pixel(r: f32, g: f32, b: f32, factor: f32) -> [f32; 3] {
    // C++'s std::max / std::min.
    let max = |a: f32, b: f32| if a < b { b } else { a };
    let min = |a: f32, b: f32| if b < a { b } else { a };
    // rgb_to_hsv.
    let v = max(r, max(g, b));
    let range = v - min(r, min(g, b));
    let s = if v > 0.0 { range / v } else { 0.0 };
    let norm = 1.0f32 / (6.0f32 * range);
    // TF adds the `double` constants 2.0 / 6.0 and 4.0 / 6.0 in double precision; adding
    // 0.0 in the first case changes nothing (but the sign of a zero, which the rest
    // ignores).
    let k = usize::from(r != v) * (1 + usize::from(g != v));
    let diff = [g - b, b - r, r - g][k];
    let offset = [0.0, 2.0 / 6.0, 4.0 / 6.0][k];
    let mut h = (f64::from(norm * diff) + offset) as f32;
    h = if range <= 0.0 { 0.0 } else { h };
    h = if h < 0.0 { h + 1.0 } else { h };
    // The saturation change.
    let s = s * factor;
    let s = if 0.0 < s { s } else { 0.0 };
    let s = if s < 1.0 { s } else { 1.0 };
    // hsv_to_rgb. `h` is in [0, 1] (or NaN), so `dh` in [0, 6]; TF's loops (add 2 while
    // <= 0, subtract 2 while >= 2) compute `dh - 2 * floor(dh / 2)`, exactly (each
    // subtraction is exact), and so does this.
    let c = s * v;
    let m = v - c;
    let dh = h * 6.0;
    let category = dh as i32;
    let fmodu = dh - 2.0 * ((dh * 0.5) as i32 as f32);
    let x = c * (1.0 - (fmodu - 1.0).abs());
    let values = [c, x, 0.0];
    let slots = SAT_SLOTS[(category as u32).min(7) as usize];
    [
        values[slots[0]] + m,
        values[slots[1]] + m,
        values[slots[2]] + m,
    ]
}

/// Applies `f` to every RGB pixel (`u8`: on `x/255`, converted back with saturation).
fn map_rgb(img: &Tensor, f: impl Fn(f32, f32, f32) -> [f32; 3]) -> Result<Tensor> {
    match img.data() {
        TensorData::U8(v) => {
            let mut out = pool::take(v.len());
            for px in v.chunks_exact(3) {
                let [r, g, b] = f(u8_to_unit(px[0]), u8_to_unit(px[1]), u8_to_unit(px[2]));
                out.extend_from_slice(&[unit_to_u8(r), unit_to_u8(g), unit_to_u8(b)]);
            }
            u8_image(img.shape(), out)
        }
        TensorData::F32(v) => {
            let mut out = pool::take(v.len());
            for px in v.chunks_exact(3) {
                out.extend_from_slice(&f(px[0], px[1], px[2]));
            }
            f32_image(img.shape(), out)
        }
        _ => unreachable!("dims checked the dtype"),
    }
}

/// `tf.image.adjust_saturation`: converts each RGB pixel to HSV, multiplies the saturation
/// by `factor` and clips it to `[0, 1]`, and converts back, with TensorFlow's kernel's
/// arithmetic. Needs 3 channels. `u8`: on `x/255`, converted back (see the module docs).
/// A factor of 1 is the identity up to rounding (within about 1e-7 on `[0, 1]` values).
pub fn adjust_saturation(img: &Tensor, factor: f32) -> Result<Tensor> {
    rgb_dims(img, "adjust_saturation")?;
    map_rgb(img, |r, g, b| saturate_pixel(r, g, b, factor))
}

/// `tf.image.random_saturation`: [`adjust_saturation`] by a factor uniform in
/// `[lower, upper)` (one draw). Requires `0 <= lower < upper`.
pub fn random_saturation<R: RngCore + ?Sized>(
    img: &Tensor,
    lower: f32,
    upper: f32,
    rng: &mut R,
) -> Result<Tensor> {
    check_range("random_saturation", lower, upper)?;
    rgb_dims(img, "random_saturation")?;
    let factor = uniform(rng, lower, upper);
    adjust_saturation(img, factor)
}

// ---------------------------------------------------------------------------------------
// Hue (TensorFlow's `AdjustHue` CPU kernel)

/// For each hue sextant of TensorFlow's `AdjustHue` kernel: the indices in `[r, g, b]` of
/// the maximum, the middle and the minimum component (in `rgb_to_hv_range`, and where
/// `hv_range_to_rgb` puts them back: the same table).
const HUE_ORDER: [[usize; 3]; 6] = [
    [0, 1, 2],
    [1, 0, 2],
    [1, 2, 0],
    [2, 1, 0],
    [2, 0, 1],
    [0, 2, 1],
];

/// The inverse of [`HUE_ORDER`]: for each sextant, whether r, g and b are the maximum (0),
/// the middle (1) or the minimum (2).
const HUE_ROLE: [[usize; 3]; 6] = {
    let mut table = [[0; 3]; 6];
    let mut sextant = 0;
    while sextant < 6 {
        let mut role = 0;
        while role < 3 {
            table[sextant][HUE_ORDER[sextant][role]] = role;
            role += 1;
        }
        sextant += 1;
    }
    table
};

/// The sextant `rgb_to_hv_range` picks, by its comparisons (bit 0: `r < g`, 1: `b < r`,
/// 2: `b > g`, 3: `b < g`, 4: `b > r`): its `if` tree, evaluated at compile time.
const HUE_SEXTANT: [u8; 32] = {
    let mut table = [0u8; 32];
    let mut bits = 0;
    while bits < 32 {
        table[bits] = if bits & 1 != 0 {
            if bits & 2 != 0 {
                1
            } else if bits & 4 != 0 {
                3
            } else {
                2
            }
        } else if bits & 8 != 0 {
            0
        } else if bits & 16 != 0 {
            4
        } else {
            5
        };
        bits += 1;
    }
    table
};

/// One pixel through TensorFlow's `AdjustHue` kernel (`rgb_to_hv_range`, shift and wrap
/// the hue, `hv_range_to_rgb`), giving the same values, written without data-dependent
/// branches (the unit tests check it against a literal port of the kernel, `tf_port`).
/// `delta6` is `delta * 6`, in `[-6, 6]`.
#[inline(always)]
fn hue_pixel(r: f32, g: f32, b: f32, delta6: f32) -> [f32; 3] {
    let px = [r, g, b];
    let bits = usize::from(r < g)
        | usize::from(b < r) << 1
        | usize::from(b > g) << 2
        | usize::from(b < g) << 3
        | usize::from(b > r) << 4;
    let sextant = usize::from(HUE_SEXTANT[bits]);
    let [i_max, i_mid, i_min] = HUE_ORDER[sextant];
    let (v_max, v_mid, v_min) = (px[i_max], px[i_mid], px[i_min]);
    let ratio = (v_mid - v_min) / (v_max - v_min);
    // Indexing rather than `if`: the compiler would branch, unpredictably.
    let ratio = [ratio, 1.0 - ratio][sextant & 1];
    let h = if v_max == v_min {
        0.0
    } else {
        sextant as f32 + ratio
    };
    // TF wraps with loops (add 6 while < 0, then subtract 6 while >= 6). With h in [0, 6]
    // and delta6 in [-6, 6], one addition and at most two subtractions do the same.
    let mut h = h + delta6;
    h = if h < 0.0 { h + 6.0 } else { h };
    h = if h >= 6.0 { h - 6.0 } else { h };
    h = if h >= 6.0 { h - 6.0 } else { h };
    // hv_range_to_rgb (its sextant 5 is also its `default`).
    let sextant = (h as u32).min(5) as usize;
    let ratio = h - sextant as f32;
    let ratio = [ratio, 1.0 - ratio][sextant & 1];
    let v_mid = v_min + ratio * (v_max - v_min);
    let values = [v_max, v_mid, v_min];
    let role = HUE_ROLE[sextant];
    [values[role[0]], values[role[1]], values[role[2]]]
}

/// `tf.image.adjust_hue`: rotates each RGB pixel's hue by `delta` (a fraction of the
/// colour circle, in `[-1, 1]`), with TensorFlow's kernel's arithmetic (hue, minimum and
/// maximum; the maximum and minimum of a pixel are kept exactly). Needs 3 channels. `u8`:
/// on `x/255`, converted back (see the module docs). A delta of 0 is the identity up to
/// rounding (within about 1e-7 on `[0, 1]` values).
pub fn adjust_hue(img: &Tensor, delta: f32) -> Result<Tensor> {
    if !(-1.0..=1.0).contains(&delta) {
        return Err(Error::invalid(
            "adjust_hue",
            format!("adjust_hue: delta ({delta}) must be in [-1, 1]"),
        ));
    }
    rgb_dims(img, "adjust_hue")?;
    let delta6 = delta * 6.0;
    map_rgb(img, |r, g, b| hue_pixel(r, g, b, delta6))
}

/// `tf.image.random_hue`: [`adjust_hue`] by a delta uniform in `[-max_delta, max_delta)`
/// (one draw). Requires `0 <= max_delta <= 0.5`.
pub fn random_hue<R: RngCore + ?Sized>(
    img: &Tensor,
    max_delta: f32,
    rng: &mut R,
) -> Result<Tensor> {
    if !(0.0..=0.5).contains(&max_delta) {
        return Err(Error::invalid(
            "random_hue",
            format!("random_hue: max_delta ({max_delta}) must be in [0, 0.5]"),
        ));
    }
    rgb_dims(img, "random_hue")?;
    let delta = uniform(rng, -max_delta, max_delta);
    adjust_hue(img, delta)
}

// ---------------------------------------------------------------------------------------
// Normalization

/// Per-channel parameters: one value per channel, or one value for all.
pub(super) fn per_channel(
    op: &'static str,
    name: &str,
    values: &[f32],
    c: usize,
) -> Result<Vec<f32>> {
    match values.len() {
        1 => Ok(vec![values[0]; c]),
        n if n == c => Ok(values.to_vec()),
        n => Err(Error::invalid(
            op,
            format!(
                "{op}: {name} has {n} values for an image of {c} channels (give {c}, or 1 for \
                 all)"
            ),
        )),
    }
}

pub(super) fn inverse_stds(op: &'static str, std: &[f32], c: usize) -> Result<Vec<f32>> {
    let std = per_channel(op, "std", std, c)?;
    if let Some(bad) = std.iter().find(|s| !(s.is_finite() && **s != 0.0)) {
        return Err(Error::invalid(
            op,
            format!("{op}: std values must be finite and non-zero, got {bad}"),
        ));
    }
    Ok(std.iter().map(|s| 1.0 / s).collect())
}

/// Per-channel normalization to `f32`: `(x * scale - mean[c]) / std[c]`.
///
/// `u8` images are cast to `f32` keeping their values (`0..=255`), *not* scaled to
/// `[0, 1]`: pass `scale = 1.0 / 255.0` for that (ImageNet-style means and stds in
/// `[0, 1]`), or `1.0` for means and stds in pixel units. `mean` and `std` have one value
/// per channel, or one value for all. The division is computed as a multiplication by
/// `1 / std[c]` (within one ulp of dividing). Not in `tf.image`.
pub fn normalize(img: &Tensor, mean: &[f32], std: &[f32], scale: f32) -> Result<Tensor> {
    let d = dims(img, "normalize")?;
    let mean = per_channel("normalize", "mean", mean, d.channels)?;
    let inv = inverse_stds("normalize", std, d.channels)?;
    let mut out = pool::take(img.len());
    match img.data() {
        TensorData::U8(v) => {
            map_channels(&v[..], &mean, &inv, &mut out, |x, m, i| {
                (f32::from(x) * scale - m) * i
            });
        }
        TensorData::F32(v) => {
            map_channels(&v[..], &mean, &inv, &mut out, |x, m, i| (x * scale - m) * i);
        }
        _ => unreachable!("dims checked the dtype"),
    }
    f32_image(img.shape(), out)
}

/// The inverse of [`normalize`] with the same arguments: `(y * std[c] + mean[c]) / scale`,
/// as `f32` (cast or [`from_unit_f32`] to get `u8` pixels back). `scale` must be finite and
/// non-zero.
pub fn denormalize(img: &Tensor, mean: &[f32], std: &[f32], scale: f32) -> Result<Tensor> {
    let d = dims(img, "denormalize")?;
    if !(scale.is_finite() && scale != 0.0) {
        return Err(Error::invalid(
            "denormalize",
            format!("denormalize: scale must be finite and non-zero, got {scale}"),
        ));
    }
    let mean = per_channel("denormalize", "mean", mean, d.channels)?;
    let std = per_channel("denormalize", "std", std, d.channels)?;
    let mut out = pool::take(img.len());
    match img.data() {
        TensorData::U8(v) => {
            map_channels(&v[..], &std, &mean, &mut out, |y, s, m| {
                (f32::from(y) * s + m) / scale
            });
        }
        TensorData::F32(v) => {
            map_channels(&v[..], &std, &mean, &mut out, |y, s, m| (y * s + m) / scale);
        }
        _ => unreachable!("dims checked the dtype"),
    }
    f32_image(img.shape(), out)
}

/// Literal ports of TensorFlow's saturation and hue kernels (`adjust_saturation_op.cc`,
/// `adjust_hue_op.cc`), statement for statement, against which the branch-free versions
/// above are checked.
#[cfg(test)]
mod tf_port {
    /// RGB to HSV, `h` in `[0, 1)`, as TensorFlow's `rgb_to_hsv` in `adjust_saturation_op.cc`
    /// (including its `double` constants `2.0 / 6.0` and `4.0 / 6.0`).
    pub(super) fn rgb_to_hsv(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
        let vv = r.max(g.max(b));
        let range = vv - r.min(g.min(b));
        let s = if vv > 0.0 { range / vv } else { 0.0 };
        let norm = 1.0f32 / (6.0f32 * range);
        let mut hh = if r == vv {
            norm * (g - b)
        } else if g == vv {
            (f64::from(norm * (b - r)) + 2.0 / 6.0) as f32
        } else {
            (f64::from(norm * (r - g)) + 4.0 / 6.0) as f32
        };
        if range <= 0.0 {
            hh = 0.0;
        }
        if hh < 0.0 {
            hh += 1.0;
        }
        (hh, s, vv)
    }

    /// HSV to RGB as TensorFlow's `hsv_to_rgb` in `adjust_saturation_op.cc`.
    pub(super) fn hsv_to_rgb(h: f32, s: f32, v: f32) -> [f32; 3] {
        let c = s * v;
        let m = v - c;
        let dh = h * 6.0;
        let category = dh as i32;
        let mut fmodu = dh;
        while fmodu <= 0.0 {
            fmodu += 2.0;
        }
        while fmodu >= 2.0 {
            fmodu -= 2.0;
        }
        let x = c * (1.0 - (fmodu - 1.0).abs());
        let (r, g, b) = match category {
            0 => (c, x, 0.0),
            1 => (x, c, 0.0),
            2 => (0.0, c, x),
            3 => (0.0, x, c),
            4 => (x, 0.0, c),
            5 => (c, 0.0, x),
            _ => (0.0, 0.0, 0.0),
        };
        [r + m, g + m, b + m]
    }

    pub(super) fn saturate_pixel(r: f32, g: f32, b: f32, factor: f32) -> [f32; 3] {
        let (h, s, v) = rgb_to_hsv(r, g, b);
        let s = 1.0f32.min(0.0f32.max(s * factor));
        hsv_to_rgb(h, s, v)
    }

    /// RGB to (hue in `[0, 6)`, min, max) as TensorFlow's `rgb_to_hv_range`.
    pub(super) fn rgb_to_hv_range(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
        let (v_max, v_mid, v_min, category) = if r < g {
            if b < r {
                (g, r, b, 1)
            } else if b > g {
                (b, g, r, 3)
            } else {
                (g, b, r, 2)
            }
        } else if b < g {
            (r, g, b, 0)
        } else if b > r {
            (b, r, g, 4)
        } else {
            (r, b, g, 5)
        };
        if v_max == v_min {
            return (0.0, v_min, v_max);
        }
        let ratio = (v_mid - v_min) / (v_max - v_min);
        let h = category as f32
            + if category & 1 == 0 {
                ratio
            } else {
                1.0 - ratio
            };
        (h, v_min, v_max)
    }

    /// (hue in `[0, 6)`, min, max) to RGB as TensorFlow's `hv_range_to_rgb`.
    pub(super) fn hv_range_to_rgb(h: f32, v_min: f32, v_max: f32) -> [f32; 3] {
        let category = h as i32;
        let mut ratio = h - category as f32;
        if category & 1 != 0 {
            ratio = 1.0 - ratio;
        }
        let v_mid = v_min + ratio * (v_max - v_min);
        match category {
            0 => [v_max, v_mid, v_min],
            1 => [v_mid, v_max, v_min],
            2 => [v_min, v_max, v_mid],
            3 => [v_min, v_mid, v_max],
            4 => [v_mid, v_min, v_max],
            _ => [v_max, v_min, v_mid],
        }
    }

    pub(super) fn hue_pixel(r: f32, g: f32, b: f32, delta6: f32) -> [f32; 3] {
        let (mut h, v_min, v_max) = rgb_to_hv_range(r, g, b);
        h += delta6;
        while h < 0.0 {
            h += 6.0;
        }
        while h >= 6.0 {
            h -= 6.0;
        }
        hv_range_to_rgb(h, v_min, v_max)
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    /// Equal values (+0 and -0 count as equal, as do two NaNs).
    fn same(a: [f32; 3], b: [f32; 3]) -> bool {
        a.iter()
            .zip(&b)
            .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
    }

    /// Pixels with ties, zeros, ones and extremes, then random ones.
    fn pixels() -> Vec<[f32; 3]> {
        let levels = [0.0, 1e-7, 0.1, 1.0 / 3.0, 0.5, 0.7, 0.99999994, 1.0];
        let mut out = Vec::new();
        for &r in &levels {
            for &g in &levels {
                for &b in &levels {
                    out.push([r, g, b]);
                }
            }
        }
        for r in (0..=255u8).step_by(5) {
            for g in (0..=255u8).step_by(5) {
                for b in (0..=255u8).step_by(5) {
                    out.push([u8_to_unit(r), u8_to_unit(g), u8_to_unit(b)]);
                }
            }
        }
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        out.extend((0..100_000).map(|_| [rng.random(), rng.random(), rng.random()]));
        out
    }

    #[test]
    fn branch_free_saturation_is_tf_kernel() {
        for factor in [0.0, 0.3, 1.0, 1.7, 2.5, 100.0] {
            for &[r, g, b] in &pixels() {
                let fast = saturate_pixel(r, g, b, factor);
                let port = tf_port::saturate_pixel(r, g, b, factor);
                assert!(
                    same(fast, port),
                    "{r} {g} {b} x{factor}: {fast:?} vs {port:?}"
                );
            }
        }
    }

    #[test]
    fn branch_free_hue_is_tf_kernel() {
        for delta in [
            -1.0f32,
            -0.7,
            -0.5,
            -1e-7,
            0.0,
            1e-7,
            0.2,
            1.0 / 3.0,
            0.5,
            0.9,
            1.0,
        ] {
            for &[r, g, b] in &pixels() {
                let fast = hue_pixel(r, g, b, delta * 6.0);
                let port = tf_port::hue_pixel(r, g, b, delta * 6.0);
                assert!(
                    same(fast, port),
                    "{r} {g} {b} +{delta}: {fast:?} vs {port:?}"
                );
            }
        }
    }
}
