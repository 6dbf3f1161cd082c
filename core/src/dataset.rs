//! `Dataset`: the pipeline builder, and iteration.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::autotune::{Autotuner, Learned};
use crate::checkpoint::{CHECKPOINT_VERSION, Checkpoint};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::shutdown::{Shutdown, ShutdownTrigger};
use crate::options::Options;
use crate::stage::{RunShared, Stage, build_node_from};
use crate::stats::{PipelineStats, StatsRegistry};
use crate::stream::BoxStream;

/// A pipeline definition: a stage and its inputs. Cheap to clone (shared), immutable;
/// builder methods return new datasets. [`Dataset::iter`] runs it, one epoch per call.
///
/// See the [crate documentation](crate) for an example.
#[derive(Clone, Debug)]
pub struct Dataset {
    node: Arc<Node>,
}

#[derive(Debug)]
struct Node {
    stage: Arc<dyn Stage>,
    inputs: Vec<Dataset>,
    options: Option<Options>,
    state: Arc<RunState>,
}

/// State kept across iterations of one dataset.
#[derive(Debug, Default)]
struct RunState {
    epoch: AtomicU64,
    seed: Mutex<Option<u64>>,
    last: Mutex<Option<Arc<StatsRegistry>>>,
    /// What autotune ended the previous run with: where the next one starts.
    learned: Mutex<Learned>,
}

impl Dataset {
    /// A dataset from a stage and its inputs (how every builder method and source is made;
    /// use it for stages of your own).
    pub fn from_stage(stage: impl Stage, inputs: Vec<Dataset>) -> Dataset {
        Dataset::from_arc(Arc::new(stage), inputs)
    }

    pub(crate) fn from_arc(stage: Arc<dyn Stage>, inputs: Vec<Dataset>) -> Dataset {
        // Options set on an input carry over, as with tf.data's `with_options`.
        let options = inputs.iter().find_map(|d| d.node.options.clone());
        Dataset {
            node: Arc::new(Node {
                stage,
                inputs,
                options,
                state: Arc::default(),
            }),
        }
    }

    /// This dataset with `options` (seed, budgets, error policy) for its whole pipeline.
    pub fn with_options(&self, options: Options) -> Dataset {
        Dataset {
            node: Arc::new(Node {
                stage: Arc::clone(&self.node.stage),
                inputs: self.node.inputs.clone(),
                options: Some(options),
                state: Arc::default(),
            }),
        }
    }

    /// The options in force (the defaults if none were set).
    pub fn options(&self) -> Options {
        self.node.options.clone().unwrap_or_default()
    }

    /// The stage at the top of this dataset.
    pub fn stage(&self) -> &Arc<dyn Stage> {
        &self.node.stage
    }

    /// The inputs of the top stage.
    pub fn inputs(&self) -> &[Dataset] {
        &self.node.inputs
    }

    pub(crate) fn node_key(&self) -> usize {
        Arc::as_ptr(&self.node) as *const () as usize
    }

    /// The seed in use: the configured one, or the one drawn at the first iteration.
    pub fn seed(&self) -> Option<u64> {
        self.node.options.as_ref().and_then(|o| o.seed).or(*self
            .node
            .state
            .seed
            .lock()
            .expect("seed lock"))
    }

    /// A fingerprint of the pipeline definition up to and including this stage: changes
    /// whenever a stage or parameter changes.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        fn walk(d: &Dataset, h: &mut sha2::Sha256) {
            h.update(d.stage().name().as_bytes());
            h.update([0]);
            h.update(d.stage().fingerprint().as_bytes());
            h.update([0]);
            for i in d.inputs() {
                h.update(b"(");
                walk(i, h);
                h.update(b")");
            }
        }
        walk(self, &mut h);
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Starts a new epoch: builds every stage and returns the iterator of its elements.
    /// Iterating again starts the next epoch (reshuffling where asked). Dropping the
    /// iterator stops and joins every thread the pipeline started.
    pub fn iter(&self) -> Result<PipelineIter> {
        let seed = {
            let mut drawn = self.node.state.seed.lock().expect("seed lock");
            match self.options().seed {
                Some(s) => s,
                None => *drawn.get_or_insert_with(random_seed),
            }
        };
        let epoch = self.node.state.epoch.fetch_add(1, Ordering::Relaxed);
        self.start(seed, epoch, 0)
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
        if checkpoint.version != CHECKPOINT_VERSION {
            return Err(Error::Checkpoint(format!(
                "version {} (this Sluice reads version {CHECKPOINT_VERSION})",
                checkpoint.version
            )));
        }
        let fingerprint = self.resume_fingerprint();
        if checkpoint.fingerprint != fingerprint {
            return Err(Error::Checkpoint(format!(
                "the checkpoint is of another pipeline (fingerprint {}, this one {}): stages or their parameters differ",
                short(&checkpoint.fingerprint),
                short(&fingerprint)
            )));
        }
        if let Some(seed) = self.options().seed
            && seed != checkpoint.seed
        {
            return Err(Error::Checkpoint(format!(
                "the checkpoint was taken with seed {}, the options fix seed {seed}",
                checkpoint.seed
            )));
        }
        *self.node.state.seed.lock().expect("seed lock") = Some(checkpoint.seed);
        self.node
            .state
            .epoch
            .store(checkpoint.epoch + 1, Ordering::Relaxed);
        self.start(checkpoint.seed, checkpoint.epoch, checkpoint.position)
    }

    /// What identifies this pipeline's output for checkpoints: a hash of every stage and
    /// parameter, without thread counts and buffer sizes (see [`Stage::resume_fingerprint`]).
    pub fn resume_fingerprint(&self) -> String {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        fn walk(d: &Dataset, h: &mut sha2::Sha256) {
            h.update(d.stage().name().as_bytes());
            h.update([0]);
            h.update(d.stage().resume_fingerprint().as_bytes());
            h.update([0]);
            for i in d.inputs() {
                h.update(b"(");
                walk(i, h);
                h.update(b")");
            }
        }
        walk(self, &mut h);
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The first stage (as `name#index`, sources first) whose output order depends on
    /// thread timing, if any: such a pipeline cannot be checkpointed.
    fn nondeterministic_stage(&self) -> Option<String> {
        let mut indices = HashMap::new();
        index_nodes(self, &mut indices, &mut 0);
        fn walk(d: &Dataset, indices: &HashMap<usize, usize>) -> Option<String> {
            d.inputs()
                .iter()
                .find_map(|i| walk(i, indices))
                .or_else(|| {
                    (!d.stage().order_deterministic())
                        .then(|| format!("{}#{}", d.stage().name(), indices[&d.node_key()]))
                })
        }
        walk(self, &indices)
    }

    /// Builds the pipeline for `seed` and `epoch`, fast-forwarded `skip` elements.
    fn start(&self, seed: u64, epoch: u64, skip: u64) -> Result<PipelineIter> {
        let options = self.options();
        let (trigger, shutdown) = Shutdown::new();
        let stats = Arc::new(StatsRegistry::new());
        let mut indices = HashMap::new();
        index_nodes(self, &mut indices, &mut 0);
        let learned = self
            .node
            .state
            .learned
            .lock()
            .expect("learned lock")
            .clone();
        let autotune = Autotuner::new(learned, options.ram_budget_bytes, &stats, shutdown.clone());
        stats.set_autotuner(Arc::clone(&autotune));
        let shared = Arc::new(RunShared {
            seed,
            options,
            shutdown,
            stats: Arc::clone(&stats),
            autotune: Arc::clone(&autotune),
            indices,
            rows: Default::default(),
        });
        *self.node.state.last.lock().expect("stats lock") = Some(Arc::clone(&stats));
        let (stream, skipped) = build_node_from(self, &shared, epoch, skip)?;
        if skipped < skip {
            return Err(Error::Checkpoint(format!(
                "epoch {epoch} has {skipped} elements, fewer than the checkpoint's position {skip}"
            )));
        }
        Ok(PipelineIter {
            stream: Some(stream),
            stats,
            autotune,
            state: Arc::clone(&self.node.state),
            dataset: self.clone(),
            seed,
            epoch,
            position: skip,
            failed: false,
            done: false,
            _trigger: trigger,
        })
    }

    /// Statistics of the latest iteration (live while it runs).
    pub fn stats(&self) -> Option<PipelineStats> {
        self.node
            .state
            .last
            .lock()
            .expect("stats lock")
            .as_ref()
            .map(|s| s.snapshot())
    }

    /// Runs one epoch and collects its elements (stops at the first error).
    pub fn collect(&self) -> Result<Vec<Element>> {
        self.iter()?.collect()
    }
}

/// Numbers the stages: inputs before the stages that consume them (post-order).
fn index_nodes(d: &Dataset, indices: &mut HashMap<usize, usize>, next: &mut usize) {
    if indices.contains_key(&d.node_key()) {
        return;
    }
    for i in d.inputs() {
        index_nodes(i, indices, next);
    }
    indices.insert(d.node_key(), *next);
    *next += 1;
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

/// The iterator of one epoch. Ends at the first error (which it yields) or at the end.
/// Dropping it stops and joins the pipeline's threads.
pub struct PipelineIter {
    stream: Option<BoxStream>,
    stats: Arc<StatsRegistry>,
    autotune: Arc<Autotuner>,
    state: Arc<RunState>,
    dataset: Dataset,
    seed: u64,
    epoch: u64,
    /// Elements yielded in this epoch (counting those a resume skipped).
    position: u64,
    /// An error was yielded.
    failed: bool,
    done: bool,
    // Dropped after `stream` (fields drop in order): first the streams stop and join their
    // threads, and the trigger is set first in `drop` so blocked threads wake at once.
    _trigger: ShutdownTrigger,
}

impl PipelineIter {
    /// Statistics of this run so far.
    pub fn stats(&self) -> PipelineStats {
        self.stats.snapshot()
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
        if let Some(stage) = self.dataset.nondeterministic_stage() {
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
        })
    }

    /// Elements yielded in this epoch so far (with those a resume skipped).
    pub fn position(&self) -> u64 {
        self.position
    }
}

/// The start of a fingerprint, for messages.
fn short(fingerprint: &str) -> &str {
    &fingerprint[..fingerprint.len().min(12)]
}

impl Iterator for PipelineIter {
    type Item = Result<Element>;

    fn next(&mut self) -> Option<Result<Element>> {
        if self.done {
            return None;
        }
        let item = self.stream.as_mut()?.next();
        match &item {
            Some(Ok(_)) => {
                self.position += 1;
                self.stats.produced();
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

impl PipelineIter {
    /// Stops the tuner and keeps what it learned for the next run of the dataset.
    fn stop_autotune(&mut self) {
        self._trigger.fire();
        self.autotune.join();
        let learned = self.autotune.learned();
        if !learned.is_empty() {
            *self.state.learned.lock().expect("learned lock") = learned;
        }
    }
}

impl Drop for PipelineIter {
    fn drop(&mut self) {
        self._trigger.fire();
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

impl Error {
    /// Whether this error came from a stage (rather than from building the pipeline).
    pub fn is_stage_error(&self) -> bool {
        matches!(self, Error::Stage { .. })
    }
}
