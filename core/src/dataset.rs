//! [`Dataset`]: a pipeline as written (a [plan](crate::plan)), and running it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::autotune::{Autotuner, Learned};
use crate::checkpoint::{Checkpoint, ElasticCheckpoint};
use crate::elastic::encoding::decode;
use crate::elastic::run::{ElasticRun, Layout};
use crate::elastic::{deal, space};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::metrics::StatsRegistry;
use crate::optimize::{Optimized, Optimizer};
use crate::options::Options;
use crate::plan::{self, PlanNode};
use crate::run::PipelineIter;
use crate::stage::Stage;
use crate::stats::PipelineStats;
use crate::sync::LockExt;

/// A pipeline definition: the plan of its stages as written, and its options. Cheap to
/// clone (shared), immutable; builder methods return new datasets that append a stage.
/// [`Dataset::iter`] runs it, one epoch per call: the plan is optimized (once), checked,
/// and started.
///
/// See the [crate documentation](crate) for an example.
#[derive(Clone, Debug)]
pub struct Dataset {
    plan: Arc<PlanNode>,
    options: Option<Options>,
    state: Arc<RunState>,
}

/// State kept across iterations of one dataset.
#[derive(Debug, Default)]
pub(crate) struct RunState {
    epoch: AtomicU64,
    seed: Mutex<Option<u64>>,
    /// The latest run's statistics, tuner and records (their account).
    #[allow(clippy::type_complexity)]
    pub(crate) last: Mutex<Option<(Arc<StatsRegistry>, Arc<Autotuner>, Arc<ElasticRun>)>>,
    /// What autotune ended the previous run with: where the next one starts.
    pub(crate) learned: Mutex<Learned>,
    /// The plan that runs, made on first use.
    optimized: Mutex<Option<Arc<Optimized>>>,
    /// Where runs report (a trace, a timeline).
    pub(crate) observe: Mutex<crate::observe::Observe>,
}

impl Dataset {
    /// A dataset running `stage` over `inputs` (how every builder method and source is
    /// made; use it for stages of your own). Options set on an input carry over, as with
    /// tf.data's `with_options`.
    pub fn from_stage(stage: impl Stage, inputs: Vec<Dataset>) -> Dataset {
        Dataset::from_arc(Arc::new(stage), inputs)
    }

    /// [`Dataset::from_stage`] with a shared stage.
    pub fn from_arc(stage: Arc<dyn Stage>, inputs: Vec<Dataset>) -> Dataset {
        let options = inputs.iter().find_map(|d| d.options.clone());
        Dataset {
            plan: PlanNode::new(stage, inputs.into_iter().map(|d| d.plan).collect()),
            options,
            state: Arc::default(),
        }
    }

    /// This dataset followed by `stage`.
    pub fn then(&self, stage: impl Stage) -> Dataset {
        Dataset::from_stage(stage, vec![self.clone()])
    }

    /// A dataset running `plan` (as written), with default options.
    pub fn from_plan(plan: Arc<PlanNode>) -> Dataset {
        Dataset {
            plan,
            options: None,
            state: Arc::default(),
        }
    }

    /// This dataset with `options` (seed, budgets, error policy) for its whole pipeline.
    pub fn with_options(&self, options: Options) -> Dataset {
        Dataset {
            plan: Arc::clone(&self.plan),
            options: Some(options),
            state: Arc::default(),
        }
    }

    /// Makes every later iteration of this dataset (and of its clones, which share its
    /// run state) report to `observe`: a [trace](crate::observe::Tracer) of its threads, a
    /// [timeline](crate::observe::Timeline) of its statistics. `Observe::new()` stops
    /// reporting. See [`crate::observe`].
    pub fn observe(&self, observe: crate::observe::Observe) {
        *self.state.observe.locked() = observe;
    }

    /// The options in force (the defaults if none were set).
    pub fn options(&self) -> Options {
        self.options.clone().unwrap_or_default()
    }

    /// The plan as written.
    pub fn plan(&self) -> &Arc<PlanNode> {
        &self.plan
    }

    /// The stage at the top of this dataset.
    pub fn stage(&self) -> &Arc<dyn Stage> {
        self.plan.stage()
    }

    pub(crate) fn state(&self) -> &Arc<RunState> {
        &self.state
    }

    /// The plan that runs: the plan as written rewritten by the
    /// [optimizer](crate::optimize) for these options, checked, its stages numbered. Made
    /// once per dataset.
    pub(crate) fn optimized(&self) -> Result<Arc<Optimized>> {
        let mut slot = self.state.optimized.locked();
        if let Some(done) = slot.as_ref() {
            return Ok(Arc::clone(done));
        }
        let optimized = Arc::new(Optimizer::default().optimize(&self.plan, &self.options())?);
        crate::run::check(&optimized.plan, &optimized.numbers)?;
        *slot = Some(Arc::clone(&optimized));
        Ok(optimized)
    }

    /// The plan as written and the plan that runs, one stage per line, with the
    /// optimizer's rules that changed it (what `sluice run --explain` prints):
    ///
    /// ```
    /// use sluice_core::prelude::*;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");
    /// let dataset = Dataset::tfrecord([format!("{dir}/images.tfrecord-*")])?
    ///     .interleave(InterleaveSpec::new(2))
    ///     .shard(2, 0);
    /// let text = dataset.explain()?;
    /// assert!(text.contains("files_to_interleave"), "{text}");
    /// assert!(text.contains("shard_pushdown"), "{text}");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// An error is what `iter` would return: a stage whose parameters or inputs are
    /// impossible.
    pub fn explain(&self) -> Result<String> {
        let optimized = Optimizer::default().optimize(&self.plan, &self.options())?;
        let checked = crate::run::check(&optimized.plan, &optimized.numbers);
        let mut out = String::from("plan as written:\n");
        out.push_str(&indent(&plan::render(&self.plan, None)));
        if optimized.applied.is_empty() {
            out.push_str("optimized: no rule applies\n");
        } else {
            out.push_str("optimized by:\n");
            for applied in &optimized.applied {
                out.push_str(&format!("  {applied}\n"));
            }
        }
        out.push_str("plan that runs (#number: as stats and errors name the stage):\n");
        out.push_str(&indent(&plan::render(
            &optimized.plan,
            Some(&optimized.numbers),
        )));
        checked.map(|()| out)
    }

    /// The seed in use: the configured one, or the one drawn at the first iteration.
    pub fn seed(&self) -> Option<u64> {
        self.options
            .as_ref()
            .and_then(|o| o.seed)
            .or(*self.state.seed.locked())
    }

    /// A fingerprint of the pipeline definition up to and including this stage: changes
    /// whenever a stage or parameter changes (see [`PlanNode::fingerprint`]).
    pub fn fingerprint(&self) -> String {
        self.plan.fingerprint()
    }

    /// What identifies this pipeline's output for checkpoints: a hash of every stage and
    /// parameter as written, without thread counts and buffer sizes (see
    /// [`PlanNode::resume_fingerprint`]).
    pub fn resume_fingerprint(&self) -> String {
        self.plan.resume_fingerprint()
    }

    /// Starts a new epoch: builds every stage and returns the iterator of its elements.
    /// Iterating again starts the next epoch (reshuffling where asked). Dropping the
    /// iterator stops and joins every thread the pipeline started.
    pub fn iter(&self) -> Result<PipelineIter> {
        let seed = {
            let mut drawn = self.state.seed.locked();
            match self.options().seed {
                Some(s) => s,
                None => *drawn.get_or_insert_with(random_seed),
            }
        };
        let epoch = self.state.epoch.fetch_add(1, Ordering::Relaxed);
        PipelineIter::start(self, seed, epoch, 0, None)
    }

    /// Starts epoch `epoch` (0-based), whatever ran before: the same elements, in the same
    /// order, as the `epoch`-th [`Dataset::iter`] of a fresh dataset with this seed (for
    /// processes that start afresh each epoch, such as DataLoader workers). The next
    /// [`Dataset::iter`] starts the epoch after it.
    pub fn iter_epoch(&self, epoch: u64) -> Result<PipelineIter> {
        let seed = {
            let mut drawn = self.state.seed.locked();
            match self.options().seed {
                Some(s) => s,
                None => *drawn.get_or_insert_with(random_seed),
            }
        };
        self.state.epoch.store(epoch + 1, Ordering::Relaxed);
        PipelineIter::start(self, seed, epoch, 0, None)
    }

    /// Continues an iteration from a [`Checkpoint`] taken by [`PipelineIter::checkpoint`]
    /// (in this process or another): the iterator yields exactly the elements an
    /// uninterrupted run would have yielded after that point, at any thread count and
    /// buffer size. The next [`Dataset::iter`] starts the epoch after the checkpoint's.
    ///
    /// Refused (with [`Error::Checkpoint`]) when the pipeline differs from the one
    /// checkpointed (its [`resume_fingerprint`](Dataset::resume_fingerprint)), when the
    /// options fix another seed, or when the epoch has fewer elements than the position.
    /// See [`crate::checkpoint`] for what fast-forwarding costs per stage.
    pub fn resume(&self, checkpoint: &Checkpoint) -> Result<PipelineIter> {
        checkpoint.check_version()?;
        let fingerprint = self.resume_fingerprint();
        if checkpoint.fingerprint != fingerprint {
            return Err(Error::Checkpoint(format!(
                "the checkpoint is of another pipeline (fingerprint {}, this one {}): stages or their parameters differ",
                short(&checkpoint.fingerprint),
                short(&fingerprint)
            )));
        }
        self.check_seed(checkpoint)?;
        let before = match &checkpoint.elastic {
            Some(e) if e.generation > 0 => {
                return Err(Error::Checkpoint(format!(
                    "the checkpoint was taken by host {} of {} after an elastic resume: resume it with resume_elastic and the checkpoints of every host of that run",
                    e.host, e.hosts
                )));
            }
            Some(ElasticCheckpoint {
                progress: Some(text),
                ..
            }) => Some(decode(text).map_err(|why| {
                Error::Checkpoint(format!("its elastic progress cannot be read: {why}"))
            })?),
            _ => None,
        };
        self.continue_epoch(checkpoint);
        PipelineIter::start(
            self,
            checkpoint.seed,
            checkpoint.epoch,
            checkpoint.position,
            before.as_ref(),
        )
    }

    /// Continues an epoch from the checkpoints of **every host** of the run that took them,
    /// on this host of a new layout (its `shard` stage's `num_shards` hosts, rank `index`;
    /// one host without a `shard`): every record of the epoch not yet delivered is read by
    /// exactly one host of the new layout, and none is read twice, whatever the numbers of
    /// hosts before and after (see [`crate::elastic`]). Each host of the new layout calls it
    /// with the same checkpoints. The next [`Dataset::iter`] starts the following epoch.
    ///
    /// Checkpoints of a run with as many hosts as this one, of an epoch that was never
    /// resumed elastically, resume exactly instead (this host's own checkpoint, as
    /// [`Dataset::resume`]); at an epoch's start (every position 0), the epoch starts afresh
    /// with this layout.
    ///
    /// Refused (with [`Error::Checkpoint`], saying why) when the checkpoints are of another
    /// pipeline (its fingerprint without `shard` stages), of different epochs, seeds or runs,
    /// when one is missing or given twice (some records would have no owner, or two), when a
    /// stage of the pipeline cannot follow records ([`Stage::elastic`]), or when the `shard`
    /// stages moved.
    ///
    /// ```
    /// use sluice_core::prelude::*;
    /// use sluice_core::Checkpoint;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// let pipeline = |hosts: u64, rank: u64| {
    ///     Dataset::range(0, 100)
    ///         .shard(hosts, rank)
    ///         .shuffle(8)
    ///         .batch(4)
    ///         .with_options(Options::default().with_seed(7))
    /// };
    /// // Two hosts read 5 batches each, checkpoint, and stop.
    /// let mut checkpoints = Vec::new();
    /// let mut seen = Vec::new();
    /// for rank in 0..2 {
    ///     let mut it = pipeline(2, rank).iter()?;
    ///     for batch in it.by_ref().take(5) {
    ///         seen.extend(batch?.tensor("value").unwrap().as_i64().unwrap().to_vec());
    ///     }
    ///     checkpoints.push(it.checkpoint()?);
    /// }
    /// // Three hosts finish the epoch.
    /// for rank in 0..3 {
    ///     for batch in pipeline(3, rank).resume_elastic(&checkpoints)? {
    ///         seen.extend(batch?.tensor("value").unwrap().as_i64().unwrap().to_vec());
    ///     }
    /// }
    /// seen.sort();
    /// assert_eq!(seen, (0..100).collect::<Vec<i64>>()); // every record once
    /// # Ok(())
    /// # }
    /// ```
    pub fn resume_elastic(&self, checkpoints: &[Checkpoint]) -> Result<PipelineIter> {
        let fail = |m: String| Error::Checkpoint(m);
        let first = checkpoints
            .first()
            .ok_or_else(|| fail("no checkpoints to resume from".into()))?;
        let (hosts, host) = space::host_of(self.plan()).map_err(fail)?;
        let fingerprint = space::fingerprint_without_shards(self.plan());
        let mut parts = Vec::with_capacity(checkpoints.len());
        for (i, cp) in checkpoints.iter().enumerate() {
            cp.check_version()?;
            let e = cp.elastic.as_ref().ok_or_else(|| {
                fail(format!(
                    "checkpoint {i} has no elastic part (a version {} checkpoint): resume it on the same hosts with resume()",
                    cp.version
                ))
            })?;
            let f = first.elastic.as_ref().expect("checked first");
            if e.fingerprint != fingerprint {
                return Err(fail(format!(
                    "checkpoint {i} is of another pipeline (fingerprint without shards {}, this one {}): stages or their parameters differ",
                    short(&e.fingerprint),
                    short(&fingerprint)
                )));
            }
            if (cp.seed, cp.epoch) != (first.seed, first.epoch) {
                return Err(fail(format!(
                    "checkpoint {i} is of epoch {} with seed {}, checkpoint 0 of epoch {} with seed {}: give the checkpoints every host took at one step",
                    cp.epoch, cp.seed, first.epoch, first.seed
                )));
            }
            if (e.generation, &e.layout) != (f.generation, &f.layout) {
                return Err(fail(format!(
                    "checkpoints 0 and {i} come from different runs (generations {} and {}): give the checkpoints every host of one run took at one step",
                    f.generation, e.generation
                )));
            }
            self.check_seed(cp)?;
            parts.push(e);
        }
        let seed = first.seed;
        let epoch = first.epoch;
        let generation = parts[0].generation;
        let layout_shards = parts[0].layout.clone();
        if generation == 0 && checkpoints.iter().all(|c| c.position == 0) {
            // Nothing delivered yet: this layout starts the epoch.
            self.continue_epoch(first);
            return PipelineIter::start(self, seed, epoch, 0, None);
        }
        if generation == 0
            && parts.iter().all(|e| e.hosts == hosts)
            && let Some(own) = checkpoints
                .iter()
                .find(|c| c.elastic.as_ref().is_some_and(|e| e.host == host))
        {
            return self.resume(own);
        }
        let mut progress = Vec::with_capacity(checkpoints.len());
        for (i, (cp, e)) in checkpoints.iter().zip(&parts).enumerate() {
            let name = format!("checkpoint {i} (host {} of {})", e.host, e.hosts);
            let snapshot = match (&e.progress, &e.unavailable) {
                (Some(text), _) => decode(text)
                    .map_err(|why| fail(format!("{name}: its progress cannot be read: {why}")))?,
                (None, Some(why)) => {
                    return Err(fail(format!(
                        "{name} cannot resume on another number of hosts: {why}"
                    )));
                }
                (None, None) if cp.position == 0 => {
                    return Err(fail(format!(
                        "{name} is at the start of the epoch while other hosts are not: give the checkpoints every host took at one step"
                    )));
                }
                (None, None) => {
                    return Err(fail(format!("{name} has no progress")));
                }
            };
            progress.push((name, snapshot));
        }
        let now = space::layout(self.plan());
        if now.len() < layout_shards.len() {
            return Err(fail(format!(
                "the run that took the checkpoints had {} `shard` stage(s) ({} hosts), this pipeline {}: keep every `shard` stage where it was (one host: num_shards = 1, index = 0)",
                layout_shards.len(),
                parts[0].hosts,
                now.len()
            )));
        }
        let merged = deal::merge(&progress).map_err(fail)?;
        let relaid = Dataset::from_plan(space::with_layout(self.plan(), &layout_shards))
            .with_options(self.options());
        let optimized = relaid.optimized()?;
        let points = space::unit_points(&optimized.plan, &optimized.numbers).map_err(|why| {
            fail(format!(
                "this pipeline cannot resume on another number of hosts: {why}"
            ))
        })?;
        if points.len() != merged.spaces.len() {
            return Err(fail(format!(
                "the checkpoints count records at {} places, this pipeline at {}: keep the `shard` stages where they were",
                merged.spaces.len(),
                points.len()
            )));
        }
        for (p, s) in points.iter().zip(&merged.spaces) {
            if p.kind != s.kind || p.signature != s.signature {
                return Err(fail(format!(
                    "the checkpoints count unit space {} as {}, this pipeline as {}: keep the `shard` stages where they were",
                    p.space,
                    s.kind.describe(),
                    p.kind.describe()
                )));
            }
        }
        let dealt: Vec<_> = merged
            .spaces
            .iter()
            .map(|s| deal::deal(s, hosts, host))
            .collect();
        let layout = Layout {
            fingerprint,
            shards: layout_shards,
            generation: generation + 1,
            hosts,
            host,
        };
        let elastic =
            ElasticRun::resumed(layout, &points, &optimized.numbers, &dealt, merged.parts);
        self.continue_epoch(first);
        PipelineIter::start_with(self, optimized, seed, epoch, 0, elastic)
    }

    /// Refuses a checkpoint whose seed differs from the one the options fix.
    fn check_seed(&self, checkpoint: &Checkpoint) -> Result<()> {
        if let Some(seed) = self.options().seed
            && seed != checkpoint.seed
        {
            return Err(Error::Checkpoint(format!(
                "the checkpoint was taken with seed {}, the options fix seed {seed}",
                checkpoint.seed
            )));
        }
        Ok(())
    }

    /// Takes the seed and epoch of `checkpoint`: the next [`Dataset::iter`] starts the epoch
    /// after it.
    fn continue_epoch(&self, checkpoint: &Checkpoint) {
        *self.state.seed.locked() = Some(checkpoint.seed);
        self.state
            .epoch
            .store(checkpoint.epoch + 1, Ordering::Relaxed);
    }

    /// Statistics of the latest iteration (live while it runs).
    pub fn stats(&self) -> Option<PipelineStats> {
        self.state
            .last
            .locked()
            .as_ref()
            .map(|(stats, tuner, elastic)| {
                PipelineStats::of(stats, Some(tuner))
                    .with_records(elastic.tracking().and_then(|t| t.progress.counts()))
            })
    }

    /// Runs one epoch and collects its elements (stops at the first error).
    pub fn collect(&self) -> Result<Vec<Element>> {
        self.iter()?.collect()
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// The start of a fingerprint, for messages.
fn short(fingerprint: &str) -> &str {
    &fingerprint[..fingerprint.len().min(12)]
}

impl Error {
    /// Whether this error came from a stage (rather than from building the pipeline).
    pub fn is_stage_error(&self) -> bool {
        matches!(self, Error::Stage { .. })
    }
}
