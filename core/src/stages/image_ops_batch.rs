//! `image_ops` followed by `batch`, run as one stage (tf.data's `map_and_batch_fusion`).
//!
//! Written as users write it, `image_ops(...)` then `batch(64)` makes each augmented image
//! on its own (a 600 KB `f32` tensor for a 224² RGB image) and then copies it into the
//! batch. Fused, `batch` pulls 64 encoded elements from `image_ops`'s input and decodes and
//! augments their rows in parallel (on the run's `cpu_budget` row threads) straight into the
//! batch's buffer, as
//! [`image_ops`](crate::stages::image_ops) does for a batch of encoded images: no
//! per-image tensors, no copy, and the batch's rows run in parallel. While they run, one of
//! the row threads pulls (reads and parses) the next batch's inputs, then joins the rows,
//! so the rows never wait for the reading between batches (`augment` +3–5 % on VM-5).
//!
//! **The output is the one of the unfused stages, bit for bit.** Each row gets the RNG the
//! unfused `image_ops` gives its element (the `image_ops` stage's key and the element's
//! id), and goes through the same code (images already decoded are augmented row by row
//! in parallel, then stacked). When a batch cannot be made in one go (an image fails, the rows differ in shape, an element lacks the image, the input ends early with
//! `drop_remainder`, or an error comes from upstream), that batch is made again the unfused
//! way from the same elements, so errors, skips and their counts are exactly those of
//! the two stages. Stats still show `image_ops` (its work, counted in batches) and `batch`.
//!
//! The [`MapAndBatchFusion`](crate::optimize::MapAndBatchFusion) rule makes the fused stage
//! when `batch`'s input is an `image_ops` whose output order is deterministic, and
//! [`Options::map_and_batch_fusion`](crate::Options) is on (default).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::element::{Element, Value};
use crate::error::Error;
use crate::error::Result;
use crate::executor::parallel::WorkFn;
use crate::invalid::Invalid;
use crate::params::Params;
use crate::plan::PlanNode;
use crate::rng::{ElementRng, StreamKey};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stages::batch::{BatchSpec, combine_dense, next_batch};
use crate::stages::image_ops::ImageOpsSpec;
use crate::stages::map::map_next;
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::{DType, Tensor};

/// A `batch` fused with the `image_ops` that is its input (made by the
/// [`MapAndBatchFusion`](crate::optimize::MapAndBatchFusion) rule; see the
/// [module docs](self)). Stats, errors and `explain` still show both stages: this one as
/// `batch`, its input as `image_ops`, doing the work.
#[derive(Debug, Clone)]
pub(crate) struct FusedImageOpsBatch {
    /// The `batch` as written.
    pub batch: BatchSpec,
}

impl Stage for FusedImageOpsBatch {
    fn name(&self) -> &'static str {
        "batch"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(&self.batch).with("fused_with_input", "image_ops")
    }

    fn validate(&self) -> Result<(), Invalid> {
        self.batch.validate()
    }

    fn check_inputs(&self, inputs: &[Arc<PlanNode>]) -> Result<(), String> {
        match inputs {
            [ops] if ops.stage_as::<ImageOpsSpec>().is_some() => Ok(()),
            _ => Err("a batch fused with image_ops needs that image_ops as its input".into()),
        }
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let input = crate::stages::single_input(inputs, "batch")?;
        let ops = input
            .node()
            .stage_as::<ImageOpsSpec>()
            .ok_or_else(|| Error::invalid("a fused batch's input is not an image_ops"))?
            .clone();
        fuse(input, ops, &self.batch, ctx)
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        crate::stages::batch::batch_from(
            self,
            self.batch.batch_size,
            self.batch.drop_remainder,
            inputs,
            ctx,
            skip,
        )
    }

    fn order_deterministic(&self) -> bool {
        self.batch.order_deterministic()
    }

    fn runs_inline(&self) -> bool {
        self.batch.runs_inline()
    }

    fn computes_in_parallel(&self) -> bool {
        // The rows of a batch are decoded on the run's row threads.
        true
    }
}

/// The fused stream of a `batch` with `spec` (built with `batch_ctx`) over `input`, an
/// `image_ops` with `ops`.
fn fuse(
    input: &Input,
    ops: ImageOpsSpec,
    spec: &BatchSpec,
    batch_ctx: &BuildContext,
) -> Result<BoxStream> {
    let ops = Arc::new(ops);
    let spec = *spec;
    let batch_ctx = batch_ctx.clone();
    input.open_with(move |inputs, ctx, skip| {
        // `image_ops` is one output per input: skipping its outputs skips its input's
        // (a `batch` only asks for a skip under the fail policy).
        let upstream = crate::stages::single_input(inputs, "image_ops")?.skipping(skip);
        let stream = upstream.open()?;
        let skipped = upstream.skipped();
        let key = ctx.stream_key();
        let work_spec = Arc::clone(&ops);
        let rows = ctx.row_pool();
        if let Some(pool) = &rows {
            // The stats show `image_ops` doing the work, on the row threads.
            ctx.metrics().set_row_threads(pool.current_num_threads());
        }
        let work_rows = rows.clone();
        let metrics = Arc::clone(ctx.metrics());
        let work: WorkFn = Arc::new(move |e: Element| {
            work_spec
                .process(e, key, work_rows.as_deref(), Some(&metrics))
                .map(Some)
        });
        Ok((
            Box::new(FusedBatches {
                upstream: stream,
                ops,
                key,
                work,
                ops_ctx: ctx.clone(),
                batch_ctx,
                size: spec.batch_size,
                drop_remainder: spec.drop_remainder,
                pending: VecDeque::new(),
                ahead: None,
                rows,
            }) as BoxStream,
            skipped,
        ))
    })
}

/// Batches of `image_ops`'s output, made from its input (see the [module docs](self)).
struct FusedBatches {
    /// `image_ops`'s input.
    upstream: BoxStream,
    ops: Arc<ImageOpsSpec>,
    /// `image_ops`'s RNG key.
    key: StreamKey,
    /// `image_ops`'s work on one element (for the unfused way).
    work: WorkFn,
    ops_ctx: BuildContext,
    batch_ctx: BuildContext,
    size: usize,
    drop_remainder: bool,
    /// Inputs pulled for a batch that could not be made in one go, to go the unfused way.
    pending: VecDeque<Result<Element>>,
    /// The next batch's inputs, pulled while the row threads made the batch before it.
    ahead: Option<Pulled>,
    /// The run's threads for a batch's rows.
    rows: Option<Arc<rayon::ThreadPool>>,
}

/// One batch of `ops`'s outputs (RNG key `key`) made in one go from `items` (all of
/// `image_ops`'s inputs for it), or `None` when it cannot be (then the unfused way decides
/// what happens).
fn fused_batch(ops: &ImageOpsSpec, key: StreamKey, items: &[Element]) -> Option<Element> {
    let input = ops.input.as_str();
    let output = ops.output.as_deref().unwrap_or(input);
    let mut rows = Vec::with_capacity(items.len());
    for e in items {
        rows.push(e.tensor(input)?.clone());
    }
    let encoded = |t: &Tensor| t.rank() == 0 && t.dtype() == DType::Bytes;
    // What `image_ops` takes for a batch of its own (it would key the rows' RNGs by row).
    let batch_like = |t: &Tensor| t.rank() == 4 || (t.rank() == 1 && t.dtype() == DType::Bytes);
    let mut rngs: Vec<ElementRng> = items.iter().map(|e| key.element_rng(e.id())).collect();
    let images = if rows.iter().all(encoded) {
        // Decoded and augmented straight into the batch's buffer.
        catch_unwind(AssertUnwindSafe(|| ops.run_encoded_rows(&rows, &mut rngs)))
            .ok()?
            .ok()?
    } else if rows.iter().any(batch_like) {
        return None;
    } else {
        // Images already decoded: each row augmented on its own, in parallel, then stacked.
        use rayon::prelude::*;
        let done = catch_unwind(AssertUnwindSafe(|| {
            rows.par_iter()
                .zip(rngs.par_iter_mut())
                .map(|(row, rng)| ops.run(row, rng))
                .collect::<Result<Vec<Tensor>>>()
        }))
        .ok()?
        .ok()?;
        let refs: Vec<&Tensor> = done.iter().collect();
        Tensor::stack(&refs).ok()?
    };
    // The other values batch as `batch` batches them; the images' slot (if the output
    // replaces a value) is held by a placeholder, then filled in place.
    let placeholder = Value::Dense(Tensor::scalar_bytes(bytes::Bytes::new()));
    let parts: Vec<Element> = items
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if e.get(output).is_some() {
                e.insert(output, placeholder.clone());
            }
            e
        })
        .collect();
    let mut batch = combine_dense(&parts).ok()?;
    batch.insert(output, Value::Dense(images));
    Some(batch)
}

impl FusedBatches {
    /// One batch the unfused way (`batch` over `image_ops`): `image_ops`'s work on the
    /// pending inputs first, then the upstream's, with its error policy, batched as `batch`
    /// batches.
    fn batch_unfused(&mut self) -> Option<Result<Element>> {
        let FusedBatches {
            upstream,
            pending,
            work,
            ops_ctx,
            batch_ctx,
            size,
            drop_remainder,
            ..
        } = self;
        let mut pull = || pending.pop_front().or_else(|| upstream.next());
        next_batch(
            || map_next(&mut pull, work, ops_ctx),
            *size,
            *drop_remainder,
            combine_dense,
            batch_ctx,
        )
    }
}

/// The inputs of one batch as pulled: up to a batch of elements, then the error that
/// stopped the pulling early, if one did.
struct Pulled {
    items: Vec<Element>,
    failed: Option<Error>,
}

/// Pulls up to `size` inputs from `upstream`, stopping at the first error or the end.
fn pull(upstream: &mut BoxStream, size: usize) -> Pulled {
    let mut items = Vec::with_capacity(size);
    let mut failed = None;
    while items.len() < size {
        match upstream.next() {
            Some(Ok(e)) => items.push(e),
            Some(Err(e)) => {
                failed = Some(e);
                break;
            }
            None => break,
        }
    }
    Pulled { items, failed }
}

impl ElementStream for FusedBatches {
    fn next(&mut self) -> Option<Result<Element>> {
        if self.pending.is_empty() {
            let Pulled { items, failed } = match self.ahead.take() {
                Some(pulled) => pulled,
                None => pull(&mut self.upstream, self.size),
            };
            if items.is_empty() && failed.is_none() {
                return None;
            }
            let whole = items.len() == self.size || !self.drop_remainder;
            if failed.is_none() && whole {
                let FusedBatches {
                    upstream,
                    ops,
                    key,
                    rows,
                    size,
                    ..
                } = self;
                let (key, size) = (*key, *size);
                let made = match rows {
                    // One row thread pulls (reads and parses) the next batch's inputs while
                    // the others start on this batch's rows, and joins them when done: the
                    // rows do not wait for the reading, and no thread beyond the budget
                    // runs. A batch short of `size` is the last: nothing to pull after it.
                    Some(pool) if items.len() == size => {
                        let (made, next) = pool.install(|| {
                            rayon::join(|| fused_batch(ops, key, &items), || pull(upstream, size))
                        });
                        self.ahead = Some(next);
                        made
                    }
                    Some(pool) => pool.install(|| fused_batch(ops, key, &items)),
                    None => fused_batch(ops, key, &items),
                };
                if let Some(batch) = made {
                    return Some(Ok(batch));
                }
            }
            // The unfused way, from the same inputs in the same order: this batch's, then
            // those already pulled for the next one.
            self.pending.extend(items.into_iter().map(Ok));
            self.pending.extend(failed.map(Err));
            if let Some(Pulled { items, failed }) = self.ahead.take() {
                self.pending.extend(items.into_iter().map(Ok));
                self.pending.extend(failed.map(Err));
            }
        }
        self.batch_unfused()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::ElementId;
    use crate::stages::image_ops::ImageOp;

    fn png(w: u32, h: u32, seed: u8) -> Tensor {
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([seed.wrapping_add(x as u8), y as u8, seed ^ (x * y) as u8])
        });
        let mut out = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        Tensor::scalar_bytes(out.into())
    }

    fn element(i: u64, image: Tensor) -> Element {
        Element::new(ElementId::new(0, i))
            .with("image", image)
            .with("label", Tensor::scalar_i64(i as i64))
    }

    /// As a pipeline runs them: the decode, crop and flip fused into a window decode.
    fn ops() -> ImageOpsSpec {
        written_ops().fused().unwrap()
    }

    fn written_ops() -> ImageOpsSpec {
        ImageOpsSpec::new(vec![
            ImageOp::Decode { channels: Some(3) },
            ImageOp::RandomCrop {
                height: 6,
                width: 5,
            },
            ImageOp::RandomFlipLeftRight { p: 0.5 },
            ImageOp::ToUnitF32,
            ImageOp::RandomContrast {
                lower: 0.5,
                upper: 1.5,
            },
        ])
    }

    /// The fast path itself (the pipeline tests cannot tell it from the unfused way, by
    /// design): it makes the batch, and the batch is the per-element outputs combined.
    #[test]
    fn a_batch_is_made_in_one_go_and_equals_the_elements_combined() {
        let key = StreamKey {
            seed: 5,
            epoch: 0,
            stage: 1,
        };
        let items: Vec<Element> = (0..6).map(|i| element(i, png(9, 8, i as u8))).collect();
        let ops = ops();
        let batch = fused_batch(&ops, key, &items).expect("made in one go");
        let one_by_one: Vec<Element> = items
            .iter()
            .map(|e| ops.process(e.clone(), key, None, None).unwrap())
            .collect();
        assert_eq!(batch, combine_dense(&one_by_one).unwrap());
        assert_eq!(batch.tensor("image").unwrap().shape(), &[6, 6, 5, 3]);
        // Decoded images are augmented row by row, then stacked: the same batch again.
        let decoded: Vec<Element> = items
            .iter()
            .map(|e| {
                let bytes = &e.tensor("image").unwrap().as_bytes_list().unwrap()[0];
                let mut e = e.clone();
                e.insert("image", crate::image::decode_image(bytes, Some(3)).unwrap());
                e
            })
            .collect();
        let ops_after_decode = ImageOpsSpec::new(written_ops().ops[1..].to_vec());
        let from_decoded = fused_batch(&ops_after_decode, key, &decoded).expect("in one go");
        let decoded_one_by_one: Vec<Element> = decoded
            .iter()
            .map(|e| {
                ops_after_decode
                    .process(e.clone(), key, None, None)
                    .unwrap()
            })
            .collect();
        assert_eq!(from_decoded, combine_dense(&decoded_one_by_one).unwrap());
        // Not in one go: a bad image, an image of other rank, a missing image.
        let mut bad = items.clone();
        bad[2].insert(
            "image",
            Tensor::scalar_bytes(bytes::Bytes::from_static(b"nope")),
        );
        assert!(fused_batch(&ops, key, &bad).is_none());
        let mut mixed = items.clone();
        mixed[0].insert("image", Tensor::scalar_i64(3));
        assert!(fused_batch(&ops, key, &mixed).is_none());
        let mut missing = items;
        missing[5].remove("image");
        assert!(fused_batch(&ops, key, &missing).is_none());
    }
}
