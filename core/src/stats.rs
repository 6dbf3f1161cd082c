//! Statistics of a pipeline run: per stage, the bottleneck, what autotune did, and the
//! report `sluice run` prints. The live counters behind them are in [`crate::metrics`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::autotune::{Autotuner, Decision, KnobKind};
use crate::metrics::StatsRegistry;
use crate::metrics::{StageStats, bottleneck_of};

/// Statistics of a pipeline run (the latest iteration of a dataset).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PipelineStats {
    /// Wall time since the iteration started.
    pub wall_seconds: f64,
    /// Elements the pipeline produced.
    pub elements: u64,
    /// Elements skipped in all stages under the skip error policy.
    pub skipped: u64,
    /// Every stage, sources first.
    pub stages: Vec<StageStats>,
    /// Index (in `stages`) of the bottleneck, if any stage did measurable work.
    pub bottleneck: Option<usize>,
    /// What autotune changed or tried, and why (empty without `auto` settings).
    pub autotune: Vec<Decision>,
    /// The values autotune has set now: (stage, knob, value).
    pub tuned: Vec<(String, KnobKind, usize)>,
    /// Every record of the run accounted for, when the run follows its records (see
    /// [`RecordAccount`]); `None` otherwise.
    pub records: Option<RecordAccount>,
}

/// Every record a run read, accounted for: what became of it. The identity
///
/// ```text
/// read = delivered + skipped + filtered + dropped + unfinished
/// ```
///
/// holds for every run, and `unfinished` is 0 when an epoch ran to its end.
///
/// Records are counted where they enter the pipeline, at its unit points (a file reader:
/// the records of its files; a global shuffle: its permutation's positions; a record-level
/// `shard`: the positions of the stream it shards; another source: its elements), the
/// same records elastic checkpoints follow (see [`crate::elastic`]). A record is counted
/// once, when it is done, through the batch dimension: a batch of 32 rows delivers 32
/// records; a row `unbatch` splits off is a part of its record, which is done when all its
/// parts are. Records are followed when every stage above the unit points passes them on:
/// not across `take`, `skip`, `repeat` or `cache` (iterate epochs instead, or stop reading;
/// the records read and not delivered are then `unfinished`), nor across a stage of your
/// own that does not implement [`Stage::elastic`](crate::Stage::elastic); then `records`
/// is `None`.
///
/// ```
/// use sluice_core::prelude::*;
/// let ds = Dataset::range(0, 10)
///     .filter(|e| Ok(e.tensor("value").and_then(|t| t.as_i64()).is_some_and(|v| v[0] % 3 != 0)))
///     .batch_with(BatchSpec::new(4).drop_remainder(true));
/// let mut it = ds.iter().unwrap();
/// assert_eq!(it.by_ref().count(), 1);
/// let r = it.stats().records.unwrap();
/// // 0, 3, 6, 9 filtered; 4 of the other 6 delivered in one batch, 2 left over.
/// assert_eq!((r.read, r.delivered, r.filtered, r.dropped), (10, 4, 4, 2));
/// assert_eq!((r.skipped, r.unfinished), (0, 0));
/// assert!(r.balances());
/// ```
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct RecordAccount {
    /// Records read (marked at a unit point, or skipped under the skip error policy at or
    /// below one, before being marked: a corrupt record a reader skipped).
    pub read: u64,
    /// Delivered in the pipeline's output (rows of batches counted one by one).
    pub delivered: u64,
    /// Failed under the skip error policy, in a reader or in any stage (every record of
    /// a batch that failed).
    pub skipped: u64,
    /// Left out by a predicate or function: `filter`, a filter plugin, a map function or
    /// plugin that returned nothing, `scan` emitting nothing, `rejection_resample`'s
    /// rejections.
    pub filtered: u64,
    /// Left out by a stage's own rule: a batch remainder with `drop_remainder`, an
    /// incomplete window or group, a batch `unbatch` could not split.
    pub dropped: u64,
    /// Read and not yet done when the statistics were taken: in a buffer (shuffle,
    /// prefetch, a batch being filled) or left there when the run stopped early.
    pub unfinished: u64,
}

impl RecordAccount {
    fn of(c: crate::elastic::progress::Counts) -> RecordAccount {
        let [delivered, skipped, filtered, dropped] = c.fates;
        let done = delivered + skipped + filtered + dropped;
        RecordAccount {
            read: c.read,
            delivered,
            skipped,
            filtered,
            dropped,
            unfinished: c.read.saturating_sub(done),
        }
    }

    /// Whether the identity holds: every record done at most once and no more records
    /// done than read.
    pub fn balances(&self) -> bool {
        self.read == self.delivered + self.skipped + self.filtered + self.dropped + self.unfinished
    }

    fn add(self, o: RecordAccount) -> RecordAccount {
        RecordAccount {
            read: self.read + o.read,
            delivered: self.delivered + o.delivered,
            skipped: self.skipped + o.skipped,
            filtered: self.filtered + o.filtered,
            dropped: self.dropped + o.dropped,
            unfinished: self.unfinished + o.unfinished,
        }
    }
}

impl PipelineStats {
    /// The statistics of a run now: its stages' (from `registry`) and what `tuner` did.
    pub(crate) fn of(registry: &StatsRegistry, tuner: Option<&Autotuner>) -> PipelineStats {
        let snapshot = registry.stage_stats();
        PipelineStats {
            wall_seconds: snapshot.wall_seconds,
            elements: registry.produced_count(),
            skipped: snapshot.stages.iter().map(|s| s.skipped).sum(),
            stages: snapshot.stages,
            bottleneck: snapshot.bottleneck,
            autotune: tuner.map(|t| t.decisions()).unwrap_or_default(),
            tuned: tuner.map(|t| t.values()).unwrap_or_default(),
            records: None,
        }
    }

    /// These statistics with the run's record counts (`None`: not followed).
    pub(crate) fn with_records(mut self, counts: Option<crate::elastic::progress::Counts>) -> Self {
        self.records = counts.map(RecordAccount::of);
        self
    }

    /// The statistics of several epochs (or runs) as one: counts and times summed per
    /// stage, the busy fraction over the total wall time, the bottleneck the stage waited
    /// on most in all, autotune's decisions timed from the start of the first.
    pub fn merge(epochs: &[PipelineStats]) -> PipelineStats {
        if let [one] = epochs {
            return one.clone();
        }
        let wall: f64 = epochs.iter().map(|e| e.wall_seconds).sum();
        let mut stages: BTreeMap<usize, (StageStats, f64, u64)> = BTreeMap::new();
        for s in epochs.iter().flat_map(|e| &e.stages) {
            let (m, mean_sum, n) = stages
                .entry(s.index)
                .or_insert_with(|| (StageStats::empty(s.index, &s.name), 0.0, 0));
            m.elements_in += s.elements_in;
            m.elements_out += s.elements_out;
            m.bytes_out += s.bytes_out;
            m.busy_seconds += s.busy_seconds;
            m.wait_upstream_seconds += s.wait_upstream_seconds;
            m.wait_downstream_seconds += s.wait_downstream_seconds;
            m.consumer_wait_seconds += s.consumer_wait_seconds;
            m.caused_wait_seconds += s.caused_wait_seconds;
            m.workers = m.workers.max(s.workers);
            m.row_threads = m.row_threads.max(s.row_threads);
            m.buffer_len = s.buffer_len;
            m.buffer_capacity = m.buffer_capacity.max(s.buffer_capacity);
            m.skipped += s.skipped;
            m.element_times.merge(&s.element_times);
            *mean_sum += s.buffer_mean;
            *n += 1;
        }
        let stages: Vec<StageStats> = stages
            .into_values()
            .map(|(mut s, mean_sum, n)| {
                s.buffer_mean = mean_sum / n.max(1) as f64;
                let times = std::mem::take(&mut s.element_times);
                let mut s = s.with_element_times(times);
                s.busy_fraction = if wall > 0.0 {
                    (s.busy_seconds / (wall * s.workers.max(1) as f64)).min(1.0)
                } else {
                    0.0
                };
                s
            })
            .collect();
        PipelineStats {
            wall_seconds: wall,
            elements: epochs.iter().map(|e| e.elements).sum(),
            skipped: stages.iter().map(|s| s.skipped).sum(),
            bottleneck: bottleneck_of(&stages),
            stages,
            autotune: epochs
                .iter()
                .scan(0.0, |start, e| {
                    let offset = *start;
                    *start += e.wall_seconds;
                    Some(e.autotune.iter().map(move |d| {
                        let mut d = d.clone();
                        d.at_seconds += offset;
                        d
                    }))
                })
                .flatten()
                .collect(),
            tuned: epochs.last().map(|e| e.tuned.clone()).unwrap_or_default(),
            records: epochs
                .iter()
                .map(|e| e.records)
                .try_fold(RecordAccount::default(), |sum, r| r.map(|r| sum.add(r))),
        }
    }

    /// The stage that limits throughput: the one whose consumers wait on it most
    /// (see [`StageStats::caused_wait_seconds`]).
    pub fn bottleneck(&self) -> Option<&StageStats> {
        self.bottleneck.map(|i| &self.stages[i])
    }

    /// A human-readable table with the bottleneck named.
    pub fn report(&self) -> String {
        let mut s = String::new();
        // The name column fits the longest name (plugin stages are `plugin:NAME`).
        let w = self
            .stages
            .iter()
            .map(|st| st.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(16);
        let _ = writeln!(
            s,
            "{:>3} {:<w$} {:>10} {:>10} {:>7} {:>6} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
            "#",
            "stage",
            "in",
            "out",
            "workers",
            "busy%",
            "p50",
            "p99",
            "wait up",
            "wait down",
            "waited on",
            "buffer"
        );
        for st in &self.stages {
            let _ = writeln!(
                s,
                "{:>3} {:<w$} {:>10} {:>10} {:>7} {:>5.0}% {:>8} {:>8} {:>8.3}s {:>8.3}s {:>8.3}s {:>9}",
                st.index,
                st.name,
                st.elements_in,
                st.elements_out,
                st.threads(),
                st.busy_fraction * 100.0,
                duration(st.element_p50_seconds),
                duration(st.element_p99_seconds),
                st.wait_upstream_seconds,
                st.wait_downstream_seconds,
                st.consumer_wait_seconds,
                if st.buffer_capacity > 0 {
                    format!("{:.1}/{}", st.buffer_mean, st.buffer_capacity)
                } else {
                    "-".to_string()
                },
            );
        }
        let _ = write!(
            s,
            "{} elements in {:.3}s ({:.0}/s)",
            self.elements,
            self.wall_seconds,
            self.elements as f64 / self.wall_seconds.max(1e-9)
        );
        if self.skipped > 0 {
            let _ = write!(s, ", {} skipped", self.skipped);
        }
        match self.bottleneck() {
            Some(b) => {
                let all: f64 = self.stages.iter().map(|s| s.caused_wait_seconds).sum();
                let _ = write!(
                    s,
                    "\nbottleneck: #{} {} (the pipeline waited {:.3}s on it, {:.0}% of all waiting; busy {:.0}% of its {} thread(s); {} per element at p50, {} at p99; it waited {:.3}s on its input and {:.3}s on its consumer)",
                    b.index,
                    b.name,
                    b.caused_wait_seconds,
                    100.0 * b.caused_wait_seconds / all.max(1e-12),
                    b.busy_fraction * 100.0,
                    b.threads().max(1),
                    duration(b.element_p50_seconds).trim_start(),
                    duration(b.element_p99_seconds).trim_start(),
                    b.wait_upstream_seconds,
                    b.wait_downstream_seconds,
                );
            }
            None => s.push_str("\nbottleneck: none measured"),
        }
        if !self.tuned.is_empty() {
            let now: Vec<String> = self
                .tuned
                .iter()
                .map(|(stage, kind, v)| format!("{stage} {}={v}", kind.as_str()))
                .collect();
            let _ = write!(s, "\nautotune: {}", now.join(", "));
            let changes = self.autotune.iter().filter(|d| d.from != d.to).count();
            let _ = write!(
                s,
                " ({changes} change{}, {} probe{} undone)",
                if changes == 1 { "" } else { "s" },
                self.autotune.len() - changes,
                if self.autotune.len() - changes == 1 {
                    ""
                } else {
                    "s"
                }
            );
            for d in &self.autotune {
                let _ = write!(s, "\n  {d}");
            }
        }
        s
    }
}

/// A time per element for the table: `850ns`, `12.3µs`, `4.1ms`, `1.20s`; `-` when not
/// measured.
fn duration(seconds: Option<f64>) -> String {
    match seconds {
        None => "-".to_string(),
        Some(s) if s < 1e-6 => format!("{:.0}ns", s * 1e9),
        Some(s) if s < 1e-3 => format!("{:.1}µs", s * 1e6),
        Some(s) if s < 1.0 => format!("{:.1}ms", s * 1e3),
        Some(s) => format!("{s:.2}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(index: usize, busy: f64, caused: f64) -> StageStats {
        StageStats {
            elements_in: 10,
            elements_out: 10,
            busy_seconds: busy,
            caused_wait_seconds: caused,
            workers: 1,
            skipped: 1,
            ..StageStats::empty(index, &format!("s{index}"))
        }
    }

    #[test]
    fn epochs_merge_into_sums_and_the_overall_bottleneck() {
        let e1 = PipelineStats {
            wall_seconds: 1.0,
            elements: 5,
            skipped: 2,
            stages: vec![stage(0, 0.5, 0.1), stage(1, 0.2, 0.3)],
            bottleneck: Some(1),
            autotune: vec![],
            tuned: vec![],
            records: Some(RecordAccount {
                read: 7,
                delivered: 5,
                skipped: 2,
                ..RecordAccount::default()
            }),
        };
        // A second epoch served from a cache: stage 0 is not run.
        let e2 = PipelineStats {
            wall_seconds: 1.0,
            elements: 5,
            skipped: 1,
            stages: vec![stage(1, 0.1, 0.0)],
            bottleneck: None,
            autotune: vec![],
            tuned: vec![],
            records: Some(RecordAccount {
                read: 6,
                delivered: 5,
                skipped: 1,
                ..RecordAccount::default()
            }),
        };
        let m = PipelineStats::merge(&[e1.clone(), e2.clone()]);
        let r = m.records.unwrap();
        assert_eq!((r.read, r.delivered, r.skipped), (13, 10, 3));
        assert!(r.balances());
        // One epoch whose records were not followed: no account for the whole.
        let blind = PipelineStats {
            records: None,
            ..e2.clone()
        };
        assert_eq!(PipelineStats::merge(&[e1.clone(), blind, e2]).records, None);
        let m = PipelineStats::merge(&[e1.clone(), e1.clone()]);
        assert_eq!(m.elements, 10);
        let m = PipelineStats::merge(&[
            e1,
            PipelineStats {
                wall_seconds: 1.0,
                elements: 5,
                skipped: 1,
                stages: vec![stage(1, 0.1, 0.0)],
                bottleneck: None,
                autotune: vec![],
                tuned: vec![],
                records: None,
            },
        ]);
        assert_eq!(m.skipped, 3);
        assert_eq!(m.stages.len(), 2);
        assert_eq!(m.stages[1].elements_out, 20);
        assert!((m.stages[1].busy_seconds - 0.3).abs() < 1e-12);
        assert!((m.stages[0].busy_fraction - 0.25).abs() < 1e-12);
        assert_eq!(m.bottleneck().map(|s| s.name.as_str()), Some("s1"));
    }
}
