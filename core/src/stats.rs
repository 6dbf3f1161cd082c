//! Statistics of a pipeline run: per stage, the bottleneck, what autotune did, and the
//! report `sluice run` prints. The live counters behind them are in [`crate::metrics`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

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
        }
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
            *mean_sum += s.buffer_mean;
            *n += 1;
        }
        let stages: Vec<StageStats> = stages
            .into_values()
            .map(|(mut s, mean_sum, n)| {
                s.buffer_mean = mean_sum / n.max(1) as f64;
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
            "{:>3} {:<w$} {:>10} {:>10} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9}",
            "#",
            "stage",
            "in",
            "out",
            "workers",
            "busy%",
            "wait up",
            "wait down",
            "waited on",
            "buffer"
        );
        for st in &self.stages {
            let _ = writeln!(
                s,
                "{:>3} {:<w$} {:>10} {:>10} {:>7} {:>5.0}% {:>8.3}s {:>8.3}s {:>8.3}s {:>9}",
                st.index,
                st.name,
                st.elements_in,
                st.elements_out,
                st.threads(),
                st.busy_fraction * 100.0,
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
                let _ = write!(
                    s,
                    "\nbottleneck: #{} {} (the pipeline waited {:.3}s on it; busy {:.0}% of its {} thread(s))",
                    b.index,
                    b.name,
                    b.caused_wait_seconds,
                    b.busy_fraction * 100.0,
                    b.threads().max(1)
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
        };
        let m = PipelineStats::merge(&[e1, e2]);
        assert_eq!(m.elements, 10);
        assert_eq!(m.skipped, 3);
        assert_eq!(m.stages.len(), 2);
        assert_eq!(m.stages[1].elements_out, 20);
        assert!((m.stages[1].busy_seconds - 0.3).abs() < 1e-12);
        assert!((m.stages[0].busy_fraction - 0.25).abs() < 1e-12);
        assert_eq!(m.bottleneck().map(|s| s.name.as_str()), Some("s1"));
    }
}
