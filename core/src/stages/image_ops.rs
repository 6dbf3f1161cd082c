//! `image_ops`: decode and augment an image value with the built-in image ops.
//!
//! On one element the ops run on its image; on a batch of images (or of encoded images,
//! after `batch`) the rows run in parallel on the run's row threads (`cpu_budget` of them,
//! a rayon pool that ends with the run), each with its own RNG, and
//! an ops list ending in a colour chain writes each row straight into the batch's buffer.
//! An `image_ops` followed by a `batch` runs fused with it the same way, with each
//! element's own RNG, so the output is the two stages' bit for bit (see
//! `image_ops_batch.rs` and [`Options::map_and_batch_fusion`](crate::Options)).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::element::{Element, ElementId, Value};
use crate::error::{Error, Result};
use crate::executor::parallel::WorkFn;
use crate::image::{PointChain, PointLoad, PointOp, color, decode, geometry};
use crate::metrics::StageMetrics;
use crate::parallelism::NumParallel;
use crate::params::Params;
use crate::rng::{ElementRng, StreamKey};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stages::map::{MapSpec, run_elementwise};
use crate::stream::BoxStream;
use crate::tensor::{BatchRows, DType, Tensor, TensorData};

/// Resampling for [`ImageOp::Resize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Resample {
    /// Nearest neighbour (keeps the dtype).
    Nearest,
    /// Bilinear (returns f32), the default.
    #[default]
    Bilinear,
    /// Area averaging (returns f32).
    Area,
}

impl From<Resample> for geometry::ResizeMethod {
    fn from(r: Resample) -> Self {
        match r {
            Resample::Nearest => geometry::ResizeMethod::Nearest,
            Resample::Bilinear => geometry::ResizeMethod::Bilinear,
            Resample::Area => geometry::ResizeMethod::Area,
        }
    }
}

/// Padding for [`ImageOp::Pad`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PadSpec {
    /// Mirror without repeating the edge.
    Reflect,
    /// A constant value.
    Constant(f32),
}

fn half() -> f32 {
    0.5
}

/// One image op. Random ops draw from the element's RNG, in list order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ImageOp {
    /// Decode JPEG or PNG bytes (a scalar byte string) into u8 `[H, W, C]`.
    Decode {
        /// Channels to produce (1, 3 or 4); as stored when absent.
        #[serde(default)]
        channels: Option<usize>,
    },
    /// Resize to `height × width`.
    Resize {
        /// Output height.
        height: usize,
        /// Output width.
        width: usize,
        /// Resampling.
        #[serde(default)]
        method: Resample,
    },
    /// The central `height × width` window.
    CenterCrop {
        /// Height.
        height: usize,
        /// Width.
        width: usize,
    },
    /// A uniformly placed `height × width` window. Right after `decode` of a JPEG, only the
    /// rows the window needs are decoded (same pixels).
    RandomCrop {
        /// Height.
        height: usize,
        /// Width.
        width: usize,
    },
    /// The ImageNet `RandomResizedCrop`, then a bilinear resize to `height × width`.
    RandomResizedCrop {
        /// Output height.
        height: usize,
        /// Output width.
        width: usize,
        /// Area fraction range (default 0.08..1).
        #[serde(default = "default_scale")]
        scale: (f32, f32),
        /// Aspect ratio range (default 3/4..4/3).
        #[serde(default = "default_ratio")]
        ratio: (f32, f32),
    },
    /// Mirror left-right with probability `p` (default 0.5).
    RandomFlipLeftRight {
        /// Probability.
        #[serde(default = "half")]
        p: f32,
    },
    /// Mirror up-down with probability `p` (default 0.5).
    RandomFlipUpDown {
        /// Probability.
        #[serde(default = "half")]
        p: f32,
    },
    /// Rotate by a uniform angle in `[-max_degrees, max_degrees]`.
    RandomRotate {
        /// Largest angle.
        max_degrees: f32,
        /// Fill for uncovered pixels.
        #[serde(default)]
        fill: f32,
    },
    /// Pad every side by `n`.
    Pad {
        /// Pixels per side.
        n: usize,
        /// Padding mode.
        mode: PadSpec,
    },
    /// Blank a `size × size` square at a random centre.
    Cutout {
        /// Side.
        size: usize,
        /// Fill value.
        #[serde(default)]
        fill: f32,
    },
    /// `tf.image.random_brightness`.
    RandomBrightness {
        /// Largest delta.
        max_delta: f32,
    },
    /// `tf.image.random_contrast`.
    RandomContrast {
        /// Lowest factor.
        lower: f32,
        /// Highest factor.
        upper: f32,
    },
    /// `tf.image.random_saturation`.
    RandomSaturation {
        /// Lowest factor.
        lower: f32,
        /// Highest factor.
        upper: f32,
    },
    /// `tf.image.random_hue`.
    RandomHue {
        /// Largest delta (≤ 0.5).
        max_delta: f32,
    },
    /// Cast to `u8` or `f32` (values kept).
    Cast {
        /// Target dtype: `"u8"` or `"f32"`.
        #[schemars(with = "String")]
        dtype: DType,
    },
    /// Scale to `[0, 1]` f32 (`tf.image.convert_image_dtype`).
    ToUnitF32,
    /// `(x * scale - mean[c]) / std[c]` in f32.
    Normalize {
        /// Per-channel mean.
        mean: Vec<f32>,
        /// Per-channel standard deviation.
        std: Vec<f32>,
        /// Multiplier applied first (default 1).
        #[serde(default = "one")]
        scale: f32,
    },
    /// `[H, W, C]` → `[C, H, W]` (last op only).
    ToChw,
    /// `decode`, then a random or centre crop to `height × width`, then (with `flip`) a
    /// random left-right flip, run as one: a JPEG is decoded only where the window needs
    /// it (no IDCT or colour conversion outside it, nothing below its last MCU row) and
    /// mirrored in the same copy; the pixels and random draws are those of the three ops.
    /// Made from those ops by the `decode_crop_fusion` optimizer rule
    /// ([`ImageOpsSpec::fused`]); not written in pipelines.
    #[serde(skip_deserializing)]
    #[schemars(skip)]
    DecodeWindow {
        /// The decode's channels.
        channels: Option<usize>,
        /// The crop's height.
        height: usize,
        /// The crop's width.
        width: usize,
        /// A random crop (else a centre crop).
        random: bool,
        /// The flip's probability, if the ops flip.
        flip: Option<f32>,
    },
}

fn one() -> f32 {
    1.0
}

fn default_scale() -> (f32, f32) {
    (0.08, 1.0)
}

fn default_ratio() -> (f32, f32) {
    (3.0 / 4.0, 4.0 / 3.0)
}

impl ImageOp {
    /// Applies the op to one image.
    pub fn apply(&self, img: &Tensor, rng: &mut ElementRng) -> Result<Tensor> {
        Ok(self.apply_image(img, rng)?)
    }

    /// [`apply`](Self::apply), failing only with image errors.
    fn apply_image(&self, img: &Tensor, rng: &mut ElementRng) -> sluice_image::Result<Tensor> {
        use ImageOp::*;
        match self {
            Decode { channels } => {
                let data = scalar_bytes(img)?;
                decode::decode_image(data, *channels)
            }
            Resize {
                height,
                width,
                method,
            } => geometry::resize(img, *height, *width, (*method).into()),
            CenterCrop { height, width } => geometry::center_crop(img, *height, *width),
            RandomCrop { height, width } => geometry::random_crop(img, *height, *width, rng),
            RandomResizedCrop {
                height,
                width,
                scale,
                ratio,
            } => geometry::random_resized_crop(img, *height, *width, *scale, *ratio, rng),
            RandomFlipLeftRight { p } => geometry::random_flip_left_right(img, *p, rng),
            RandomFlipUpDown { p } => geometry::random_flip_up_down(img, *p, rng),
            RandomRotate { max_degrees, fill } => {
                geometry::random_rotate(img, *max_degrees, *fill, rng)
            }
            Pad { n, mode } => geometry::pad(
                img,
                *n,
                match mode {
                    PadSpec::Reflect => geometry::PadMode::Reflect,
                    PadSpec::Constant(v) => geometry::PadMode::Constant(*v),
                },
            ),
            Cutout { size, fill } => geometry::cutout(img, *size, *fill, rng),
            RandomBrightness { max_delta } => color::random_brightness(img, *max_delta, rng),
            RandomContrast { lower, upper } => color::random_contrast(img, *lower, *upper, rng),
            RandomSaturation { lower, upper } => color::random_saturation(img, *lower, *upper, rng),
            RandomHue { max_delta } => color::random_hue(img, *max_delta, rng),
            Cast { dtype } => color::cast(img, *dtype),
            ToUnitF32 => color::to_unit_f32(img),
            Normalize { mean, std, scale } => color::normalize(img, mean, std, *scale),
            ToChw => geometry::to_chw(img),
            DecodeWindow { .. } => {
                let head = CropHead::of(std::slice::from_ref(self)).ok_or_else(|| {
                    sluice_image::Error::InvalidArgument {
                        op: "decode_window",
                        message: "decode_window is its own crop head".into(),
                    }
                })?;
                decode_crop(scalar_bytes(img)?, &head, rng)
            }
        }
    }
}

fn scalar_bytes(t: &Tensor) -> sluice_image::Result<&[u8]> {
    match t.as_bytes_list() {
        Some([b]) if t.rank() == 0 => Ok(b),
        _ => {
            let message = format!(
                "decode needs a scalar byte string, got a {} tensor of shape {:?}",
                t.dtype(),
                t.shape()
            );
            Err(match t.dtype() {
                DType::Bytes => sluice_image::Error::shape("decode", message),
                found => sluice_image::Error::DType {
                    op: "decode",
                    found,
                    message,
                },
            })
        }
    }
}

/// Decodes and augments an image value with the built-in ops, in list order, writing the
/// result to `output` (default: replace `input`). Random draws come from the element's RNG
/// (seed, epoch, stage, element id): the output is fixed by the seed at any parallelism. An
/// image that fails (does not decode, is smaller than a crop) fails its element with an
/// image error and its provenance; `error_policy` decides. Sizes are checked along the list
/// before anything runs: after a `resize` to 64×64, a `random_crop` of 80×80 is refused (a
/// crop right after `decode` is checked per image, as the size is not known before).
///
/// An `image_ops` directly followed by a `batch` runs fused with it (the
/// `map_and_batch_fusion` rule, on by default): the rows of each batch are decoded and
/// augmented in parallel and written straight into the batch's `f32` buffer, with each
/// element's own random draws, so the output is the one of the two stages bit for bit. On a
/// batch of images (after `batch`) the rows are processed in parallel too, each row's draws
/// keyed by the batch's id and the row (so the images differ from the per-element order's,
/// both fixed by the seed), and a bad image fails its whole batch.
///
/// How it runs fast (the results are bit-identical to the ops applied one by one):
/// `to_unit_f32` / `cast` / `normalize` and the brightness and contrast ops after them run
/// as one pass; `decode` then `random_crop` or `center_crop` decodes only what the window
/// needs (a baseline JPEG: no IDCT or colour conversion outside it, nothing below its last
/// MCU row), and the colour pass reads the window in place from the decoded rows.
///
/// ```toml
/// [[stage]]
/// kind = "image_ops"
/// input = "image/encoded"   # the feature holding the JPEG
/// output = "image"
/// num_parallel = "auto"
/// ops = [
///   { op = "decode", channels = 3 },
///   { op = "random_resized_crop", height = 224, width = 224, scale = [0.08, 1.0] },
///   { op = "pad", n = 4, mode = { constant = 0.0 } },
/// ]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImageOpsSpec {
    /// The ops, in order.
    pub ops: Vec<ImageOp>,
    /// The value holding the image (default `image`).
    #[serde(default = "image_name")]
    pub input: String,
    /// Where to put the result (default: replace `input`).
    #[serde(default)]
    pub output: Option<String>,
    /// Worker threads (default sequential).
    #[serde(default)]
    pub num_parallel: NumParallel,
    /// Keep the input order with threads (default true).
    #[serde(default = "yes")]
    pub deterministic: bool,
}

fn image_name() -> String {
    "image".to_string()
}

fn yes() -> bool {
    true
}

impl ImageOpsSpec {
    /// These ops on the `image` value, sequentially.
    pub fn new(ops: Vec<ImageOp>) -> Self {
        ImageOpsSpec {
            ops,
            input: image_name(),
            output: None,
            num_parallel: NumParallel::Sequential,
            deterministic: true,
        }
    }

    /// These ops with a leading decode, random or centre crop and random left-right flip
    /// run as one [`ImageOp::DecodeWindow`] (only the window of a JPEG is decoded; the same
    /// pixels and draws): what the `decode_crop_fusion` optimizer rule does to the plan.
    /// `None` when the ops do not start so.
    pub fn fused(&self) -> Option<ImageOpsSpec> {
        let (op, replaced) = CropHead::fuse(&self.ops)?;
        let mut ops = vec![op];
        ops.extend_from_slice(&self.ops[replaced..]);
        Some(ImageOpsSpec {
            ops,
            ..self.clone()
        })
    }

    /// This spec with `num_parallel` worker threads.
    pub fn num_parallel(mut self, n: impl Into<NumParallel>) -> Self {
        self.num_parallel = n.into();
        self
    }

    /// Runs the ops on one image.
    pub fn run(&self, img: &Tensor, rng: &mut ElementRng) -> Result<Tensor> {
        if let Some(plan) = self.window_chain() {
            return self.run_window_chain(&plan, img, rng, |view, chain| {
                let [h, w, c] = view.shape();
                let mut out = crate::pool::take_filled(h * w * c);
                chain.apply_view_into(view, &mut out)?;
                Ok(Tensor::new(&[h, w, c], TensorData::F32(out.into()))?)
            });
        }
        let (head, chain) = self.run_head_and_draw(img, rng)?;
        self.finish(head, chain.as_ref())
    }

    /// When the ops are exactly a decode, a random or centre crop, optionally a random
    /// left-right flip, then a point chain: how to run them without copying the window out
    /// of the decoded rows (the chain reads it in place, [`Self::run_window_chain`]).
    fn window_chain(&self) -> Option<WindowChain> {
        let (start, end) = self.split();
        if start >= end || end != self.ops.len() {
            return None;
        }
        let head = CropHead::of(&self.ops[..start]).filter(|head| head.len == start)?;
        Some(WindowChain {
            head,
            chain: start..end,
        })
    }

    /// Decodes the encoded image `img`, draws the window and flip (as
    /// [`decode_crop`] does) and then the chain's parameters, and hands the window of
    /// the decoded rows and the chain to `then`, as `plan` ([`Self::window_chain`]) says.
    fn run_window_chain<R>(
        &self,
        plan: &WindowChain,
        img: &Tensor,
        rng: &mut ElementRng,
        then: impl FnOnce(decode::WindowView<'_>, PointChain) -> Result<R>,
    ) -> Result<R> {
        let head = &plan.head;
        head.check_flip()?;
        decode::decode_window_then(
            scalar_bytes(img)?,
            head.channels,
            &decode::DecodeLimits::default(),
            rng,
            |rng, h, w| head.draw_window(rng, h, w),
            |rng, view| {
                let chain = draw_chain(&self.ops[plan.chain.clone()], rng)?;
                then(view, chain)
            },
        )
    }

    /// The shape of every image after `ops[..start]` when the ops fix it whatever the
    /// input (a decode to a given channel count, then crops or resizes to a given size and
    /// ops that keep the shape), so a batch's buffer can be made before any row is decoded.
    fn static_head_shape(&self, start: usize) -> Option<Vec<usize>> {
        let (mut h, mut w, mut c) = (None, None, None);
        for (i, op) in self.ops[..start].iter().enumerate() {
            match op {
                ImageOp::Decode { channels } if i == 0 => c = *channels,
                ImageOp::DecodeWindow {
                    channels,
                    height,
                    width,
                    ..
                } if i == 0 => (c, h, w) = (*channels, Some(*height), Some(*width)),
                ImageOp::Resize { height, width, .. }
                | ImageOp::CenterCrop { height, width }
                | ImageOp::RandomCrop { height, width }
                | ImageOp::RandomResizedCrop { height, width, .. } => {
                    (h, w) = (Some(*height), Some(*width));
                }
                ImageOp::Pad { n, .. } => {
                    h = h.and_then(|h| h.checked_add(n.checked_mul(2)?));
                    w = w.and_then(|w| w.checked_add(n.checked_mul(2)?));
                }
                ImageOp::RandomFlipLeftRight { .. }
                | ImageOp::RandomFlipUpDown { .. }
                | ImageOp::RandomRotate { .. }
                | ImageOp::Cutout { .. }
                | ImageOp::RandomBrightness { .. }
                | ImageOp::RandomContrast { .. }
                | ImageOp::RandomSaturation { .. }
                | ImageOp::RandomHue { .. } => {}
                _ => return None,
            }
        }
        Some(vec![h?, w?, c?])
    }

    /// Runs the ops on the encoded image `row` and writes the result, which must have the
    /// batch's row shape `shape`, into `dst()`, asked for once the image is decoded. Only
    /// for ops ending in a point chain.
    fn run_row_into<'d>(
        &self,
        plan: Option<&WindowChain>,
        row: &Tensor,
        rng: &mut ElementRng,
        shape: &[usize],
        dst: impl FnOnce() -> &'d mut [f32],
    ) -> Result<()> {
        if let Some(plan) = plan {
            return self.run_window_chain(plan, row, rng, |view, chain| {
                same_row_shape(shape, &view.shape())?;
                Ok(chain.apply_view_into_batch_row(view, dst())?)
            });
        }
        let (head, chain) = self.run_head_and_draw(row, rng)?;
        same_row_shape(shape, head.shape())?;
        Ok(chain
            .ok_or_else(|| Error::invalid("image_ops: the ops do not end in a point chain"))?
            .apply_into_batch_row(&head, dst())?)
    }

    /// Where the op list splits: `ops[..start]` run one by one, `ops[start..end]` run as one
    /// [`PointChain`] (a conversion to `f32` and the brightness / contrast / normalize ops
    /// after it, in one pass), `ops[end..]` is a final `to_chw` or nothing.
    fn split(&self) -> (usize, usize) {
        let end = match self.ops.last() {
            Some(ImageOp::ToChw) => self.ops.len() - 1,
            _ => self.ops.len(),
        };
        let mut start = end;
        while start > 0 && is_chain_op(&self.ops[start - 1]) {
            start -= 1;
        }
        while start < end && !is_chain_entry(&self.ops[start]) {
            start += 1;
        }
        (start, end)
    }

    /// Runs `ops[..start]` and draws the chain's parameters (in list order, so the draws
    /// are those of the ops run one by one).
    fn run_head_and_draw(
        &self,
        img: &Tensor,
        rng: &mut ElementRng,
    ) -> Result<(Tensor, Option<PointChain>)> {
        let (start, end) = self.split();
        let head = self.run_head(&self.ops[..start], img, rng)?;
        let chain = if start < end {
            Some(draw_chain(&self.ops[start..end], rng)?)
        } else {
            None
        };
        Ok((head, chain))
    }

    /// Applies the drawn chain and the final `to_chw`, if any.
    fn finish(&self, head: Tensor, chain: Option<&PointChain>) -> Result<Tensor> {
        let mut current = match chain {
            Some(chain) => chain.apply(&head)?,
            None => head,
        };
        if let Some(ImageOp::ToChw) = self.ops.last() {
            current = geometry::to_chw(&current)?;
        }
        Ok(current)
    }

    fn run_head(&self, ops: &[ImageOp], img: &Tensor, rng: &mut ElementRng) -> Result<Tensor> {
        let mut ops = ops;
        // Decode then a random or centre crop (then a random left-right flip): decode only
        // what the window needs, mirrored in the same copy (same pixels).
        let mut current = match ops {
            _ if let Some(head) = CropHead::of(ops) => {
                ops = &ops[head.len..];
                decode_crop(scalar_bytes(img)?, &head, rng)?
            }
            [first, ..] => {
                ops = &ops[1..];
                first.apply(img, rng)?
            }
            [] => return Ok(img.clone()),
        };
        while let Some((op, rest)) = ops.split_first() {
            // Brightness then contrast: one pass over the pixels instead of two.
            if let (
                ImageOp::RandomBrightness { max_delta },
                [ImageOp::RandomContrast { lower, upper }, after @ ..],
            ) = (op, rest)
            {
                current =
                    color::random_brightness_contrast(&current, *max_delta, *lower, *upper, rng)?;
                ops = after;
                continue;
            }
            current = op.apply(&current, rng)?;
            ops = rest;
        }
        Ok(current)
    }

    /// A batch of encoded images `[B]`: each decoded and augmented on the rayon pool; when
    /// the ops end in a point chain, its output goes straight into the batch's buffer.
    fn run_encoded_batch(&self, img: &Tensor, rngs: &mut [ElementRng]) -> Result<Tensor> {
        let rows: Vec<Tensor> = (0..img.shape()[0])
            .map(|i| img.row(i))
            .collect::<Result<_, _>>()?;
        self.run_encoded_rows(&rows, rngs)
    }

    /// [`run_encoded_batch`](Self::run_encoded_batch) of the batch of `rows` (encoded
    /// images, scalars), row `i` with `rngs[i]`.
    pub(crate) fn run_encoded_rows(
        &self,
        rows: &[Tensor],
        rngs: &mut [ElementRng],
    ) -> Result<Tensor> {
        use rayon::prelude::*;
        let (start, end) = self.split();
        let direct = start < end && !matches!(self.ops.last(), Some(ImageOp::ToChw));
        if !direct || rows.is_empty() {
            let done = rows
                .par_iter()
                .zip(rngs.par_iter_mut())
                .map(|(row, rng)| self.run(row, rng))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = done.iter().collect();
            return Ok(Tensor::stack(&refs)?);
        }
        // The batch's buffer is made once the shape of its rows is known: from the ops when
        // they fix it, otherwise from the first row, run first. Then every row is decoded,
        // augmented and written into its place in one task, so only a few decoded images
        // are alive at any time.
        let plan = self.window_chain();
        let mut first = None;
        let shape = match self.static_head_shape(start) {
            Some(shape) => shape,
            None => {
                let (head, chain) = self.run_head_and_draw(&rows[0], &mut rngs[0])?;
                let shape = head.shape().to_vec();
                first = Some((head, chain.expect("direct: the ops end in a chain")));
                shape
            }
        };
        let plane: usize = shape.iter().product();
        // Taken from the pool when the first row is decoded (usually the buffer of the
        // batch before, dropped by then), aligned to a cache line so rows whose size is a
        // multiple of one are streamed out from the registers (`sluice_image`'s point chain).
        let out = BatchRows::<f32>::new(rows.len(), plane, 64);
        let mut batch_shape = vec![rows.len()];
        batch_shape.extend_from_slice(&shape);
        let done = match first {
            Some((head, chain)) => {
                chain.apply_into_batch_row(&head, out.row(0))?;
                1
            }
            None => 0,
        };
        if plane > 0 {
            (done..rows.len())
                .into_par_iter()
                .zip(rows[done..].par_iter())
                .zip(rngs[done..].par_iter_mut())
                .map(|((i, row), rng)| {
                    self.run_row_into(plan.as_ref(), row, rng, &shape, || out.row(i))
                })
                .collect::<Result<()>>()?;
        }
        Ok(Tensor::new(
            &batch_shape,
            TensorData::F32(out.into_shared()),
        )?)
    }

    /// This stage's work on one element, with the stage's RNG key.
    /// A batch's rows run on `rows` (the run's pool, `cpu_budget` threads) when given, and
    /// `metrics` (the stage's) then record those threads.
    pub(crate) fn process(
        &self,
        mut element: Element,
        key: StreamKey,
        rows: Option<&rayon::ThreadPool>,
        metrics: Option<&StageMetrics>,
    ) -> Result<Element> {
        let img = element
            .tensor(&self.input)
            .ok_or_else(|| {
                Error::data_of(
                    &self.input,
                    format!("image_ops: no dense value named {:?}", self.input),
                )
            })?
            .clone();
        let batched = img.rank() == 4 || (img.rank() == 1 && img.dtype() == DType::Bytes);
        let out = if batched {
            let id = element.id();
            let mut rngs: Vec<ElementRng> = (0..img.shape()[0] as u64)
                .map(|i| key.element_rng(batch_row_id(id, i)))
                .collect();
            let mut run = || {
                if img.rank() == 1 {
                    self.run_encoded_batch(&img, &mut rngs)
                } else {
                    geometry::map_batch_with_rngs(&img, &mut rngs, |row, rng| self.run(row, rng))
                }
            };
            match rows {
                Some(pool) => {
                    if let Some(m) = metrics {
                        m.set_row_threads(pool.current_num_threads());
                    }
                    pool.install(run)?
                }
                None => run()?,
            }
        } else {
            self.run(&img, &mut key.element_rng(element.id()))?
        };
        let name = self.output.as_deref().unwrap_or(&self.input).to_string();
        element.insert(&name, Value::Dense(out));
        Ok(element)
    }
}

/// The RNG id of row `i` of a batch.
fn batch_row_id(batch: ElementId, i: u64) -> ElementId {
    batch.child(i)
}

/// The ops a [`PointChain`] can hold.
fn is_chain_op(op: &ImageOp) -> bool {
    is_chain_entry(op)
        || matches!(
            op,
            ImageOp::RandomBrightness { .. } | ImageOp::RandomContrast { .. }
        )
}

/// The ops that start a [`PointChain`]: those whose output is `f32` whatever the input.
fn is_chain_entry(op: &ImageOp) -> bool {
    matches!(
        op,
        ImageOp::ToUnitF32 | ImageOp::Normalize { .. } | ImageOp::Cast { dtype: DType::F32 }
    )
}

/// The chain for `ops` (which [`is_chain_entry`] / [`is_chain_op`] accept), drawing the
/// random parameters in list order as the ops themselves draw them.
fn draw_chain(ops: &[ImageOp], rng: &mut ElementRng) -> Result<PointChain> {
    let load = match ops.first() {
        Some(ImageOp::ToUnitF32) => PointLoad::Unit,
        _ => PointLoad::Cast,
    };
    let mut chain = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            // After the first op the values are f32, which these keep as they are.
            ImageOp::ToUnitF32 | ImageOp::Cast { .. } => {}
            ImageOp::Normalize { mean, std, scale } => chain.push(PointOp::Normalize {
                mean: mean.clone(),
                std: std.clone(),
                scale: *scale,
            }),
            ImageOp::RandomBrightness { max_delta } => chain.push(PointOp::Brightness(
                color::draw_brightness(*max_delta, rng)?,
            )),
            ImageOp::RandomContrast { lower, upper } => chain.push(PointOp::Contrast(
                color::draw_contrast(*lower, *upper, rng)?,
            )),
            other => unreachable!("not a chain op: {other:?}"),
        }
    }
    Ok(PointChain { load, ops: chain })
}

/// Decodes a JPEG window drawn as `head`'s crop draws it ([`geometry::random_crop`] or
/// [`geometry::center_crop`]), decoding only what it needs; other formats decode whole and
/// crop. With a flip, then draws it with its probability as
/// [`geometry::random_flip_left_right`] does, and mirrors the window in the same copy.
fn decode_crop(data: &[u8], head: &CropHead, rng: &mut ElementRng) -> sluice_image::Result<Tensor> {
    head.check_flip()?;
    // The window is drawn once the decoder has read the image's size from its header.
    decode::decode_window_with(
        data,
        head.channels,
        &decode::DecodeLimits::default(),
        &mut |h, w| head.draw_window(rng, h, w),
    )
}

/// The start of a list of ops that decodes a window: a decode, a random or centre crop, and
/// optionally a random left-right flip.
#[derive(Debug, Clone, Copy)]
struct CropHead {
    /// The decode's channels.
    channels: Option<usize>,
    /// The crop's size.
    height: usize,
    width: usize,
    /// A random crop (else a centre crop).
    random: bool,
    /// The flip's probability, if the ops flip.
    flip: Option<f32>,
    /// How many ops this is (2 or 3).
    len: usize,
}

impl CropHead {
    /// The crop head `ops` start with, if they do: a [`ImageOp::DecodeWindow`] (which the
    /// `decode_crop_fusion` rule makes of a decode, crop and flip).
    fn of(ops: &[ImageOp]) -> Option<Self> {
        let [
            ImageOp::DecodeWindow {
                channels,
                height,
                width,
                random,
                flip,
            },
            ..,
        ] = ops
        else {
            return None;
        };
        Some(Self {
            channels: *channels,
            height: *height,
            width: *width,
            random: *random,
            flip: *flip,
            len: 1,
        })
    }

    /// The [`ImageOp::DecodeWindow`] that `ops` start with when they start with a decode,
    /// a random or centre crop, and optionally a random left-right flip; and how many ops
    /// it replaces.
    pub(crate) fn fuse(ops: &[ImageOp]) -> Option<(ImageOp, usize)> {
        let [ImageOp::Decode { channels }, crop, rest @ ..] = ops else {
            return None;
        };
        let (height, width, random) = match crop {
            ImageOp::RandomCrop { height, width } => (*height, *width, true),
            ImageOp::CenterCrop { height, width } => (*height, *width, false),
            _ => return None,
        };
        let flip = match rest.first() {
            Some(ImageOp::RandomFlipLeftRight { p }) => Some(*p),
            _ => None,
        };
        let op = ImageOp::DecodeWindow {
            channels: *channels,
            height,
            width,
            random,
            flip,
        };
        Some((op, 2 + usize::from(flip.is_some())))
    }

    /// Checks the flip's probability (before anything is decoded, as the op would).
    fn check_flip(&self) -> sluice_image::Result<()> {
        match self.flip {
            Some(p) => geometry::probability("random_flip_left_right", p),
            None => Ok(()),
        }
    }

    /// The crop's window in an `h` × `w` image: drawn as [`geometry::random_crop`] draws
    /// it, or the centre as [`geometry::center_crop`] takes it; then mirrored with the
    /// flip's probability as [`geometry::random_flip_left_right`] draws it.
    fn draw_window(
        &self,
        rng: &mut ElementRng,
        h: usize,
        w: usize,
    ) -> sluice_image::Result<decode::Window> {
        let (height, width) = (self.height, self.width);
        if height > h || width > w {
            let op = if self.random {
                "random_crop"
            } else {
                "center_crop"
            };
            return Err(sluice_image::Error::invalid(
                op,
                format!("{op} of {height}x{width} is larger than the {h}x{w} image"),
            ));
        }
        use rand::Rng;
        let (y, x) = if self.random {
            (
                rng.random_range(0..=h - height),
                rng.random_range(0..=w - width),
            )
        } else {
            ((h - height) / 2, (w - width) / 2)
        };
        let mirror = self.flip.is_some_and(|p| rng.random::<f32>() < p);
        Ok(decode::Window {
            y,
            x,
            height,
            width,
            mirror,
        })
    }
}

/// How [`ImageOpsSpec::run_window_chain`] runs a decode, random or centre crop, optional
/// flip and point chain.
struct WindowChain {
    /// The decode, crop and flip.
    head: CropHead,
    /// Where the point chain's ops are in the list.
    chain: std::ops::Range<usize>,
}

/// Checks that a row of a batch has the batch's row shape.
fn same_row_shape(batch: &[usize], row: &[usize]) -> Result<()> {
    if batch == row {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "cannot batch tensors of shapes {batch:?} and {row:?} (crop or resize to one size \
             first)"
        )))
    }
}

impl Stage for ImageOpsSpec {
    fn name(&self) -> &'static str {
        "image_ops"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), crate::invalid::Invalid> {
        crate::registry::Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, "image_ops")?.open()?;
        let key = ctx.stream_key();
        let spec = Arc::new(self.clone());
        let rows = ctx.row_pool();
        let metrics = Arc::clone(ctx.metrics());
        let work: WorkFn = Arc::new(move |e: Element| {
            spec.process(e, key, rows.as_deref(), Some(&metrics))
                .map(Some)
        });
        let spec = MapSpec {
            num_parallel: self.num_parallel,
            deterministic: self.deterministic,
        };
        Ok(run_elementwise(upstream, work, spec, ctx))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        // One output per input: skip inputs without doing this stage's work.
        crate::run::build_one_to_one(self, inputs, ctx, skip)
    }

    fn order_deterministic(&self) -> bool {
        self.deterministic || self.num_parallel == NumParallel::Sequential
    }

    fn runs_inline(&self) -> bool {
        self.num_parallel == NumParallel::Sequential
    }

    fn computes_in_parallel(&self) -> bool {
        self.num_parallel != NumParallel::Sequential
    }
}
