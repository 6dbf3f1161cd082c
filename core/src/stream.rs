//! Running stages: pull-based streams of elements.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use crate::element::Element;
use crate::error::Result;
use crate::stats::StageMetrics;

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
}

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
}

/// Elements between flushes of an [`Instrumented`] stream's counters.
const FLUSH_EVERY: u32 = 64;

#[derive(Default)]
struct Local {
    elements: u32,
    bytes: u64,
    own_ns: u64,
    nested_ns: u64,
}

impl Instrumented {
    pub(crate) fn new(inner: BoxStream, metrics: Arc<StageMetrics>, inline: bool) -> Self {
        Instrumented {
            inner,
            metrics,
            inline,
            local: Local::default(),
        }
    }

    fn flush(&mut self) {
        let l = std::mem::take(&mut self.local);
        self.metrics.add_out_many(u64::from(l.elements), l.bytes);
        let own = std::time::Duration::from_nanos(l.own_ns);
        self.metrics.add_consumer_wait(own);
        if self.inline {
            self.metrics.add_busy(own);
            self.metrics
                .add_wait_upstream(std::time::Duration::from_nanos(l.nested_ns));
        }
    }
}

impl ElementStream for Instrumented {
    fn next(&mut self) -> Option<Result<Element>> {
        let outer = NESTED_NS.with(|c| c.replace(0));
        let start = Instant::now();
        let item = self.inner.next();
        let elapsed = start.elapsed().as_nanos() as u64;
        let nested = NESTED_NS.with(|c| c.replace(outer + elapsed));
        self.local.own_ns += elapsed.saturating_sub(nested);
        self.local.nested_ns += nested;
        match &item {
            Some(Ok(e)) => {
                self.local.elements += 1;
                self.local.bytes += e.nbytes() as u64;
                if self.local.elements >= FLUSH_EVERY {
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
