//! [`PipelineIter`]: the iterator of one epoch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::autotune::Autotuner;
use crate::checkpoint::{CHECKPOINT_VERSION, Checkpoint, ElasticCheckpoint};
use crate::dataset::{Dataset, RunState};
use crate::elastic::progress::ProgressSnapshot;
use crate::elastic::run::ElasticRun;
use crate::elastic::space::unit_points;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::shutdown::{Shutdown, ShutdownTrigger};
use crate::metrics::StatsRegistry;
use crate::optimize::Optimized;
use crate::plan::{self, PlanNode};
use crate::stats::PipelineStats;
use crate::stream::BoxStream;

use super::kept_mappings::KeptMappings;
use super::{RunShared, build_node};
use crate::sync::LockExt;

/// The iterator of one epoch. Ends at the first error (which it yields) or at the end.
/// Dropping it stops and joins the pipeline's threads.
pub struct PipelineIter {
    stream: Option<BoxStream>,
    stats: Arc<StatsRegistry>,
    autotune: Arc<Autotuner>,
    state: Arc<RunState>,
    /// The bytes held in the run's buffers.
    ledger: Arc<super::ByteLedger>,
    dataset: Dataset,
    /// The plan that runs, and its stage numbers.
    plan: Arc<PlanNode>,
    indices: Arc<std::collections::HashMap<usize, usize>>,
    seed: u64,
    epoch: u64,
    /// Elements yielded in this epoch (counting those a resume skipped).
    position: u64,
    /// An error was yielded.
    failed: bool,
    done: bool,
    /// Set by a [`Canceller`].
    cancelled: Arc<AtomicBool>,
    /// The epoch's records, as elastic checkpoints follow them.
    elastic: Arc<ElasticRun>,
    /// Samples the run for its observers (trace counters, timeline).
    sampler: crate::observe::Sampler,
    /// The run's tracer, if traced.
    tracer: Option<crate::observe::Tracer>,
    // Dropped after `stream` (fields drop in order): first the streams stop and join their
    // threads, and the trigger is set first in `drop` so blocked threads wake at once.
    trigger: Arc<ShutdownTrigger>,
}

/// Cancels an iteration from another thread ([`PipelineIter::canceller`]): the pipeline's
/// threads stop, and the iterator's `next` (if waiting, as soon as it wakes) yields
/// [`Error::Cancelled`] and then ends. What a front end calls on Ctrl-C.
#[derive(Debug, Clone)]
pub struct Canceller {
    trigger: Arc<ShutdownTrigger>,
    cancelled: Arc<AtomicBool>,
}

impl Canceller {
    /// Cancels the iteration.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        self.trigger.fire();
    }

    /// Whether [`cancel`](Canceller::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }
}

impl PipelineIter {
    /// Builds `dataset`'s plan that runs for `seed` and `epoch`, fast-forwarded `skip`
    /// elements; `before`: the progress of the checkpoint being resumed exactly (what was
    /// done up to `skip`).
    pub(crate) fn start(
        dataset: &Dataset,
        seed: u64,
        epoch: u64,
        skip: u64,
        before: Option<&ProgressSnapshot>,
    ) -> Result<Self> {
        let optimized = dataset.optimized()?;
        let layout = crate::elastic::space::layout_of(dataset.plan());
        let elastic = match layout {
            Ok(layout) => ElasticRun::start(
                layout,
                unit_points(&optimized.plan, &optimized.numbers),
                &optimized.numbers,
                before,
            ),
            Err((layout, why)) => ElasticRun::Blocked { layout, why },
        };
        Self::start_with(dataset, optimized, seed, epoch, skip, elastic)
    }

    /// Builds the plan `optimized` (for `dataset`, whose statistics and state it keeps) for
    /// `seed` and `epoch`, fast-forwarded `skip` elements, its records followed as `elastic`
    /// says.
    pub(crate) fn start_with(
        dataset: &Dataset,
        optimized: Arc<Optimized>,
        seed: u64,
        epoch: u64,
        skip: u64,
        elastic: ElasticRun,
    ) -> Result<Self> {
        let options = dataset.options();
        let (trigger, shutdown) = Shutdown::new();
        let stats = Arc::new(StatsRegistry::new());
        let state = dataset.state();
        let learned = state.learned.locked().clone();
        let observe = state.observe.locked().clone();
        let autotune = Autotuner::new(
            learned,
            options.ram_budget,
            options.cpu_budget,
            &stats,
            shutdown.clone(),
            observe.clone(),
        );
        let elastic = Arc::new(elastic);
        let ledger = super::ByteLedger::new(options.ram_budget);
        let kept_mappings = KeptMappings::wanted(&optimized.plan)
            .then(|| KeptMappings::new(options.ram_budget / 4));
        let shared = Arc::new(RunShared {
            seed,
            options,
            shutdown: shutdown.clone(),
            stats: Arc::clone(&stats),
            autotune: Arc::clone(&autotune),
            indices: optimized.numbers.as_ref().clone(),
            rows: Default::default(),
            elastic: Some(Arc::clone(&elastic)),
            ledger: Arc::clone(&ledger),
            tracer: observe.tracer().cloned(),
            observe: observe.clone(),
            kept_mappings,
        });
        let sampler = crate::observe::Sampler::start(
            &observe,
            crate::observe::sampler_sources(epoch, &stats, &autotune, &ledger, &elastic),
            shutdown,
        );
        *state.last.locked() = Some((
            Arc::clone(&stats),
            Arc::clone(&autotune),
            Arc::clone(&elastic),
        ));
        let mut iter = PipelineIter {
            stream: None,
            stats,
            autotune,
            state: Arc::clone(state),
            ledger,
            dataset: dataset.clone(),
            plan: Arc::clone(&optimized.plan),
            indices: Arc::clone(&optimized.numbers),
            seed,
            epoch,
            position: skip,
            failed: false,
            done: false,
            cancelled: Arc::default(),
            elastic,
            sampler,
            tracer: observe.tracer().cloned(),
            trigger: Arc::new(trigger),
        };
        let (stream, skipped) = build_node(&optimized.plan, &shared, epoch, skip)?;
        if skipped < skip {
            return Err(Error::Checkpoint(format!(
                "epoch {epoch} has {skipped} elements, fewer than the checkpoint's position {skip}"
            )));
        }
        iter.stream = Some(stream);
        Ok(iter)
    }

    /// Statistics of this run so far.
    pub fn stats(&self) -> PipelineStats {
        PipelineStats::of(&self.stats, Some(&self.autotune))
            .with_records(self.elastic.tracking().and_then(|t| t.progress.counts()))
    }

    /// What the run's buffers hold in bytes now, at most so far, and the RAM budget
    /// (see [`ByteLedger`](super::ByteLedger)).
    pub fn memory(&self) -> super::MemoryUsage {
        self.ledger.usage()
    }

    /// The run's byte ledger, to watch what its buffers hold while it runs (from another
    /// thread, or from a function inside the pipeline).
    pub fn ledger(&self) -> Arc<super::ByteLedger> {
        Arc::clone(&self.ledger)
    }

    /// Where this iteration is: a small [`Checkpoint`] (seed, epoch, elements yielded,
    /// the pipeline's fingerprint) to give to [`Dataset::resume`], here or in another
    /// process. Its size does not depend on buffer sizes: buffers are re-derived on resume.
    ///
    /// Fails when a stage's output order depends on thread timing (`deterministic =
    /// false`), or after the iterator yielded an error.
    pub fn checkpoint(&self) -> Result<Checkpoint> {
        if self.failed {
            return Err(Error::Checkpoint(
                "the iteration ended with an error: resume from an earlier checkpoint".into(),
            ));
        }
        if let Some(stage) = self.nondeterministic_stage() {
            return Err(Error::Checkpoint(format!(
                "stage {stage} runs with deterministic = false: its order depends on thread timing, so a position in its output cannot be resumed"
            )));
        }
        Ok(Checkpoint {
            version: CHECKPOINT_VERSION,
            fingerprint: self.dataset.resume_fingerprint(),
            seed: self.seed,
            epoch: self.epoch,
            position: self.position,
            elastic: Some(self.elastic_checkpoint()),
        })
    }

    /// What an elastic resume needs of this host: the epoch's layout and this host's
    /// progress, or why there is none.
    fn elastic_checkpoint(&self) -> ElasticCheckpoint {
        let layout = self.elastic.layout();
        let (progress, unavailable) = match &*self.elastic {
            ElasticRun::Blocked { why, .. } => (None, Some(why.clone())),
            ElasticRun::Tracking(t) => match t.progress.snapshot() {
                Ok(snapshot) => (Some(crate::elastic::encoding::encode(&snapshot)), None),
                Err(why) => (None, Some(why)),
            },
        };
        ElasticCheckpoint {
            fingerprint: layout.fingerprint.clone(),
            layout: layout.shards.clone(),
            generation: layout.generation,
            hosts: layout.hosts,
            host: layout.host,
            progress,
            unavailable,
        }
    }

    /// The first stage (as `name#number`, sources first) whose output order depends on
    /// thread timing, if any: such a pipeline cannot be checkpointed.
    fn nondeterministic_stage(&self) -> Option<String> {
        plan::nodes(&self.plan)
            .into_iter()
            .find(|n| !n.stage().order_deterministic())
            .map(|n| format!("{}#{}", n.stage().display_name(), self.indices[&n.key()]))
    }

    /// Elements yielded in this epoch so far (with those a resume skipped).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// A handle that cancels this iteration from any thread (see [`Canceller`]).
    pub fn canceller(&self) -> Canceller {
        Canceller {
            trigger: Arc::clone(&self.trigger),
            cancelled: Arc::clone(&self.cancelled),
        }
    }

    /// Stops the tuner and keeps what it learned for the next run of the dataset.
    fn stop_autotune(&mut self) {
        self.trigger.fire();
        self.autotune.join();
        self.sampler.stop();
        let learned = self.autotune.learned();
        if !learned.is_empty() {
            *self.state.learned.locked() = learned;
        }
    }
}

impl Iterator for PipelineIter {
    type Item = Result<Element>;

    fn next(&mut self) -> Option<Result<Element>> {
        if self.done {
            return None;
        }
        let cancelled = || self.cancelled.load(Ordering::Acquire);
        let item = if cancelled() {
            None
        } else {
            // Code running on this thread inside the stages (a plugin call) finds the
            // run's tracer.
            crate::observe::Tracer::set_current(self.tracer.as_ref());
            self.stream.as_mut()?.next()
        };
        // The element is the caller's now: out of the run's buffers.
        super::ledger::settle();
        // Cancelled while waiting (the streams end on shutdown) or before: say so, once.
        let item = match item {
            Some(Ok(_)) | None | Some(Err(_)) if cancelled() => Some(Err(Error::Cancelled)),
            other => other,
        };
        match &item {
            Some(Ok(e)) => {
                self.position += 1;
                self.stats.produced();
                if let Some(t) = self.elastic.tracking() {
                    t.progress.delivered(e.units());
                }
            }
            Some(Err(_)) | None => {
                self.failed |= item.is_some();
                self.done = true;
                // Stop the threads now rather than when the iterator is dropped.
                self.stream = None;
                self.stop_autotune();
            }
        }
        item
    }
}

impl Drop for PipelineIter {
    fn drop(&mut self) {
        self.trigger.fire();
        self.stream = None;
        self.stop_autotune();
    }
}

impl std::fmt::Debug for PipelineIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineIter")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
