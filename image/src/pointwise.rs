//! Point-wise colour chains: a conversion to `f32` followed by any run of brightness,
//! contrast and normalization, computed in one pass over the pixels.
//!
//! The usual tail of an augmentation (`to_unit_f32`, `adjust_brightness`,
//! `adjust_contrast`, `normalize`) applied op by op reads and writes the whole `f32` image
//! once per op. A [`PointChain`] reads the source (`u8` or `f32`) in cache-sized chunks,
//! applies every op to the chunk, and writes each output value once, straight into the
//! caller's buffer if it likes ([`PointChain::apply_into`]). Each value goes through the
//! same `f32` operations in the same order as the ops one after the other (no multiply-add
//! is fused, so the AVX-512, AVX2 and portable builds give the same bits).
//!
//! A contrast needs each channel's mean first, computed without writing anything to the
//! output:
//!
//! - When its values are `u8` pixels loaded to `f32` plus at most one brightness delta `d`
//!   (the usual augmentation), the means come from the exact integer sum of each channel's
//!   pixels: `sum * (1/255) / pixels + d` (or `sum / pixels + d` after a plain cast),
//!   computed in `f64` and rounded once to `f32`. That is the exact mean of the values
//!   before each is rounded to `f32`, so it can differ in the last bit from the mean the
//!   op computes over the rounded `f32` values (at least as accurate, and about 10 µs per
//!   224×224×3 image faster). Integer sums do not depend on the order of the additions, so
//!   any chunking, thread count or vector width gives the same bits.
//! - Otherwise they are summed in the op's fixed order over the `f32` values the op would
//!   see (streamed from a small buffer), and the result is **bit-identical** to the
//!   separate ops (tested).
//!
//! ```
//! use sluice_image::{PointChain, PointOp, adjust_brightness, adjust_contrast,
//!     normalize, to_unit_f32};
//! use sluice_tensor::{Tensor, TensorData};
//!
//! let img = Tensor::new(&[2, 2, 3], TensorData::U8((0..12u8).map(|x| x * 20).collect::<Vec<_>>().into()))?;
//! let norm = PointOp::Normalize { mean: vec![0.5], std: vec![0.25], scale: 1.0 };
//! // Brightness and normalization: the bits of the ops one after the other.
//! let chain = PointChain::to_unit(vec![PointOp::Brightness(0.05), norm.clone()]);
//! let step_by_step = normalize(&adjust_brightness(&to_unit_f32(&img)?, 0.05)?, &[0.5], &[0.25], 1.0)?;
//! assert_eq!(chain.apply(&img)?, step_by_step);
//! // With a contrast on the loaded pixels, the means are exact: equal to the ops' up to
//! // rounding.
//! let chain = PointChain::to_unit(vec![PointOp::Brightness(0.05), PointOp::Contrast(1.3), norm]);
//! let fused = chain.apply(&img)?;
//! let step_by_step = normalize(
//!     &adjust_contrast(&adjust_brightness(&to_unit_f32(&img)?, 0.05)?, 1.3)?,
//!     &[0.5], &[0.25], 1.0,
//! )?;
//! for (a, b) in fused.as_f32().unwrap().iter().zip(step_by_step.as_f32().unwrap()) {
//!     assert!((a - b).abs() < 1e-5);
//! }
//! # Ok::<(), sluice_image::Error>(())
//! ```

use sluice_tensor::{Tensor, TensorData, pool};

use crate::channel_sums::{ByteSums, ChannelSums};
use crate::color::{BLOCK, INV_255, inverse_stds, per_channel};
use crate::decode::WindowView;
use crate::error::{Error, Result};
use crate::stream_store::{BlockStore, Plain};

/// How `u8` values become `f32` at the start of a [`PointChain`] (`f32` images are taken
/// as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointLoad {
    /// `x * (1/255)`: [`to_unit_f32`](super::to_unit_f32).
    Unit,
    /// `x` as `f32`: [`cast`](super::cast) to `f32` (what [`normalize`](super::normalize)
    /// does to a `u8` image).
    Cast,
}

/// One op of a [`PointChain`], with its parameters drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum PointOp {
    /// [`adjust_brightness`](super::adjust_brightness) of an `f32` image: `x + delta`.
    Brightness(f32),
    /// [`adjust_contrast`](super::adjust_contrast) of an `f32` image by this factor.
    Contrast(f32),
    /// [`normalize`](super::normalize): `(x * scale - mean[c]) / std[c]`.
    Normalize {
        /// Per-channel mean (or one for all).
        mean: Vec<f32>,
        /// Per-channel standard deviation (or one for all).
        std: Vec<f32>,
        /// Multiplier applied first.
        scale: f32,
    },
}

/// A conversion to `f32` then [`PointOp`]s, applied in one pass (see the
/// [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct PointChain {
    /// How `u8` values are loaded.
    pub load: PointLoad,
    /// The ops, in order.
    pub ops: Vec<PointOp>,
}

/// Values a streaming sink is handed at a time: one AVX-512 register, two AVX ones
/// ([`BLOCK`] is a multiple of it).
const GROUP: usize = 16;
const _: () = assert!(BLOCK.is_multiple_of(GROUP));

/// Values per chunk: a multiple of [`BLOCK`] small enough for two chunks to stay in L1.
const CHUNK: usize = BLOCK * 32;

/// The source values of one image.
#[derive(Clone, Copy)]
enum Src<'a> {
    U8(&'a [u8]),
    F32(&'a [f32]),
    /// A window of decoded rows, read in place run by run (a mirrored run through a small
    /// buffer): the same values as the window copied out first.
    Window(WindowView<'a>),
}

/// How an image's output values are stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Store {
    /// Ordinary stores: the output stays in the cache for whoever reads it next.
    Cached,
    /// A row of a large batch buffer that nothing reads soon: streaming stores where the
    /// CPU gains from them ([`crate::stream_store::pays`]), which keep the output from
    /// evicting the decoder's data from the cache. The values are the same.
    Streamed,
}

impl Store {
    /// Whether `dst` is written with streaming stores.
    fn streams(self, dst: &[f32]) -> bool {
        self == Store::Streamed && crate::stream_store::pays(std::mem::size_of_val(dst))
    }
}

/// A [`PointOp`] resolved for an image of `c` channels: per-channel parameters laid out as
/// a pattern of `BLOCK` values (or `c` when `c` does not divide `BLOCK`).
#[derive(Clone)]
enum Step {
    Add(f32),
    Contrast {
        factor: f32,
        means: Vec<f32>,
    },
    Normalize {
        mean: Vec<f32>,
        inv: Vec<f32>,
        scale: f32,
    },
}

impl PointChain {
    /// `to_unit_f32` then `ops`.
    pub fn to_unit(ops: Vec<PointOp>) -> Self {
        PointChain {
            load: PointLoad::Unit,
            ops,
        }
    }

    /// A cast to `f32` (values kept) then `ops`.
    pub fn cast(ops: Vec<PointOp>) -> Self {
        PointChain {
            load: PointLoad::Cast,
            ops,
        }
    }

    /// Applies the chain to an image `[H, W, C]` or a batch `[B, H, W, C]` (`u8` or `f32`),
    /// giving an `f32` tensor of the same shape.
    pub fn apply(&self, img: &Tensor) -> Result<Tensor> {
        let mut out = pool::take_filled(img.len());
        self.apply_into(img, &mut out)?;
        Ok(Tensor::new(img.shape(), TensorData::F32(out.into()))?)
    }

    /// [`apply`](Self::apply), writing the values to `out` (of the image's length).
    pub fn apply_into(&self, img: &Tensor, out: &mut [f32]) -> Result<()> {
        self.apply_into_as(img, out, Store::Cached)
    }

    /// [`apply_into`](Self::apply_into) for a row of a batch being assembled: the same
    /// values, written with streaming stores where they pay (the batch's buffer is large
    /// and nothing reads the row soon; see [`Store::Streamed`]).
    pub fn apply_into_batch_row(&self, img: &Tensor, out: &mut [f32]) -> Result<()> {
        self.apply_into_as(img, out, Store::Streamed)
    }

    fn apply_into_as(&self, img: &Tensor, out: &mut [f32], store: Store) -> Result<()> {
        let (pixels, c) = match *img.shape() {
            [h, w, c] | [_, h, w, c] => (h * w, c),
            ref other => {
                return Err(Error::shape(
                    "point chain",
                    format!(
                        "point chain: expected an image [height, width, channels] or a batch \
                         [batch, height, width, channels], got shape {other:?}"
                    ),
                ));
            }
        };
        check_output_len(out, img.len())?;
        let plane = pixels * c;
        if plane == 0 {
            return Ok(());
        }
        let steps = self.resolve(c)?;
        for (i, dst) in out.chunks_exact_mut(plane).enumerate() {
            let range = i * plane..(i + 1) * plane;
            let src = match img.data() {
                TensorData::U8(v) => Src::U8(&v[range]),
                TensorData::F32(v) => Src::F32(&v[range]),
                other => {
                    return Err(Error::DType {
                        op: "point chain",
                        found: other.dtype(),
                        message: format!(
                            "point chain: expected a u8 or f32 image, got {}",
                            other.dtype()
                        ),
                    });
                }
            };
            image_pass(src, dst, pixels, c, &steps, self.load, store.streams(dst));
        }
        Ok(())
    }

    /// [`apply_into`](Self::apply_into) for the window of decoded rows `view` (a `u8`
    /// image `[height, width, channels]`, from [`decode_window_then`](crate::decode::decode_window_then)),
    /// read straight from the rows: no copy of the window is made.
    pub fn apply_view_into(&self, view: WindowView<'_>, out: &mut [f32]) -> Result<()> {
        self.apply_view_into_as(view, out, Store::Cached)
    }

    /// [`apply_view_into`](Self::apply_view_into) for a row of a batch being assembled
    /// (as [`apply_into_batch_row`](Self::apply_into_batch_row)).
    pub fn apply_view_into_batch_row(&self, view: WindowView<'_>, out: &mut [f32]) -> Result<()> {
        self.apply_view_into_as(view, out, Store::Streamed)
    }

    fn apply_view_into_as(
        &self,
        view: WindowView<'_>,
        out: &mut [f32],
        store: Store,
    ) -> Result<()> {
        let [h, w, c] = view.shape();
        check_output_len(out, h * w * c)?;
        if out.is_empty() {
            return Ok(());
        }
        let steps = self.resolve(c)?;
        let stream = store.streams(out);
        image_pass(Src::Window(view), out, h * w, c, &steps, self.load, stream);
        Ok(())
    }

    /// The ops with their per-channel parameters laid out for `c` channels (contrast means
    /// are filled in per image).
    fn resolve(&self, c: usize) -> Result<Vec<Step>> {
        self.ops
            .iter()
            .map(|op| {
                Ok(match op {
                    PointOp::Brightness(d) => Step::Add(*d),
                    PointOp::Contrast(f) => Step::Contrast {
                        factor: *f,
                        means: Vec::new(),
                    },
                    PointOp::Normalize { mean, std, scale } => Step::Normalize {
                        mean: pattern(&per_channel("normalize", "mean", mean, c)?, c),
                        inv: pattern(&inverse_stds("normalize", std, c)?, c),
                        scale: *scale,
                    },
                })
            })
            .collect()
    }
}

/// An output buffer must have as many values as the image.
fn check_output_len(out: &[f32], len: usize) -> Result<()> {
    if out.len() == len {
        Ok(())
    } else {
        Err(Error::invalid(
            "point chain",
            format!(
                "point chain: output of {} values for an image of {len}",
                out.len()
            ),
        ))
    }
}

/// One image through the chain: each contrast's means, then the output values. Runs the
/// AVX-512 (F, BW, VL and VBMI: byte permutes for mirrored rows) or AVX2 build of the same
/// code where the CPU has it (same operations, same results: only the vector width
/// differs, and no multiply-add is fused). With `stream`, the output is written with
/// streaming stores (from the registers where its blocks line up with the vector width):
/// the same values.
fn image_pass(
    src: Src<'_>,
    dst: &mut [f32],
    pixels: usize,
    c: usize,
    steps: &[Step],
    load: PointLoad,
    stream: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
    {
        #[allow(unsafe_code)]
        // SAFETY: `image_pass_avx512` only requires AVX-512 F, BW, VL and VBMI, which the
        // lines above checked this CPU has.
        unsafe {
            image_pass_avx512(src, dst, pixels, c, steps, load, stream)
        };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[allow(unsafe_code)]
        // SAFETY: `image_pass_avx2` only requires AVX2, which the line above checked this
        // CPU has.
        unsafe {
            image_pass_avx2(src, dst, pixels, c, steps, load, stream)
        };
        return;
    }
    image_pass_body(src, dst, pixels, c, steps, load, stream, Plain);
}

/// [`image_pass_body`] built for a target feature: the compiler vectorizes the same code
/// for that vector width, and streams a batch row's blocks with `$sink`'s stores.
macro_rules! image_pass_for {
    ($name:ident, $feature:literal, $sink:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        fn $name(
            src: Src<'_>,
            dst: &mut [f32],
            pixels: usize,
            c: usize,
            steps: &[Step],
            load: PointLoad,
            stream: bool,
        ) {
            #[allow(unsafe_code)]
            // SAFETY: this function is built for `$feature`, which includes the feature
            // `$sink`'s stores need, and is only called where the CPU has it.
            let sink = unsafe { crate::stream_store::$sink::new() };
            image_pass_body(src, dst, pixels, c, steps, load, stream, sink);
        }
    };
}
image_pass_for!(
    image_pass_avx512,
    "avx512f,avx512bw,avx512vl,avx512vbmi",
    Stream512
);
image_pass_for!(image_pass_avx2, "avx2", Stream256);

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn image_pass_body<S: BlockStore>(
    src: Src<'_>,
    dst: &mut [f32],
    pixels: usize,
    c: usize,
    steps: &[Step],
    load: PointLoad,
    stream: bool,
    sink: S,
) {
    let mut steps = steps.to_vec();
    // Where a window's chunks are read to (see `eval`).
    let mut gathered = match src {
        Src::Window(_) => vec![0u8; chunk_len(c)],
        _ => Vec::new(),
    };
    // Each contrast's means are over the values it sees: those of the ops before it.
    for k in 0..steps.len() {
        if let Step::Contrast { .. } = steps[k] {
            let means = means(src, pixels, c, &steps[..k], load, &mut gathered);
            if let Step::Contrast { means: m, .. } = &mut steps[k] {
                *m = pattern(&means, c);
            }
        }
    }
    let len = chunk_len(c);
    if stream {
        // A large output, whose lines are not read before they are written (see
        // `stream_store`): each block streamed from the registers it was computed in when
        // the blocks line up with the vector width; otherwise each chunk computed in L1,
        // then streamed out.
        if sink.streams(dst, BLOCK) && len.is_multiple_of(BLOCK) {
            for (n, chunk) in dst.chunks_mut(len).enumerate() {
                eval(src, n * len, chunk, &steps, load, &mut gathered, sink);
            }
        } else {
            let mut staged = vec![0.0f32; len];
            for (n, chunk) in dst.chunks_mut(len).enumerate() {
                let buf = &mut staged[..chunk.len()];
                eval(src, n * len, buf, &steps, load, &mut gathered, Plain);
                crate::stream_store::copy(chunk, buf);
            }
        }
        crate::stream_store::fence();
        return;
    }
    for (n, chunk) in dst.chunks_mut(len).enumerate() {
        eval(src, n * len, chunk, &steps, load, &mut gathered, Plain);
    }
}

/// Per-channel means of the values after `steps`, for a contrast: from exact integer sums
/// when the values are `u8` pixels loaded plus at most one brightness delta
/// ([`byte_mean`]); otherwise summed as [`ChannelSums`] sums them (as `adjust_contrast`
/// does), a chunk at a time into a small buffer that stays in cache. Nothing is written to
/// the image's output buffer.
#[inline(always)]
fn means(
    src: Src<'_>,
    pixels: usize,
    c: usize,
    steps: &[Step],
    load: PointLoad,
    gathered: &mut [u8],
) -> Vec<f32> {
    // `u8` pixels with at most one brightness before the contrast (the usual augmentation):
    // the means of `load(x) + d` from the exact integer sums of `x`.
    let delta = match steps {
        [] => Some(0.0),
        [Step::Add(d)] => Some(*d),
        _ => None,
    };
    if let Some(d) = delta
        && let Some(sums) = byte_sums(src, pixels * c, c)
    {
        return sums
            .sums(c)
            .into_iter()
            .map(|s| byte_mean(s, pixels, load, d))
            .collect();
    }
    float_means(src, pixels, c, steps, load, gathered)
}

/// The exact per-channel sums of the first `plane` values of a `u8` source (`None` for an
/// `f32` one). A window is summed row by row in place: the sums do not depend on the
/// pixels' order, so a mirrored run is summed as it lies.
#[inline(always)]
fn byte_sums(src: Src<'_>, plane: usize, c: usize) -> Option<ByteSums> {
    let mut sums = ByteSums::new(c);
    match src {
        Src::U8(v) => sums.push(&v[..plane]),
        Src::Window(view) => {
            let mut pos = 0;
            while pos < plane {
                let (run, _mirrored) = view.run(pos, plane - pos);
                sums.push(run);
                pos += run.len();
            }
        }
        Src::F32(_) => return None,
    }
    Some(sums)
}

/// The mean of `load(x) + d` over `pixels` values `x` whose sum is `sum`, computed in `f64`
/// from the exact sum and rounded once to `f32`: `sum * (1/255) / pixels + d` for
/// [`PointLoad::Unit`] (`1/255` the `f32` constant the values are loaded with), `sum /
/// pixels + d` for [`PointLoad::Cast`].
fn byte_mean(sum: u64, pixels: usize, load: PointLoad, d: f32) -> f32 {
    let sum = sum as f64;
    let scaled = match load {
        PointLoad::Unit => sum * f64::from(INV_255),
        PointLoad::Cast => sum,
    };
    (scaled / pixels as f64 + f64::from(d)) as f32
}

/// Per-channel means of `f32` values after `steps` ([`ChannelSums`]), a chunk at a time.
#[inline(always)]
fn float_means(
    src: Src<'_>,
    pixels: usize,
    c: usize,
    steps: &[Step],
    load: PointLoad,
    gathered: &mut [u8],
) -> Vec<f32> {
    let plane = pixels * c;
    let mut sums = ChannelSums::new(c);
    let len = chunk_len(c);
    let mut buf = vec![0.0f32; len];
    let mut off = 0;
    while off < plane {
        let n = len.min(plane - off);
        eval(src, off, &mut buf[..n], steps, load, gathered, Plain);
        sums.push(&buf[..n]);
        off += n;
    }
    sums.means(pixels, c)
}

/// Per-channel values repeated over `BLOCK` values (or over `c` if `c` does not divide it).
fn pattern(values: &[f32], c: usize) -> Vec<f32> {
    let len = if BLOCK.is_multiple_of(c) { BLOCK } else { c };
    (0..len).map(|i| values[i % c]).collect()
}

/// A chunk length that is a multiple of the pattern length.
fn chunk_len(c: usize) -> usize {
    if BLOCK.is_multiple_of(c) {
        CHUNK
    } else {
        c * (CHUNK / c).max(1)
    }
}

/// The values `src[start..start + dst.len()]` after loading and `steps`, into `dst`.
/// `start` is a multiple of the channel count, so a pattern lines up with the chunk.
///
/// Chains of up to three steps with `BLOCK`-long patterns (1, 2, 3, 4 … channels) run as
/// one loop that takes each value through every step in registers (one instance of the
/// loop per sequence of step kinds); longer chains run step by step over the chunk.
#[inline(always)]
fn eval<S: BlockStore>(
    src: Src<'_>,
    start: usize,
    dst: &mut [f32],
    steps: &[Step],
    load: PointLoad,
    gathered: &mut [u8],
    sink: S,
) {
    // A window is taken run by run (each within one row): a run in natural order is read in
    // place; a mirrored one is first copied in pixel-reversed order into `gathered` (at
    // least `dst.len()` long, so it stays in L1). Runs are whole pixels, so the patterns
    // line up. One call site of `eval_values`: it is inlined.
    let mut done = 0;
    while done < dst.len() {
        let (values, from, n) = match src {
            Src::Window(view) => {
                let (run, mirrored) = view.run(start + done, dst.len() - done);
                let values: &[u8] = if mirrored {
                    let out = &mut gathered[..run.len()];
                    super::decode::mirror_copy(run, out, view.channels());
                    out
                } else {
                    run
                };
                (Src::U8(values), 0, run.len())
            }
            other => (other, start, dst.len()),
        };
        eval_values(values, from, &mut dst[done..done + n], steps, load, sink);
        done += n;
    }
}

/// [`eval`] of a source held as values (not a window); the fused loops write each block
/// with `sink`'s stores, the step-by-step one with ordinary stores.
#[inline(always)]
fn eval_values<S: BlockStore>(
    src: Src<'_>,
    start: usize,
    dst: &mut [f32],
    steps: &[Step],
    load: PointLoad,
    sink: S,
) {
    let blocked = steps.iter().all(|s| match s {
        Step::Add(_) => true,
        Step::Contrast { means, .. } => means.len() == BLOCK,
        Step::Normalize { mean, .. } => mean.len() == BLOCK,
    });
    let ctx = Ctx {
        src,
        start,
        load,
        all: steps,
        sink,
    };
    if blocked && steps.len() <= 3 {
        go0(&ctx, steps, dst);
    } else {
        eval_by_steps(&ctx, dst);
    }
}

/// What every level of the fused-kernel composition needs.
struct Ctx<'a, S> {
    src: Src<'a>,
    start: usize,
    load: PointLoad,
    all: &'a [Step],
    /// How the fused loop writes each block.
    sink: S,
}

#[inline(always)]
fn pat(v: &[f32]) -> &[f32; BLOCK] {
    v.try_into().expect("eval checked the pattern length")
}

/// Composes `step` after `f` and hands the result to `next`.
macro_rules! compose {
    ($ctx:expr, $step:expr, $rest:expr, $dst:expr, $f:expr, $next:ident) => {{
        let f = $f;
        match $step {
            Step::Add(delta) => {
                let d = *delta;
                $next($ctx, $rest, $dst, move |x: f32, k: usize| f(x, k) + d)
            }
            Step::Contrast { factor, means } => {
                let (c, m) = (*factor, pat(means));
                $next($ctx, $rest, $dst, move |x: f32, k: usize| {
                    m[k] + c * (f(x, k) - m[k])
                })
            }
            Step::Normalize { mean, inv, scale } => {
                let (s, m, i) = (*scale, pat(mean), pat(inv));
                $next($ctx, $rest, $dst, move |x: f32, k: usize| {
                    (f(x, k) * s - m[k]) * i[k]
                })
            }
        }
    }};
}

#[inline(always)]
fn go0<S: BlockStore>(ctx: &Ctx<'_, S>, steps: &[Step], dst: &mut [f32]) {
    match steps {
        [] => load_only(ctx, dst),
        [step, rest @ ..] => compose!(ctx, step, rest, dst, |x: f32, _: usize| x, go1),
    }
}

#[inline(always)]
fn go1<S: BlockStore, F: Fn(f32, usize) -> f32 + Copy>(
    ctx: &Ctx<'_, S>,
    steps: &[Step],
    dst: &mut [f32],
    f: F,
) {
    match steps {
        [] => fused(ctx, dst, f),
        [step, rest @ ..] => compose!(ctx, step, rest, dst, f, go2),
    }
}

#[inline(always)]
fn go2<S: BlockStore, F: Fn(f32, usize) -> f32 + Copy>(
    ctx: &Ctx<'_, S>,
    steps: &[Step],
    dst: &mut [f32],
    f: F,
) {
    match steps {
        [] => fused(ctx, dst, f),
        [step, rest @ ..] => compose!(ctx, step, rest, dst, f, go3),
    }
}

#[inline(always)]
fn go3<S: BlockStore, F: Fn(f32, usize) -> f32 + Copy>(
    ctx: &Ctx<'_, S>,
    steps: &[Step],
    dst: &mut [f32],
    f: F,
) {
    if steps.is_empty() {
        fused(ctx, dst, f);
    } else {
        eval_by_steps(ctx, dst);
    }
}

/// `dst[j] = f(load(src[start + j]), j % BLOCK)`.
#[inline(always)]
fn fused<S: BlockStore, F: Fn(f32, usize) -> f32 + Copy>(ctx: &Ctx<'_, S>, dst: &mut [f32], f: F) {
    let (start, sink) = (ctx.start, ctx.sink);
    let end = start + dst.len();
    match (ctx.src, ctx.load) {
        (Src::U8(v), PointLoad::Unit) => fused_from(&v[start..end], dst, sink, move |x: u8, k| {
            f(f32::from(x) * INV_255, k)
        }),
        (Src::U8(v), PointLoad::Cast) => fused_from(&v[start..end], dst, sink, move |x: u8, k| {
            f(f32::from(x), k)
        }),
        (Src::F32(v), _) => fused_from(&v[start..end], dst, sink, f),
        (Src::Window(_), _) => unreachable!("eval reads windows into a buffer first"),
    }
}

#[inline(always)]
fn fused_from<T: Copy, S: BlockStore, F: Fn(T, usize) -> f32>(
    src: &[T],
    dst: &mut [f32],
    sink: S,
    f: F,
) {
    let mut blocks = dst.chunks_exact_mut(BLOCK);
    let mut from = src.chunks_exact(BLOCK);
    for (d, s) in (&mut blocks).zip(&mut from) {
        let d: &mut [f32; BLOCK] = d.try_into().expect("a block");
        let s: &[T; BLOCK] = s.try_into().expect("a block");
        if !sink.aligned(d) {
            // Ordinary stores, computed straight into the block.
            for k in 0..BLOCK {
                d[k] = f(s[k], k);
            }
            continue;
        }
        // Streamed: each group of `GROUP` values stored from the registers it was computed
        // in (not through a block-sized temporary).
        for (g, d) in d.chunks_exact_mut(GROUP).enumerate() {
            let d: &mut [f32; GROUP] = d.try_into().expect("a group");
            let mut v = [0.0f32; GROUP];
            for (l, v) in v.iter_mut().enumerate() {
                let k = g * GROUP + l;
                *v = f(s[k], k);
            }
            #[allow(unsafe_code)]
            // SAFETY: the block starts aligned (checked above) and is a whole number of
            // groups of `GROUP` values (`BLOCK` is a multiple of it), each a whole number of
            // streaming registers, so each group starts aligned too.
            unsafe {
                sink.put_aligned(d, &v)
            };
        }
    }
    for (k, (d, &s)) in blocks
        .into_remainder()
        .iter_mut()
        .zip(from.remainder())
        .enumerate()
    {
        *d = f(s, k);
    }
}

/// The loaded values alone (a plain loop: the compiler vectorizes it better than
/// [`fused`] with an identity function).
#[inline(always)]
fn load_only<S>(ctx: &Ctx<'_, S>, dst: &mut [f32]) {
    let (start, end) = (ctx.start, ctx.start + dst.len());
    match (ctx.src, ctx.load) {
        (Src::U8(v), PointLoad::Unit) => {
            for (d, &x) in dst.iter_mut().zip(&v[start..end]) {
                *d = f32::from(x) * INV_255;
            }
        }
        (Src::U8(v), PointLoad::Cast) => {
            for (d, &x) in dst.iter_mut().zip(&v[start..end]) {
                *d = f32::from(x);
            }
        }
        (Src::F32(v), _) => dst.copy_from_slice(&v[start..end]),
        (Src::Window(_), _) => unreachable!("eval reads windows into a buffer first"),
    }
}

/// [`eval`] one step at a time over the chunk (any pattern length, any number of steps).
#[inline(always)]
fn eval_by_steps<S>(ctx: &Ctx<'_, S>, dst: &mut [f32]) {
    load_only(ctx, dst);
    for step in ctx.all {
        match step {
            Step::Add(delta) => dst.iter_mut().for_each(|x| *x += delta),
            Step::Contrast { factor, means } => {
                let f = *factor;
                for_pattern(dst, means, means, |x, m, _| m + f * (x - m));
            }
            Step::Normalize { mean, inv, scale } => {
                let s = *scale;
                for_pattern(dst, mean, inv, |x, m, i| (x * s - m) * i);
            }
        }
    }
}

/// `x = f(x, a[k], b[k])` over `values`, `k` the position in the pattern.
#[inline(always)]
fn for_pattern(values: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32, f32) -> f32) {
    if let (Ok(a), Ok(b)) = (<&[f32; BLOCK]>::try_from(a), <&[f32; BLOCK]>::try_from(b)) {
        let mut blocks = values.chunks_exact_mut(BLOCK);
        for block in &mut blocks {
            let block: &mut [f32; BLOCK] = block.try_into().expect("a block");
            for k in 0..BLOCK {
                block[k] = f(block[k], a[k], b[k]);
            }
        }
        for (k, x) in blocks.into_remainder().iter_mut().enumerate() {
            *x = f(*x, a[k], b[k]);
        }
    } else {
        for part in values.chunks_mut(a.len()) {
            for (k, x) in part.iter_mut().enumerate() {
                *x = f(*x, a[k], b[k]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::color::{adjust_brightness, adjust_contrast, cast, normalize, to_unit_f32};
    use proptest::prelude::*;

    /// The chain as the ops one after the other, except for the means of a contrast whose
    /// values are `u8` pixels loaded plus at most one brightness: those are the exact mean
    /// of the ideal values (`x * (1/255) + d` or `x + d`), computed in `f64` from each
    /// image's per-channel integer sums, one channel value at a time.
    fn step_by_step(chain: &PointChain, img: &Tensor) -> Result<Tensor> {
        let mut t = match chain.load {
            PointLoad::Unit => to_unit_f32(img)?,
            PointLoad::Cast => cast(img, sluice_tensor::DType::F32)?,
        };
        for (k, op) in chain.ops.iter().enumerate() {
            let from_bytes = match (&chain.ops[..k], img.data()) {
                ([], TensorData::U8(_)) => Some(0.0),
                ([PointOp::Brightness(d)], TensorData::U8(_)) => Some(*d),
                _ => None,
            };
            t = match (op, from_bytes) {
                (PointOp::Contrast(f), Some(d)) => exact_byte_contrast(img, &t, chain.load, d, *f),
                (PointOp::Brightness(d), _) => adjust_brightness(&t, *d)?,
                (PointOp::Contrast(f), None) => adjust_contrast(&t, *f)?,
                (PointOp::Normalize { mean, std, scale }, _) => normalize(&t, mean, std, *scale)?,
            };
        }
        Ok(t)
    }

    /// `m + f * (x - m)` over the `f32` values `t`, each image's channel means `m` those of
    /// the `u8` pixels `img` loaded by `load` plus `d`, from exact sums.
    fn exact_byte_contrast(img: &Tensor, t: &Tensor, load: PointLoad, d: f32, f: f32) -> Tensor {
        let c = *img.shape().last().unwrap();
        let pixels: usize = img.shape()[img.shape().len() - 3..img.shape().len() - 1]
            .iter()
            .product();
        let plane = pixels * c;
        let bytes = img.as_u8().unwrap();
        let mut out = t.as_f32().unwrap().to_vec();
        for (image, values) in bytes.chunks(plane).zip(out.chunks_mut(plane)) {
            let means: Vec<f32> = (0..c)
                .map(|ch| {
                    let sum: u64 = image
                        .iter()
                        .skip(ch)
                        .step_by(c)
                        .map(|&x| u64::from(x))
                        .sum();
                    let scaled = match load {
                        PointLoad::Unit => sum as f64 * f64::from(INV_255),
                        PointLoad::Cast => sum as f64,
                    };
                    (scaled / pixels as f64 + f64::from(d)) as f32
                })
                .collect();
            for (i, x) in values.iter_mut().enumerate() {
                let m = means[i % c];
                *x = m + f * (*x - m);
            }
        }
        Tensor::new(t.shape(), TensorData::F32(out.into())).unwrap()
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        t.as_f32().unwrap().iter().map(|x| x.to_bits()).collect()
    }

    fn op() -> impl Strategy<Value = PointOp> {
        prop_oneof![
            (-0.5f32..0.5).prop_map(PointOp::Brightness),
            (0.0f32..3.0).prop_map(PointOp::Contrast),
            (
                prop::collection::vec(-1.0f32..1.0, 1..=1),
                prop::collection::vec(0.1f32..2.0, 1..=1),
                prop_oneof![Just(1.0f32), Just(1.0 / 255.0)]
            )
                .prop_map(|(mean, std, scale)| PointOp::Normalize { mean, std, scale }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The fused chain is bit-identical to the ops one after the other (with a contrast
        /// straight after loading `u8` pixels taking its means from exact sums, see
        /// `step_by_step`), for any shape (odd pixel counts, channel counts that do and do not
        /// divide the block, batches), either source dtype, and any op order.
        #[test]
        fn equals_the_ops_in_sequence(
            b in 1usize..3, h in 1usize..40, w in 1usize..70, c in 1usize..6,
            unit in any::<bool>(), as_f32 in any::<bool>(),
            ops in prop::collection::vec(op(), 0..5),
            seed in any::<u64>(),
        ) {
            let n = b * h * w * c;
            let mut x = seed;
            let raw: Vec<u8> = (0..n).map(|_| { x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (x >> 56) as u8 }).collect();
            let shape: Vec<usize> = if b == 1 { vec![h, w, c] } else { vec![b, h, w, c] };
            let img = if as_f32 {
                Tensor::new(&shape, TensorData::F32(raw.iter().map(|&v| f32::from(v) / 200.0).collect::<Vec<_>>().into())).unwrap()
            } else {
                Tensor::new(&shape, TensorData::U8(raw.into())).unwrap()
            };
            let chain = PointChain { load: if unit { PointLoad::Unit } else { PointLoad::Cast }, ops };
            let fused = chain.apply(&img).unwrap();
            let reference = step_by_step(&chain, &img).unwrap();
            prop_assert_eq!(fused.shape(), reference.shape());
            prop_assert_eq!(bits(&fused), bits(&reference));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A chain reading a window of decoded rows in place (mirrored or not) gives the
        /// bits of the ops one after the other on the window cropped out by hand.
        #[test]
        fn a_window_read_in_place_equals_the_cropped_image(
            h in 1usize..50, w in 1usize..70, c in 1usize..6,
            fy in 0.0f64..1.0, fx in 0.0f64..1.0, fh in 0.0f64..1.0, fw in 0.0f64..1.0,
            mirror in any::<bool>(), unit in any::<bool>(),
            ops in prop::collection::vec(op(), 0..5),
            seed in any::<u64>(),
        ) {
            let mut x = seed;
            let rows: Vec<u8> = (0..h * w * c).map(|_| { x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (x >> 56) as u8 }).collect();
            let y0 = (fy * h as f64) as usize;
            let x0 = (fx * w as f64) as usize;
            let height = 1 + (fh * (h - y0 - 1) as f64) as usize;
            let width = 1 + (fw * (w - x0 - 1) as f64) as usize;
            let mut cropped = Vec::new();
            for r in y0..y0 + height {
                let mut line: Vec<&[u8]> = (x0..x0 + width).map(|p| &rows[(r * w + p) * c..(r * w + p + 1) * c]).collect();
                if mirror {
                    line.reverse();
                }
                cropped.extend(line.concat());
            }
            let win = crate::decode::Window { y: y0, x: x0, height, width, mirror };
            let view = WindowView::new(&rows, w, c, win).unwrap();
            let chain = PointChain { load: if unit { PointLoad::Unit } else { PointLoad::Cast }, ops };
            let mut out = vec![f32::NAN; height * width * c];
            chain.apply_view_into(view, &mut out).unwrap();
            let img = Tensor::new(&[height, width, c], TensorData::U8(cropped.into())).unwrap();
            let reference = step_by_step(&chain, &img).unwrap();
            let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
            prop_assert_eq!(got, bits(&reference));
        }
    }

    /// `n` pseudo-random bytes (xorshift64 from `seed`).
    fn xorshift_bytes(n: usize, mut x: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn the_vector_builds_give_the_portable_bits() {
        // `image_pass` runs the widest build this CPU has (AVX-512 or AVX2 on x86_64);
        // `image_pass_body` called from here is the portable one.
        let (h, w, c) = (37, 53, 3);
        let raw = xorshift_bytes(h * w * c, 0x2545_f491_4f6c_dd1d);
        let floats: Vec<f32> = raw.iter().map(|&v| f32::from(v) / 200.0).collect();
        let chain = PointChain::to_unit(vec![
            PointOp::Brightness(0.07),
            PointOp::Contrast(1.3),
            PointOp::Normalize {
                mean: vec![0.485, 0.456, 0.406],
                std: vec![0.229, 0.224, 0.225],
                scale: 1.0,
            },
            PointOp::Contrast(0.8),
        ]);
        let steps = chain.resolve(c).unwrap();
        for src in [Src::U8(&raw), Src::F32(&floats)] {
            let mut widest = vec![0.0f32; raw.len()];
            image_pass(src, &mut widest, h * w, c, &steps, chain.load, false);
            // The portable body, inlined here, needs a large frame in unoptimized builds.
            let portable = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .stack_size(64 << 20)
                    .spawn_scoped(s, || {
                        let mut out = vec![0.0f32; raw.len()];
                        image_pass_body(src, &mut out, h * w, c, &steps, chain.load, false, Plain);
                        out
                    })
                    .unwrap()
                    .join()
                    .unwrap()
            });
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&portable), bits(&widest));
        }
    }

    /// `len` values of NaN in a vector, starting `offset` values after a 64-byte boundary:
    /// the vector and that start.
    fn nan_at(len: usize, offset: usize) -> (Vec<f32>, usize) {
        let v = vec![f32::NAN; len + 16 + offset + 1];
        let start = v.as_ptr().align_offset(64) + offset;
        (v, start)
    }

    #[test]
    fn streamed_outputs_have_the_bits_of_cached_ones_at_every_alignment() {
        // `image_pass` with `stream` on, whatever the CPU's vendor: blocks streamed from
        // the registers where the output is 64-byte (AVX-512) or 32-byte (AVX2) aligned,
        // through an L1 buffer where it is not. Rows of a window run over the chunks' and
        // blocks' edges (280 × 3 values is no multiple of 48), and half of them mirrored.
        let (h, w, c) = (61, 299, 3);
        let raw = xorshift_bytes(h * w * c, 0x51ed_270b_2754_6d3b);
        let floats: Vec<f32> = raw.iter().map(|&v| f32::from(v) / 300.0).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let chains = [
            PointChain::to_unit(vec![
                PointOp::Brightness(0.03),
                PointOp::Contrast(0.7),
                PointOp::Normalize {
                    mean: vec![0.485, 0.456, 0.406],
                    std: vec![0.229, 0.224, 0.225],
                    scale: 1.0,
                },
            ]),
            PointChain::cast(vec![PointOp::Brightness(2.0)]),
            // Longer than the fused loops take: step by step, ordinary stores.
            PointChain::to_unit(vec![
                PointOp::Brightness(0.1),
                PointOp::Contrast(1.2),
                PointOp::Brightness(-0.1),
                PointOp::Contrast(0.9),
            ]),
        ];
        for chain in &chains {
            let steps = chain.resolve(c).unwrap();
            for mirror in [false, true] {
                let win = crate::decode::Window {
                    y: 2,
                    x: 7,
                    height: 57,
                    width: 280,
                    mirror,
                };
                let view = WindowView::new(&raw, w, c, win).unwrap();
                let sources = [
                    (Src::U8(&raw), h * w),
                    (Src::F32(&floats), h * w),
                    (Src::Window(view), 57 * 280),
                ];
                for (src, pixels) in sources {
                    let len = pixels * c;
                    let mut cached = vec![f32::NAN; len];
                    image_pass(src, &mut cached, pixels, c, &steps, chain.load, false);
                    for offset in [0, 1, 8, 12] {
                        let (mut out, at) = nan_at(len, offset);
                        image_pass(
                            src,
                            &mut out[at..at + len],
                            pixels,
                            c,
                            &steps,
                            chain.load,
                            true,
                        );
                        assert_eq!(bits(&out[at..at + len]), bits(&cached), "offset {offset}");
                        assert!(out[..at].iter().chain(&out[at + len..]).all(|v| v.is_nan()));
                    }
                }
            }
        }
    }

    #[test]
    fn a_batch_row_has_the_bits_of_an_ordinary_output() {
        // Large enough for streaming stores where the CPU gains from them, written at an
        // offset that is not a multiple of any vector width.
        let (h, w, c) = (301, 299, 3);
        let raw = xorshift_bytes(h * w * c, 0x9e37_79b9_7f4a_7c15);
        let chain = PointChain::to_unit(vec![
            PointOp::Brightness(-0.05),
            PointOp::Contrast(1.4),
            PointOp::Normalize {
                mean: vec![0.5; 3],
                std: vec![0.25; 3],
                scale: 1.0,
            },
        ]);
        let img = Tensor::new(&[h, w, c], TensorData::U8(raw.clone().into())).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut cached = vec![f32::NAN; h * w * c];
        chain.apply_into(&img, &mut cached).unwrap();
        let mut batch = vec![f32::NAN; h * w * c + 2];
        chain
            .apply_into_batch_row(&img, &mut batch[1..=h * w * c])
            .unwrap();
        assert_eq!(bits(&batch[1..=h * w * c]), bits(&cached));
        assert!(batch[0].is_nan() && batch[h * w * c + 1].is_nan());
        // A mirrored window read in place, the way `image_ops` writes a batch's rows.
        let win = crate::decode::Window {
            y: 3,
            x: 5,
            height: 290,
            width: 280,
            mirror: true,
        };
        let view = WindowView::new(&raw, w, c, win).unwrap();
        let mut cached = vec![f32::NAN; 290 * 280 * c];
        chain.apply_view_into(view, &mut cached).unwrap();
        let mut row = vec![f32::NAN; 290 * 280 * c];
        chain.apply_view_into_batch_row(view, &mut row).unwrap();
        assert_eq!(bits(&row), bits(&cached));
    }

    #[test]
    fn bad_normalize_parameters_are_errors() {
        let img = Tensor::new(&[1, 1, 3], TensorData::U8(vec![1, 2, 3].into())).unwrap();
        let chain = PointChain::to_unit(vec![PointOp::Normalize {
            mean: vec![0.0; 2],
            std: vec![1.0],
            scale: 1.0,
        }]);
        let err = chain.apply(&img).unwrap_err().to_string();
        assert!(err.contains("mean has 2 values"), "{err}");
        let chain = PointChain::to_unit(vec![PointOp::Normalize {
            mean: vec![0.0],
            std: vec![0.0],
            scale: 1.0,
        }]);
        assert!(chain.apply(&img).is_err());
    }

    #[test]
    fn a_wrong_output_length_is_an_error() {
        let img = Tensor::new(&[1, 2, 1], TensorData::U8(vec![1, 2].into())).unwrap();
        let mut out = vec![0.0; 3];
        assert!(
            PointChain::to_unit(vec![])
                .apply_into(&img, &mut out)
                .is_err()
        );
    }
}
