//! A producer thread that runs ahead of its consumer into a bounded buffer.
//!
//! Elements cross the channel in chunks of up to `chunk` elements, so the per-element cost
//! of the hand-off (and of waking the other thread) is paid once per chunk. The buffer holds
//! at most `capacity` elements: `capacity / chunk` chunks in the channel, one being filled.
//!
//! The buffer is bounded in bytes too: each element's bytes are reserved in the run's
//! [byte ledger](crate::run::ledger) before it enters the buffer and released when the
//! consumer takes it; when the budget has no room the producer hands on the chunk it has
//! and waits (unless the buffer is empty: one element may always be in flight).

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, SendTimeoutError, Sender, TryRecvError, bounded, select};

use crate::autotune::Knob;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::gate::Gate;
use crate::executor::parallel::guarded;
use crate::run::BuildContext;
use crate::run::ledger::{Account, bytes_of};
use crate::stream::{BoxStream, ElementStream};

type Chunk = Vec<Result<Element>>;

/// How long a producer blocked on a full buffer waits before it checks for a stop.
const STOP_POLL: Duration = Duration::from_millis(5);

/// What the producer thread hands back when stopped: the chunk it held and the upstream.
type Handback = Option<(Chunk, BoxStream)>;

/// The consumer side of a prefetching thread.
pub(crate) struct PrefetchStream {
    rx: Receiver<Chunk>,
    current: VecDeque<Result<Element>>,
    ended: bool,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<Handback>>,
    ctx: BuildContext,
    capacity: usize,
    chunk: usize,
    knob: Option<Arc<Knob>>,
    /// The bytes of the buffered elements (channel and `current`), in the run's ledger.
    account: Arc<Account>,
}

impl PrefetchStream {
    /// Starts a thread pulling `upstream` into a buffer of `capacity` elements, handed over
    /// in chunks of up to `chunk` elements (1: each element as soon as it is ready).
    /// `upstream_is_work`: time in `upstream.next()` is this stage's own work (an
    /// interleave's file reader) rather than waiting on another stage (prefetch).
    ///
    /// With a knob (`prefetch(auto)`), the buffer holds at most `knob.get()` chunks (and
    /// never more than `capacity` elements). With a gate, the thread pulls a chunk only while
    /// it holds one of the gate's permits (threads sharing a CPU budget).
    pub(crate) fn start(
        mut upstream: BoxStream,
        capacity: usize,
        chunk: usize,
        upstream_is_work: bool,
        knob: Option<Arc<Knob>>,
        gate: Option<Arc<Gate>>,
        ctx: &BuildContext,
    ) -> Self {
        let chunk = chunk.clamp(1, capacity.max(1));
        let slots = (capacity.max(1) / chunk).max(1);
        let (tx, rx) = bounded::<Chunk>(slots);
        let (stop_tx, stop_rx) = bounded::<()>(0);
        let tctx = ctx.clone();
        let tknob = knob.clone();
        let account = ctx.account();
        let taccount = Arc::clone(&account);
        let thread = std::thread::Builder::new()
            .name(format!("sluice-{}", ctx.stage_label()))
            .spawn(move || {
                let shutdown = tctx.shutdown().clone();
                let account = taccount;
                // Stopped by `into_inner` (the stop channel disconnects): hand back what was
                // pulled and the upstream.
                let stopped = || matches!(stop_rx.try_recv(), Err(TryRecvError::Disconnected));
                let mut ended = false;
                // An element pulled for which the budget had no room: the chunk in hand was
                // handed on first.
                let mut pending: Option<Result<Element>> = None;
                while !ended {
                    // Not timed: neither work nor waiting on the stages around it.
                    let permit = match &gate {
                        Some(gate) => match gate.acquire(|| shutdown.is_set() || stopped()) {
                            Some(permit) => Some(permit),
                            None if shutdown.is_set() => return None,
                            None => return Some((pending.into_iter().collect(), upstream)),
                        },
                        None => None,
                    };
                    let t = Instant::now();
                    let mut waited = Duration::ZERO;
                    let mut items: Chunk = Vec::with_capacity(chunk);
                    while items.len() < chunk {
                        if pending.is_none() {
                            // Room for the next element before making it.
                            let estimate = account.expected(0);
                            if !items.is_empty() && !account.has_room(estimate) {
                                break;
                            }
                            let w = Instant::now();
                            let room =
                                account.wait_for_room(estimate, || shutdown.is_set() || stopped());
                            waited += w.elapsed();
                            if !room {
                                if shutdown.is_set() {
                                    return None;
                                }
                                return Some((items, upstream));
                            }
                        }
                        let item = match pending.take() {
                            Some(item) => item,
                            None => match guarded(|| upstream.next(), &tctx) {
                                Some(item) => item,
                                None => {
                                    ended = true;
                                    break;
                                }
                            },
                        };
                        let n = bytes_of(&item);
                        let item = match item {
                            Ok(e) if account.too_large(n).is_some() => {
                                match tctx.too_large(&e, n) {
                                    Some(err) => Err(err),
                                    None => continue,
                                }
                            }
                            item => item,
                        };
                        let n = bytes_of(&item);
                        if !account.try_reserve(n) {
                            if !items.is_empty() {
                                // No room: hand on what is in hand, then wait.
                                pending = Some(item);
                                break;
                            }
                            let w = Instant::now();
                            let reserved = account.reserve(n, || shutdown.is_set() || stopped());
                            waited += w.elapsed();
                            if !reserved {
                                if shutdown.is_set() {
                                    return None;
                                }
                                return Some((vec![item], upstream));
                            }
                        }
                        let is_err = item.is_err();
                        items.push(item);
                        if is_err {
                            break;
                        }
                    }
                    drop(permit);
                    let pulled = t.elapsed().saturating_sub(waited);
                    if upstream_is_work {
                        tctx.metrics().add_busy(pulled);
                    } else {
                        tctx.metrics().add_wait_upstream(pulled);
                    }
                    tctx.metrics().add_wait_downstream(waited);
                    if items.is_empty() {
                        return None;
                    }
                    let t = Instant::now();
                    // Autotune's size for the buffer, below the channel's room.
                    if let Some(knob) = &knob {
                        while tx.len() >= knob.get() {
                            if shutdown.is_set() {
                                return None;
                            }
                            if stopped() {
                                items.extend(pending);
                                return Some((items, upstream));
                            }
                            std::thread::sleep(Duration::from_micros(200));
                        }
                    }
                    let mut sending = items;
                    loop {
                        match tx.send_timeout(sending, STOP_POLL) {
                            Ok(()) => break,
                            Err(SendTimeoutError::Disconnected(_)) => return None,
                            Err(SendTimeoutError::Timeout(back)) => {
                                if shutdown.is_set() {
                                    return None;
                                }
                                if stopped() {
                                    let mut back = back;
                                    back.extend(pending);
                                    return Some((back, upstream));
                                }
                                sending = back;
                            }
                        }
                    }
                    tctx.metrics().add_wait_downstream(t.elapsed());
                    tctx.trace_wait("wait downstream", t);
                }
                None
            });
        // A thread that cannot be started (the system's limit) is an error in the stream,
        // not a panic: the consumer gets it where the first element would be.
        let (current, ended, thread) = match thread {
            Ok(thread) => (VecDeque::new(), false, Some(thread)),
            Err(e) => (
                VecDeque::from([Err(
                    ctx.stream_error(Error::internal(format!("cannot start a thread: {e}")))
                )]),
                true,
                None,
            ),
        };
        PrefetchStream {
            rx,
            current,
            ended,
            stop: Some(stop_tx),
            thread,
            ctx: ctx.clone(),
            capacity,
            chunk,
            knob: tknob,
            account,
        }
    }

    /// The next element taken from the buffer: its bytes leave the ledger.
    fn pop(&mut self) -> Option<Result<Element>> {
        let item = self.current.pop_front()?;
        self.account.hand_out(bytes_of(&item));
        Some(item)
    }

    fn take(&mut self, chunk: Option<Chunk>) -> Option<Result<Element>> {
        match chunk {
            Some(c) => {
                self.current.extend(c);
                self.pop()
            }
            None => {
                self.ended = true;
                None
            }
        }
    }
}

impl PrefetchStream {
    /// Stops the thread and returns, in order, the elements it had read ahead and the
    /// upstream to go on reading on the caller's thread (`None` if it had ended).
    pub(crate) fn into_inner(mut self) -> (VecDeque<Result<Element>>, Option<BoxStream>) {
        self.stop = None;
        let held = self.thread.take().and_then(|t| t.join().ok()).flatten();
        // What was read ahead is the caller's now.
        self.account.release_all();
        let mut items = std::mem::take(&mut self.current);
        while let Ok(chunk) = self.rx.try_recv() {
            items.extend(chunk);
        }
        match held {
            Some((chunk, upstream)) => {
                items.extend(chunk);
                (items, Some(upstream))
            }
            None => (items, None),
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
        if let Some(item) = self.pop() {
            return Poll::Ready(Some(item));
        }
        if self.ended {
            return Poll::Ready(None);
        }
        match self.rx.try_recv() {
            Ok(c) => {
                self.account.set_starving(false);
                Poll::Ready(self.take(Some(c)))
            }
            Err(crossbeam_channel::TryRecvError::Empty) => {
                self.account.set_starving(true);
                Poll::Pending
            }
            Err(crossbeam_channel::TryRecvError::Disconnected) => Poll::Ready(self.take(None)),
        }
    }
}

/// What [`PrefetchStream::next_unless`] came back with.
pub(crate) enum Waited {
    /// An element, an error, or `None` at the end (as `next` returns).
    Item(Option<Result<Element>>),
    /// Nothing came, and the caller's condition said to stop waiting.
    GaveUp,
}

impl PrefetchStream {
    /// The next element, as [`next`](ElementStream::next), but when the buffer is empty
    /// the wait ends as soon as `give_up()` is true (checked every [`STOP_POLL`]): an
    /// interleave's file thread waits for a permit of a gate that autotune may close
    /// (no reading threads) while its consumer waits for the thread's next chunk; the
    /// consumer then reads the file itself ([`into_inner`](Self::into_inner)).
    pub(crate) fn next_unless(&mut self, give_up: impl Fn() -> bool) -> Waited {
        if let Some(item) = self.without_waiting() {
            return Waited::Item(item);
        }
        self.account.set_starving(true);
        let shutdown = self.ctx.shutdown().channel();
        let got = loop {
            select! {
                recv(self.rx) -> c => break Some(c.ok()),
                recv(shutdown) -> _ => break Some(None),
                default(STOP_POLL) => if give_up() {
                    break None;
                },
            }
        };
        self.account.set_starving(false);
        match got {
            Some(chunk) => Waited::Item(self.take(chunk)),
            None => Waited::GaveUp,
        }
    }

    /// What the buffer gives without waiting: `Some` of an element (or of `None` at the
    /// end), `None` when the consumer has to wait for the thread.
    fn without_waiting(&mut self) -> Option<Option<Result<Element>>> {
        if let Some(item) = self.pop() {
            return Some(Some(item));
        }
        if self.ended {
            return Some(None);
        }
        let capacity = self
            .knob
            .as_ref()
            .map_or(self.capacity, |k| k.get() * self.chunk);
        self.ctx
            .metrics()
            .sample_buffer(self.rx.len() * self.chunk, capacity);
        self.rx.try_recv().ok().map(|c| self.take(Some(c)))
    }
}

impl ElementStream for PrefetchStream {
    fn next(&mut self) -> Option<Result<Element>> {
        if let Some(item) = self.without_waiting() {
            return item;
        }
        // Waiting on an empty buffer: it may take one element past the budget.
        self.account.set_starving(true);
        let chunk = select! {
            recv(self.rx) -> c => c.ok(),
            recv(self.ctx.shutdown().channel()) -> _ => None,
        };
        self.account.set_starving(false);
        self.take(chunk)
    }
}

impl Drop for PrefetchStream {
    fn drop(&mut self) {
        self.stop = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.account.release_all();
    }
}
