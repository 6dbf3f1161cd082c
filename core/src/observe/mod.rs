//! Seeing where a run's time goes: a [`Tracer`] records a timeline of every thread in the
//! Chrome trace event format (Perfetto, `chrome://tracing`); a [`Timeline`] samples the
//! run's statistics over time (what `sluice run --json` keeps for `sluice report`), and
//! hands each sample to sinks such as the [`TensorBoardWriter`].
//!
//! ```
//! use sluice_core::prelude::*;
//! use sluice_core::observe::{Observe, Timeline, TimelineConfig, TraceConfig, Tracer};
//!
//! let tracer = Tracer::new(TraceConfig::default());
//! let timeline = Timeline::new(TimelineConfig::default());
//! let ds = Dataset::range(0, 1000).map(|e| Ok(e)).batch(10);
//! ds.observe(Observe::new().trace(tracer.clone()).timeline(timeline.clone()));
//! assert_eq!(ds.iter().unwrap().count(), 100);
//!
//! let mut json = Vec::new();
//! tracer.write(&mut json).unwrap();
//! let trace: serde_json::Value = serde_json::from_slice(&json).unwrap();
//! assert!(trace["traceEvents"].as_array().unwrap().iter().any(|e| e["name"] == "batch"));
//! // A sample at least at the end of the epoch, with every stage.
//! let data = timeline.data();
//! assert_eq!(data.samples.last().unwrap().elements, 100);
//! ```

mod sampler;
mod tensorboard;
mod timeline;
mod trace;

pub(crate) use sampler::{Sampler, Sources};

/// What the sampler of epoch `epoch` reads.
pub(crate) fn sampler_sources(
    epoch: u64,
    stats: &std::sync::Arc<crate::metrics::StatsRegistry>,
    autotune: &std::sync::Arc<crate::autotune::Autotuner>,
    ledger: &std::sync::Arc<crate::run::ByteLedger>,
    elastic: &std::sync::Arc<crate::elastic::run::ElasticRun>,
) -> Sources {
    Sources {
        epoch,
        stats: std::sync::Arc::clone(stats),
        autotune: std::sync::Arc::clone(autotune),
        ledger: std::sync::Arc::clone(ledger),
        elastic: std::sync::Arc::clone(elastic),
    }
}
pub use tensorboard::TensorBoardWriter;
pub use timeline::{
    KnobSample, MAX_EVENTS, Sample, StageSample, Timeline, TimelineConfig, TimelineData,
    TimelineEvent, TimelineSink, TimelineStage,
};
pub(crate) use trace::MIN_WAIT;
pub use trace::{TraceConfig, Tracer};

use serde_json::json;

/// Where a dataset's runs report what they do: a trace, a timeline, or both. Set with
/// [`Dataset::observe`](crate::Dataset::observe); every later iteration of the dataset
/// (and of its clones) reports to them, epoch after epoch.
#[derive(Debug, Clone, Default)]
pub struct Observe {
    tracer: Option<Tracer>,
    timeline: Option<Timeline>,
}

impl Observe {
    /// Nothing observed.
    pub fn new() -> Observe {
        Observe::default()
    }

    /// Records a trace into `tracer`.
    pub fn trace(mut self, tracer: Tracer) -> Observe {
        self.tracer = Some(tracer);
        self
    }

    /// Samples the run into `timeline`.
    pub fn timeline(mut self, timeline: Timeline) -> Observe {
        self.timeline = Some(timeline);
        self
    }

    /// The tracer, if any.
    pub fn tracer(&self) -> Option<&Tracer> {
        self.tracer.as_ref()
    }

    /// The timeline, if any.
    pub fn timeline_ref(&self) -> Option<&Timeline> {
        self.timeline.as_ref()
    }

    /// Whether nothing is observed.
    pub fn is_empty(&self) -> bool {
        self.tracer.is_none() && self.timeline.is_none()
    }

    /// Reports an autotune decision.
    pub(crate) fn autotune(&self, d: &crate::autotune::Decision) {
        if let Some(t) = &self.tracer {
            t.instant(
                "autotune",
                format!("{} {} {} -> {}", d.stage, d.knob.as_str(), d.from, d.to),
                json!({"stage": d.stage, "knob": d.knob.as_str(), "from": d.from, "to": d.to, "reason": d.reason}),
            );
        }
        if let Some(t) = &self.timeline {
            t.event("autotune", d.to_string());
        }
    }

    /// Reports `n` elements skipped by stage `stage` under the skip policy.
    pub(crate) fn skipped(&self, stage: &str, error: &crate::Error, n: u64) {
        if let Some(t) = &self.tracer {
            t.instant(
                "skip",
                format!("skipped {n} ({stage})"),
                json!({"stage": stage, "elements": n, "error": error.to_string()}),
            );
        }
        if let Some(t) = &self.timeline {
            t.event("skip", format!("{stage}: skipped {n}: {error}"));
        }
    }
}
