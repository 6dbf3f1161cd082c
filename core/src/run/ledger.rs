//! The byte ledger: what the buffers of one running pipeline hold, in bytes, against
//! [`Options::ram_budget`](crate::Options).
//!
//! Every buffer of a run (a `prefetch` buffer, the work in flight in a parallel stage, an
//! `interleave`'s read-ahead, a batch being assembled, a shuffle buffer, an in-memory
//! cache, open groups of `group_by_window`) has an [`Account`] in the run's one
//! [`ByteLedger`]. It reserves the bytes of the elements it takes in ([`Element::nbytes`]:
//! the sum of its tensors' byte lengths) and releases them when it hands them on, so the
//! ledger's total is the bytes held in the pipeline's buffers at that moment.
//!
//! A buffer filled by a thread of its own (prefetch, interleave's reading threads, the
//! dispatcher of a parallel stage) waits while a reservation would take the total past
//! the budget (backpressure), except when it holds nothing and its consumer is waiting for
//! it: such a buffer may always take one element (or one item of work), so the pipeline
//! always makes progress. A buffer
//! filled on its consumer's thread (shuffle, cache, group_by_window, a batch assembled
//! inline) cannot wait (its consumer would wait on itself): it reserves what it holds and
//! fails with [`Error::ResourceExhausted`] when its own contents exceed the budget. An
//! element larger than the whole budget fails where it would be buffered, naming its size,
//! the budget and the stage.
//!
//! An element taken out of a buffer is handed over, not released: its bytes stay in the
//! ledger, carried by the thread that took it (a thread-local credit), and the next
//! reservation on that thread (the buffer it goes into next, downstream) takes them over.
//! So moving an element from one buffer into the next never needs room (no deadlock
//! between a full upstream buffer and an empty downstream one), and the room it leaves is
//! not taken by an upstream producer in between. A thread carries one element at a time:
//! what it carries and does not put into a buffer is released when it takes the next one,
//! at its next reservation, when the pipeline's iterator hands the element to the caller,
//! or when the thread ends. The high-water mark is then at most
//! the budget plus what starved buffers took past it (one element each, in practice the
//! one new element a source or a growing stage, such as `batch`, made).
//!
//! The common case costs a few atomic adds per element and a thread-local access; only a
//! producer waiting for room takes a lock.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::AcqRel, Ordering::Acquire};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::element::Element;
use crate::error::Error;
use crate::sync::LockExt;

/// How long a producer waiting for room sleeps before it looks again (a release wakes it
/// sooner).
const WAIT: Duration = Duration::from_millis(2);

/// The bytes held in the buffers of one running pipeline, against its RAM budget (see the
/// [module](self)). [`PipelineIter::memory`](crate::PipelineIter::memory) reads it.
#[derive(Debug)]
pub struct ByteLedger {
    budget: u64,
    held: AtomicU64,
    high_water: AtomicU64,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    freed: Condvar,
}

/// What a run's buffers hold, read from its [`ByteLedger`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryUsage {
    /// The RAM budget, in bytes.
    pub budget: u64,
    /// Bytes held in the buffers now.
    pub held: u64,
    /// The most bytes held at once since the run started.
    pub high_water: u64,
}

impl ByteLedger {
    /// A ledger for a run with `budget` bytes (at least 1).
    pub fn new(budget: u64) -> Arc<Self> {
        Arc::new(ByteLedger {
            budget: budget.max(1),
            held: AtomicU64::new(0),
            high_water: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            freed: Condvar::new(),
        })
    }

    /// The RAM budget, in bytes.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Bytes held in the buffers now.
    pub fn held(&self) -> u64 {
        self.held.load(Acquire)
    }

    /// The most bytes held at once since the run started.
    pub fn high_water(&self) -> u64 {
        self.high_water.load(Acquire)
    }

    /// Budget, bytes held and high-water mark.
    pub fn usage(&self) -> MemoryUsage {
        MemoryUsage {
            budget: self.budget,
            held: self.held(),
            high_water: self.high_water(),
        }
    }

    fn add(&self, n: u64) {
        let now = self.held.fetch_add(n, AcqRel) + n;
        self.high_water.fetch_max(now, AcqRel);
    }

    /// Adds `n` if the total stays within the budget.
    fn try_add(&self, n: u64) -> bool {
        let mut cur = self.held.load(Acquire);
        loop {
            if cur.saturating_add(n) > self.budget {
                return false;
            }
            match self
                .held
                .compare_exchange_weak(cur, cur + n, AcqRel, Acquire)
            {
                Ok(_) => {
                    self.high_water.fetch_max(cur + n, AcqRel);
                    return true;
                }
                Err(now) => cur = now,
            }
        }
    }

    fn sub(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.held.fetch_sub(n, AcqRel);
        if self.waiters.load(Acquire) > 0 {
            let _guard = self.lock.locked();
            self.freed.notify_all();
        }
    }

    /// Sleeps until some bytes are released (or [`WAIT`] passed).
    fn wait(&self) {
        self.waiters.fetch_add(1, AcqRel);
        let guard = self.lock.locked();
        let _ = self.freed.wait_timeout(guard, WAIT);
        self.waiters.fetch_sub(1, AcqRel);
    }
}

/// The bytes of the elements this thread took out of a ledger's buffers and has not yet put
/// into another buffer (still counted in that ledger).
struct Carried {
    ledger: Arc<ByteLedger>,
    bytes: u64,
    /// The account they came out of (its address; 0: several).
    from: usize,
}

#[derive(Default)]
struct InHand {
    carried: Option<Carried>,
    /// Gathering a group (a batch's elements): what is taken out is added to what is
    /// carried instead of replacing it.
    gathering: bool,
}

impl Drop for InHand {
    fn drop(&mut self) {
        if let Some(c) = self.carried.take() {
            c.ledger.sub(c.bytes);
        }
    }
}

thread_local! {
    static IN_HAND: RefCell<InHand> = RefCell::new(InHand::default());
}

/// Bytes of `ledger` this thread carries, and how many of them came out of `from` (an
/// account's address).
fn carried(ledger: &Arc<ByteLedger>, from: usize) -> (u64, u64) {
    IN_HAND
        .try_with(|h| match &h.borrow().carried {
            Some(c) if Arc::ptr_eq(&c.ledger, ledger) => {
                (c.bytes, if c.from == from { c.bytes } else { 0 })
            }
            _ => (0, 0),
        })
        .unwrap_or((0, 0))
}

/// Takes `n` (at most what it carries) of this thread's bytes of `ledger` over into a
/// buffer and releases the rest it carries (they were not put into a buffer).
fn take_over(ledger: &Arc<ByteLedger>, n: u64) {
    let _ = IN_HAND.try_with(|h| {
        if let Some(c) = h.borrow_mut().carried.take() {
            let rest = if Arc::ptr_eq(&c.ledger, ledger) {
                c.bytes.saturating_sub(n)
            } else {
                c.bytes
            };
            c.ledger.sub(rest);
        }
    });
}

/// [`take_over`] of up to `n` bytes, in one look at what the thread carries: returns how
/// many it took over.
fn take_over_up_to(ledger: &Arc<ByteLedger>, n: u64) -> u64 {
    IN_HAND
        .try_with(|h| {
            let c = h.borrow_mut().carried.take()?;
            let cover = if Arc::ptr_eq(&c.ledger, ledger) {
                c.bytes.min(n)
            } else {
                0
            };
            c.ledger.sub(c.bytes - cover);
            Some(cover)
        })
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// `n` bytes of `ledger` taken out of account `from` are what this thread carries now:
/// what it carried before is released (one element at a time: one it dropped, e.g.
/// filtered out, is not held any more), unless it is gathering a group.
fn carry(ledger: &Arc<ByteLedger>, n: u64, from: usize) {
    let kept = IN_HAND.try_with(|h| {
        let mut h = h.borrow_mut();
        let gathering = h.gathering;
        match &mut h.carried {
            Some(c) if gathering && Arc::ptr_eq(&c.ledger, ledger) => {
                c.bytes += n;
                if c.from != from {
                    c.from = 0;
                }
            }
            other => {
                if let Some(c) = other.take() {
                    c.ledger.sub(c.bytes);
                }
                *other = Some(Carried {
                    ledger: Arc::clone(ledger),
                    bytes: n,
                    from,
                });
            }
        }
    });
    if kept.is_err() {
        // The thread is ending: nothing can carry them.
        ledger.sub(n);
    }
}

/// Runs `f` gathering a group: the elements it takes out of buffers are carried together
/// (a batch's inputs, which go on together as one item of work).
pub(crate) fn gathering<T>(f: impl FnOnce() -> T) -> T {
    let set = |on: bool| {
        let _ = IN_HAND.try_with(|h| h.borrow_mut().gathering = on);
    };
    set(true);
    let out = f();
    set(false);
    out
}

/// Releases what this thread carries (the element it took is the caller's now).
pub(crate) fn settle() {
    let _ = IN_HAND.try_with(|h| {
        if let Some(c) = h.borrow_mut().carried.take() {
            c.ledger.sub(c.bytes);
        }
    });
}

/// One buffer's share of a run's [`ByteLedger`]: the bytes it holds (see the
/// [module](self)). Dropping it releases them.
#[derive(Debug)]
pub(crate) struct Account {
    ledger: Arc<ByteLedger>,
    held: AtomicU64,
    /// The stage the buffer belongs to, as errors name it (`prefetch#3`).
    stage: String,
    /// The buffer's consumer is waiting for it (it is empty).
    starving: AtomicBool,
    /// What the waiting consumer carries (`(all, out of this buffer)`, bytes): a consumer
    /// gathering a group out of this buffer does not make it take more than the budget
    /// while the group fits.
    consumer_carries: Mutex<(u64, u64)>,
    /// Bytes of output per item of work (a running average; a parallel stage reserves
    /// this much for an item it dispatches when it is more than the item's own).
    per_item: AtomicU64,
    /// Some output was learnt (`per_item` is meaningful).
    learnt: AtomicBool,
    /// Bytes of the last item reserved: what the next one is expected to weigh.
    last_item: AtomicU64,
}

impl Account {
    pub(crate) fn new(ledger: &Arc<ByteLedger>, stage: String) -> Self {
        Account {
            ledger: Arc::clone(ledger),
            held: AtomicU64::new(0),
            stage,
            starving: AtomicBool::new(false),
            consumer_carries: Mutex::new((0, 0)),
            per_item: AtomicU64::new(0),
            learnt: AtomicBool::new(false),
            last_item: AtomicU64::new(0),
        }
    }

    /// The run's RAM budget.
    pub(crate) fn budget(&self) -> u64 {
        self.ledger.budget
    }

    /// Whether the buffer's consumer is waiting for it: then, holding nothing, it may take
    /// one item past the budget (so that the pipeline always makes progress).
    /// Called on the consumer's thread.
    pub(crate) fn set_starving(&self, waiting: bool) {
        if waiting {
            let c = carried(&self.ledger, self.address());
            if *self.consumer_carries.locked() != c {
                *self.consumer_carries.locked() = c;
            }
        }
        self.starving
            .store(waiting, std::sync::atomic::Ordering::Release);
    }

    fn address(&self) -> usize {
        self as *const Account as usize
    }

    /// Whether this buffer, holding nothing, may take `rest` bytes past the budget: its
    /// consumer waits for it and is not gathering a group out of it that would fit once
    /// the rest of the pipeline drained.
    fn may_overdraw(&self, rest: u64) -> bool {
        if self.held() != 0 || !self.starving.load(Acquire) {
            return false;
        }
        let (all, mine) = *self.consumer_carries.locked();
        mine == 0 || all + rest > self.ledger.budget
    }

    /// Learns that `items` items of work gave `bytes` bytes of output.
    pub(crate) fn learn_output(&self, items: u64, bytes: u64) {
        if items == 0 {
            return;
        }
        let per = bytes / items;
        let old = self.per_item.load(Acquire);
        let new = if old == 0 { per } else { (old * 7 + per) / 8 };
        self.per_item
            .store(new, std::sync::atomic::Ordering::Release);
        self.learnt
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether an item of work was done, so that [`Account::output_per_item`] says what
    /// one gives.
    pub(crate) fn learnt(&self) -> bool {
        self.learnt.load(Acquire)
    }

    /// The bytes of output an item of work gives, as learnt so far (0: none seen).
    pub(crate) fn output_per_item(&self) -> u64 {
        self.per_item.load(Acquire)
    }

    /// Bytes this buffer holds.
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Acquire)
    }

    /// Reserves `n` bytes for an item this thread pulled: what the thread carries (the
    /// item taken out of the buffer before, see the [module](self)) is taken over, and the
    /// total with the rest must be within the budget, unless this buffer holds nothing
    /// (one item may always be in flight); `false`: no room now (nothing was taken over).
    pub(crate) fn try_reserve(&self, n: u64) -> bool {
        let cover = carried(&self.ledger, 0).0.min(n);
        let rest = n - cover;
        let fits = if rest == 0 {
            // Already counted: it moves in when the total is within the budget.
            self.ledger.held() <= self.ledger.budget
        } else {
            self.ledger.try_add(rest)
        };
        if !fits {
            if self.may_overdraw(rest) {
                // Past the budget: the one item a buffer its consumer waits on may hold.
                self.ledger.add(rest);
            } else {
                return false;
            }
        }
        take_over(&self.ledger, cover);
        self.held.fetch_add(n, AcqRel);
        self.last_item
            .store(n, std::sync::atomic::Ordering::Release);
        true
    }

    /// What the next item is expected to weigh: the last one reserved, or `at_least`.
    pub(crate) fn expected(&self, at_least: u64) -> u64 {
        self.last_item.load(Acquire).max(at_least)
    }

    /// Whether an item of `estimate` bytes would find room now (see
    /// [`Account::try_reserve`]): a producer looks before it pulls (and so makes) the next
    /// element, so that elements waiting for room are not made in the first place.
    pub(crate) fn has_room(&self, estimate: u64) -> bool {
        let held = self.ledger.held();
        held.saturating_add(estimate) <= self.ledger.budget
            || (held <= self.ledger.budget && self.held() == 0 && estimate > self.ledger.budget)
            || self.may_overdraw(estimate)
    }

    /// Waits until an item of `estimate` bytes would find room ([`Account::has_room`]),
    /// or `stop` says to give up; returns whether there is room.
    pub(crate) fn wait_for_room(&self, estimate: u64, stop: impl Fn() -> bool) -> bool {
        loop {
            if self.has_room(estimate) {
                return true;
            }
            if stop() {
                return false;
            }
            self.ledger.wait();
        }
    }

    /// Reserves `n` bytes, waiting for room (see [`Account::try_reserve`]) until `stop`
    /// says to give up; returns whether it reserved them.
    pub(crate) fn reserve(&self, n: u64, stop: impl Fn() -> bool) -> bool {
        loop {
            if self.try_reserve(n) {
                return true;
            }
            if stop() {
                return false;
            }
            self.ledger.wait();
        }
    }

    /// Reserves `n` bytes whatever the total (a buffer filled on its consumer's thread,
    /// which cannot wait), taking over what the thread carries.
    pub(crate) fn force(&self, n: u64) {
        let cover = take_over_up_to(&self.ledger, n);
        self.ledger.add(n - cover);
        self.held.fetch_add(n, AcqRel);
    }

    /// Swaps `from` bytes this buffer held for `to` (a worker's outputs for its inputs).
    ///
    /// Only the difference moves: adding the outputs before releasing the inputs would
    /// count a job twice for a moment, and the high-water mark would see it (with every
    /// worker swapping at once, up to one extra job per worker past the budget).
    pub(crate) fn swap(&self, from: u64, to: u64) {
        let from = from.min(self.held());
        if to >= from {
            self.held.fetch_add(to - from, AcqRel);
            self.ledger.add(to - from);
        } else {
            self.held.fetch_sub(from - to, AcqRel);
            self.ledger.sub(from - to);
        }
    }

    /// Hands `n` bytes over to the thread taking an element out of this buffer: they stay
    /// in the ledger until that thread puts the element into another buffer or settles.
    pub(crate) fn hand_out(&self, n: u64) {
        let n = n.min(self.held());
        self.held.fetch_sub(n, AcqRel);
        carry(&self.ledger, n, self.address());
    }

    /// Releases `n` bytes this buffer held.
    pub(crate) fn release(&self, n: u64) {
        let n = n.min(self.held());
        self.held.fetch_sub(n, AcqRel);
        self.ledger.sub(n);
    }

    /// Releases everything this buffer holds.
    pub(crate) fn release_all(&self) {
        let n = self.held.swap(0, AcqRel);
        self.ledger.sub(n);
    }

    /// The error of an element of `n` bytes that no buffer can hold: `None` when it fits
    /// in the budget.
    pub(crate) fn too_large(&self, n: u64) -> Option<Error> {
        (n > self.ledger.budget).then(|| too_large(n, self.ledger.budget, &self.stage))
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        self.release_all();
    }
}

/// [`Error::ResourceExhausted`]: an element of `n` bytes is larger than the whole budget.
pub(crate) fn too_large(n: u64, budget: u64, stage: &str) -> Error {
    Error::ram_budget(format!(
        "an element of {n} bytes is larger than the whole RAM budget of {budget} bytes, so \
         {stage} cannot buffer it; raise `ram_budget` or make elements smaller (e.g. smaller \
         batches)"
    ))
}

/// The bytes an element holds, as the ledger counts them.
pub(crate) fn bytes_of(item: &crate::error::Result<Element>) -> u64 {
    match item {
        Ok(e) => e.nbytes() as u64,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_starved_buffer_holding_nothing_may_take_one_item_past_the_budget() {
        let ledger = ByteLedger::new(100);
        let a = Account::new(&ledger, "a#1".into());
        let b = Account::new(&ledger, "b#2".into());
        assert!(a.try_reserve(80));
        // b holds nothing, but nobody waits for it: it waits for room.
        assert!(!b.try_reserve(60));
        // Its consumer waits for it: it may take one item past the budget.
        b.set_starving(true);
        assert!(b.try_reserve(60));
        assert_eq!(ledger.held(), 140);
        // Neither may take more now.
        assert!(!a.try_reserve(10));
        assert!(!b.try_reserve(10));
        b.release(60);
        assert!(a.try_reserve(20));
        assert_eq!(ledger.usage().high_water, 140);
        drop(a);
        assert_eq!(ledger.held(), 0);
    }

    #[test]
    fn a_swap_moves_only_the_difference_so_the_high_water_mark_never_counts_a_job_twice() {
        // A worker's outputs for its inputs: 90 reserved for the job, 90 of output, at a
        // total of 100 (the budget). Adding before releasing would have shown 190.
        let ledger = ByteLedger::new(100);
        let work = Account::new(&ledger, "map#1".into());
        let other = Account::new(&ledger, "prefetch#2".into());
        assert!(other.try_reserve(10));
        assert!(work.try_reserve(90));
        work.swap(90, 90);
        assert_eq!((ledger.held(), work.held()), (100, 90));
        assert_eq!(ledger.usage().high_water, 100);
        // Outputs larger than the inputs add the difference, smaller ones release it.
        work.swap(90, 95);
        assert_eq!(
            (ledger.held(), work.held(), ledger.usage().high_water),
            (105, 95, 105)
        );
        work.swap(95, 5);
        assert_eq!((ledger.held(), work.held()), (15, 5));
        // Never more than the buffer holds.
        work.swap(50, 0);
        assert_eq!((ledger.held(), work.held()), (10, 0));
    }

    #[test]
    fn an_element_handed_over_to_the_next_buffer_needs_no_room() {
        let ledger = ByteLedger::new(100);
        let up = Account::new(&ledger, "prefetch#1".into());
        let down = Account::new(&ledger, "prefetch#2".into());
        assert!(up.try_reserve(60));
        assert!(down.try_reserve(30));
        // Taken out of `up` on this thread: still counted, carried.
        up.hand_out(60);
        assert_eq!(ledger.held(), 90);
        // Into `down`: taken over, no room needed (90 + 60 would not fit).
        assert!(down.try_reserve(60));
        assert_eq!((ledger.held(), up.held(), down.held()), (90, 0, 90));
        // Taken out and given to the caller: released.
        down.hand_out(60);
        settle();
        assert_eq!(ledger.held(), 30);
        // A thread carries one element at a time (one it dropped is released)...
        assert!(up.try_reserve(20));
        assert!(up.try_reserve(20));
        up.hand_out(20);
        up.hand_out(20);
        assert_eq!(ledger.held(), 50);
        // ...unless it gathers a group, which goes on as one item.
        assert!(up.try_reserve(20));
        assert!(up.try_reserve(20));
        gathering(|| {
            up.hand_out(20);
            up.hand_out(20);
        });
        assert_eq!(ledger.held(), 70);
        down.force(40);
        assert_eq!((ledger.held(), down.held()), (70, 70));
        settle();
    }

    #[test]
    fn a_waiting_reservation_goes_on_when_bytes_are_released() {
        let ledger = ByteLedger::new(100);
        let a = Arc::new(Account::new(&ledger, "a#1".into()));
        a.force(90);
        let other = Account::new(&ledger, "b#2".into());
        other.force(5);
        let waiter = {
            let a = Arc::clone(&a);
            std::thread::spawn(move || a.reserve(50, || false))
        };
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(ledger.held(), 95, "the reservation waits");
        a.release(90);
        assert!(waiter.join().unwrap());
        assert_eq!(ledger.held(), 55);
        assert!(!a.reserve(60, || true), "a stop ends the wait");
    }

    #[test]
    fn an_element_larger_than_the_budget_is_named() {
        let ledger = ByteLedger::new(1000);
        let a = Account::new(&ledger, "prefetch#3".into());
        assert!(a.too_large(1000).is_none());
        let e = a.too_large(1001).expect("too large");
        let msg = e.to_string();
        assert!(
            msg.contains("1001 bytes") && msg.contains("1000 bytes") && msg.contains("prefetch#3"),
            "{msg}"
        );
    }
}
