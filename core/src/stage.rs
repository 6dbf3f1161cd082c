//! The stage trait and what a stage receives when it is built.

use std::any::Any;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use crate::autotune::{Autotuner, Knob, KnobKind};
use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::shutdown::Shutdown;
use crate::options::{ErrorPolicy, Options};
use crate::rng::{ElementRng, StreamKey};
use crate::stats::{StageMetrics, StatsRegistry};
use crate::stream::{BoxStream, Instrumented};

/// A stage of a pipeline: the definition (usually a serde `*Spec` of what the user wrote)
/// that [`Stage::build`] turns into a running [`BoxStream`] for one epoch.
///
/// Only `name`, `build` and `as_any` are required; the hooks have defaults.
pub trait Stage: Send + Sync + fmt::Debug + 'static {
    /// The stage's kind, e.g. `"map"`.
    fn name(&self) -> &'static str;

    /// The name stats show for this stage. Default: [`Stage::name`]; a stage running
    /// user code may name that code (e.g. `plugin:gaussian_noise`).
    fn display_name(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.name())
    }

    /// Starts the stage for one epoch over its inputs (opened or not, as it needs).
    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream>;

    /// For downcasting in the builder.
    fn as_any(&self) -> &dyn Any;

    /// A description that changes whenever the stage's output could change; used to
    /// fingerprint caches. Default: the `Debug` form.
    fn fingerprint(&self) -> String {
        format!("{self:?}")
    }

    /// True (the default) when the stage does its work inside `next` on the consumer's
    /// thread; stages with worker threads return false and record their own busy time.
    fn runs_inline(&self) -> bool {
        true
    }

    /// Starts the stage for one epoch after its first `skip` outputs, returning the stream
    /// and how many outputs were skipped (fewer than `skip` only when the epoch ended
    /// first). Resuming from a [`Checkpoint`](crate::Checkpoint) uses it.
    ///
    /// The default builds the stage and pulls and drops `skip` outputs, which is right for
    /// every stage. Stages whose output count maps to their inputs' without running their
    /// work override it to fast-forward their inputs instead: a 1:1 map skips the same
    /// number of inputs without calling its function, a batch `skip × batch_size`, a source
    /// seeks. Inputs are fast-forwarded before the stage starts threads that pull from them.
    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        let mut stream = self.build(inputs, ctx)?;
        let skipped = discard(&mut stream, skip)?;
        Ok((stream, skipped))
    }

    /// Whether the order of the stage's output is a function of its input (true by
    /// default). A stage that hands out results as threads finish (`deterministic =
    /// false`) returns false, and a pipeline holding one cannot be checkpointed.
    fn order_deterministic(&self) -> bool {
        true
    }

    /// What identifies the stage's output for checkpoints: like
    /// [`fingerprint`](Stage::fingerprint), without the settings that do not change a
    /// deterministic stage's elements (`num_parallel` fields; `prefetch` leaves out its
    /// buffer size), so a run can be resumed with other thread counts and buffers.
    fn resume_fingerprint(&self) -> String {
        without_parallelism(&self.fingerprint())
    }
}

/// Pulls and drops up to `n` elements; returns how many there were. An error is returned:
/// an uninterrupted run would have ended with it before the position being skipped to.
pub(crate) fn discard(stream: &mut BoxStream, n: u64) -> Result<u64> {
    let mut k = 0;
    while k < n {
        match stream.next() {
            Some(Ok(_)) => k += 1,
            Some(Err(e)) => return Err(e),
            None => break,
        }
    }
    Ok(k)
}

/// Removes `num_parallel: ...` fields from a `Debug` form.
pub(crate) fn without_parallelism(debug: &str) -> String {
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug;
    while let Some(at) = rest.find("num_parallel: ") {
        out.push_str(&rest[..at]);
        // Skip the value: up to the next ',' or '}' at nesting depth 0.
        let value = &rest[at..];
        let mut depth = 0i32;
        let mut end = value.len();
        for (i, c) in value.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = value[end..].trim_start();
    }
    out.push_str(rest);
    out
}

/// How many threads a parallel stage uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NumParallel {
    /// Run on the consumer's thread, element by element (tf.data's default for `map`).
    #[default]
    #[serde(skip)]
    Sequential,
    /// This many worker threads (capped by the CPU budget).
    Fixed(usize),
    /// Chosen by the runtime within the CPU budget (written `"auto"`).
    #[serde(with = "auto_str")]
    Auto,
}

mod auto_str {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("auto")
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
        let s = String::deserialize(d)?;
        if s == "auto" {
            Ok(())
        } else {
            Err(serde::de::Error::custom(format!(
                "expected a number or \"auto\", got {s:?}"
            )))
        }
    }
}

impl NumParallel {
    /// Worker threads to start (0: sequential) within `cpu_budget`.
    pub fn workers(self, cpu_budget: usize) -> usize {
        match self {
            NumParallel::Sequential => 0,
            NumParallel::Fixed(n) => n.clamp(1, cpu_budget.max(1)),
            NumParallel::Auto => cpu_budget.max(1),
        }
    }
}

impl From<usize> for NumParallel {
    fn from(n: usize) -> Self {
        NumParallel::Fixed(n)
    }
}

/// What is shared by every stage of one running pipeline.
#[derive(Debug)]
pub(crate) struct RunShared {
    pub(crate) seed: u64,
    pub(crate) options: Options,
    pub(crate) shutdown: Shutdown,
    pub(crate) stats: Arc<StatsRegistry>,
    /// The run's autotuner (knobs of `auto` settings).
    pub(crate) autotune: Arc<Autotuner>,
    /// Stage index of each node, keyed by the node's address.
    pub(crate) indices: HashMap<usize, usize>,
    /// The threads that run the rows of a batch in parallel (`image_ops` on batches),
    /// `cpu_budget` of them, started on first use and ended with the run.
    pub(crate) rows: OnceLock<Option<Arc<rayon::ThreadPool>>>,
}

impl RunShared {
    /// The run's pool for a batch's rows ([`RunShared::rows`]); `None` if its threads could
    /// not be started (the rows then run on rayon's global pool).
    pub(crate) fn row_pool(&self) -> Option<Arc<rayon::ThreadPool>> {
        self.rows
            .get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(self.options.cpu_budget.max(1))
                    .thread_name(|i| format!("sluice-rows-{i}"))
                    .build()
                    .map_err(|e| tracing::warn!(%e, "no pool for batch rows"))
                    .ok()
                    .map(Arc::new)
            })
            .clone()
    }
}

/// What a stage receives when built: the pipeline's seed and options, the epoch, its own
/// index and metrics, and the shutdown signal its threads must observe.
#[derive(Debug, Clone)]
pub struct BuildContext {
    pub(crate) shared: Arc<RunShared>,
    pub(crate) epoch: u64,
    pub(crate) index: usize,
    pub(crate) name: &'static str,
    pub(crate) metrics: Arc<StageMetrics>,
}

impl BuildContext {
    /// The pipeline's seed.
    pub fn seed(&self) -> u64 {
        self.shared.seed
    }

    /// The epoch (distinct for every repetition inside `repeat` too).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The stage's index in the pipeline.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The pipeline's options.
    pub fn options(&self) -> &Options {
        &self.shared.options
    }

    /// The pipeline's error policy.
    pub fn error_policy(&self) -> ErrorPolicy {
        self.shared.options.error_policy
    }

    /// The run's threads for the rows of a batch (`cpu_budget` of them), if they started.
    pub(crate) fn row_pool(&self) -> Option<Arc<rayon::ThreadPool>> {
        self.shared.row_pool()
    }

    /// The stage's live metrics.
    pub fn metrics(&self) -> &Arc<StageMetrics> {
        &self.metrics
    }

    /// The pipeline's shutdown signal.
    pub fn shutdown(&self) -> &Shutdown {
        &self.shared.shutdown
    }

    /// The autotuned value of this stage's `kind` setting, starting at `initial` within
    /// `min..=max` (see [`crate::autotune`]). The same knob is returned when `repeat`
    /// rebuilds the stage; the stage reads [`Knob::get`] as it runs.
    pub fn autotuned(&self, kind: KnobKind, initial: usize, bounds: (usize, usize)) -> Arc<Knob> {
        self.shared.autotune.knob(
            self.index,
            self.stage_label(),
            kind,
            initial,
            bounds,
            &self.metrics,
        )
    }

    /// Worker threads for `num_parallel`: how many to start, and the knob that says how
    /// many of them work when it is `auto` (they start all working).
    pub fn parallelism(&self, num_parallel: NumParallel) -> (usize, Option<Arc<Knob>>) {
        let budget = self.options().cpu_budget.max(1);
        match num_parallel {
            NumParallel::Auto => {
                let knob = self.autotuned(KnobKind::NumParallel, budget, (1, budget));
                (budget, Some(knob))
            }
            n => (n.workers(budget), None),
        }
    }

    /// The RNG stream of this stage in this epoch.
    pub fn stream_key(&self) -> StreamKey {
        StreamKey {
            seed: self.shared.seed,
            epoch: self.epoch,
            stage: self.index as u64,
        }
    }

    /// The RNG of one element in this stage and epoch.
    pub fn element_rng(&self, element: &Element) -> ElementRng {
        self.stream_key().element_rng(element.id())
    }

    /// `stage#index`, as errors name the stage.
    pub fn stage_label(&self) -> String {
        format!("{}#{}", self.name, self.index)
    }

    /// Wraps an error raised while processing `element` with this stage's context.
    pub fn element_error(&self, element: &Element, error: Error) -> Error {
        Error::Stage {
            stage: self.stage_label(),
            element: Some(element.id()),
            provenance: element.provenance().cloned(),
            source: Box::new(error),
        }
    }

    /// Wraps an error not tied to one element with this stage's context.
    pub fn stream_error(&self, error: Error) -> Error {
        Error::Stage {
            stage: self.stage_label(),
            element: None,
            provenance: None,
            source: Box::new(error),
        }
    }

    /// Applies the error policy to an error raised in this stage: `Some(error)` to pass
    /// down the stream (fail), `None` when it was skipped and counted (skip).
    pub fn on_error(&self, error: Error) -> Option<Error> {
        self.on_error_dropping(error, 1)
    }

    /// [`BuildContext::on_error`] for an error that drops `n` elements at once (a failed
    /// chunk of `map_chunks`, a batch that cannot be assembled): under skip, all `n` are
    /// counted.
    pub fn on_error_dropping(&self, error: Error, n: u64) -> Option<Error> {
        match self.error_policy() {
            ErrorPolicy::Fail => Some(error),
            ErrorPolicy::Skip => {
                tracing::debug!(stage = %self.stage_label(), %error, dropped = n, "skipped");
                self.metrics.add_skipped(n);
                None
            }
        }
    }
}

/// An input of a stage: a dataset that can be opened (and, by `repeat`, re-opened).
#[derive(Debug, Clone)]
pub struct Input {
    pub(crate) dataset: Dataset,
    pub(crate) shared: Arc<RunShared>,
    pub(crate) epoch: u64,
    /// Outputs to fast-forward past when opened (see [`Stage::build_from`]).
    pub(crate) skip: u64,
    /// How many were skipped at the last open.
    pub(crate) skipped: Arc<AtomicU64>,
}

impl Input {
    /// Opens the input for the current epoch.
    pub fn open(&self) -> Result<BoxStream> {
        self.open_epoch(self.epoch)
    }

    /// Opens the input for another epoch key (used by `repeat` for each repetition).
    pub fn open_epoch(&self, epoch: u64) -> Result<BoxStream> {
        let (stream, skipped) = build_node_from(&self.dataset, &self.shared, epoch, self.skip)?;
        self.skipped.store(skipped, Ordering::Relaxed);
        Ok(stream)
    }

    /// Opens the input's node built by `build` instead of by its stage: `build` gets the
    /// node's inputs, its context (index, metrics, RNG key: the node's own) and the outputs
    /// to skip, and returns the stream and how many it skipped. Stats see the node as
    /// usual, its work timed on the consumer's thread. For fusions: `batch` runs the
    /// `image_ops` before it on whole batches.
    pub(crate) fn open_with(
        &self,
        build: impl FnOnce(&[Input], &BuildContext, u64) -> Result<(BoxStream, u64)>,
    ) -> Result<BoxStream> {
        let (stream, skipped) = build_node_with(
            &self.dataset,
            &self.shared,
            self.epoch,
            self.skip,
            true,
            build,
        )?;
        self.skipped.store(skipped, Ordering::Relaxed);
        Ok(stream)
    }

    /// This input, opening after its first `n` outputs (for [`Stage::build_from`]).
    pub fn skipping(&self, n: u64) -> Input {
        Input {
            dataset: self.dataset.clone(),
            shared: Arc::clone(&self.shared),
            epoch: self.epoch,
            skip: n,
            skipped: Arc::default(),
        }
    }

    /// How many outputs the last open skipped (fewer than asked only if the input ended).
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// The input's definition.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// The epoch this input opens with by default.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// Builds a node for one epoch after its first `skip` outputs (see [`Stage::build_from`]).
pub(crate) fn build_node_from(
    dataset: &Dataset,
    shared: &Arc<RunShared>,
    epoch: u64,
    skip: u64,
) -> Result<(BoxStream, u64)> {
    let stage = dataset.stage();
    build_node_with(
        dataset,
        shared,
        epoch,
        skip,
        stage.runs_inline(),
        |inputs, ctx, skip| {
            if skip == 0 {
                Ok((stage.build(inputs, ctx)?, 0))
            } else {
                stage.build_from(inputs, ctx, skip)
            }
        },
    )
}

/// [`build_node_from`] with the stream made by `build` (see [`Input::open_with`]);
/// `inline`: the stream does its work inside `next` on the consumer's thread.
fn build_node_with(
    dataset: &Dataset,
    shared: &Arc<RunShared>,
    epoch: u64,
    skip: u64,
    inline: bool,
    build: impl FnOnce(&[Input], &BuildContext, u64) -> Result<(BoxStream, u64)>,
) -> Result<(BoxStream, u64)> {
    let stage = dataset.stage();
    let index = *shared
        .indices
        .get(&dataset.node_key())
        .expect("every node is indexed before building");
    let input_indices = dataset
        .inputs()
        .iter()
        .filter_map(|d| shared.indices.get(&d.node_key()).copied())
        .collect();
    let metrics = shared
        .stats
        .register(index, &stage.display_name(), input_indices);
    let ctx = BuildContext {
        shared: Arc::clone(shared),
        epoch,
        index,
        name: stage.name(),
        metrics: Arc::clone(&metrics),
    };
    let inputs: Vec<Input> = dataset
        .inputs()
        .iter()
        .map(|d| Input {
            dataset: d.clone(),
            shared: Arc::clone(shared),
            epoch,
            skip: 0,
            skipped: Arc::default(),
        })
        .collect();
    let (inner, skipped) = build(&inputs, &ctx, skip)?;
    Ok((Box::new(Instrumented::new(inner, metrics, inline)), skipped))
}

/// [`Stage::build_from`] for a stage with one output per input (under the fail policy):
/// its inputs skip `skip` elements, unread, and the stage is built over them.
pub(crate) fn build_one_to_one(
    stage: &dyn Stage,
    inputs: &[Input],
    ctx: &BuildContext,
    skip: u64,
) -> Result<(BoxStream, u64)> {
    if ctx.error_policy() != ErrorPolicy::Fail {
        // Skipped failures change the count: replay.
        let mut stream = stage.build(inputs, ctx)?;
        let skipped = discard(&mut stream, skip)?;
        return Ok((stream, skipped));
    }
    let skipping: Vec<Input> = inputs.iter().map(|i| i.skipping(skip)).collect();
    let stream = stage.build(&skipping, ctx)?;
    let skipped = skipping.iter().map(Input::skipped).min().unwrap_or(0);
    Ok((stream, skipped))
}

#[cfg(test)]
mod tests {
    use super::without_parallelism;

    #[test]
    fn parallelism_is_left_out_of_resume_fingerprints() {
        assert_eq!(
            without_parallelism("map(MapSpec { num_parallel: Fixed(2), deterministic: true }, f)"),
            "map(MapSpec { deterministic: true }, f)"
        );
        assert_eq!(
            without_parallelism("ShuffleSpec { buffer_size: 10 }"),
            "ShuffleSpec { buffer_size: 10 }"
        );
        assert_eq!(
            without_parallelism("X { a: 1, num_parallel: Sequential }"),
            "X { a: 1, }"
        );
        assert_eq!(without_parallelism("plain"), "plain");
    }
}
