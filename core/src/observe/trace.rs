//! [`Tracer`]: a timeline of a run in the Chrome trace event format, which Perfetto
//! (<https://ui.perfetto.dev>) and `chrome://tracing` open.
//!
//! What a trace holds:
//! - one track per thread (the consumer's, each stage's workers, prefetch and interleave
//!   threads, the row threads), named as the thread is (`sluice-map-0`, ...);
//! - a span (`"ph": "X"`, category `stage`) per element a stage produced, on the thread
//!   that did the work: a stage running on its consumer's thread spans its `next` call
//!   (the stages it calls nest inside it), a parallel stage spans each chunk of elements
//!   its worker processed (`args.elements`); spans of blocked waits longer than 50 µs
//!   (category `wait`: a worker waiting for input or for room downstream);
//! - plugin calls (category `plugin`, native and WASM) as spans inside their stage's;
//! - counters (`"ph": "C"`) sampled every [`TraceConfig::counter_interval`]: per stage
//!   with a buffer, its occupancy and capacity; the bytes the run's buffers hold; the
//!   elements produced per second;
//! - instant events (`"ph": "i"`): autotune's decisions (category `autotune`), storage
//!   retries (`storage`), elements skipped under the skip policy (`skip`), epochs.
//!
//! **Sampling.** Spans come from the calls the statistics time (every call for a thread's
//! first 64 elements, then one in 16), and a stage records at most one span per
//! [`TraceConfig::min_span_gap`] on each thread; the trace's `otherData.sampling` says so
//! and `otherData.stages` gives, per stage, the spans recorded and the elements produced.
//! At [`TraceConfig::max_events`] the trace stops recording (`otherData.truncated`).
//!
//! Recording costs a clock read the statistics take anyway, a thread-local lookup and a
//! push into the thread's own buffer; without a tracer, nothing (BENCHMARKS.md has the
//! measured overhead).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::sync::LockExt;

/// How a [`Tracer`] samples (see the [module](self)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceConfig {
    /// A stage records at most one span per this gap on each thread. Default 100 µs (at
    /// most 10,000 spans per second per stage and thread).
    pub min_span_gap: Duration,
    /// How often counters are sampled. Default 10 ms.
    pub counter_interval: Duration,
    /// Events after which the trace stops recording. Default 2,000,000 (about 200 MB of
    /// JSON).
    pub max_events: usize,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            min_span_gap: Duration::from_micros(100),
            counter_interval: Duration::from_millis(10),
            max_events: 2_000_000,
        }
    }
}

/// Waits shorter than this are not recorded as spans.
pub(crate) const MIN_WAIT: Duration = Duration::from_micros(50);

/// Records a run's trace (see the [module](self)). Cheap to clone (shared); give it to
/// [`Observe::trace`](super::Observe::trace), run, then [`write`](Tracer::write) it.
#[derive(Debug, Clone)]
pub struct Tracer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    id: u64,
    config: TraceConfig,
    started: Instant,
    threads: Mutex<Vec<Arc<ThreadBuf>>>,
    events: AtomicUsize,
    dropped: AtomicU64,
    /// Per stage index: its name, spans recorded, elements produced (set by the sampler).
    stages: Mutex<BTreeMap<usize, StageEntry>>,
}

#[derive(Debug, Default, Clone, Serialize)]
struct StageEntry {
    name: String,
    spans: u64,
    /// Elements produced in the epochs before `epoch`, and in `epoch` so far.
    elements: u64,
    #[serde(skip)]
    epoch: u64,
    #[serde(skip)]
    current: u64,
}

#[derive(Debug)]
struct ThreadBuf {
    tid: u64,
    name: String,
    events: Mutex<Vec<Event>>,
}

/// One recorded event (times in nanoseconds since the tracer started).
#[derive(Debug)]
enum Event {
    Span {
        cat: &'static str,
        /// `None` for a stage's span: the stage's name (kept once per stage) is written.
        name: Option<Arc<str>>,
        ts: u64,
        dur: u64,
        stage: Option<usize>,
        elements: u64,
    },
    Instant {
        cat: &'static str,
        name: Cow<'static, str>,
        ts: u64,
        args: Value,
    },
    Counter {
        name: Arc<str>,
        ts: u64,
        values: Vec<(&'static str, f64)>,
    },
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static NEXT_TID: AtomicU64 = AtomicU64::new(1);

/// This thread's buffer in the tracer it last recorded to, and when each stage last
/// recorded a span on it.
struct Local {
    tracer: u64,
    buf: Arc<ThreadBuf>,
    last: Vec<(usize, u64)>,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
    static TID: u64 = NEXT_TID.fetch_add(1, Relaxed);
    /// The tracer of the run this thread works for (see [`Tracer::current`]).
    static CURRENT: RefCell<Option<Tracer>> = const { RefCell::new(None) };
}

impl Tracer {
    /// A tracer sampling as `config` says; its clock starts now.
    pub fn new(config: TraceConfig) -> Tracer {
        Tracer {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Relaxed),
                config,
                started: Instant::now(),
                threads: Mutex::default(),
                events: AtomicUsize::new(0),
                dropped: AtomicU64::new(0),
                stages: Mutex::default(),
            }),
        }
    }

    /// The tracer of the traced run the calling thread works for (a stage's worker, or
    /// the thread iterating the pipeline), if any: how code without a
    /// [`BuildContext`](crate::BuildContext), such as a plugin host's call, records
    /// its spans.
    pub fn current() -> Option<Tracer> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// Makes `tracer` the calling thread's [`current`](Tracer::current) one (`None`:
    /// none), unless it already is.
    pub(crate) fn set_current(tracer: Option<&Tracer>) {
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            let same = match (c.as_ref(), tracer) {
                (Some(a), Some(b)) => Arc::ptr_eq(&a.inner, &b.inner),
                (None, None) => true,
                _ => false,
            };
            if !same {
                *c = tracer.cloned();
            }
        });
    }

    /// How it samples.
    pub fn config(&self) -> &TraceConfig {
        &self.inner.config
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.inner.started).as_nanos() as u64
    }

    /// Runs `f` on this thread's buffer (registering the thread on first use), unless the
    /// trace is full.
    fn with_local<R>(&self, f: impl FnOnce(&mut Local) -> R) -> Option<R> {
        if self.inner.events.load(Relaxed) >= self.inner.config.max_events {
            self.inner.dropped.fetch_add(1, Relaxed);
            return None;
        }
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            if l.as_ref().is_none_or(|l| l.tracer != self.inner.id) {
                let thread = std::thread::current();
                let tid = TID.with(|t| *t);
                let buf = Arc::new(ThreadBuf {
                    tid,
                    name: thread
                        .name()
                        .map_or_else(|| format!("thread {tid}"), str::to_string),
                    events: Mutex::default(),
                });
                self.inner.threads.locked().push(Arc::clone(&buf));
                *l = Some(Local {
                    tracer: self.inner.id,
                    buf,
                    last: Vec::new(),
                });
            }
            l.as_mut().map(f)
        })
    }

    fn push(&self, local: &Local, event: Event) {
        // Threads racing past `with_local`'s check: only the first `max_events` push.
        if self.inner.events.fetch_add(1, Relaxed) >= self.inner.config.max_events {
            self.inner.dropped.fetch_add(1, Relaxed);
            return;
        }
        local.buf.events.locked().push(event);
    }

    /// Records the span of stage `stage` (its number and name) from `start` to `end`
    /// that produced `elements` elements, unless the stage recorded one on this thread
    /// less than [`TraceConfig::min_span_gap`] ago.
    pub fn stage_span(
        &self,
        stage: usize,
        name: &Arc<str>,
        start: Instant,
        end: Instant,
        elements: u64,
    ) {
        let (ts, gap) = (
            self.ns(start),
            self.inner.config.min_span_gap.as_nanos() as u64,
        );
        self.with_local(|local| {
            let i = match local.last.iter().position(|(s, _)| *s == stage) {
                Some(i) => i,
                None => {
                    // The stage's first span on this thread: its name, kept once (spans
                    // then carry only the stage's number: no shared lock or count per span).
                    self.inner
                        .stages
                        .locked()
                        .entry(stage)
                        .or_insert_with(|| StageEntry {
                            name: name.to_string(),
                            ..StageEntry::default()
                        });
                    local.last.push((stage, 0));
                    local.last.len() - 1
                }
            };
            let last = local.last[i].1;
            if last != 0 && ts < last + gap {
                return;
            }
            local.last[i].1 = ts.max(1);
            self.push(
                local,
                Event::Span {
                    cat: "stage",
                    name: None,
                    ts,
                    dur: end.saturating_duration_since(start).as_nanos() as u64,
                    stage: Some(stage),
                    elements,
                },
            );
        });
    }

    /// Records a span of category `cat` (`wait`, `plugin`, ...) named `name`, of stage
    /// `stage` if it belongs to one, from `start` to `end`. Not rate-limited: for events
    /// that are already rare or long (waits over 50 µs, plugin calls on chunks).
    pub fn span(
        &self,
        cat: &'static str,
        name: &Arc<str>,
        stage: Option<usize>,
        start: Instant,
        end: Instant,
    ) {
        let ts = self.ns(start);
        self.with_local(|local| {
            self.push(
                local,
                Event::Span {
                    cat,
                    name: Some(Arc::clone(name)),
                    ts,
                    dur: end.saturating_duration_since(start).as_nanos() as u64,
                    stage,
                    elements: 0,
                },
            )
        });
    }

    /// Records an instant event of category `cat`, with `args` (a JSON object).
    pub fn instant(&self, cat: &'static str, name: impl Into<Cow<'static, str>>, args: Value) {
        let ts = self.ns(Instant::now());
        let name = name.into();
        self.with_local(|local| {
            self.push(
                local,
                Event::Instant {
                    cat,
                    name,
                    ts,
                    args,
                },
            )
        });
    }

    /// Records the values of counter `name` now (a counter track per name, a series per
    /// value).
    pub fn counter(&self, name: &Arc<str>, values: Vec<(&'static str, f64)>) {
        let ts = self.ns(Instant::now());
        self.with_local(|local| {
            self.push(
                local,
                Event::Counter {
                    name: Arc::clone(name),
                    ts,
                    values,
                },
            )
        });
    }

    /// Notes stage `stage` (number, name) and the elements it produced so far in epoch
    /// `epoch` (the denominators of the sampling note).
    pub(crate) fn note_stage(&self, stage: usize, name: &str, epoch: u64, elements: u64) {
        let mut stages = self.inner.stages.locked();
        let e = stages.entry(stage).or_insert_with(|| StageEntry {
            name: name.to_string(),
            epoch,
            ..StageEntry::default()
        });
        if e.epoch != epoch {
            e.epoch = epoch;
            e.current = 0;
        }
        e.elements += elements.saturating_sub(e.current);
        e.current = elements;
    }

    /// Events recorded so far.
    pub fn events(&self) -> usize {
        self.inner
            .events
            .load(Relaxed)
            .min(self.inner.config.max_events)
    }

    /// Writes the trace as one JSON object (`{"traceEvents": [...], ...}`): the events of
    /// each thread in time order (a span before the spans nested in it), the threads'
    /// names, and `otherData` (the sampling rule, per stage the spans and elements, events
    /// dropped when full).
    pub fn write(&self, mut out: impl Write) -> io::Result<()> {
        let pid = std::process::id();
        let threads: Vec<Arc<ThreadBuf>> = self.inner.threads.locked().clone();
        let config = &self.inner.config;
        // Every thread's events (taken: a second write has only what came after), in time
        // order; at equal starts the longer span first (it encloses the other).
        let taken: Vec<Vec<Event>> = threads
            .iter()
            .map(|t| {
                let mut events = std::mem::take(&mut *t.events.locked());
                events.sort_by_key(|e| match e {
                    Event::Span { ts, dur, .. } => (*ts, u64::MAX - dur),
                    Event::Instant { ts, .. } | Event::Counter { ts, .. } => (*ts, 0),
                });
                events
            })
            .collect();
        let mut stages = self.inner.stages.locked().clone();
        for e in taken.iter().flatten() {
            if let Event::Span {
                name: None,
                stage: Some(s),
                ..
            } = e
                && let Some(entry) = stages.get_mut(s)
            {
                entry.spans += 1;
            }
        }
        let other = json!({
            "producer": concat!("sluice ", env!("CARGO_PKG_VERSION")),
            "sampling": format!(
                "stage spans come from the calls the statistics time (a thread's first 64, then one in 16), at most one per {} µs per stage and thread; counters every {} ms",
                config.min_span_gap.as_micros(),
                config.counter_interval.as_millis()
            ),
            "stages": stages.iter().map(|(i, e)| (i.to_string(), json!(e))).collect::<serde_json::Map<_, _>>(),
            "truncated": self.inner.dropped.load(Relaxed) > 0,
            "dropped_events": self.inner.dropped.load(Relaxed),
        });
        writeln!(
            out,
            "{{\"displayTimeUnit\":\"ms\",\"otherData\":{other},\"traceEvents\":["
        )?;
        let mut first = true;
        let mut emit = |out: &mut dyn Write, v: Value| -> io::Result<()> {
            if !first {
                out.write_all(b",\n")?;
            }
            first = false;
            serde_json::to_writer(&mut *out, &v).map_err(io::Error::other)
        };
        emit(
            &mut out,
            json!({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": "sluice"}}),
        )?;
        for t in &threads {
            emit(
                &mut out,
                json!({"ph": "M", "pid": pid, "tid": t.tid, "name": "thread_name", "args": {"name": t.name}}),
            )?;
            emit(
                &mut out,
                json!({"ph": "M", "pid": pid, "tid": t.tid, "name": "thread_sort_index", "args": {"sort_index": t.tid}}),
            )?;
        }
        let us = |ns: u64| ns as f64 / 1e3;
        for (t, events) in threads.iter().zip(&taken) {
            for e in events {
                let v = match e {
                    Event::Span {
                        cat,
                        name,
                        ts,
                        dur,
                        stage,
                        elements,
                    } => {
                        let mut args = serde_json::Map::new();
                        if let Some(s) = stage {
                            args.insert("stage".into(), json!(s));
                        }
                        if *elements > 0 {
                            args.insert("elements".into(), json!(elements));
                        }
                        let name = match (name, stage) {
                            (Some(n), _) => n.to_string(),
                            (None, Some(s)) => stages
                                .get(s)
                                .map_or_else(|| format!("stage {s}"), |e| e.name.clone()),
                            (None, None) => "span".to_string(),
                        };
                        json!({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": t.tid,
                               "ts": us(*ts), "dur": us(*dur), "args": args})
                    }
                    Event::Instant {
                        cat,
                        name,
                        ts,
                        args,
                    } => json!({"ph": "i", "s": "g", "cat": cat, "name": name, "pid": pid,
                               "tid": t.tid, "ts": us(*ts), "args": args}),
                    Event::Counter { name, ts, values } => {
                        let args: serde_json::Map<String, Value> = values
                            .iter()
                            .map(|(k, v)| ((*k).to_string(), json!(v)))
                            .collect();
                        json!({"ph": "C", "name": &**name, "pid": pid, "tid": t.tid,
                               "ts": us(*ts), "args": args})
                    }
                };
                emit(&mut out, v)?;
            }
            // Written once: the events are taken (a second write has only what came after).
        }
        out.write_all(b"\n]}\n")?;
        out.flush()
    }

    /// [`write`](Tracer::write) to the file `path`, whole or not at all (a temporary
    /// file renamed).
    pub fn write_to(&self, path: &std::path::Path) -> crate::Result<()> {
        let mut buf = Vec::new();
        let io = |error| crate::Error::Io {
            path: path.to_path_buf(),
            error,
        };
        self.write(&mut buf).map_err(io)?;
        sluice_storage::write_durably(path, &buf).map_err(io)
    }
}
