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
pub(crate) struct Instrumented {
    pub(crate) inner: BoxStream,
    pub(crate) metrics: Arc<StageMetrics>,
    /// The stage does its work inside `next` on the consumer's thread.
    pub(crate) inline: bool,
}

impl ElementStream for Instrumented {
    fn next(&mut self) -> Option<Result<Element>> {
        let outer = NESTED_NS.with(|c| c.replace(0));
        let start = Instant::now();
        let item = self.inner.next();
        let elapsed = start.elapsed();
        let nested = NESTED_NS.with(|c| c.replace(outer + elapsed.as_nanos() as u64));
        let own = elapsed.saturating_sub(std::time::Duration::from_nanos(nested));
        self.metrics.add_consumer_wait(own);
        if self.inline {
            self.metrics.add_busy(own);
            self.metrics
                .add_wait_upstream(std::time::Duration::from_nanos(nested));
        }
        if let Some(Ok(e)) = &item {
            self.metrics.add_out(e.nbytes() as u64);
        }
        item
    }
}
