//! The thread that samples a running epoch for its [`Observe`]rs: the trace's counters
//! (every [`TraceConfig::counter_interval`](super::TraceConfig)), the timeline's samples
//! (every [`TimelineConfig::interval`](super::TimelineConfig)), storage retries. It takes
//! a last sample when the epoch ends.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::select;
use serde_json::json;

use super::{KnobSample, Observe};
use crate::autotune::Autotuner;
use crate::executor::shutdown::Shutdown;
use crate::metrics::StatsRegistry;
use crate::run::ByteLedger;

/// A running sampler; [`Sampler::stop`] takes the last sample and joins it.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    thread: Option<JoinHandle<()>>,
}

/// What the sampler reads.
pub(crate) struct Sources {
    pub(crate) epoch: u64,
    pub(crate) stats: Arc<StatsRegistry>,
    pub(crate) autotune: Arc<Autotuner>,
    pub(crate) ledger: Arc<ByteLedger>,
    /// The epoch's records, when followed.
    pub(crate) elastic: Arc<crate::elastic::run::ElasticRun>,
}

impl Sampler {
    /// Starts sampling epoch `sources.epoch` for `observe` until `shutdown` (nothing to do
    /// when nothing is observed).
    pub(crate) fn start(observe: &Observe, sources: Sources, shutdown: Shutdown) -> Sampler {
        if observe.is_empty() {
            return Sampler::default();
        }
        let text = format!("epoch {} started", sources.epoch);
        if let Some(t) = &observe.tracer {
            t.instant("epoch", text.clone(), json!({"epoch": sources.epoch}));
        }
        if let Some(t) = &observe.timeline {
            t.event("epoch", text);
        }
        let observe = observe.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-observe".into())
            .spawn(move || Run::new(observe, sources).run(&shutdown))
            .map_err(|e| tracing::warn!(%e, "no thread to sample the run: no timeline or counters"))
            .ok();
        Sampler { thread }
    }

    /// Waits for the sampler's last sample (after shutdown was signalled).
    pub(crate) fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Run {
    observe: Observe,
    s: Sources,
    /// Counter names per stage (`buffer #3 prefetch`).
    names: BTreeMap<usize, Arc<str>>,
    bytes: Arc<str>,
    rate: Arc<str>,
    /// Elements at the start of the rate's window, and when.
    window: (u64, Instant),
    /// Retries per store so far.
    retries: BTreeMap<String, u64>,
    last_sample: Option<Instant>,
}

impl Run {
    fn new(observe: Observe, s: Sources) -> Run {
        let retries = sluice_storage::stats()
            .into_iter()
            .map(|(k, v)| (k, v.retries))
            .collect();
        Run {
            observe,
            names: BTreeMap::new(),
            bytes: Arc::from("bytes in buffers"),
            rate: Arc::from("elements/s"),
            window: (s.stats.produced_count(), Instant::now()),
            s,
            retries,
            last_sample: None,
        }
    }

    fn tick(&self) -> Duration {
        let counters = self
            .observe
            .tracer
            .as_ref()
            .map(|t| t.config().counter_interval);
        let samples = self.observe.timeline.as_ref().map(|t| t.interval());
        counters
            .into_iter()
            .chain(samples)
            .min()
            .unwrap_or(Duration::from_millis(100))
            .max(Duration::from_millis(1))
    }

    fn run(mut self, shutdown: &Shutdown) {
        loop {
            let stop = select! {
                recv(shutdown.channel()) -> _ => true,
                default(self.tick()) => shutdown.is_set(),
            };
            self.once(stop);
            if stop {
                if let Some(t) = &self.observe.timeline {
                    t.end_epoch();
                }
                return;
            }
        }
    }

    /// One tick: counters (and retries) for the trace; a sample for the timeline when its
    /// interval has passed, or `last`.
    fn once(&mut self, last: bool) {
        let snapshot = self.s.stats.stage_stats();
        let produced = self.s.stats.produced_count();
        let buffered = self.s.ledger.usage().held;
        if let Some(t) = &self.observe.tracer {
            for st in &snapshot.stages {
                t.note_stage(st.index, &st.name, self.s.epoch, st.elements_out);
                if st.buffer_capacity > 0 {
                    let name = self
                        .names
                        .entry(st.index)
                        .or_insert_with(|| Arc::from(format!("buffer #{} {}", st.index, st.name)));
                    t.counter(
                        name,
                        vec![
                            ("len", st.buffer_len as f64),
                            ("capacity", st.buffer_capacity as f64),
                        ],
                    );
                }
            }
            t.counter(&self.bytes, vec![("bytes", buffered as f64)]);
            let dt = self.window.1.elapsed();
            if dt >= Duration::from_millis(100) || last {
                let rate =
                    produced.saturating_sub(self.window.0) as f64 / dt.as_secs_f64().max(1e-9);
                t.counter(&self.rate, vec![("elements/s", rate)]);
                self.window = (produced, Instant::now());
            }
        }
        self.retries_since();
        if let Some(t) = &self.observe.timeline {
            let due = self
                .last_sample
                .is_none_or(|at| at.elapsed() >= t.interval());
            if due || last {
                self.last_sample = Some(Instant::now());
                let knobs = self
                    .s
                    .autotune
                    .values()
                    .into_iter()
                    .map(|(stage, knob, value)| KnobSample {
                        stage,
                        knob: knob.as_str().to_string(),
                        value,
                    })
                    .collect();
                let records = self
                    .s
                    .elastic
                    .tracking()
                    .and_then(|t| t.progress.counts())
                    .map(|c| c.fates[0]);
                t.sample(
                    self.s.epoch,
                    &snapshot.stages,
                    (produced, records),
                    buffered,
                    knobs,
                );
            }
        }
    }

    /// Storage retries since the last tick, as events.
    fn retries_since(&mut self) {
        for (store, s) in sluice_storage::stats() {
            let before = self.retries.insert(store.clone(), s.retries).unwrap_or(0);
            let n = s.retries.saturating_sub(before);
            if n == 0 {
                continue;
            }
            let text = format!(
                "{store}: {n} request{} retried",
                if n == 1 { "" } else { "s" }
            );
            if let Some(t) = &self.observe.tracer {
                t.instant(
                    "storage",
                    text.clone(),
                    json!({"store": store, "retries": n}),
                );
            }
            if let Some(t) = &self.observe.timeline {
                t.event("retry", text);
            }
        }
    }
}
