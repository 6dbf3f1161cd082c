//! Live per-stage counters of a running pipeline, their snapshots, and the bottleneck rule.
//! Autotune reads them while the pipeline runs; [`crate::stats`] reports them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::histogram::{TimeDistribution, TimeHistogram};
use crate::sync::LockExt;
use serde::{Deserialize, Serialize};

/// Live counters of one running stage. Cheap to update from any thread (relaxed atomics).
#[derive(Debug, Default)]
pub struct StageMetrics {
    elements_in: AtomicU64,
    elements_out: AtomicU64,
    bytes_out: AtomicU64,
    busy_ns: AtomicU64,
    wait_upstream_ns: AtomicU64,
    wait_downstream_ns: AtomicU64,
    consumer_wait_ns: AtomicU64,
    buffer_len: AtomicU64,
    buffer_capacity: AtomicU64,
    buffer_samples: AtomicU64,
    buffer_sum: AtomicU64,
    workers: AtomicU64,
    row_threads: AtomicU64,
    skipped: AtomicU64,
    counts_own_inputs: AtomicBool,
    element_time: TimeHistogram,
}

impl StageMetrics {
    /// Counts elements a source read from outside the pipeline (stages with inputs are
    /// credited with their inputs' output automatically, unless they
    /// [count their own inputs](Self::set_counts_own_inputs)).
    pub fn add_in(&self, n: u64) {
        self.elements_in.fetch_add(n, Relaxed);
    }
    /// Makes the stage's `in` count only what it counts with [`add_in`](Self::add_in), not
    /// its inputs' output: a stage reading the records of a file list (`tfrecord`,
    /// `interleave`) takes in records, not file names.
    pub fn set_counts_own_inputs(&self) {
        self.counts_own_inputs.store(true, Relaxed);
    }
    /// Counts an element handed downstream, of `bytes` bytes.
    pub fn add_out(&self, bytes: u64) {
        self.elements_out.fetch_add(1, Relaxed);
        self.bytes_out.fetch_add(bytes, Relaxed);
    }
    /// Counts `n` elements handed downstream, of `bytes` bytes in all.
    pub fn add_out_many(&self, n: u64, bytes: u64) {
        if n > 0 {
            self.elements_out.fetch_add(n, Relaxed);
            self.bytes_out.fetch_add(bytes, Relaxed);
        }
    }
    /// Adds time spent doing the stage's own work.
    pub fn add_busy(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        self.busy_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }
    /// Adds time spent blocked waiting for upstream.
    pub fn add_wait_upstream(&self, d: Duration) {
        self.wait_upstream_ns
            .fetch_add(d.as_nanos() as u64, Relaxed);
    }
    /// Adds time spent blocked because the output buffer was full.
    pub fn add_wait_downstream(&self, d: Duration) {
        self.wait_downstream_ns
            .fetch_add(d.as_nanos() as u64, Relaxed);
    }
    /// Adds time the consumer spent blocked in this stage's `next` (excluding time inside
    /// upstream stages called on the same thread).
    pub fn add_consumer_wait(&self, d: Duration) {
        self.consumer_wait_ns
            .fetch_add(d.as_nanos() as u64, Relaxed);
    }
    /// Records the output buffer's occupancy.
    pub fn sample_buffer(&self, len: usize, capacity: usize) {
        self.buffer_len.store(len as u64, Relaxed);
        self.buffer_capacity.store(capacity as u64, Relaxed);
        self.buffer_samples.fetch_add(1, Relaxed);
        self.buffer_sum.fetch_add(len as u64, Relaxed);
    }
    /// Buffer occupancy samples so far: (samples, sum of occupancies, capacity at the last).
    pub fn buffer_samples(&self) -> (u64, u64, u64) {
        (
            self.buffer_samples.load(Relaxed),
            self.buffer_sum.load(Relaxed),
            self.buffer_capacity.load(Relaxed),
        )
    }
    /// Sets the number of worker threads.
    pub fn set_workers(&self, n: usize) {
        self.workers.store(n as u64, Relaxed);
    }
    /// Records that the stage runs the rows of its batches on the run's `n` row threads
    /// (`image_ops` on batches, and fused with `batch`).
    pub fn set_row_threads(&self, n: usize) {
        self.row_threads.store(n as u64, Relaxed);
    }
    /// Counts an element skipped under the skip error policy.
    pub fn add_skipped(&self, n: u64) {
        self.skipped.fetch_add(n, Relaxed);
    }
    /// Records `n` elements whose own work took `each` per element (the distribution
    /// behind [`StageStats::element_p50_seconds`]).
    pub fn add_element_time(&self, each: Duration, n: u64) {
        self.element_time.record(each.as_nanos() as u64, n);
    }
}

/// A snapshot of one stage's statistics. Deserializes from what it serializes to, every
/// field defaulted when missing (JSON of older runs: `sluice report` reads it).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StageStats {
    /// Index of the stage in the pipeline (sources first).
    pub index: usize,
    /// The stage's kind, e.g. `map` or `tfrecord`.
    pub name: String,
    /// Elements taken from upstream; for `tfrecord` and `interleave`, the records read from
    /// their files (not the file names of their input).
    pub elements_in: u64,
    /// Elements handed downstream.
    pub elements_out: u64,
    /// Bytes of the elements handed downstream.
    pub bytes_out: u64,
    /// Time doing the stage's own work, summed over its threads.
    pub busy_seconds: f64,
    /// Time blocked waiting on upstream, summed over its threads.
    pub wait_upstream_seconds: f64,
    /// Time blocked on a full output buffer (the consumer is slower), summed over threads.
    pub wait_downstream_seconds: f64,
    /// Time the stage's consumer spent waiting on this stage (its own work or its buffer).
    pub consumer_wait_seconds: f64,
    /// The share of all waiting in the pipeline that this stage causes: its consumer's
    /// waits on it, plus waits passed down to it by the stages above whose workers were
    /// themselves starved by it. The bottleneck is the stage with the most.
    pub caused_wait_seconds: f64,
    /// Worker threads (0: runs on its consumer's thread).
    pub workers: u64,
    /// The run's row threads the stage runs its batches' rows on (0: none). While it
    /// works they all do, so its busy time is theirs too: `busy_fraction` is the share of
    /// the wall time they were at work.
    pub row_threads: u64,
    /// Busy time as a fraction of the wall time available to the stage's threads.
    pub busy_fraction: f64,
    /// Output buffer: last occupancy, capacity and mean occupancy (0 without a buffer).
    pub buffer_len: u64,
    /// See `buffer_len`.
    pub buffer_capacity: u64,
    /// See `buffer_len`.
    pub buffer_mean: f64,
    /// Elements skipped under the skip error policy.
    pub skipped: u64,
    /// The median time of the stage's own work per element, in seconds (to within 12 %),
    /// from the calls the statistics time; `None` when the stage's work is not its own
    /// (`prefetch`: its thread's time is its input's).
    pub element_p50_seconds: Option<f64>,
    /// The 99th percentile of the same times: a stage whose p99 is far above its p50 has
    /// slow elements (large images, slow storage reads) that stall its consumer.
    pub element_p99_seconds: Option<f64>,
    /// The times behind the percentiles (merged over epochs).
    #[serde(skip)]
    pub element_times: TimeDistribution,
}

impl StageStats {
    /// A stage that did nothing yet.
    pub fn empty(index: usize, name: &str) -> StageStats {
        StageStats {
            index,
            name: name.to_string(),
            ..StageStats::default()
        }
    }

    /// These statistics with the percentiles of `times`.
    pub(crate) fn with_element_times(mut self, times: TimeDistribution) -> StageStats {
        self.element_p50_seconds = times.quantile(0.5);
        self.element_p99_seconds = times.quantile(0.99);
        self.element_times = times;
        self
    }

    /// The threads doing the stage's work: its workers, or the row threads its batches'
    /// rows run on (0: it runs on its consumer's thread alone).
    pub fn threads(&self) -> u64 {
        self.workers.max(self.row_threads)
    }
}

/// A registered stage: (index, name, indices of its inputs, metrics).
type Registered = (usize, String, Vec<usize>, Arc<StageMetrics>);

/// The registry of a running pipeline's stages.
#[derive(Debug)]
pub(crate) struct StatsRegistry {
    started: Instant,
    stages: std::sync::Mutex<Vec<Registered>>,
    produced: AtomicU64,
}

impl StatsRegistry {
    pub(crate) fn new() -> Self {
        StatsRegistry {
            started: Instant::now(),
            stages: Default::default(),
            produced: AtomicU64::new(0),
        }
    }

    /// The most elements any stage has handed out so far.
    pub(crate) fn max_elements_out(&self) -> u64 {
        self.stages
            .locked()
            .iter()
            .map(|s| s.3.elements_out.load(Relaxed))
            .max()
            .unwrap_or(0)
    }

    /// The stage to count progress at: the one nearest the output among those that hand
    /// out at least half as many elements as the busiest (so not a batch count, which is
    /// too coarse to time, nor a reader far upstream, whose read-ahead makes it bursty).
    pub(crate) fn progress_stage(&self) -> Option<usize> {
        let stages = self.stages.locked();
        let most = stages
            .iter()
            .map(|s| s.3.elements_out.load(Relaxed))
            .max()?;
        stages
            .iter()
            .filter(|s| s.3.elements_out.load(Relaxed) * 2 >= most)
            .map(|s| s.0)
            .max()
    }

    /// Elements stage `index` has handed out so far.
    pub(crate) fn elements_out_of(&self, index: usize) -> u64 {
        self.stages
            .locked()
            .iter()
            .find(|s| s.0 == index)
            .map_or(0, |s| s.3.elements_out.load(Relaxed))
    }

    pub(crate) fn register(
        &self,
        index: usize,
        name: &str,
        inputs: Vec<usize>,
    ) -> Arc<StageMetrics> {
        let m = Arc::new(StageMetrics::default());
        let mut stages = self.stages.locked();
        // A stage re-opened (by repeat) keeps accumulating into the same metrics.
        if let Some((_, _, _, existing)) = stages.iter().find(|(i, _, _, _)| *i == index) {
            return Arc::clone(existing);
        }
        stages.push((index, name.to_string(), inputs, Arc::clone(&m)));
        m
    }

    pub(crate) fn produced(&self) {
        self.produced.fetch_add(1, Relaxed);
    }

    /// Elements the pipeline produced so far.
    pub(crate) fn produced_count(&self) -> u64 {
        self.produced.load(Relaxed)
    }

    /// Every stage's statistics now (sources first), the waits attributed to the stages
    /// that cause them, and the position of the bottleneck; with the wall time so far.
    pub(crate) fn stage_stats(&self) -> StageSnapshot {
        let wall = self.started.elapsed().as_secs_f64();
        let stages = self.stages.locked();
        let mut out: Vec<StageStats> = stages
            .iter()
            .map(|(index, name, inputs, m)| {
                let secs = |a: &AtomicU64| a.load(Relaxed) as f64 / 1e9;
                let workers = m.workers.load(Relaxed);
                let busy = secs(&m.busy_ns);
                let samples = m.buffer_samples.load(Relaxed);
                StageStats {
                    index: *index,
                    name: name.clone(),
                    elements_in: m.elements_in.load(Relaxed)
                        + if m.counts_own_inputs.load(Relaxed) {
                            0
                        } else {
                            inputs
                                .iter()
                                .filter_map(|i| stages.iter().find(|s| s.0 == *i))
                                .map(|s| s.3.elements_out.load(Relaxed))
                                .sum::<u64>()
                        },
                    elements_out: m.elements_out.load(Relaxed),
                    bytes_out: m.bytes_out.load(Relaxed),
                    busy_seconds: busy,
                    wait_upstream_seconds: secs(&m.wait_upstream_ns),
                    wait_downstream_seconds: secs(&m.wait_downstream_ns),
                    consumer_wait_seconds: secs(&m.consumer_wait_ns),
                    caused_wait_seconds: 0.0,
                    workers,
                    row_threads: m.row_threads.load(Relaxed),
                    busy_fraction: if wall > 0.0 {
                        (busy / (wall * workers.max(1) as f64)).min(1.0)
                    } else {
                        0.0
                    },
                    buffer_len: m.buffer_len.load(Relaxed),
                    buffer_capacity: m.buffer_capacity.load(Relaxed),
                    buffer_mean: if samples > 0 {
                        m.buffer_sum.load(Relaxed) as f64 / samples as f64
                    } else {
                        0.0
                    },
                    skipped: m.skipped.load(Relaxed),
                    element_p50_seconds: None,
                    element_p99_seconds: None,
                    element_times: TimeDistribution::default(),
                }
                .with_element_times(m.element_time.snapshot())
            })
            .collect();
        out.sort_by_key(|s| s.index);
        let bottleneck = attribute_waits(&mut out, &stages);
        StageSnapshot {
            wall_seconds: wall,
            stages: out,
            bottleneck,
        }
    }
}

/// The stages' statistics at one moment (see [`StatsRegistry::stage_stats`]).
#[derive(Debug, Clone)]
pub(crate) struct StageSnapshot {
    /// Wall time since the run started.
    pub(crate) wall_seconds: f64,
    /// Every stage, sources first.
    pub(crate) stages: Vec<StageStats>,
    /// Position (in `stages`) of the bottleneck.
    pub(crate) bottleneck: Option<usize>,
}

/// Attributes the consumers' waiting to the stages that cause it and returns the position
/// (in `out`) of the stage causing the most.
///
/// A stage that runs on its consumer's thread causes the time measured inside it (upstream
/// time excluded). A stage with worker threads (a buffer) causes the share of the waits on
/// it during which its workers were working; the share during which they were waiting on
/// their own input is passed down to that input, which is the true cause.
///
/// Waits passed down to an inline stage are split the same way, by its own time against the
/// time spent in the stages it called: a worker thread (prefetch's) blocked in an inline
/// `batch` was mostly blocked in the stage below it, not in `batch`'s own work. (Its own
/// consumer's waits are not split again: they exclude upstream time already.)
fn attribute_waits(out: &mut [StageStats], stages: &[Registered]) -> Option<usize> {
    let indices: Vec<usize> = out.iter().map(|s| s.index).collect();
    let pos = |index: usize| indices.iter().position(|&i| i == index);
    // Waits passed down to each stage by the stages that consume it.
    let mut received = vec![0.0; out.len()];
    // Consumers have higher indices than their inputs: walk from the top down, so that a
    // stage has received everything before it passes its share on.
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(out[i].index));
    for i in order {
        let s = &out[i];
        let inputs: Vec<usize> = stages
            .iter()
            .find(|r| r.0 == s.index)
            .map(|r| r.2.iter().filter_map(|&x| pos(x)).collect())
            .unwrap_or_default();
        let own = s.consumer_wait_seconds;
        let splittable = if s.workers > 0 {
            own + received[i]
        } else {
            received[i]
        };
        let total = s.busy_seconds + s.wait_upstream_seconds;
        let starved = if total > 0.0 && !inputs.is_empty() {
            s.wait_upstream_seconds / total
        } else {
            0.0
        };
        let passed = splittable * starved;
        out[i].caused_wait_seconds = own + received[i] - passed;
        for &j in &inputs {
            received[j] += passed / inputs.len() as f64;
        }
    }
    bottleneck_of(out)
}

/// The bottleneck among `stages` whose waits are attributed (`caused_wait_seconds`): the
/// position of the stage the pipeline waited on most, if it waited on any. The one rule
/// the report, the merge of several epochs and autotune all use.
pub(crate) fn bottleneck_of(stages: &[StageStats]) -> Option<usize> {
    stages
        .iter()
        .enumerate()
        .filter(|(_, s)| s.caused_wait_seconds > 0.0)
        .max_by(|(_, a), (_, b)| a.caused_wait_seconds.total_cmp(&b.caused_wait_seconds))
        .map(|(i, _)| i)
}
