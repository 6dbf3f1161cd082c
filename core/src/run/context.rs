//! [`BuildContext`]: what a stage receives when it is built.

use std::sync::Arc;

use crate::autotune::{Knob, KnobKind};
use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::shutdown::Shutdown;
use crate::metrics::StageMetrics;
use crate::options::{ErrorPolicy, Options};
use crate::parallelism::NumParallel;
use crate::rng::{ElementRng, StreamKey};
use crate::stream::BoxStream;

use super::RunShared;
use crate::elastic::run::PointRun;
use crate::elastic::{Unit, Units};

/// What a stage receives when built: the pipeline's seed and options, the epoch, its own
/// number, name and metrics, and the shutdown signal its threads must observe.
#[derive(Debug, Clone)]
pub struct BuildContext {
    pub(crate) shared: Arc<RunShared>,
    pub(crate) epoch: u64,
    pub(crate) index: usize,
    /// The stage's name as stats, errors and `explain` show it (`display_name`).
    pub(crate) name: Arc<str>,
    pub(crate) metrics: Arc<StageMetrics>,
    /// The unit point this stage is, when the epoch's records are followed.
    pub(crate) point: Option<Arc<PointRun>>,
}

impl BuildContext {
    /// A context for a stage's unit test: stage `index` named `name`, in a run of seed 1
    /// with default options, the given autotuner (its knobs made by the test), metrics and
    /// shutdown, a ledger of 1 GiB; records not followed, nothing traced.
    #[cfg(test)]
    pub(crate) fn for_test(
        index: usize,
        name: &str,
        autotune: Arc<crate::autotune::Autotuner>,
        metrics: Arc<StageMetrics>,
        shutdown: crate::executor::shutdown::Shutdown,
    ) -> BuildContext {
        BuildContext {
            shared: Arc::new(RunShared {
                seed: 1,
                options: Options::default(),
                shutdown,
                stats: Arc::new(crate::metrics::StatsRegistry::new()),
                autotune,
                indices: std::collections::HashMap::new(),
                rows: Default::default(),
                elastic: None,
                ledger: super::ByteLedger::new(1 << 30),
                tracer: None,
                observe: Default::default(),
                kept_mappings: None,
            }),
            epoch: 0,
            index,
            name: name.into(),
            metrics,
            point: None,
        }
    }

    /// The pipeline's seed.
    pub fn seed(&self) -> u64 {
        self.shared.seed
    }

    /// The epoch (distinct for every repetition inside `repeat` too).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The stage's number in the pipeline.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Reports the records of elements this stage dropped (filtered out, a batch remainder
    /// left out, failed under the skip policy): they are done for this epoch, as delivered
    /// ones are, and an elastic resume does not read them again (see [`crate::elastic`]).
    pub fn dropped(&self, units: &Units) {
        if let Some(t) = self.shared.elastic.as_ref().and_then(|e| e.tracking()) {
            t.progress.dropped(units);
        }
    }

    /// A file reader reached the end of file `file` (its index in the file list) after
    /// `count` records (the next record index): the file's lanes have ended.
    pub fn file_ended(&self, file: u64, count: u64) {
        if let Some(t) = self.shared.elastic.as_ref().and_then(|e| e.tracking()) {
            t.file_ended(self.index, file, count);
        }
    }

    /// In an epoch resumed on another number of hosts: where this file reader may start
    /// reading file `file` (its index in the file list): `(record index, byte offset)` of a
    /// record such that every record before it that this host reads is done. A reader
    /// that can (an uncompressed file) starts there instead of at the file's start.
    pub fn resume_seek(&self, file: u64) -> Option<(u64, u64)> {
        self.shared
            .elastic
            .as_ref()
            .and_then(|e| e.tracking())
            .and_then(|t| t.seek(self.index, file))
    }

    /// Whether `unit`, a part of a record, was delivered before this run (an epoch resumed
    /// elastically after part of the record's rows were delivered): a stage splitting
    /// records into parts leaves such parts out.
    pub fn delivered_before(&self, unit: &Unit) -> bool {
        self.shared
            .elastic
            .as_ref()
            .and_then(|e| e.tracking())
            .is_some_and(|t| t.delivered_before(unit))
    }

    /// The unit point this stage is in an epoch whose records are followed (a global
    /// shuffle marks its records and reads this host's lanes itself).
    pub(crate) fn unit_point(&self) -> Option<&Arc<PointRun>> {
        self.point.as_ref()
    }

    /// Record `index` of file `file` (starting at byte `offset`), read by this file reader
    /// itself rather than through the unit point's own marking (a reader fused with the
    /// `batch` after it): `None` when this host does not read it (see
    /// [`crate::elastic`]); otherwise its unit, or `None` inside when records are not
    /// followed here.
    pub(crate) fn stamp_record(&self, file: u64, index: u64, offset: u64) -> Option<Option<Unit>> {
        let Some(point) = &self.point else {
            return Some(None);
        };
        let tracking = self.shared.elastic.as_ref().and_then(|e| e.tracking());
        point.stamp(tracking, file, index, Some(offset)).map(Some)
    }

    /// The stream of this unit point has `count` positions in all (a global shuffle's
    /// permutation, known once indexed): its lanes' ends.
    pub(crate) fn unit_point_ended(&self, count: u64) {
        if let (Some(point), Some(t)) = (
            &self.point,
            self.shared.elastic.as_ref().and_then(|e| e.tracking()),
        ) {
            t.progress.end_of_stream(point.space, count);
        }
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

    /// The run's byte ledger (see [`super::ledger`]).
    pub fn ledger(&self) -> &Arc<super::ByteLedger> {
        &self.shared.ledger
    }

    /// A new buffer's account in the run's byte ledger, named for this stage.
    pub(crate) fn account(&self) -> Arc<super::ledger::Account> {
        Arc::new(super::ledger::Account::new(
            &self.shared.ledger,
            self.stage_label(),
        ))
    }

    /// The error of `element`, `n` bytes, larger than the whole RAM budget (this stage's
    /// context, the error policy applied: `None` when skipped).
    pub(crate) fn too_large(&self, element: &Element, n: u64) -> Option<Error> {
        let error = super::ledger::too_large(n, self.shared.ledger.budget(), &self.stage_label());
        self.on_element_error(element, error)
    }

    /// The stage's live metrics.
    pub fn metrics(&self) -> &Arc<StageMetrics> {
        &self.metrics
    }

    /// The run's tracer, when it is traced ([`crate::observe`]): stages with threads of
    /// their own record their work and waits on it; plugin stages their calls.
    pub fn tracer(&self) -> Option<&crate::observe::Tracer> {
        self.shared.tracer.as_ref()
    }

    /// What [`Instrumented`](crate::stream) spans this stage with: the tracer, the stage's
    /// name and number.
    pub(crate) fn stage_tracer(&self) -> Option<crate::stream::StageTracer> {
        self.shared
            .tracer
            .clone()
            .map(|t| (t, Arc::clone(&self.name), self.index))
    }

    /// Records the span of this stage's work from `start` to now on the calling thread
    /// (`elements` produced), when the run is traced: for stages whose work runs on
    /// threads of their own.
    pub fn trace_work(&self, start: std::time::Instant, elements: u64) {
        if let Some(t) = &self.shared.tracer {
            t.stage_span(
                self.index,
                &self.name,
                start,
                std::time::Instant::now(),
                elements,
            );
        }
    }

    /// Records a blocked wait of this stage from `start` to now (`what`: `wait upstream`,
    /// `wait downstream`), when the run is traced and the wait was long enough to matter.
    pub(crate) fn trace_wait(&self, what: &'static str, start: std::time::Instant) {
        if let Some(t) = &self.shared.tracer {
            let end = std::time::Instant::now();
            if end.duration_since(start) >= crate::observe::MIN_WAIT {
                t.span("wait", &Arc::from(what), Some(self.index), start, end);
            }
        }
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

    /// `name#number`, as stats, errors and `explain` name the stage (e.g.
    /// `plugin:gray_solarize#3`).
    pub fn stage_label(&self) -> String {
        format!("{}#{}", self.name, self.index)
    }

    /// Wraps an error raised while processing `element` with this stage's context.
    pub fn element_error(&self, element: &Element, error: Error) -> Error {
        Error::Stage {
            stage: self.stage_label(),
            element: Some(element.id()),
            provenance: element.provenance().cloned(),
            error: Box::new(error),
        }
    }

    /// Wraps an error not tied to one element with this stage's context.
    pub fn stream_error(&self, error: Error) -> Error {
        Error::Stage {
            stage: self.stage_label(),
            element: None,
            provenance: None,
            error: Box::new(error),
        }
    }

    /// Applies the error policy to an error raised in this stage: `Some(error)` to pass
    /// down the stream (fail), `None` when it was skipped and counted (skip).
    pub fn on_error(&self, error: Error) -> Option<Error> {
        self.on_error_dropping(error, 1)
    }

    /// [`BuildContext::on_error`] for an error raised while processing `element` (wrapped
    /// with this stage's context, [`BuildContext::element_error`]): under skip, the
    /// element's records are reported dropped too.
    pub fn on_element_error(&self, element: &Element, error: Error) -> Option<Error> {
        let out = self.on_error(self.element_error(element, error));
        if out.is_none() {
            self.skipped(element.units());
        }
        out
    }

    /// [`BuildContext::on_error`] for an error that drops `n` elements at once (a failed
    /// chunk of `map_chunks`, a batch that cannot be assembled): under skip, all `n` are
    /// counted.
    pub fn on_error_dropping(&self, error: Error, n: u64) -> Option<Error> {
        match self.error_policy() {
            ErrorPolicy::Fail => Some(error),
            ErrorPolicy::Skip => {
                tracing::debug!(stage = %self.stage_label(), %error, dropped = n, "skipped");
                self.shared.observe.skipped(&self.stage_label(), &error, n);
                self.metrics.add_skipped(n);
                self.skipped_below_points(n);
                None
            }
        }
    }

    /// Runs `dataset` inside this stage (the sub-datasets of `interleave`): its plan is
    /// optimized and checked like a pipeline's, and its stages are built with this stage's
    /// context: they count into this stage's statistics, name it in their errors and draw
    /// from its random stream (keyed by element id). Dropping the stream stops it.
    pub fn open_dataset(&self, dataset: &Dataset) -> Result<BoxStream> {
        let plan = crate::optimize::Optimizer::default()
            .optimize(dataset.plan(), self.options())?
            .plan;
        super::check(&plan, &super::number(&plan))?;
        super::build_nested(&plan, self, self.epoch, 0).map(|(stream, _)| stream)
    }
}
