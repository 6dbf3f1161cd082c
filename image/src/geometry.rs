//! Geometric image ops: resize, crops, flips, rotation, padding, cutout, layout changes, and
//! a parallel per-row map over batches.
//!
//! Every op takes an HWC image (see [the crate docs](crate)) of dtype `u8` or `f32`, with
//! any number of channels, and returns a new [`Tensor`]; bad arguments give an [`Error`]
//! ([`Error::InvalidArgument`], [`Error::Shape`] or [`Error::DType`]), never a panic. Ops keep the input's dtype except [`resize`] with [`ResizeMethod::Bilinear`] or
//! [`ResizeMethod::Area`], which return `f32` as `tf.image.resize` does.
//!
//! Where a value has to be written into a `u8` image (a fill value, a rotated pixel) it is
//! rounded to the nearest integer and saturated to `0..=255`.
//!
//! Random ops draw from the RNG they are given, and always draw the same amount whatever
//! they decide, so an RNG keyed per image (`sluice-core`'s `ElementRng`) makes them
//! reproducible.
//!
//! Hot loops work on whole rows (slices), and on `[T; C]` pixel arrays for 1, 3 and 4
//! channels, so crops and flips of `u8` images run at memory speed, and a crop of whole
//! rows shares the input's buffer instead of copying it.
//!
//! # Differences from TensorFlow
//!
//! - The resize formulas are TF's (`HalfPixelScaler`, `ResizeAreaOp`), computed in `f32` in
//!   TF's order of operations; results agree with TF to float rounding.
//! - [`rotate`] samples bilinearly and blends with `fill` where samples leave the image
//!   (torchvision-style, not `tfa.image.rotate`'s nearest default).
//! - `resize` is Sluice's own code, not fast_image_resize: on a 256×256×3 image to 224×224
//!   (`benches/geometry.rs`), Sluice's bilinear takes ~110 µs from `u8` and ~90 µs from
//!   `f32`; fast_image_resize's non-antialiased bilinear (`ResizeAlg::Interpolation`)
//!   takes ~105 µs for `u8` but returns `u8` (rounded), not TF's `f32` values, and
//!   ~210 µs for `f32`.

use bytes::Bytes;
use rand::{Rng, RngCore};
use rayon::prelude::*;

use sluice_tensor::{Shared, Tensor, TensorData, pool};

use crate::error::{Error, Result};

/// How [`resize`] computes output pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResizeMethod {
    /// Nearest neighbour with half-pixel centres (TF2 `method='nearest'`): output pixel `x`
    /// takes input pixel `min(floor((x + 0.5) * in / out), in - 1)`. Keeps the dtype.
    Nearest,
    /// Bilinear interpolation with half-pixel centres and no antialiasing (TF2
    /// `method='bilinear', antialias=False`): output pixel `x` samples the input at
    /// `(x + 0.5) * in / out - 0.5`, clamped at the borders. Returns `f32`.
    Bilinear,
    /// Area averaging (TF `method='area'`): each output pixel is the mean of the input
    /// area it covers, partial pixels weighted by their covered fraction. Returns `f32`.
    Area,
}

/// The padding of [`pad`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    /// Pad with one value (rounded and saturated for `u8` images).
    Constant(f32),
    /// Mirror without repeating the edge (numpy / `tf.pad` `'REFLECT'`): `[a b c]` padded by
    /// 2 gives `[c b a b c b a]`. The padding must be smaller than the height and width.
    Reflect,
}

// ---------------------------------------------------------------------------------------
// Pixel types.

/// A pixel value type geometry ops work on (`u8` or `f32`).
trait Px: Copy + Default + Send + Sync + 'static {
    fn to_f32(self) -> f32;
    /// From `f32`, rounded and saturated for `u8`.
    fn from_f32(v: f32) -> Self;
    fn alloc(n: usize) -> Vec<Self>;
    fn wrap(v: Vec<Self>) -> TensorData;
    /// The values as `f32`: themselves for `f32`, converted into `buf` for `u8` (a
    /// vectorized pass, cheaper than converting each value where it is used).
    fn f32s<'a>(v: &'a [Self], buf: &'a mut Vec<f32>) -> &'a [f32];
}

impl Px for u8 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f32::from(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        // Round half up (the same as `round` for the values that do not saturate to 0),
        // without a libm call; `as` saturates (and maps NaN to 0).
        (v + 0.5) as u8
    }
    fn alloc(n: usize) -> Vec<Self> {
        Vec::with_capacity(n)
    }
    fn wrap(v: Vec<Self>) -> TensorData {
        TensorData::U8(Bytes::from(v))
    }
    fn f32s<'a>(v: &'a [Self], buf: &'a mut Vec<f32>) -> &'a [f32] {
        buf.clear();
        buf.extend(v.iter().map(|&b| f32::from(b)));
        buf
    }
}

impl Px for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    fn alloc(n: usize) -> Vec<Self> {
        pool::take(n)
    }
    fn wrap(v: Vec<Self>) -> TensorData {
        TensorData::F32(Shared::new(v))
    }
    fn f32s<'a>(v: &'a [Self], _: &'a mut Vec<f32>) -> &'a [f32] {
        v
    }
}

fn make<T: Px>(shape: &[usize], v: Vec<T>) -> Result<Tensor> {
    Ok(Tensor::new(shape, T::wrap(v))?)
}

/// `(height, width, channels)` of an HWC image tensor; an [`Error::Shape`] for another rank.
#[inline]
pub fn hwc(t: &Tensor) -> Result<(usize, usize, usize)> {
    match t.shape() {
        [h, w, c] => Ok((*h, *w, *c)),
        other => Err(Error::shape(
            "hwc",
            format!("expected an image of shape [height, width, channels], got {other:?}"),
        )),
    }
}

/// Runs `$body` with `$s` bound to the image's values as `&[u8]` or `&[f32]`.
macro_rules! per_dtype {
    ($img:expr, $op:literal, |$s:ident| $body:expr) => {
        match $img.data() {
            TensorData::U8(v) => {
                let $s: &[u8] = v;
                $body
            }
            TensorData::F32(v) => {
                let $s: &[f32] = v;
                $body
            }
            _ => {
                return Err(Error::DType {
                    op: $op,
                    found: $img.dtype(),
                    message: format!("{} takes u8 or f32 images, got {}", $op, $img.dtype()),
                });
            }
        }
    };
}

/// Calls `$fast::<T, C>` with `C` a constant for the common channel counts (1, 3, 4), so
/// per-pixel work is on `[T; C]` arrays and unrolls, and `$slow` (runtime channel count)
/// otherwise.
macro_rules! per_channels {
    ($c:expr, $fast:ident :: <$t:ty> ($($arg:expr),*), $slow:expr) => {
        match $c {
            1 => $fast::<$t, 1>($($arg),*),
            3 => $fast::<$t, 3>($($arg),*),
            4 => $fast::<$t, 4>($($arg),*),
            _ => $slow,
        }
    };
}

/// Like [`per_channels`] for functions taking `C = 0` as "use the runtime count".
macro_rules! per_channels_or_0 {
    ($c:expr, $f:ident :: <$t:ty> ($($arg:expr),*)) => {
        match $c {
            1 => $f::<$t, 1>($($arg),*),
            3 => $f::<$t, 3>($($arg),*),
            4 => $f::<$t, 4>($($arg),*),
            _ => $f::<$t, 0>($($arg),*),
        }
    };
}

#[inline(always)]
fn chans<const C: usize>(c: usize) -> usize {
    if C == 0 { c } else { C }
}

fn nonempty(op: &'static str, h: usize, w: usize) -> Result<()> {
    if h == 0 || w == 0 {
        return Err(Error::shape(
            op,
            format!("{op} needs a non-empty image, got height {h} and width {w}"),
        ));
    }
    Ok(())
}

/// Errors unless an output of `shape` fits in memory (its byte size fits an `isize`).
fn values_in(op: &'static str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 4)
        .ok_or_else(|| Error::invalid(op, format!("{op}: output shape {shape:?} is too large")))
}

/// Checks that `p` is a probability (in `[0, 1]`) for `op`: an [`Error::InvalidArgument`]
/// otherwise. What the random flips check before drawing.
#[inline]
pub fn probability(op: &'static str, p: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::invalid(
            op,
            format!("{op}: probability must be in [0, 1], got {p}"),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Resize.

/// Resizes an image to `height` × `width` as `tf.image.resize(img, [height, width],
/// method, antialias=False)` does (TF2 semantics: half-pixel centres).
///
/// `Nearest` keeps the dtype; `Bilinear` and `Area` return `f32` (for `u8` input as well,
/// as TF does — values are not rounded). Output sizes must be positive.
pub fn resize(img: &Tensor, height: usize, width: usize, method: ResizeMethod) -> Result<Tensor> {
    let (h, w, c) = hwc(img)?;
    nonempty("resize", h, w)?;
    if height == 0 || width == 0 {
        return Err(Error::invalid(
            "resize",
            format!("resize: output size must be positive, got {height}x{width}"),
        ));
    }
    let shape = [height, width, c];
    values_in("resize", &shape)?;
    if c == 0 {
        let data = img.data().slice(0..0);
        let data = match (method, data) {
            (ResizeMethod::Nearest, d) => d,
            _ => TensorData::F32(Shared::new(Vec::new())),
        };
        return Ok(Tensor::new(&shape, data)?);
    }
    per_dtype!(img, "resize", |s| match method {
        ResizeMethod::Nearest => make(&shape, resize_nearest(s, h, w, c, height, width)),
        ResizeMethod::Bilinear => make(&shape, resize_bilinear(s, h, w, c, height, width)),
        ResizeMethod::Area => make(&shape, resize_area(s, h, w, c, height, width)),
    })
}

/// TF's `CalculateResizeScale` without `align_corners`.
fn scale(inp: usize, out: usize) -> f32 {
    inp as f32 / out as f32
}

fn nearest_index(out: usize, scale: f32, inp: usize) -> usize {
    // TF's HalfPixelScalerForNN, floored and clamped.
    let v = ((out as f32 + 0.5) * scale).floor();
    (v.max(0.0) as usize).min(inp - 1)
}

fn resize_nearest<T: Px>(s: &[T], h: usize, w: usize, c: usize, oh: usize, ow: usize) -> Vec<T> {
    let (sy, sx) = (scale(h, oh), scale(w, ow));
    let xs: Vec<usize> = (0..ow).map(|x| nearest_index(x, sx, w)).collect();
    let (irow, orow) = (w * c, ow * c);
    let mut out = vec![T::default(); oh * orow];
    let mut prev = usize::MAX;
    for y in 0..oh {
        let iy = nearest_index(y, sy, h);
        let start = y * orow;
        if iy == prev {
            // Same source row as the previous output row (upscaling): copy that row.
            out.copy_within(start - orow..start, start);
            continue;
        }
        prev = iy;
        let row = &s[iy * irow..(iy + 1) * irow];
        let dst = &mut out[start..start + orow];
        per_channels!(
            c,
            gather::<T>(row, &xs, dst),
            for (d, &x) in dst.chunks_exact_mut(c).zip(&xs) {
                d.copy_from_slice(&row[x * c..(x + 1) * c]);
            }
        );
    }
    out
}

/// `dst[i] = row[xs[i]]`, pixel by pixel.
#[inline(always)]
fn gather<T: Px, const C: usize>(row: &[T], xs: &[usize], dst: &mut [T]) {
    let (src, _) = row.as_chunks::<C>();
    let (dst, _) = dst.as_chunks_mut::<C>();
    for (d, &x) in dst.iter_mut().zip(xs) {
        *d = src[x];
    }
}

/// One output column (or row) of a bilinear resize: the two input columns and the weight of
/// the second.
#[derive(Clone, Copy)]
struct Tap {
    lo: usize,
    hi: usize,
    frac: f32,
}

/// TF's HalfPixelScaler + ComputeInterpolationWeights.
fn bilinear_taps(out: usize, inp: usize) -> Vec<Tap> {
    let sc = scale(inp, out);
    (0..out)
        .map(|x| {
            let v = (x as f32 + 0.5) * sc - 0.5;
            let f = v.floor();
            let lo = (f.max(0.0) as usize).min(inp - 1);
            let hi = (v.ceil().max(0.0) as usize).min(inp - 1);
            Tap {
                lo,
                hi,
                frac: v - f,
            }
        })
        .collect()
}

/// Horizontal pass of a bilinear resize over one input row.
#[inline(always)]
fn bilinear_row<T: Px, const C: usize>(row: &[T], taps: &[Tap], out: &mut [f32]) {
    let (src, _) = row.as_chunks::<C>();
    let (dst, _) = out.as_chunks_mut::<C>();
    for (o, t) in dst.iter_mut().zip(taps) {
        let (a, b) = (&src[t.lo], &src[t.hi]);
        for k in 0..C {
            let a = a[k].to_f32();
            o[k] = a + (b[k].to_f32() - a) * t.frac;
        }
    }
}

fn bilinear_row_dyn<T: Px>(row: &[T], taps: &[Tap], c: usize, out: &mut [f32]) {
    for (o, t) in out.chunks_exact_mut(c).zip(taps) {
        let a = &row[t.lo * c..(t.lo + 1) * c];
        let b = &row[t.hi * c..(t.hi + 1) * c];
        for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
            let a = a.to_f32();
            *o = a + (b.to_f32() - a) * t.frac;
        }
    }
}

fn resize_bilinear<T: Px>(s: &[T], h: usize, w: usize, c: usize, oh: usize, ow: usize) -> Vec<f32> {
    let xt = bilinear_taps(ow, w);
    let yt = bilinear_taps(oh, h);
    let (irow, orow) = (w * c, ow * c);
    let mut out = f32::alloc(oh * orow);
    // The horizontally interpolated input rows `rows.0` and `rows.1` (as `keys`).
    let mut top = vec![0.0f32; orow];
    let mut bot = vec![0.0f32; orow];
    let mut keys = (usize::MAX, usize::MAX);
    let mut scratch = Vec::new();
    let mut hpass = |r: usize, dst: &mut [f32]| {
        let row = T::f32s(&s[r * irow..(r + 1) * irow], &mut scratch);
        per_channels!(
            c,
            bilinear_row::<f32>(row, &xt, dst),
            bilinear_row_dyn(row, &xt, c, dst)
        )
    };
    for t in &yt {
        let (lo, hi) = (t.lo, t.hi);
        if keys.0 != lo {
            if keys.1 == lo {
                std::mem::swap(&mut top, &mut bot);
                keys.1 = usize::MAX;
            } else {
                hpass(lo, &mut top);
            }
            keys.0 = lo;
        }
        if keys.1 != hi {
            if hi == lo {
                bot.copy_from_slice(&top);
            } else {
                hpass(hi, &mut bot);
            }
            keys.1 = hi;
        }
        let f = t.frac;
        out.extend(top.iter().zip(&bot).map(|(&a, &b)| a + (b - a) * f));
    }
    out
}

/// The input cells one output cell of an area resize covers: (index, weight) pairs, as
/// TF's ResizeAreaOp computes them.
fn area_spans(out: usize, inp: usize) -> Vec<Vec<(usize, f32)>> {
    let sc = scale(inp, out);
    (0..out)
        .map(|o| {
            let a = o as f32 * sc;
            let b = (o + 1) as f32 * sc;
            let start = a.floor() as i64;
            let end = b.ceil() as i64;
            (start..end)
                .map(|i| {
                    let fi = i as f32;
                    let wgt = if fi < a {
                        if fi + 1.0 > b { sc } else { fi + 1.0 - a }
                    } else if fi + 1.0 > b {
                        b - fi
                    } else {
                        1.0
                    };
                    (i.clamp(0, inp as i64 - 1) as usize, wgt)
                })
                .collect()
        })
        .collect()
}

fn resize_area<T: Px>(s: &[T], h: usize, w: usize, c: usize, oh: usize, ow: usize) -> Vec<f32> {
    let ys = area_spans(oh, h);
    let xs = area_spans(ow, w);
    let norm = 1.0 / (scale(h, oh) * scale(w, ow));
    let (irow, orow) = (w * c, ow * c);
    // Separable, in TF's order of operations: first each input row's weighted sums over
    // the columns of each output cell, then their weighted sum over the cell's rows.
    let mut hsum = vec![0.0f32; h * orow];
    for (row, dst) in s.chunks_exact(irow).zip(hsum.chunks_exact_mut(orow)) {
        for (d, span) in dst.chunks_exact_mut(c).zip(&xs) {
            for &(ix, wx) in span {
                for (d, v) in d.iter_mut().zip(&row[ix * c..(ix + 1) * c]) {
                    *d += v.to_f32() * wx;
                }
            }
        }
    }
    let mut out = f32::alloc(oh * orow);
    let mut acc = vec![0.0f32; orow];
    for span in &ys {
        acc.fill(0.0);
        for &(iy, wy) in span {
            for (a, v) in acc.iter_mut().zip(&hsum[iy * orow..(iy + 1) * orow]) {
                *a += v * wy;
            }
        }
        out.extend(acc.iter().map(|a| a * norm));
    }
    out
}

// ---------------------------------------------------------------------------------------
// Crops.

/// The `height` × `width` block whose top-left pixel is (`y`, `x`). A crop of whole rows
/// shares the input's buffer; otherwise rows are copied.
pub fn crop(img: &Tensor, y: usize, x: usize, height: usize, width: usize) -> Result<Tensor> {
    let (h, w, c) = hwc(img)?;
    let fits = |o: usize, n: usize, lim: usize| o.checked_add(n).is_some_and(|e| e <= lim);
    if height == 0 || width == 0 || !fits(y, height, h) || !fits(x, width, w) {
        return Err(Error::invalid(
            "crop",
            format!(
                "crop of {height}x{width} at ({y}, {x}) does not fit in a {h}x{w} image (sizes \
                 must be positive)"
            ),
        ));
    }
    let shape = [height, width, c];
    if (x == 0 && width == w) || c == 0 {
        let data = img.data().slice(y * w * c..(y + height) * w * c);
        return Ok(Tensor::new(&shape, data)?);
    }
    per_dtype!(img, "crop", |s| {
        let mut out = Px::alloc(height * width * c);
        for row in s[y * w * c..(y + height) * w * c].chunks_exact(w * c) {
            out.extend_from_slice(&row[x * c..(x + width) * c]);
        }
        make(&shape, out)
    })
}
/// The central `height` × `width` block (offsets `(H - height) / 2` and `(W - width) / 2`,
/// rounded down as `tf.image.resize_with_crop_or_pad` does). Errors if larger than the image.
pub fn center_crop(img: &Tensor, height: usize, width: usize) -> Result<Tensor> {
    let (h, w, _) = hwc(img)?;
    if height > h || width > w {
        return Err(Error::invalid(
            "center_crop",
            format!("center_crop of {height}x{width} is larger than the {h}x{w} image"),
        ));
    }
    crop(img, (h - height) / 2, (w - width) / 2, height, width)
}

/// A `height` × `width` block at a uniformly random offset (`tf.image.random_crop`).
pub fn random_crop<R: RngCore + ?Sized>(
    img: &Tensor,
    height: usize,
    width: usize,
    rng: &mut R,
) -> Result<Tensor> {
    let (h, w, _) = hwc(img)?;
    if height > h || width > w {
        return Err(Error::invalid(
            "random_crop",
            format!("random_crop of {height}x{width} is larger than the {h}x{w} image"),
        ));
    }
    let y = rng.random_range(0..=h - height);
    let x = rng.random_range(0..=w - width);
    crop(img, y, x, height, width)
}

/// The crop window torchvision's `RandomResizedCrop.get_params` picks: `(y, x, h, w)`.
///
/// Up to 10 attempts draw an area fraction uniformly from `scale` and an aspect ratio
/// (width / height) log-uniformly from `ratio`, and take the first window that fits, at a
/// uniformly random offset; otherwise a central crop of the whole image with its aspect
/// ratio clamped to `ratio`.
pub fn random_resized_crop_window<R: RngCore + ?Sized>(
    h: usize,
    w: usize,
    scale: (f32, f32),
    ratio: (f32, f32),
    rng: &mut R,
) -> Result<(usize, usize, usize, usize)> {
    nonempty("random_resized_crop", h, w)?;
    let ok = |(a, b): (f32, f32)| a.is_finite() && b.is_finite() && a > 0.0 && a <= b;
    if !ok(scale) || !ok(ratio) {
        return Err(Error::invalid(
            "random_resized_crop",
            format!(
                "random_resized_crop: scale and ratio must be finite ranges (lo, hi) with 0 < lo \
                 <= hi, got {scale:?} and {ratio:?}"
            ),
        ));
    }
    let area = (h * w) as f64;
    let (lr0, lr1) = (f64::from(ratio.0).ln(), f64::from(ratio.1).ln());
    for _ in 0..10 {
        let target = area * f64::from(rng.random_range(scale.0..=scale.1));
        let aspect = rng.random_range(lr0..=lr1).exp();
        let cw = (target * aspect).sqrt().round();
        let ch = (target / aspect).sqrt().round();
        if cw > 0.0 && ch > 0.0 && cw <= w as f64 && ch <= h as f64 {
            let (cw, ch) = (cw as usize, ch as usize);
            let y = rng.random_range(0..=h - ch);
            let x = rng.random_range(0..=w - cw);
            return Ok((y, x, ch, cw));
        }
    }
    let in_ratio = w as f64 / h as f64;
    let (r0, r1) = (f64::from(ratio.0), f64::from(ratio.1));
    let (ch, cw) = if in_ratio < r0 {
        (((w as f64 / r0).round() as usize).clamp(1, h), w)
    } else if in_ratio > r1 {
        (h, ((h as f64 * r1).round() as usize).clamp(1, w))
    } else {
        (h, w)
    };
    Ok(((h - ch) / 2, (w - cw) / 2, ch, cw))
}

/// torchvision's `RandomResizedCrop` (the ImageNet training crop): a window chosen by
/// [`random_resized_crop_window`], resized bilinearly to `out_height` × `out_width`.
/// Returns `f32` (see [`ResizeMethod::Bilinear`]). The usual arguments are
/// `scale = (0.08, 1.0)` and `ratio = (3/4, 4/3)`.
pub fn random_resized_crop<R: RngCore + ?Sized>(
    img: &Tensor,
    out_height: usize,
    out_width: usize,
    scale: (f32, f32),
    ratio: (f32, f32),
    rng: &mut R,
) -> Result<Tensor> {
    let (h, w, _) = hwc(img)?;
    let (y, x, ch, cw) = random_resized_crop_window(h, w, scale, ratio, rng)?;
    let window = crop(img, y, x, ch, cw)?;
    resize(&window, out_height, out_width, ResizeMethod::Bilinear)
}

// ---------------------------------------------------------------------------------------
// Flips.

#[inline(always)]
fn mirror_rows<T: Px, const C: usize>(s: &[T], w: usize, out: &mut [T]) {
    for (src, dst) in s.chunks_exact(w * C).zip(out.chunks_exact_mut(w * C)) {
        let (src, _) = src.as_chunks::<C>();
        let (dst, _) = dst.as_chunks_mut::<C>();
        for (d, p) in dst.iter_mut().zip(src.iter().rev()) {
            *d = *p;
        }
    }
}

fn mirror_rows_dyn<T: Px>(s: &[T], w: usize, c: usize, out: &mut [T]) {
    for (src, dst) in s.chunks_exact(w * c).zip(out.chunks_exact_mut(w * c)) {
        for (d, p) in dst.chunks_exact_mut(c).zip(src.chunks_exact(c).rev()) {
            d.copy_from_slice(p);
        }
    }
}

/// Mirrors the image horizontally (`tf.image.flip_left_right`).
pub fn flip_left_right(img: &Tensor) -> Result<Tensor> {
    let (h, w, c) = hwc(img)?;
    per_dtype!(img, "flip_left_right", |s| {
        let mut out = vec![Default::default(); s.len()];
        if w * c > 0 {
            per_channels!(
                c,
                mirror_rows::<_>(s, w, &mut out),
                mirror_rows_dyn(s, w, c, &mut out)
            );
        }
        make(&[h, w, c], out)
    })
}

/// Mirrors the image vertically (`tf.image.flip_up_down`).
pub fn flip_up_down(img: &Tensor) -> Result<Tensor> {
    let (h, w, c) = hwc(img)?;
    per_dtype!(img, "flip_up_down", |s| {
        let mut out = Px::alloc(s.len());
        if w * c > 0 {
            for row in s.chunks_exact(w * c).rev() {
                out.extend_from_slice(row);
            }
        }
        make(&[h, w, c], out)
    })
}

/// [`flip_left_right`] with probability `p` (else the input, shared). Draws one `f32`.
pub fn random_flip_left_right<R: RngCore + ?Sized>(
    img: &Tensor,
    p: f32,
    rng: &mut R,
) -> Result<Tensor> {
    probability("random_flip_left_right", p)?;
    hwc(img)?;
    if rng.random::<f32>() < p {
        flip_left_right(img)
    } else {
        Ok(img.clone())
    }
}

/// [`flip_up_down`] with probability `p` (else the input, shared). Draws one `f32`.
pub fn random_flip_up_down<R: RngCore + ?Sized>(
    img: &Tensor,
    p: f32,
    rng: &mut R,
) -> Result<Tensor> {
    probability("random_flip_up_down", p)?;
    hwc(img)?;
    if rng.random::<f32>() < p {
        flip_up_down(img)
    } else {
        Ok(img.clone())
    }
}

// ---------------------------------------------------------------------------------------
// Rotation.

/// `(cos, sin)` of an angle in degrees, exact for multiples of 90°.
fn cos_sin(degrees: f64) -> (f64, f64) {
    let d = degrees.rem_euclid(360.0);
    match d {
        0.0 => (1.0, 0.0),
        90.0 => (0.0, 1.0),
        180.0 => (-1.0, 0.0),
        270.0 => (0.0, -1.0),
        _ => {
            let r = d.to_radians();
            (r.cos(), r.sin())
        }
    }
}

/// Rotates the image by `degrees` **counter-clockwise** (as displayed, rows going down;
/// torchvision's convention) about its centre `((W - 1) / 2, (H - 1) / 2)`, keeping its
/// size. Output pixels are sampled bilinearly from the input; samples falling outside the
/// input take `fill` (so edges blend smoothly into it). Keeps the dtype (`u8` rounded).
pub fn rotate(img: &Tensor, degrees: f32, fill: f32) -> Result<Tensor> {
    let (h, w, c) = hwc(img)?;
    if !degrees.is_finite() {
        return Err(Error::invalid(
            "rotate",
            format!("rotate: angle must be finite, got {degrees}"),
        ));
    }
    let (cos, sin) = cos_sin(f64::from(degrees));
    let (cos, sin) = (cos as f32, sin as f32);
    per_dtype!(img, "rotate", |s| make(
        &[h, w, c],
        per_channels_or_0!(c, rotate_impl::<_>(s, h, w, c, cos, sin, fill))
    ))
}

/// `v.floor()` without a libm call (for |v| < 2^31).
#[inline(always)]
fn floor(v: f32) -> f32 {
    let t = v as i32 as f32;
    if t > v { t - 1.0 } else { t }
}

fn rotate_impl<T: Px, const C: usize>(
    s: &[T],
    h: usize,
    w: usize,
    c: usize,
    cos: f32,
    sin: f32,
    fill: f32,
) -> Vec<T> {
    let c = chans::<C>(c);
    let mut out = vec![T::default(); h * w * c];
    if c == 0 {
        return out;
    }
    let (cx, cy) = ((w as f32 - 1.0) * 0.5, (h as f32 - 1.0) * 0.5);
    // Samples in [0, w - 1) x [0, h - 1) have all four taps inside.
    let (wl, hl) = (w as f32 - 1.0, h as f32 - 1.0);
    let (wi, hi) = (w as isize, h as isize);
    let irow = w * c;
    // Sample from f32 values (one vectorized conversion, not four per output value).
    let mut buf = Vec::new();
    let s = T::f32s(s, &mut buf);
    let mut acc = vec![0.0f32; c];
    for (y, orow) in out.chunks_exact_mut(irow).enumerate() {
        let dy = y as f32 - cy;
        // Inverse map: output pixel (x, y) samples the input at (bx + x cos, by + x sin).
        let bx = cx - cx * cos - dy * sin;
        let by = cy - cx * sin + dy * cos;
        for (x, o) in orow.chunks_exact_mut(c).enumerate() {
            let xf = x as f32;
            let (sx, sy) = (bx + xf * cos, by + xf * sin);
            if sx >= 0.0 && sy >= 0.0 && sx < wl && sy < hl {
                let (x0, y0) = (sx as usize, sy as usize);
                let (ax, ay) = (sx - x0 as f32, sy - y0 as f32);
                let p = y0 * irow + x0 * c;
                let (a00, a01) = s[p..p + 2 * c].split_at(c);
                let (a10, a11) = s[p + irow..p + irow + 2 * c].split_at(c);
                for ch in 0..c {
                    let top = a00[ch].to_f32() + (a01[ch].to_f32() - a00[ch].to_f32()) * ax;
                    let bot = a10[ch].to_f32() + (a11[ch].to_f32() - a10[ch].to_f32()) * ax;
                    o[ch] = T::from_f32(top + (bot - top) * ay);
                }
            } else if sx <= -1.0 || sy <= -1.0 || sx >= w as f32 || sy >= h as f32 {
                // All four taps outside.
                o.fill(T::from_f32(fill));
            } else {
                let (fx, fy) = (floor(sx), floor(sy));
                let (ax, ay) = (sx - fx, sy - fy);
                let (x0, y0) = (fx as isize, fy as isize);
                acc.fill(0.0);
                let taps = [
                    (x0, y0, (1.0 - ax) * (1.0 - ay)),
                    (x0 + 1, y0, ax * (1.0 - ay)),
                    (x0, y0 + 1, (1.0 - ax) * ay),
                    (x0 + 1, y0 + 1, ax * ay),
                ];
                for (tx, ty, wt) in taps {
                    if wt == 0.0 {
                        continue;
                    }
                    if tx >= 0 && ty >= 0 && tx < wi && ty < hi {
                        let p = (ty as usize * w + tx as usize) * c;
                        for (a, v) in acc.iter_mut().zip(&s[p..p + c]) {
                            *a += v.to_f32() * wt;
                        }
                    } else {
                        for a in acc.iter_mut() {
                            *a += fill * wt;
                        }
                    }
                }
                for (o, &a) in o.iter_mut().zip(&acc) {
                    *o = T::from_f32(a);
                }
            }
        }
    }
    out
}

/// [`rotate`] by an angle drawn uniformly from `[-max_degrees, max_degrees]`.
pub fn random_rotate<R: RngCore + ?Sized>(
    img: &Tensor,
    max_degrees: f32,
    fill: f32,
    rng: &mut R,
) -> Result<Tensor> {
    if !(max_degrees.is_finite() && max_degrees >= 0.0) {
        return Err(Error::invalid(
            "random_rotate",
            format!("random_rotate: max_degrees must be finite and >= 0, got {max_degrees}"),
        ));
    }
    let d = rng.random_range(-max_degrees..=max_degrees);
    rotate(img, d, fill)
}

// ---------------------------------------------------------------------------------------
// Padding and cutout.

/// Pads `n` pixels on every side (output `[H + 2n, W + 2n, C]`).
pub fn pad(img: &Tensor, n: usize, mode: PadMode) -> Result<Tensor> {
    let (h, w, c) = hwc(img)?;
    if let PadMode::Reflect = mode
        && (n >= h || n >= w)
    {
        return Err(Error::invalid(
            "pad",
            format!("pad: reflect padding of {n} needs an image larger than {n}x{n}, got {h}x{w}"),
        ));
    }
    let grow = |d: usize| n.checked_mul(2).and_then(|p| d.checked_add(p));
    let (Some(oh), Some(ow)) = (grow(h), grow(w)) else {
        return Err(Error::invalid(
            "pad",
            format!("pad: padding {n} is too large"),
        ));
    };
    values_in("pad", &[oh, ow, c])?;
    per_dtype!(img, "pad", |s| make(
        &[oh, ow, c],
        pad_impl(s, h, w, c, n, mode)
    ))
}

fn pad_impl<T: Px>(s: &[T], h: usize, w: usize, c: usize, n: usize, mode: PadMode) -> Vec<T> {
    let (oh, ow) = (h + 2 * n, w + 2 * n);
    let mut out = T::alloc(oh * ow * c);
    let irow = w * c;
    match mode {
        PadMode::Constant(v) => {
            let v = T::from_f32(v);
            out.resize(n * ow * c, v);
            if irow > 0 {
                for row in s.chunks_exact(irow) {
                    out.resize(out.len() + n * c, v);
                    out.extend_from_slice(row);
                    out.resize(out.len() + n * c, v);
                }
            } else {
                out.resize(out.len() + h * ow * c, v);
            }
            out.resize(oh * ow * c, v);
        }
        PadMode::Reflect => {
            // Here n < h and n < w, so every reflected index is in range.
            let reflect = |i: isize, len: usize| -> usize {
                let i = i.unsigned_abs();
                if i >= len { 2 * (len - 1) - i } else { i }
            };
            for oy in 0..oh {
                let iy = reflect(oy as isize - n as isize, h);
                let row = &s[iy * irow..(iy + 1) * irow];
                for j in 0..n {
                    let ix = n - j;
                    out.extend_from_slice(&row[ix * c..(ix + 1) * c]);
                }
                out.extend_from_slice(row);
                for j in 0..n {
                    let ix = w - 2 - j;
                    out.extend_from_slice(&row[ix * c..(ix + 1) * c]);
                }
            }
        }
    }
    out
}

/// Cutout (DeVries & Taylor, 2017): sets a `size` × `size` square centred at a uniformly
/// random pixel (the square spans `[cy - size/2, cy - size/2 + size)`), clipped at the
/// borders, to `fill`. Draws two integers.
pub fn cutout<R: RngCore + ?Sized>(
    img: &Tensor,
    size: usize,
    fill: f32,
    rng: &mut R,
) -> Result<Tensor> {
    let (h, w, c) = hwc(img)?;
    nonempty("cutout", h, w)?;
    let cy = rng.random_range(0..h);
    let cx = rng.random_range(0..w);
    let span = |centre: usize, len: usize| {
        let start = centre as i128 - (size / 2) as i128;
        let end = (start + size as i128).clamp(0, len as i128) as usize;
        (start.clamp(0, len as i128) as usize, end)
    };
    let ((y0, y1), (x0, x1)) = (span(cy, h), span(cx, w));
    per_dtype!(img, "cutout", |s| {
        let mut out = Px::alloc(s.len());
        out.extend_from_slice(s);
        let v = Px::from_f32(fill);
        if c > 0 {
            for row in out[y0 * w * c..y1 * w * c].chunks_exact_mut(w * c) {
                row[x0 * c..x1 * c].fill(v);
            }
        }
        make(&[h, w, c], out)
    })
}

// ---------------------------------------------------------------------------------------
// Layout.

/// `[H, W, C]` → `[C, H, W]` (planar, as PyTorch models take). A single channel is shared.
pub fn to_chw(img: &Tensor) -> Result<Tensor> {
    let (h, w, c) = hwc(img)?;
    if c == 1 {
        return Ok(Tensor::new(&[1, h, w], img.data().clone())?);
    }
    per_dtype!(img, "to_chw", |s| {
        let mut out = Px::alloc(s.len());
        per_channels!(
            c,
            planar::<_>(s, &mut out),
            for ch in 0..c {
                out.extend(s.iter().skip(ch).step_by(c).copied());
            }
        );
        make(&[c, h, w], out)
    })
}

#[inline(always)]
fn planar<T: Px, const C: usize>(s: &[T], out: &mut Vec<T>) {
    let (px, _) = s.as_chunks::<C>();
    for k in 0..C {
        out.extend(px.iter().map(|p| p[k]));
    }
}

#[inline(always)]
fn interleave<T: Px, const C: usize>(s: &[T], hw: usize, out: &mut [T]) {
    let (dst, _) = out.as_chunks_mut::<C>();
    for (k, plane) in s.chunks_exact(hw).enumerate() {
        for (d, &v) in dst.iter_mut().zip(plane) {
            d[k] = v;
        }
    }
}

/// `[C, H, W]` → `[H, W, C]`, the inverse of [`to_chw`].
pub fn from_chw(img: &Tensor) -> Result<Tensor> {
    let (c, h, w) = hwc(img)?;
    if c == 1 {
        return Ok(Tensor::new(&[h, w, 1], img.data().clone())?);
    }
    per_dtype!(img, "from_chw", |s| {
        let mut out = vec![Default::default(); s.len()];
        let hw = h * w;
        if hw > 0 {
            per_channels!(
                c,
                interleave::<_>(s, hw, &mut out),
                for (k, plane) in s.chunks_exact(hw).enumerate() {
                    for (d, &v) in out.chunks_exact_mut(c).zip(plane) {
                        d[k] = v;
                    }
                }
            );
        }
        make(&[h, w, c], out)
    })
}

// ---------------------------------------------------------------------------------------
// Batches.

fn stack_rows(rows: Vec<Tensor>) -> Result<Tensor> {
    let Some(first) = rows.first() else {
        return Err(Error::shape("map_batch", "map_batch: the batch is empty"));
    };
    if let Some(bad) = rows
        .iter()
        .find(|r| r.shape() != first.shape() || r.dtype() != first.dtype())
    {
        return Err(Error::shape(
            "map_batch",
            format!(
                "map_batch: rows came out with different shapes or dtypes ({:?} {} and {:?} {})",
                first.shape(),
                first.dtype(),
                bad.shape(),
                bad.dtype()
            ),
        ));
    }
    Ok(Tensor::stack(&rows.iter().collect::<Vec<_>>())?)
}

fn batch_rows(batch: &Tensor) -> Result<usize> {
    match batch.shape().first() {
        Some(&b) if b > 0 => Ok(b),
        _ => Err(Error::shape(
            "map_batch",
            format!(
                "map_batch needs a non-empty batch [batch, ...], got shape {:?}",
                batch.shape()
            ),
        )),
    }
}

/// Applies `f(row, index)` to each row of a batch (e.g. `[B, H, W, C]`) in parallel (rayon)
/// and stacks the results, which must all have one shape and dtype. For random ops, derive
/// the row's RNG from its index (e.g. `sluice-core`'s
/// `key.element_rng(ElementId::new(s, i as u64))`), or use [`map_batch_with_rngs`].
///
/// `f` may fail with an error of its own type `E` (this crate's errors convert into it),
/// which comes through unchanged.
pub fn map_batch<E: From<Error> + Send>(
    batch: &Tensor,
    f: impl Fn(&Tensor, usize) -> Result<Tensor, E> + Sync,
) -> Result<Tensor, E> {
    let b = batch_rows(batch)?;
    let rows = (0..b)
        .into_par_iter()
        .map(|i| f(&batch.row(i).map_err(Error::from)?, i))
        .collect::<Result<Vec<_>, E>>()?;
    Ok(stack_rows(rows)?)
}

/// [`map_batch`] with one RNG per row: `f(row, &mut rngs[i])` (`rngs` must have one RNG per
/// row, e.g. `sluice-core`'s `ElementRng`s keyed by the rows' ids).
pub fn map_batch_with_rngs<R: RngCore + Send, E: From<Error> + Send>(
    batch: &Tensor,
    rngs: &mut [R],
    f: impl Fn(&Tensor, &mut R) -> Result<Tensor, E> + Sync,
) -> Result<Tensor, E> {
    let b = batch_rows(batch)?;
    if rngs.len() != b {
        return Err(Error::invalid(
            "map_batch_with_rngs",
            format!(
                "map_batch_with_rngs: {} RNGs for a batch of {b}",
                rngs.len()
            ),
        )
        .into());
    }
    let rows = rngs
        .par_iter_mut()
        .enumerate()
        .map(|(i, rng)| f(&batch.row(i).map_err(Error::from)?, rng))
        .collect::<Result<Vec<_>, E>>()?;
    Ok(stack_rows(rows)?)
}
