//! The parallel element executor: a dispatcher thread pulls from upstream, worker threads
//! apply a function to chunks of elements, and the consumer reassembles results in input
//! order (`deterministic`) or takes them as they finish.
//!
//! Memory is bounded: at most `max_in_flight` chunks exist between the dispatcher and the
//! consumer (a permit is taken per chunk and returned when the consumer takes it), and
//! their bytes are in the run's [byte ledger](crate::run::ledger): the dispatcher reserves
//! each item's bytes as it pulls it (handing on a shorter chunk, then waiting, when the
//! budget has no room, unless nothing is in flight), a worker swaps its inputs' bytes for
//! its outputs', and the consumer releases each element it takes.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded, select, unbounded};

use crate::autotune::Knob;
use crate::elastic::Units;
use crate::element::{Element, ElementId, Provenance};
use crate::error::{Error, Result};
use crate::options::ErrorPolicy;
use crate::run::BuildContext;
use crate::run::ledger::{Account, bytes_of};
use crate::stream::{BoxStream, ElementStream};

/// The function a parallel stage applies to each input item (an element, or a group of
/// elements for `batch`): `Ok(None)` drops it (filter); errors are wrapped with the stage's
/// context and the error policy applied.
pub(crate) type WorkFn<I = Element, O = Option<Element>> =
    Arc<dyn Fn(I) -> Result<O> + Send + Sync>;

/// What a work function gives for one item: at most one element (map, filter, batch) or
/// any number (a chunk map).
pub(crate) trait Outputs: Send + 'static {
    /// Appends the elements to `out`, in order.
    fn push_into(self, out: &mut Vec<Result<Element>>);
}

impl Outputs for Option<Element> {
    fn push_into(self, out: &mut Vec<Result<Element>>) {
        out.extend(self.map(Ok));
    }
}

impl Outputs for Vec<Element> {
    fn push_into(self, out: &mut Vec<Result<Element>>) {
        out.extend(self.into_iter().map(Ok));
    }
}

/// What the workers take: an element, or a group of elements.
pub(crate) trait Item: Send + 'static {
    /// The id and provenance errors about this item name.
    fn trace(&self) -> (Option<ElementId>, Option<Provenance>);

    /// The elements a failure of this item drops.
    fn count(&self) -> u64 {
        1
    }

    /// The records a failure of this item drops.
    fn units(&self) -> Units;

    /// The bytes the item holds, as the byte ledger counts them.
    fn nbytes(&self) -> u64;
}

impl Item for Element {
    fn trace(&self) -> (Option<ElementId>, Option<Provenance>) {
        (Some(self.id()), self.provenance().cloned())
    }

    fn units(&self) -> Units {
        self.units().clone()
    }

    fn nbytes(&self) -> u64 {
        Element::nbytes(self) as u64
    }
}

impl Item for Vec<Element> {
    fn count(&self) -> u64 {
        self.len() as u64
    }

    fn units(&self) -> Units {
        Units::concat(self.iter().map(Element::units))
    }

    fn nbytes(&self) -> u64 {
        self.iter().map(|e| Element::nbytes(e) as u64).sum()
    }

    fn trace(&self) -> (Option<ElementId>, Option<Provenance>) {
        match self.first() {
            Some(e) => e.trace(),
            None => (None, None),
        }
    }
}

/// Where the dispatcher pulls items from.
pub(crate) trait Source<I>: Send {
    /// The next item, an error, or `None` at the end.
    fn next_item(&mut self) -> Option<Result<I>>;
}

impl Source<Element> for BoxStream {
    fn next_item(&mut self) -> Option<Result<Element>> {
        self.next()
    }
}

/// Target work per chunk: chunks grow until one takes about this long, so cheap functions
/// are not dominated by channel traffic and expensive ones still spread over the workers.
const CHUNK_TARGET: Duration = Duration::from_micros(200);
const MAX_CHUNK: usize = 256;
/// How often a worker parked by autotune checks whether it is wanted again.
const PARKED_POLL: Duration = Duration::from_millis(2);

struct Job<I> {
    seq: u64,
    items: Vec<Result<I>>,
    /// The items' bytes, reserved in the ledger.
    bytes: u64,
}

struct Done {
    seq: u64,
    items: Vec<Result<Element>>,
}

/// The running parallel stage (consumer side).
pub(crate) struct ParallelStream {
    results: Receiver<Done>,
    permits: Sender<()>,
    stop: Option<Sender<()>>,
    shutdown: crate::executor::shutdown::Shutdown,
    deterministic: bool,
    next_seq: u64,
    reorder: BTreeMap<u64, Vec<Result<Element>>>,
    ready: VecDeque<Result<Element>>,
    threads: Vec<JoinHandle<()>>,
    ctx: BuildContext,
    max_in_flight: usize,
    finished: bool,
    /// The bytes in flight (jobs, results, `ready`), in the run's ledger.
    account: Arc<Account>,
}

impl ParallelStream {
    /// Starts `workers` threads applying `f` to the items of `upstream`; with a knob
    /// (`num_parallel = auto`), only the first `knob.get()` of them take work.
    pub(crate) fn start<I: Item, S: Source<I> + 'static, O: Outputs>(
        upstream: S,
        f: WorkFn<I, O>,
        (workers, knob): (usize, Option<Arc<Knob>>),
        deterministic: bool,
        ctx: &BuildContext,
    ) -> ParallelStream {
        let workers = workers.max(1);
        let max_in_flight = workers * 4;
        let (permit_tx, permit_rx) = bounded(max_in_flight);
        for _ in 0..max_in_flight {
            permit_tx.send(()).expect("room for every permit");
        }
        let (job_tx, job_rx) = unbounded::<Job<I>>();
        let (done_tx, done_rx) = unbounded::<Done>();
        let (stop_tx, stop_rx) = bounded::<()>(0);
        let avg_ns = Arc::new(AtomicU64::new(0));
        let account = ctx.account();
        ctx.metrics()
            .set_workers(knob.as_ref().map_or(workers, |k| k.get()));

        let mut threads = Vec::with_capacity(workers + 1);
        // A thread that cannot be started (the system's limit) is not a panic: with fewer
        // workers the stage goes on; with no dispatcher or no worker it fails in the stream.
        let mut spawn_error = None;
        // Whether the dispatcher has sent its last job: a parked worker then leaves once
        // the jobs are all taken, so that every worker has gone when the last result is in
        // (which is how the consumer learns that the stream has ended).
        let dispatched = Arc::new(AtomicBool::new(false));
        {
            let dispatched = Arc::clone(&dispatched);
            let ctx = ctx.clone();
            let stop_rx = stop_rx.clone();
            let avg_ns = Arc::clone(&avg_ns);
            let account = Arc::clone(&account);
            match std::thread::Builder::new()
                .name(format!("sluice-{}-in", ctx.stage_label()))
                .spawn(move || {
                    // Set however the dispatcher leaves, after its last job is sent.
                    let _ended = SetOnDrop(dispatched);
                    dispatch(upstream, job_tx, permit_rx, stop_rx, avg_ns, account, ctx)
                }) {
                Ok(t) => threads.push(t),
                Err(e) => spawn_error = Some(e),
            }
        }
        let dispatcher_started = spawn_error.is_none();
        for w in 0..workers {
            if !dispatcher_started {
                break;
            }
            let ctx = ctx.clone();
            let job_rx = job_rx.clone();
            let done_tx = done_tx.clone();
            let f = Arc::clone(&f);
            let avg_ns = Arc::clone(&avg_ns);
            let stop_rx = stop_rx.clone();
            let active = knob.clone().map(|k| (w, k, Arc::clone(&dispatched)));
            let account = Arc::clone(&account);
            match std::thread::Builder::new()
                .name(format!("sluice-{}-w{w}", ctx.stage_label()))
                .spawn(move || work(job_rx, done_tx, f, (avg_ns, account), stop_rx, active, ctx))
            {
                Ok(t) => threads.push(t),
                Err(e) => {
                    spawn_error.get_or_insert(e);
                }
            }
        }
        let mut ready = VecDeque::new();
        let mut finished = false;
        if let Some(e) = spawn_error.filter(|_| !dispatcher_started || threads.len() < 2) {
            ready.push_back(Err(
                ctx.stream_error(Error::internal(format!("cannot start a thread: {e}")))
            ));
            finished = true;
        }
        ParallelStream {
            results: done_rx,
            permits: permit_tx,
            stop: Some(stop_tx),
            shutdown: ctx.shutdown().clone(),
            deterministic,
            next_seq: 0,
            reorder: BTreeMap::new(),
            ready,
            threads,
            ctx: ctx.clone(),
            max_in_flight,
            finished,
            account,
        }
    }

    fn accept(&mut self, done: Done) {
        if self.deterministic {
            self.reorder.insert(done.seq, done.items);
            while let Some(items) = self.reorder.remove(&self.next_seq) {
                self.next_seq += 1;
                self.ready.extend(items);
                let _ = self.permits.try_send(());
            }
        } else {
            self.ready.extend(done.items);
            let _ = self.permits.try_send(());
        }
        self.ctx
            .metrics()
            .sample_buffer(self.max_in_flight - self.permits.len(), self.max_in_flight);
    }
}

impl ElementStream for ParallelStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                self.account.hand_out(bytes_of(&item));
                return Some(item);
            }
            if self.finished {
                return None;
            }
            // Waiting with nothing ready: the stage may take one item past the budget.
            self.account.set_starving(true);
            let msg = select! {
                recv(self.results) -> msg => Some(msg),
                recv(self.shutdown.channel()) -> _ => None,
            };
            self.account.set_starving(false);
            let msg = msg?;
            match msg {
                Ok(done) => self.accept(done),
                Err(_) => {
                    // Every worker has finished: the rest is in order already.
                    self.finished = true;
                    let rest = std::mem::take(&mut self.reorder);
                    for (_, items) in rest {
                        self.ready.extend(items);
                    }
                }
            }
        }
    }
}

impl Drop for ParallelStream {
    fn drop(&mut self) {
        // Disconnect the stop channel: the dispatcher and workers leave their loops.
        self.stop = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.account.release_all();
    }
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

fn dispatch<I: Item, S: Source<I>>(
    mut upstream: S,
    jobs: Sender<Job<I>>,
    permits: Receiver<()>,
    stop: Receiver<()>,
    avg_ns: Arc<AtomicU64>,
    account: Arc<Account>,
    ctx: BuildContext,
) {
    let shutdown = ctx.shutdown().clone();
    let stopped =
        || shutdown.is_set() || matches!(stop.try_recv(), Err(TryRecvError::Disconnected));
    let mut seq = 0u64;
    let mut ended = false;
    // An item pulled for which the budget had no room: the job in hand was sent first.
    let mut pending: Option<Result<I>> = None;
    while !ended {
        let t = Instant::now();
        select! {
            recv(permits) -> p => if p.is_err() { return },
            recv(stop) -> _ => return,
            recv(shutdown.channel()) -> _ => return,
        }
        // One job in flight until one is done: what an item's outputs weigh is unknown (a
        // map may make large elements out of small ones).
        while seq > 0 && !account.learnt() {
            if stopped() {
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        ctx.metrics().add_wait_downstream(t.elapsed());
        ctx.trace_wait("wait downstream", t);
        // One item per job until the workers have measured what an item costs.
        let chunk = match avg_ns.load(Relaxed) {
            0 => 1,
            avg => ((CHUNK_TARGET.as_nanos() as u64 / avg) as usize).clamp(1, MAX_CHUNK),
        };
        let t = Instant::now();
        let mut waited = Duration::ZERO;
        let mut items = Vec::with_capacity(chunk);
        let mut bytes = 0u64;
        while items.len() < chunk {
            if pending.is_none() {
                // Room for the next item (and what it will give) before pulling it.
                let estimate = account.expected(account.output_per_item());
                if !items.is_empty() && !account.has_room(estimate) {
                    break;
                }
                let w = Instant::now();
                let room = account.wait_for_room(estimate, stopped);
                waited += w.elapsed();
                if !room {
                    return;
                }
            }
            let item = match pending.take() {
                Some(item) => item,
                None => match guarded(|| upstream.next_item(), &ctx) {
                    Some(item) => item,
                    None => {
                        ended = true;
                        break;
                    }
                },
            };
            let item = match item {
                Ok(i) => match account.too_large(i.nbytes()) {
                    None => Ok(i),
                    Some(error) => match oversized(&i, error, &ctx) {
                        Some(e) => Err(e),
                        None => continue,
                    },
                },
                Err(e) => Err(e),
            };
            // An item's own bytes, or what an item's outputs were so far if more (a map
            // that makes large elements out of small ones).
            let n = item
                .as_ref()
                .map_or(0, |i| i.nbytes().max(account.output_per_item()));
            if !account.try_reserve(n) {
                if !items.is_empty() {
                    // No room: send the job in hand, then wait.
                    pending = Some(item);
                    break;
                }
                let w = Instant::now();
                let reserved = account.reserve(n, stopped);
                waited += w.elapsed();
                if !reserved {
                    return;
                }
            }
            bytes += n;
            let is_err = item.is_err();
            items.push(item);
            if is_err {
                break;
            }
        }
        if shutdown.is_set() {
            return;
        }
        ctx.metrics()
            .add_wait_upstream(t.elapsed().saturating_sub(waited));
        ctx.metrics().add_wait_downstream(waited);
        if items.is_empty() {
            break;
        }
        if jobs.send(Job { seq, items, bytes }).is_err() {
            return;
        }
        seq += 1;
    }
}

fn work<I: Item, O: Outputs>(
    jobs: Receiver<Job<I>>,
    done: Sender<Done>,
    f: WorkFn<I, O>,
    // The stage's time per element (sizes the chunks) and its bytes in flight.
    (avg_ns, account): (Arc<AtomicU64>, Arc<Account>),
    stop: Receiver<()>,
    active: Option<(usize, Arc<Knob>, Arc<AtomicBool>)>,
    ctx: BuildContext,
) {
    let shutdown = ctx.shutdown().clone();
    crate::observe::Tracer::set_current(ctx.tracer());
    loop {
        // Autotune parks the workers beyond its current number of threads.
        if let Some((w, knob, dispatched)) = &active
            && *w >= knob.get()
        {
            // Nothing is left for this worker: the stream's end must not wait for it.
            if dispatched.load(SeqCst) && jobs.is_empty() {
                return;
            }
            select! {
                recv(stop) -> _ => return,
                recv(shutdown.channel()) -> _ => return,
                default(PARKED_POLL) => continue,
            }
        }
        let t = Instant::now();
        let job = select! {
            recv(jobs) -> j => match j { Ok(j) => j, Err(_) => return },
            recv(stop) -> _ => return,
            recv(shutdown.channel()) -> _ => return,
        };
        ctx.metrics().add_wait_upstream(t.elapsed());
        ctx.trace_wait("wait upstream", t);
        let start = Instant::now();
        let n = job.items.len() as u64;
        let mut out = Vec::with_capacity(job.items.len());
        for item in job.items {
            match item {
                Err(e) => out.push(Err(e)),
                Ok(element) => {
                    let dropped = element.count();
                    // Under skip, a failed item's records are reported dropped.
                    let units =
                        (ctx.error_policy() == ErrorPolicy::Skip).then(|| Item::units(&element));
                    match apply(&f, element, &ctx) {
                        Ok(outputs) => outputs.push_into(&mut out),
                        Err(e) => match ctx.on_error_dropping(e, dropped) {
                            Some(e) => out.push(Err(e)),
                            None => {
                                if let Some(units) = &units {
                                    ctx.dropped(units);
                                }
                            }
                        },
                    }
                }
            }
        }
        let elapsed = start.elapsed();
        ctx.metrics().add_busy(elapsed);
        ctx.metrics().add_element_time(elapsed / n.max(1) as u32, n);
        ctx.trace_work(start, n);
        // A running average of the time per element, which sizes the chunks.
        let per = elapsed.as_nanos() as u64 / n.max(1);
        let old = avg_ns.load(Relaxed);
        avg_ns.store(if old == 0 { per } else { (old * 7 + per) / 8 }, Relaxed);
        // The job's inputs are gone; its outputs wait for the consumer.
        let out_bytes = out.iter().map(bytes_of).sum();
        account.learn_output(n, out_bytes);
        account.swap(job.bytes, out_bytes);
        if done
            .send(Done {
                seq: job.seq,
                items: out,
            })
            .is_err()
        {
            return;
        }
    }
}

/// The error of an item larger than the whole RAM budget, with the stage's context and the
/// error policy applied (`None`: skipped, its records reported dropped).
fn oversized<I: Item>(item: &I, error: Error, ctx: &BuildContext) -> Option<Error> {
    let (id, provenance) = item.trace();
    let error = Error::Stage {
        stage: ctx.stage_label(),
        element: id,
        provenance,
        error: Box::new(error),
    };
    let out = ctx.on_error_dropping(error, item.count());
    if out.is_none() {
        ctx.dropped(&item.units());
    }
    out
}

/// Applies `f` to one item, wrapping its error (or panic) with the stage's context.
pub(crate) fn apply<I: Item, O>(f: &WorkFn<I, O>, item: I, ctx: &BuildContext) -> Result<O> {
    let (id, provenance) = item.trace();
    let wrap = |e: Error| Error::Stage {
        stage: ctx.stage_label(),
        element: id,
        provenance: provenance.clone(),
        error: Box::new(e),
    };
    match catch_unwind(AssertUnwindSafe(|| f(item))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(wrap(e)),
        Err(panic) => Err(wrap(Error::Panic {
            stage: ctx.stage_label(),
            message: panic_message(panic.as_ref()),
        })),
    }
}

/// The message of a panic payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".to_string())
}

/// Pulls from an upstream on a stage's own thread: a panic there (a bug in an inline stage
/// or a closure above) becomes an error in the stream and ends it, instead of silently
/// ending the stream when the thread dies.
pub(crate) fn guarded<T>(
    next: impl FnOnce() -> Option<Result<T>>,
    ctx: &BuildContext,
) -> Option<Result<T>> {
    match catch_unwind(AssertUnwindSafe(next)) {
        Ok(item) => item,
        Err(panic) => Some(Err(Error::Panic {
            stage: ctx.stage_label(),
            message: format!(
                "upstream of this stage panicked: {}",
                panic_message(panic.as_ref())
            ),
        })),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::autotune::{Autotuner, KnobKind, Learned};
    use crate::executor::shutdown::Shutdown;
    use crate::metrics::StageMetrics;
    use crate::stream::IterStream;
    use crate::tensor::Tensor;

    /// The stream ends although autotune has parked some workers (knob 1 of 4): parked
    /// workers leave once every job is taken, so the consumer sees the end instead of
    /// waiting for them forever.
    #[test]
    fn the_stream_ends_while_workers_are_parked() {
        let (_trigger, shutdown) = Shutdown::new();
        let metrics = Arc::new(StageMetrics::default());
        let tuner = Arc::new(Autotuner::detached(Learned::new(), 1 << 30));
        let knob = tuner.knob(
            1,
            "map#1".into(),
            KnobKind::NumParallel,
            1,
            (1, 4),
            &metrics,
        );
        assert_eq!(knob.get(), 1);
        let ctx = BuildContext::for_test(1, "map", tuner, metrics, shutdown);
        let upstream: BoxStream = Box::new(IterStream((0..100u64).map(|i| {
            Ok(Element::new(ElementId::new(0, i)).with("value", Tensor::scalar_i64(i as i64)))
        })));
        let f: WorkFn = Arc::new(|e| Ok(Some(e)));
        let mut stream = ParallelStream::start(upstream, f, (4, Some(knob)), true, &ctx);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut n = 0;
            while let Some(e) = stream.next() {
                e.expect("no error");
                n += 1;
            }
            let _ = tx.send(n);
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(100));
    }
}
