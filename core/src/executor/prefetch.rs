//! A producer thread that runs ahead of its consumer into a bounded buffer.

use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded, select};

use crate::element::Element;
use crate::error::Result;
use crate::stage::BuildContext;
use crate::stream::{BoxStream, ElementStream};

/// The consumer side of a prefetching thread.
pub(crate) struct PrefetchStream {
    rx: Receiver<Result<Element>>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    ctx: BuildContext,
    capacity: usize,
}

impl PrefetchStream {
    /// Starts a thread pulling `upstream` into a buffer of `capacity` elements.
    /// `upstream_is_work`: time in `upstream.next()` is this stage's own work (an
    /// interleave's file reader) rather than waiting on another stage (prefetch).
    pub(crate) fn start(
        mut upstream: BoxStream,
        capacity: usize,
        upstream_is_work: bool,
        ctx: &BuildContext,
    ) -> Self {
        let capacity = capacity.max(1);
        let (tx, rx) = bounded(capacity);
        let (stop_tx, stop_rx) = bounded::<()>(0);
        let tctx = ctx.clone();
        let thread = std::thread::Builder::new()
            .name(format!("sluice-{}", ctx.stage_label()))
            .spawn(move || {
                let shutdown = tctx.shutdown().clone();
                loop {
                    let t = Instant::now();
                    let Some(item) = upstream.next() else { return };
                    if upstream_is_work {
                        tctx.metrics().add_busy(t.elapsed());
                    } else {
                        tctx.metrics().add_wait_upstream(t.elapsed());
                    }
                    let t = Instant::now();
                    select! {
                        send(tx, item) -> r => if r.is_err() { return },
                        recv(stop_rx) -> _ => return,
                        recv(shutdown.channel()) -> _ => return,
                    }
                    tctx.metrics().add_wait_downstream(t.elapsed());
                }
            })
            .expect("spawn prefetch thread");
        PrefetchStream {
            rx,
            stop: Some(stop_tx),
            thread: Some(thread),
            ctx: ctx.clone(),
            capacity,
        }
    }
}

/// The result of a non-blocking poll.
pub(crate) enum Poll {
    /// An element, an error, or `None` at the end.
    Ready(Option<Result<Element>>),
    /// Nothing buffered yet.
    Pending,
}

impl PrefetchStream {
    /// Takes a buffered element without blocking.
    pub(crate) fn try_next(&mut self) -> Poll {
        match self.rx.try_recv() {
            Ok(item) => Poll::Ready(Some(item)),
            Err(crossbeam_channel::TryRecvError::Empty) => Poll::Pending,
            Err(crossbeam_channel::TryRecvError::Disconnected) => Poll::Ready(None),
        }
    }
}

impl ElementStream for PrefetchStream {
    fn next(&mut self) -> Option<Result<Element>> {
        self.ctx
            .metrics()
            .sample_buffer(self.rx.len(), self.capacity);
        select! {
            recv(self.rx) -> item => item.ok(),
            recv(self.ctx.shutdown().channel()) -> _ => None,
        }
    }
}

impl Drop for PrefetchStream {
    fn drop(&mut self) {
        self.stop = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
