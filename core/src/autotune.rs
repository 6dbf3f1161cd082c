//! Autotuning: `num_parallel = "auto"` and `prefetch("auto")` chosen while the pipeline runs.
//!
//! Every stage asked for `auto` registers a [`Knob`]: the worker threads of a parallel stage
//! (`map`, `filter`, `image_ops`, `map_chunks`, `batch`, plugin stages; they start at the
//! CPU budget), the reading threads of an `interleave` (from 0, every file read on the
//! consumer's thread, to one per open file; they start at 0), or the buffer of a `prefetch`
//! (it starts at two elements per CPU). One tuner thread per running pipeline
//! measures the pipeline's throughput and hill-climbs one knob at a time:
//!
//! 1. Warm-up: the first [`WARMUP`] of the run (and at least [`MIN_ELEMENTS`] elements) are
//!    not judged; buffers fill and workers measure their chunk sizes.
//! 2. A round: knobs are tried in the order of the bottleneck report (the stage the
//!    pipeline waits on most first). For a knob, the throughput at its current value is
//!    measured, then one step up (one more thread, or a buffer twice as large); a step
//!    is kept only when the throughput rises by more than [`GAIN`] in two windows in a
//!    row, and then the next step up is tried; otherwise one step down is tried the same
//!    way (except on the bottleneck stage, which is never given less; a stage whose
//!    threads are busy less than 10% of the time is tried at its minimum at once), and the
//!    knob goes back to where it was if neither helped. An `interleave` is not tried with
//!    more reading threads while the process keeps at least 90% of its CPUs (the CPU
//!    budget, at most the machine's) busy: a reading thread adds a thread, not CPU, and
//!    helps only where CPUs wait on storage (the `augment` pipeline lost 3% to that probe).
//! 3. A round that changed nothing is followed by a pause (1 s, doubling to 8 s) before the
//!    knobs are tried again, so the tuner follows a run whose costs change. A direction
//!    that did not help sits out the next 2, 4, 8, then 16 rounds (a probe of a worse
//!    setting costs throughput while it is measured), and a `prefetch` buffer that its
//!    consumer finds nearly empty is left alone (its input is the slower side: no size
//!    changes the pace).
//!
//! Throughput is counted at the stage nearest the output among those that hand out at
//! least half as many elements as the busiest (in steady state every stage runs at the
//! same pace; a batch count is too coarse to time, and a reader's read-ahead makes its
//! count bursty), over windows of at least [`MIN_WINDOW`] and [`MIN_ELEMENTS`] elements.
//!
//! Budgets: a stage never has more worker threads than the CPU budget
//! ([`Options::cpu_budget`](crate::Options)), as a fixed `num_parallel` is capped too; an
//! `interleave` never more than its `cycle_length`; a `prefetch` buffer is capped at
//! [`MAX_BUFFER`] elements and at its share of the RAM budget in bytes: half the budget
//! ([`BUFFER_SHARE`]) divided among the tuned buffers, as many elements of the mean size
//! seen so far as fit in it. The run's byte ledger ([`crate::ByteLedger`]) holds all
//! buffers together to the budget whatever the knobs say (a producer waits for room);
//! the share keeps the tuner from growing a buffer the ledger would keep from filling.
//!
//! Every change, and every probe that was undone, is a [`Decision`] in the pipeline's
//! statistics ([`PipelineStats::autotune`](crate::PipelineStats)), saying what was
//! changed and the throughputs that decided it.
//!
//! Values learned in one epoch are where the next epoch of the same dataset starts.
//!
//! Not tuned: a global shuffle's reading threads (`num_parallel = "auto"` there means the
//! CPU budget, at most 4, fixed for the epoch, because each thread owns a fixed share of the
//! permutation's chunks) and buffers other than `prefetch`'s (a parallel stage's in-flight
//! chunks are bounded by its thread count).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::select;
use serde::Serialize;

use crate::executor::shutdown::Shutdown;
use crate::metrics::{StageMetrics, StatsRegistry, bottleneck_of};
use crate::process_cpu::process_cpu_time;
use crate::sync::LockExt;

/// The part of a run not judged, while buffers fill.
pub const WARMUP: Duration = Duration::from_millis(150);
/// The shortest measuring window.
pub const MIN_WINDOW: Duration = Duration::from_millis(250);
/// The longest measuring window (a slow pipeline is judged on fewer elements).
pub const MAX_WINDOW: Duration = Duration::from_millis(1500);
/// The fewest elements a window counts (unless it reaches [`MAX_WINDOW`]).
pub const MIN_ELEMENTS: u64 = 512;
/// The throughput rise that makes a step worth keeping (noise between windows on a busy
/// machine is a few percent).
pub const GAIN: f64 = 0.03;
/// The largest `prefetch` buffer autotune chooses, in elements.
pub const MAX_BUFFER: usize = 64;
/// The part of the RAM budget the tuned `prefetch` buffers share (in bytes; the rest is
/// for the other buffers: work in flight, shuffle buffers, caches).
pub const BUFFER_SHARE: f64 = 0.5;
/// Below this busy fraction a stage's threads are tried away all at once.
const IDLE_BUSY: f64 = 0.1;
/// The share of its CPUs a process keeps busy from which more reading threads are not
/// tried: they could only take CPU time from the threads that have it.
const CPUS_BUSY: f64 = 0.9;
/// Time for a change to take effect before its window starts.
const SETTLE: Duration = Duration::from_millis(30);
/// How often the tuner wakes while waiting.
const TICK: Duration = Duration::from_millis(10);

/// What a knob sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KnobKind {
    /// Worker threads of a parallel stage.
    NumParallel,
    /// Open files of an `interleave` read on threads of their own (`num_parallel =
    /// "auto"`); 0 reads them all on the consumer's thread.
    ReadingThreads,
    /// Elements a `prefetch` buffers.
    BufferSize,
}

impl KnobKind {
    /// Whether the knob counts threads (stepped one at a time).
    pub fn is_threads(self) -> bool {
        matches!(self, KnobKind::NumParallel | KnobKind::ReadingThreads)
    }

    /// The knob's name as reports show it: `num_parallel`, `reading_threads` or
    /// `buffer_size`.
    pub fn as_str(self) -> &'static str {
        match self {
            KnobKind::NumParallel => "num_parallel",
            KnobKind::ReadingThreads => "reading_threads",
            KnobKind::BufferSize => "buffer_size",
        }
    }
}

/// One value the tuner sets, read by the stage it belongs to (relaxed atomics: a stage
/// sees a change within a few elements).
#[derive(Debug)]
pub struct Knob {
    stage_index: usize,
    stage: String,
    kind: KnobKind,
    value: AtomicUsize,
    min: usize,
    max: usize,
    metrics: Arc<StageMetrics>,
}

impl Knob {
    /// The current value.
    pub fn get(&self) -> usize {
        self.value.load(Relaxed)
    }

    /// The largest value the stage allows (threads it started, or its channel's room).
    pub fn max(&self) -> usize {
        self.max
    }

    fn set(&self, v: usize) {
        self.value.store(v, Relaxed);
        if self.kind.is_threads() {
            self.metrics.set_workers(v);
        }
    }
}

/// A change the tuner made (or tried and undid), and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Decision {
    /// Seconds since the run started.
    pub at_seconds: f64,
    /// The stage, as `name#index`.
    pub stage: String,
    /// `num_parallel` or `buffer_size`.
    pub knob: KnobKind,
    /// The value before.
    pub from: usize,
    /// The value after (equal to `from` when a probe was undone).
    pub to: usize,
    /// Why, with the measured throughputs.
    pub reason: String,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>7.2}s {} {}: {} -> {}: {}",
            self.at_seconds,
            self.stage,
            self.knob.as_str(),
            self.from,
            self.to,
            self.reason
        )
    }
}

/// CPUs a run with `cpu_budget` may keep busy: the budget, at most the machine's CPUs.
fn usable_cpus(cpu_budget: usize) -> usize {
    let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpu_budget.clamp(1, machine)
}

/// Knob values a previous run of the same dataset ended with, by (stage index, kind).
pub(crate) type Learned = HashMap<(usize, KnobKind), usize>;

/// The tuner of one running pipeline: its knobs, decisions and thread.
#[derive(Debug)]
pub(crate) struct Autotuner {
    knobs: Mutex<Vec<Arc<Knob>>>,
    decisions: Mutex<Vec<Decision>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    learned: Learned,
    ram_budget: u64,
    /// CPUs the run may keep busy: its CPU budget, at most the machine's.
    cpus: usize,
    /// The run's statistics (weak: they hold this tuner for their snapshots) and shutdown.
    run: Option<(Weak<StatsRegistry>, Shutdown)>,
    me: Weak<Autotuner>,
    /// Where decisions are reported as they are taken (trace, timeline).
    observe: crate::observe::Observe,
}

impl Autotuner {
    /// A tuner for the run with these statistics; its thread starts with the first knob
    /// (stages may be built after the run starts, e.g. inside `repeat`).
    pub(crate) fn new(
        learned: Learned,
        ram_budget: u64,
        cpu_budget: usize,
        stats: &Arc<StatsRegistry>,
        shutdown: Shutdown,
        observe: crate::observe::Observe,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Autotuner {
            knobs: Mutex::default(),
            decisions: Mutex::default(),
            thread: Mutex::default(),
            learned,
            ram_budget,
            cpus: usable_cpus(cpu_budget),
            run: Some((Arc::downgrade(stats), shutdown)),
            me: me.clone(),
            observe,
        })
    }

    /// A tuner without a thread (unit tests).
    #[cfg(test)]
    pub(crate) fn detached(learned: Learned, ram_budget: u64) -> Self {
        Autotuner {
            knobs: Mutex::default(),
            decisions: Mutex::default(),
            thread: Mutex::default(),
            learned,
            ram_budget,
            cpus: usable_cpus(usize::MAX),
            run: None,
            me: Weak::new(),
            observe: crate::observe::Observe::new(),
        }
    }

    /// The knob of stage `index` (the same one when the stage is rebuilt by `repeat`),
    /// starting at `initial` (or what the previous run learned) within `min..=max`.
    pub(crate) fn knob(
        &self,
        index: usize,
        stage: String,
        kind: KnobKind,
        initial: usize,
        (min, max): (usize, usize),
        metrics: &Arc<StageMetrics>,
    ) -> Arc<Knob> {
        let mut knobs = self.knobs.locked();
        if let Some(k) = knobs
            .iter()
            .find(|k| k.stage_index == index && k.kind == kind)
        {
            return Arc::clone(k);
        }
        let start = self
            .learned
            .get(&(index, kind))
            .copied()
            .unwrap_or(initial)
            .clamp(min, max.max(min));
        let knob = Arc::new(Knob {
            stage_index: index,
            stage,
            kind,
            value: AtomicUsize::new(start),
            min,
            max: max.max(min),
            metrics: Arc::clone(metrics),
        });
        knob.set(start);
        knobs.push(Arc::clone(&knob));
        drop(knobs);
        self.start();
        knob
    }

    /// Starts the tuner thread (once).
    fn start(&self) {
        let Some((stats, shutdown)) = &self.run else {
            return;
        };
        let (Some(me), Some(stats)) = (self.me.upgrade(), stats.upgrade()) else {
            return;
        };
        let mut slot = self.thread.locked();
        if slot.is_some() || shutdown.is_set() {
            return;
        }
        let shutdown = shutdown.clone();
        *slot = std::thread::Builder::new()
            .name("sluice-autotune".into())
            .spawn(move || Tuner::new(me, stats, shutdown).run())
            .ok();
    }

    /// Waits for the tuner thread (after shutdown was signalled).
    pub(crate) fn join(&self) {
        if let Some(t) = self.thread.locked().take() {
            let _ = t.join();
        }
    }

    /// The decisions so far.
    pub(crate) fn decisions(&self) -> Vec<Decision> {
        self.decisions.locked().clone()
    }

    /// The knobs' values now, to start the next run from.
    pub(crate) fn learned(&self) -> Learned {
        self.knobs
            .locked()
            .iter()
            .map(|k| ((k.stage_index, k.kind), k.get()))
            .collect()
    }

    /// The knobs' values now, as (stage, kind, value).
    pub(crate) fn values(&self) -> Vec<(String, KnobKind, usize)> {
        self.knobs
            .locked()
            .iter()
            .map(|k| (k.stage.clone(), k.kind, k.get()))
            .collect()
    }

    fn record(&self, started: Instant, knob: &Knob, from: usize, to: usize, reason: String) {
        let d = Decision {
            at_seconds: started.elapsed().as_secs_f64(),
            stage: knob.stage.clone(),
            knob: knob.kind,
            from,
            to,
            reason,
        };
        tracing::debug!(decision = %d, "autotune");
        self.observe.autotune(&d);
        self.decisions.locked().push(d);
    }
}

/// Why a measurement stopped early.
struct Stopped;

/// The tuner thread's state.
struct Tuner {
    tuner: Arc<Autotuner>,
    stats: Arc<StatsRegistry>,
    shutdown: Shutdown,
    started: Instant,
    /// Reasons already given for leaving a knob alone.
    noted: Mutex<std::collections::HashSet<(usize, KnobKind, String)>>,
    /// Per (stage, kind, up): how many rounds a direction that failed sits out.
    backoffs: Mutex<HashMap<(usize, KnobKind, bool), Backoff>>,
    /// Per buffer stage: its occupancy samples when it was last looked at.
    occupancy: Mutex<HashMap<usize, (u64, u64)>>,
}

impl Tuner {
    fn new(tuner: Arc<Autotuner>, stats: Arc<StatsRegistry>, shutdown: Shutdown) -> Self {
        Tuner {
            tuner,
            stats,
            shutdown,
            started: Instant::now(),
            noted: Mutex::default(),
            backoffs: Mutex::default(),
            occupancy: Mutex::default(),
        }
    }

    /// Sleeps `d`; `Err` when the pipeline shuts down.
    fn sleep(&self, d: Duration) -> Result<(), Stopped> {
        select! {
            recv(self.shutdown.channel()) -> _ => Err(Stopped),
            default(d) => if self.shutdown.is_set() { Err(Stopped) } else { Ok(()) },
        }
    }

    /// The throughput over the next window, in elements per second of the progress stage
    /// (see [`StatsRegistry::progress_stage`]); `None` if the pipeline produced nothing for
    /// [`MAX_WINDOW`] (it ended or is stalled).
    fn measure(&self) -> Result<Option<f64>, Stopped> {
        let Some(stage) = self.stats.progress_stage() else {
            self.sleep(MIN_WINDOW)?;
            return Ok(None);
        };
        let count = || self.stats.elements_out_of(stage);
        let (t0, c0) = (Instant::now(), count());
        loop {
            self.sleep(TICK)?;
            let (dt, dc) = (t0.elapsed(), count().saturating_sub(c0));
            if (dt >= MIN_WINDOW && dc >= MIN_ELEMENTS) || dt >= MAX_WINDOW {
                return Ok((dc > 0).then(|| dc as f64 / dt.as_secs_f64()));
            }
        }
    }

    /// The throughput with the current setting over two windows, if the first already
    /// beats `base` by more than [`GAIN`] (a step is kept only if it holds twice: windows
    /// on a busy machine vary by several percent). Returns the mean, or the first window's
    /// rate if it did not beat `base`.
    fn measure_against(&self, base: f64) -> Result<Option<f64>, Stopped> {
        let Some(first) = self.measure()? else {
            return Ok(None);
        };
        if first / base - 1.0 <= GAIN {
            return Ok(Some(first));
        }
        let Some(second) = self.measure()? else {
            return Ok(None);
        };
        Ok(Some(if second / base - 1.0 > GAIN {
            (first + second) / 2.0
        } else {
            first.min(second)
        }))
    }

    fn run(self) {
        // `Err` only says the pipeline shut down.
        let _ = self.tune();
    }

    fn tune(&self) -> Result<(), Stopped> {
        // Warm-up.
        while self.started.elapsed() < WARMUP || self.stats.max_elements_out() < MIN_ELEMENTS {
            self.sleep(TICK)?;
        }
        let mut pause = Duration::from_secs(1);
        loop {
            let mut changed = false;
            let (knobs, bottleneck) = self.order();
            for knob in knobs {
                // The stage the pipeline waits on most is never given less.
                let bottleneck = bottleneck == Some(knob.stage_index);
                changed |= self.tune_knob(&knob, bottleneck)?;
            }
            if changed {
                pause = Duration::from_secs(1);
            } else {
                self.sleep(pause)?;
                pause = (pause * 2).min(Duration::from_secs(8));
            }
        }
    }

    /// The knobs, the bottleneck's first, then by how long the pipeline waited on their
    /// stages; and the bottleneck's stage index.
    fn order(&self) -> (Vec<Arc<Knob>>, Option<usize>) {
        let snapshot = self.stats.stage_stats().stages;
        let caused = |k: &Knob| {
            snapshot
                .iter()
                .find(|s| s.index == k.stage_index)
                .map(|s| s.caused_wait_seconds)
                .unwrap_or(0.0)
        };
        let mut knobs = self.tuner.knobs.locked().clone();
        knobs.sort_by(|a, b| caused(b).total_cmp(&caused(a)));
        let bottleneck = bottleneck_of(&snapshot).map(|i| snapshot[i].index);
        (knobs, bottleneck)
    }

    /// The bounds of a knob now: a buffer's top is also limited by the RAM budget.
    fn bounds(&self, knob: &Knob) -> (usize, usize, Option<String>) {
        if knob.kind != KnobKind::BufferSize {
            return (knob.min, knob.max, None);
        }
        let snapshot = self.stats.stage_stats().stages;
        let Some(s) = snapshot.iter().find(|s| s.index == knob.stage_index) else {
            return (knob.min, knob.max, None);
        };
        if s.elements_out == 0 {
            // No element size seen yet: nothing to hold the buffer to.
            return (knob.min, knob.max, None);
        }
        let mean = (s.bytes_out / s.elements_out).max(1);
        let buffers = self
            .tuner
            .knobs
            .locked()
            .iter()
            .filter(|k| k.kind == KnobKind::BufferSize)
            .count()
            .max(1) as u64;
        let share = (self.tuner.ram_budget as f64 * BUFFER_SHARE) as u64 / buffers;
        let fit = (share / mean) as usize;
        if fit < knob.max {
            let why = format!(
                "a buffer's share of the RAM budget is {} bytes, {} elements of {} KiB",
                share,
                fit,
                mean >> 10
            );
            (knob.min.min(fit.max(1)), fit.max(1), Some(why))
        } else {
            (knob.min, knob.max, None)
        }
    }

    /// Records why a knob was left alone, once per reason.
    fn note(&self, knob: &Knob, value: usize, why: String) {
        let mut noted = self.noted.locked();
        if noted.insert((knob.stage_index, knob.kind, why.clone())) {
            self.tuner.record(self.started, knob, value, value, why);
        }
    }

    /// One step of `knob` from `v`, up or down, within bounds.
    fn step(kind: KnobKind, v: usize, up: bool, (lo, hi): (usize, usize)) -> Option<usize> {
        let next = match (kind, up) {
            (KnobKind::NumParallel | KnobKind::ReadingThreads, true) => v + 1,
            (KnobKind::NumParallel | KnobKind::ReadingThreads, false) => v.saturating_sub(1),
            (KnobKind::BufferSize, true) => v * 2,
            (KnobKind::BufferSize, false) => v / 2,
        };
        let next = next.clamp(lo, hi);
        (next != v).then_some(next)
    }

    /// Tries `knob` up, then (unless its stage is the bottleneck) down; returns whether it
    /// changed. A direction that did not help is skipped for the next 2, 4, 8 or 16
    /// rounds (probes of worse settings cost throughput); a buffer that its consumer
    /// always finds (nearly) empty is not probed (its input is slower: neither a bigger nor
    /// a smaller one changes the pace).
    fn tune_knob(&self, knob: &Knob, bottleneck: bool) -> Result<bool, Stopped> {
        let (lo, hi, ram_note) = self.bounds(knob);
        let start = knob.get();
        // The RAM budget can shrink a buffer's room as bigger elements are seen.
        if start > hi {
            knob.set(hi);
            self.tuner.record(
                self.started,
                knob,
                start,
                hi,
                ram_note.unwrap_or_else(|| "above its bounds".into()),
            );
            return Ok(true);
        }
        let directions: &[bool] = if bottleneck { &[true] } else { &[true, false] };
        if directions
            .iter()
            .all(|&up| Self::step(knob.kind, start, up, (lo, hi)).is_none())
        {
            let limit = match (&ram_note, knob.kind) {
                (Some(note), _) => format!(": {note}"),
                (None, KnobKind::ReadingThreads) => ", the CPU budget or cycle_length".into(),
                (None, KnobKind::NumParallel) => ", the CPU budget".into(),
                (None, KnobKind::BufferSize) => String::new(),
            };
            let why = if bottleneck {
                format!("kept {start}: the bottleneck, already at the most allowed ({hi}{limit})")
            } else {
                format!("kept {start}: its only value within its bounds")
            };
            self.note(knob, start, why);
            return Ok(false);
        }
        if knob.kind == KnobKind::BufferSize {
            let (samples, sum, _) = knob.metrics.buffer_samples();
            let (s0, sum0) = self
                .occupancy
                .locked()
                .insert(knob.stage_index, (samples, sum))
                .unwrap_or((0, 0));
            let n = samples.saturating_sub(s0);
            if n >= 8 {
                let mean = sum.saturating_sub(sum0) as f64 / n as f64;
                if mean < 0.1 * start as f64 {
                    self.note(
                        knob,
                        start,
                        format!(
                            "kept {start}: its consumer finds it nearly empty (mean {mean:.1} of {start}): its input is the slower side, and a buffer's size does not change that"
                        ),
                    );
                    return Ok(false);
                }
            }
        }
        let cpu_before = process_cpu_time();
        let window = Instant::now();
        let Some(mut base) = self.measure()? else {
            return Ok(false);
        };
        // CPUs the process kept busy over the base window (all its threads: the pipeline's
        // and, in Python, the trainer's).
        let busy_cpus = cpu_before
            .zip(process_cpu_time())
            .map(|(a, b)| b.saturating_sub(a).as_secs_f64() / window.elapsed().as_secs_f64());
        let mut changed = false;
        for &up in directions {
            if self.backing_off(knob, up) {
                continue;
            }
            if up
                && knob.kind == KnobKind::ReadingThreads
                && busy_cpus.is_some_and(|busy| busy >= CPUS_BUSY * self.tuner.cpus as f64)
            {
                // A reading thread adds a thread, not CPU: it helps where the CPUs wait on
                // storage, and here they do not (its probe would only cost throughput).
                self.note(
                    knob,
                    knob.get(),
                    format!(
                        "kept {}: the process keeps its CPUs busy (at least {:.0}% of {}), so a reading thread would only share them",
                        knob.get(),
                        CPUS_BUSY * 100.0,
                        self.tuner.cpus
                    ),
                );
                continue;
            }
            // A stage whose threads are nearly idle is tried without them at once: its work
            // fits on its consumer's thread, and one step at a time may each gain too
            // little to tell from noise.
            let mut jump = (!up && knob.kind.is_threads() && knob.get() > lo + 1)
                .then(|| self.busy_fraction(knob))
                .flatten()
                .filter(|&busy| busy < IDLE_BUSY)
                .map(|_| lo);
            while let Some(next) = jump
                .take()
                .or_else(|| Self::step(knob.kind, knob.get(), up, (lo, hi)))
            {
                let from = knob.get();
                knob.set(next);
                // Whatever happens, a probe does not outlive the tuner.
                let measured = self.sleep(SETTLE).and_then(|()| self.measure_against(base));
                let rate = match measured {
                    Ok(Some(rate)) => rate,
                    Ok(None) => {
                        knob.set(from);
                        return Ok(changed);
                    }
                    Err(stopped) => {
                        knob.set(from);
                        return Err(stopped);
                    }
                };
                let gain = rate / base - 1.0;
                if gain > GAIN {
                    self.tuner.record(
                        self.started,
                        knob,
                        from,
                        next,
                        format!(
                            "{} {}: {:.0} -> {:.0} elements/s ({:+.1}%)",
                            if up { "raised" } else { "lowered" },
                            knob.kind.as_str(),
                            base,
                            rate,
                            gain * 100.0
                        ),
                    );
                    self.backoff(knob, up, true);
                    base = rate;
                    changed = true;
                } else {
                    knob.set(from);
                    let mut reason = format!(
                        "kept {from}: {next} gave {rate:.0} elements/s against {base:.0} ({:+.1}%, a step is kept above {:+.0}%)",
                        gain * 100.0,
                        GAIN * 100.0
                    );
                    if up
                        && next == hi
                        && let Some(note) = &ram_note
                    {
                        reason.push_str(&format!("; at most {hi}: {note}"));
                    }
                    self.tuner.record(self.started, knob, from, from, reason);
                    self.backoff(knob, up, false);
                    break;
                }
            }
            if changed {
                break;
            }
        }
        Ok(changed)
    }

    /// The busy fraction of the knob's stage's threads so far.
    fn busy_fraction(&self, knob: &Knob) -> Option<f64> {
        self.stats
            .stage_stats()
            .stages
            .iter()
            .find(|s| s.index == knob.stage_index)
            .map(|s| s.busy_fraction)
    }

    /// Whether `knob`'s `up` (or down) direction sits this round out; counts the round.
    fn backing_off(&self, knob: &Knob, up: bool) -> bool {
        let mut states = self.backoffs.locked();
        let state = states.entry((knob.stage_index, knob.kind, up)).or_default();
        if state.skip > 0 {
            state.skip -= 1;
            return true;
        }
        false
    }

    /// After a probe: a step that helped clears the backoff; one that did not doubles it.
    fn backoff(&self, knob: &Knob, up: bool, helped: bool) {
        let mut states = self.backoffs.locked();
        let state = states.entry((knob.stage_index, knob.kind, up)).or_default();
        if helped {
            *state = Backoff::default();
        } else {
            state.penalty = (state.penalty * 2).clamp(2, 16);
            state.skip = state.penalty;
        }
    }
}

/// Rounds a probe direction sits out after failing.
#[derive(Debug, Default, Clone, Copy)]
struct Backoff {
    penalty: u32,
    skip: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_stay_in_bounds() {
        assert_eq!(Tuner::step(KnobKind::NumParallel, 2, true, (1, 2)), None);
        assert_eq!(
            Tuner::step(KnobKind::NumParallel, 2, false, (1, 2)),
            Some(1)
        );
        assert_eq!(Tuner::step(KnobKind::NumParallel, 1, false, (1, 2)), None);
        assert_eq!(Tuner::step(KnobKind::BufferSize, 4, true, (1, 64)), Some(8));
        assert_eq!(
            Tuner::step(KnobKind::BufferSize, 48, true, (1, 64)),
            Some(64)
        );
        assert_eq!(Tuner::step(KnobKind::BufferSize, 1, false, (1, 64)), None);
    }

    #[test]
    fn knobs_are_shared_per_stage_and_start_from_what_was_learned() {
        let m = Arc::new(StageMetrics::default());
        let mut learned = Learned::new();
        learned.insert((3, KnobKind::NumParallel), 1);
        let t = Autotuner::detached(learned, 1 << 30);
        let a = t.knob(3, "map#3".into(), KnobKind::NumParallel, 4, (1, 4), &m);
        let b = t.knob(3, "map#3".into(), KnobKind::NumParallel, 4, (1, 4), &m);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.get(), 1);
        let c = t.knob(
            5,
            "prefetch#5".into(),
            KnobKind::BufferSize,
            99,
            (1, 64),
            &m,
        );
        assert_eq!(c.get(), 64, "clamped to the bounds");
        assert_eq!(t.learned().len(), 2);
    }
}
