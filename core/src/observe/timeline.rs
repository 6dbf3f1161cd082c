//! [`Timeline`]: a run's statistics sampled over time, what `sluice run --json` keeps for
//! `sluice report` and what TensorBoard's scalars are made of.
//!
//! Every [`TimelineConfig::interval`] (100 ms by default) the run's counters are read:
//! per stage, its elements and bytes out, its busy time and its waits (cumulative over the
//! run, across epochs), its threads and buffer; the elements produced, the bytes the
//! buffers hold, the values autotune has set, and the stage the pipeline waited on most
//! since the sample before (the bottleneck of that interval). Rates are differences of
//! neighbouring samples. The samples stay few: at [`TimelineConfig::max_samples`] every
//! other one is dropped and the interval doubles, so a run of any length keeps at most
//! that many, evenly spaced.
//!
//! Events (epochs, autotune's decisions, storage retries, skipped elements) are kept with
//! their time too, at most [`MAX_EVENTS`] (then counted).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::metrics::StageStats;
use crate::sync::LockExt;

/// Events a timeline keeps; later ones are counted in [`TimelineData::events_dropped`].
pub const MAX_EVENTS: usize = 2000;

/// How often a [`Timeline`] samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelineConfig {
    /// Time between samples at first. Default 100 ms.
    pub interval: Duration,
    /// The most samples kept (see the [module](self)). Default 2000.
    pub max_samples: usize,
}

impl Default for TimelineConfig {
    fn default() -> Self {
        TimelineConfig {
            interval: Duration::from_millis(100),
            max_samples: 2000,
        }
    }
}

/// A run's timeline as data: what `sluice run --json` writes as `"timeline"`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineData {
    /// Seconds between samples (at the end of the run: it doubles as samples are thinned).
    pub interval_seconds: f64,
    /// The stages, by number (the numbers of the run's statistics and errors).
    pub stages: Vec<TimelineStage>,
    /// The samples, in time order.
    pub samples: Vec<Sample>,
    /// Epochs, autotune's decisions, storage retries, skipped elements, in time order.
    pub events: Vec<TimelineEvent>,
    /// Events not kept (beyond [`MAX_EVENTS`]).
    #[serde(default)]
    pub events_dropped: u64,
}

/// A stage of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineStage {
    /// Its number.
    pub index: usize,
    /// Its name (`map`, `plugin:noise`, ...).
    pub name: String,
}

/// The run's counters at one moment. Counts and times are cumulative from the start of
/// the run (over all its epochs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the run started.
    pub t: f64,
    /// The epoch running (0-based).
    pub epoch: u64,
    /// Elements the pipeline produced so far (batches, when it batches).
    pub elements: u64,
    /// Records delivered so far, counted through the batch dimension (a batch of 64 rows
    /// is 64), when the run follows its records (see `RecordAccount`); `None` otherwise.
    #[serde(default)]
    pub records: Option<u64>,
    /// Bytes the run's buffers hold now (the byte ledger).
    pub buffered_bytes: u64,
    /// The stage the pipeline waited on most since the sample before (its number).
    pub bottleneck: Option<usize>,
    /// Every stage that ran so far.
    pub stages: Vec<StageSample>,
    /// The values autotune has set now.
    #[serde(default)]
    pub knobs: Vec<KnobSample>,
}

/// One stage's counters in a [`Sample`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageSample {
    /// The stage's number.
    pub index: usize,
    /// Elements handed downstream so far.
    pub elements_out: u64,
    /// Bytes handed downstream so far.
    pub bytes_out: u64,
    /// Time its threads worked so far (seconds, summed over threads).
    pub busy_seconds: f64,
    /// Time its threads waited on their input so far.
    pub wait_upstream_seconds: f64,
    /// Time its threads were blocked on a full output buffer so far.
    pub wait_downstream_seconds: f64,
    /// Waiting in the pipeline it caused so far (see `StageStats::caused_wait_seconds`).
    pub caused_wait_seconds: f64,
    /// Its threads now (workers, or the row threads it runs batches on).
    pub threads: u64,
    /// Its output buffer's occupancy and capacity now (0 and 0 without one).
    pub buffer_len: u64,
    /// See `buffer_len`.
    pub buffer_capacity: u64,
}

/// A value autotune has set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnobSample {
    /// The stage (`name#number`).
    pub stage: String,
    /// The knob (`num_parallel`, `buffer_size`, `cycle_length` threads).
    pub knob: String,
    /// Its value.
    pub value: usize,
}

/// Something that happened at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// Seconds since the run started.
    pub t: f64,
    /// `epoch`, `autotune`, `retry` or `skip`.
    pub kind: String,
    /// What happened, in words.
    pub text: String,
}

/// Receives each sample as it is taken (the TensorBoard writer is one).
pub trait TimelineSink: Send {
    /// A new sample; `stages` names the stages by number.
    fn sample(&mut self, stages: &[TimelineStage], sample: &Sample, previous: Option<&Sample>);
    /// The run ended (or an epoch did): flush.
    fn flush(&mut self) {}
}

/// Records a run's timeline (see the [module](self)). Cheap to clone (shared); give it
/// to [`Observe::timeline`](super::Observe::timeline), run, then read
/// [`data`](Timeline::data).
#[derive(Clone)]
pub struct Timeline {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeline").finish_non_exhaustive()
    }
}

struct Inner {
    config: TimelineConfig,
    started: Instant,
    state: Mutex<State>,
    sinks: Mutex<Vec<Box<dyn TimelineSink>>>,
}

#[derive(Default)]
struct State {
    data: TimelineData,
    /// The current interval (doubles as samples are thinned).
    interval: Duration,
    /// Totals of the epochs that ended, per stage, and their elements.
    before: BTreeMap<usize, StageSample>,
    elements_before: u64,
    records_before: u64,
    /// The running epoch's counters at the last sample (for the interval's bottleneck),
    /// and the epoch's own elements then.
    last_epoch: BTreeMap<usize, StageSample>,
    last_elements: u64,
    last_records: u64,
}

impl Timeline {
    /// A timeline sampling as `config` says; its clock starts now.
    pub fn new(config: TimelineConfig) -> Timeline {
        Timeline {
            inner: Arc::new(Inner {
                config,
                started: Instant::now(),
                state: Mutex::new(State {
                    interval: config.interval,
                    data: TimelineData {
                        interval_seconds: config.interval.as_secs_f64(),
                        ..TimelineData::default()
                    },
                    ..State::default()
                }),
                sinks: Mutex::default(),
            }),
        }
    }

    /// Hands every sample to `sink` too, as it is taken.
    pub fn add_sink(&self, sink: Box<dyn TimelineSink>) {
        self.inner.sinks.locked().push(sink);
    }

    /// The timeline so far.
    pub fn data(&self) -> TimelineData {
        self.inner.state.locked().data.clone()
    }

    /// Seconds since the timeline started.
    pub fn now(&self) -> f64 {
        self.inner.started.elapsed().as_secs_f64()
    }

    /// The time between samples now.
    pub(crate) fn interval(&self) -> Duration {
        self.inner.state.locked().interval
    }

    /// Keeps an event (`kind`: `epoch`, `autotune`, `retry`, `skip`).
    pub fn event(&self, kind: &str, text: String) {
        let t = self.now();
        let mut s = self.inner.state.locked();
        if s.data.events.len() >= MAX_EVENTS {
            s.data.events_dropped += 1;
        } else {
            s.data.events.push(TimelineEvent {
                t,
                kind: kind.to_string(),
                text,
            });
        }
    }

    /// Takes a sample of the running epoch `epoch`: its stages' statistics now, its own
    /// elements so far, the bytes buffered, autotune's values.
    pub(crate) fn sample(
        &self,
        epoch: u64,
        stages: &[StageStats],
        (elements, records): (u64, Option<u64>),
        buffered_bytes: u64,
        knobs: Vec<KnobSample>,
    ) {
        let t = self.now();
        let (sample, previous, names) = {
            let mut s = self.inner.state.locked();
            let state = &mut *s;
            for st in stages {
                if !state.data.stages.iter().any(|x| x.index == st.index) {
                    state.data.stages.push(TimelineStage {
                        index: st.index,
                        name: st.name.clone(),
                    });
                    state.data.stages.sort_by_key(|x| x.index);
                }
            }
            // The interval's bottleneck: the most waiting caused since the last sample.
            let bottleneck = stages
                .iter()
                .map(|st| {
                    let before = state
                        .last_epoch
                        .get(&st.index)
                        .map_or(0.0, |l| l.caused_wait_seconds);
                    (st.index, st.caused_wait_seconds - before)
                })
                .filter(|(_, d)| *d > 1e-6)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(i, _)| i);
            let epoch_samples: Vec<StageSample> = stages.iter().map(stage_sample).collect();
            state.last_epoch = epoch_samples.iter().map(|x| (x.index, x.clone())).collect();
            state.last_elements = elements;
            state.last_records = records.unwrap_or(0);
            let sample = Sample {
                t,
                epoch,
                elements: state.elements_before + elements,
                records: records.map(|r| state.records_before + r),
                buffered_bytes,
                bottleneck,
                stages: epoch_samples
                    .into_iter()
                    .map(|x| add(&x, state.before.get(&x.index)))
                    .collect(),
                knobs,
            };
            let previous = state.data.samples.last().cloned();
            state.data.samples.push(sample.clone());
            if state.data.samples.len() >= self.inner.config.max_samples.max(2) {
                // Thin: keep every other sample (the last one too), double the interval.
                let last = state.data.samples.pop();
                let kept: Vec<Sample> = state.data.samples.iter().step_by(2).cloned().collect();
                state.data.samples = kept;
                state.data.samples.extend(last);
                state.interval *= 2;
                state.data.interval_seconds = state.interval.as_secs_f64();
            }
            (sample, previous, state.data.stages.clone())
        };
        for sink in self.inner.sinks.locked().iter_mut() {
            sink.sample(&names, &sample, previous.as_ref());
        }
    }

    /// The running epoch ended: its totals carry into the next epoch's samples; sinks
    /// flush.
    pub(crate) fn end_epoch(&self) {
        {
            let mut s = self.inner.state.locked();
            let state = &mut *s;
            for (i, x) in std::mem::take(&mut state.last_epoch) {
                let sum = add(&x, state.before.get(&i));
                state.before.insert(i, sum);
            }
            state.elements_before += std::mem::take(&mut state.last_elements);
            state.records_before += std::mem::take(&mut state.last_records);
        }
        for sink in self.inner.sinks.locked().iter_mut() {
            sink.flush();
        }
    }
}

fn stage_sample(s: &StageStats) -> StageSample {
    StageSample {
        index: s.index,
        elements_out: s.elements_out,
        bytes_out: s.bytes_out,
        busy_seconds: s.busy_seconds,
        wait_upstream_seconds: s.wait_upstream_seconds,
        wait_downstream_seconds: s.wait_downstream_seconds,
        caused_wait_seconds: s.caused_wait_seconds,
        threads: s.threads(),
        buffer_len: s.buffer_len,
        buffer_capacity: s.buffer_capacity,
    }
}

/// `x` with the cumulative counts of `before` added (gauges are `x`'s).
fn add(x: &StageSample, before: Option<&StageSample>) -> StageSample {
    let Some(b) = before else {
        return x.clone();
    };
    StageSample {
        elements_out: x.elements_out + b.elements_out,
        bytes_out: x.bytes_out + b.bytes_out,
        busy_seconds: x.busy_seconds + b.busy_seconds,
        wait_upstream_seconds: x.wait_upstream_seconds + b.wait_upstream_seconds,
        wait_downstream_seconds: x.wait_downstream_seconds + b.wait_downstream_seconds,
        caused_wait_seconds: x.caused_wait_seconds + b.caused_wait_seconds,
        ..x.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(index: usize, out: u64, caused: f64) -> StageStats {
        let mut s = StageStats::empty(index, &format!("s{index}"));
        s.elements_out = out;
        s.caused_wait_seconds = caused;
        s
    }

    #[test]
    fn samples_accumulate_over_epochs_and_name_the_interval_bottleneck() {
        let t = Timeline::new(TimelineConfig::default());
        t.sample(
            0,
            &[stage(0, 10, 1.0), stage(1, 10, 0.5)],
            (10, Some(10)),
            0,
            vec![],
        );
        // Since then stage 1 caused more waiting than stage 0.
        t.sample(
            0,
            &[stage(0, 20, 1.1), stage(1, 20, 2.0)],
            (20, Some(20)),
            0,
            vec![],
        );
        t.end_epoch();
        t.sample(
            1,
            &[stage(0, 5, 0.0), stage(1, 5, 0.0)],
            (5, None),
            0,
            vec![],
        );
        let d = t.data();
        let b: Vec<Option<usize>> = d.samples.iter().map(|s| s.bottleneck).collect();
        assert_eq!(b, [Some(0), Some(1), None]);
        let last = d.samples.last().unwrap();
        assert_eq!((last.epoch, last.elements), (1, 25));
        // Records are counted when the run follows them (the last epoch did not).
        assert_eq!((d.samples[1].records, last.records), (Some(20), None));
        assert_eq!(last.stages[0].elements_out, 25);
        assert_eq!(d.stages.len(), 2);
    }

    #[test]
    fn thinning_keeps_at_most_max_samples_evenly_and_doubles_the_interval() {
        let t = Timeline::new(TimelineConfig {
            interval: Duration::from_millis(10),
            max_samples: 8,
        });
        for i in 0..100 {
            t.sample(0, &[stage(0, i, 0.0)], (i, None), 0, vec![]);
        }
        let d = t.data();
        assert!(d.samples.len() < 8, "{}", d.samples.len());
        assert!(d.interval_seconds > 0.01);
        assert_eq!(d.samples.last().unwrap().elements, 99);
        assert!(d.samples.windows(2).all(|w| w[0].t <= w[1].t));
    }

    #[test]
    fn events_are_bounded() {
        let t = Timeline::new(TimelineConfig::default());
        for i in 0..MAX_EVENTS + 5 {
            t.event("skip", format!("{i}"));
        }
        let d = t.data();
        assert_eq!((d.events.len(), d.events_dropped), (MAX_EVENTS, 5));
    }
}
