//! Running stages: pull-based streams of elements.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use crate::element::Element;
use crate::error::Result;
use crate::metrics::StageMetrics;

/// A running stage: yields elements (or errors, which travel down the stream) until `None`.
///
/// Streams are pulled by their consumer. A stage that runs worker threads owns them, and
/// dropping the stream stops and joins them.
pub trait ElementStream: Send {
    /// The next element, an error, or `None` at the end.
    fn next(&mut self) -> Option<Result<Element>>;
}

/// A boxed [`ElementStream`].
pub type BoxStream = Box<dyn ElementStream>;

impl ElementStream for BoxStream {
    fn next(&mut self) -> Option<Result<Element>> {
        (**self).next()
    }
}

/// A stream over an iterator.
pub struct IterStream<I>(pub I);

impl<I: Iterator<Item = Result<Element>> + Send> ElementStream for IterStream<I> {
    fn next(&mut self) -> Option<Result<Element>> {
        self.0.next()
    }
}

thread_local! {
    /// Nanoseconds spent in instrumented `next` calls nested in the current one.
    static NESTED_NS: Cell<u64> = const { Cell::new(0) };
    /// Per thread: nesting depth of instrumented `next` calls, outermost calls so far, and
    /// whether the current outermost call (and everything nested in it) is timed.
    static SAMPLING: Cell<(u32, u64, bool)> = const { Cell::new((0, 0, false)) };
}

/// Every call is timed for the first `ALWAYS_TIMED` outermost calls on a thread, then one
/// in `TIME_EVERY`: reading the clock twice per stage per element would cost more than the
/// work of a simple stage. The decision is taken at the outermost call and holds for every
/// stage nested in it on that thread, so own and upstream times stay consistent; totals
/// are scaled by calls / timed calls.
const ALWAYS_TIMED: u64 = 64;
const TIME_EVERY: u64 = 16;

/// Wraps every built stage: counts elements out and measures how long consumers wait on
/// the stage itself, excluding time inside upstream stages called on the same thread.
///
/// Counts accumulate locally and reach the shared metrics every [`FLUSH_EVERY`] elements,
/// at the end of the stream and on drop, to keep the per-element cost low.
pub(crate) struct Instrumented {
    inner: BoxStream,
    metrics: Arc<StageMetrics>,
    /// The stage does its work inside `next` on the consumer's thread.
    inline: bool,
    local: Local,
    /// Spans the stage's timed calls in the run's trace, when traced.
    trace: Option<StageTracer>,
}

/// A traced stage: the run's tracer, the stage's name and number.
pub(crate) type StageTracer = (crate::observe::Tracer, Arc<str>, usize);

/// Elements between flushes of an [`Instrumented`] stream's counters.
const FLUSH_EVERY: u32 = 64;

/// Bytes of output after which the counters are flushed anyway, so stages of large, slow
/// elements (batches of images) show up in the stats while the pipeline runs, not only
/// every 64 elements.
const FLUSH_BYTES: u64 = 1 << 20;

#[derive(Default)]
struct Local {
    elements: u32,
    bytes: u64,
    calls: u64,
    timed_calls: u64,
    own_ns: u64,
    nested_ns: u64,
}

impl Instrumented {
    pub(crate) fn new(
        inner: BoxStream,
        metrics: Arc<StageMetrics>,
        inline: bool,
        trace: Option<StageTracer>,
    ) -> Self {
        Instrumented {
            inner,
            metrics,
            inline,
            local: Local::default(),
            trace,
        }
    }

    fn flush(&mut self) {
        let l = std::mem::take(&mut self.local);
        self.metrics.add_out_many(u64::from(l.elements), l.bytes);
        if l.timed_calls == 0 {
            return;
        }
        let scale = |ns: u64| {
            std::time::Duration::from_nanos(
                (ns as u128 * l.calls as u128 / l.timed_calls as u128) as u64,
            )
        };
        let own = scale(l.own_ns);
        self.metrics.add_consumer_wait(own);
        if self.inline {
            self.metrics.add_busy(own);
            self.metrics.add_wait_upstream(scale(l.nested_ns));
        }
    }
}

impl ElementStream for Instrumented {
    fn next(&mut self) -> Option<Result<Element>> {
        let (depth, timed) = SAMPLING.with(|c| {
            let (depth, mut calls, mut timed) = c.get();
            if depth == 0 {
                calls += 1;
                timed = calls <= ALWAYS_TIMED || calls % TIME_EVERY == 0;
            }
            c.set((depth + 1, calls, timed));
            (depth, timed)
        });
        self.local.calls += 1;
        let item = if timed {
            let outer = NESTED_NS.with(|c| c.replace(0));
            let start = Instant::now();
            let item = self.inner.next();
            let elapsed = start.elapsed().as_nanos() as u64;
            let nested = NESTED_NS.with(|c| c.replace(outer + elapsed));
            let own = elapsed.saturating_sub(nested);
            self.local.own_ns += own;
            self.local.nested_ns += nested;
            self.local.timed_calls += 1;
            if let Some(Ok(_)) = &item {
                // An element's own time: a sample of the stage's distribution.
                if self.inline {
                    self.metrics
                        .add_element_time(std::time::Duration::from_nanos(own), 1);
                }
                if let Some((tracer, name, index)) = &self.trace {
                    let end = start + std::time::Duration::from_nanos(elapsed);
                    tracer.stage_span(*index, name, start, end, 1);
                }
            }
            item
        } else {
            self.inner.next()
        };
        SAMPLING.with(|c| {
            let (_, calls, timed) = c.get();
            c.set((depth, calls, timed));
        });
        match &item {
            Some(Ok(e)) => {
                self.local.elements += 1;
                self.local.bytes += e.nbytes() as u64;
                if self.local.elements >= FLUSH_EVERY || self.local.bytes >= FLUSH_BYTES {
                    self.flush();
                }
            }
            _ => self.flush(),
        }
        item
    }
}

impl Drop for Instrumented {
    fn drop(&mut self) {
        self.flush();
    }
}
