//! A gate: at most so many producer threads working at once.
//!
//! `interleave` gives each open file a reading thread of its own, so that the consumer never
//! reads a file itself, but lets at most `num_parallel` of them (the CPU budget's, or
//! autotune's number) read at a time: a thread holds a [`Permit`] while it pulls a chunk of
//! records and waits for one otherwise. Threads beyond the budget cost a little memory and
//! no CPU; the consumer's thread stays free for the stages after the interleave.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::autotune::Knob;

/// How long a thread waiting for a permit sleeps before it checks whether to stop.
const STOP_POLL: Duration = Duration::from_millis(5);

/// At most [`limit`](Gate::limit) permits out at once.
#[derive(Debug)]
pub(crate) struct Gate {
    limit: Limit,
    out: Mutex<usize>,
    freed: Condvar,
}

#[derive(Debug)]
enum Limit {
    Fixed(usize),
    /// Autotune's value, read at each acquisition (a lowered value takes effect as permits
    /// come back).
    Knob(Arc<Knob>),
}

impl Gate {
    /// A gate letting `n` threads through at once.
    pub(crate) fn fixed(n: usize) -> Arc<Gate> {
        Gate::new(Limit::Fixed(n))
    }

    /// A gate letting `knob.get()` threads through at once.
    pub(crate) fn knob(knob: Arc<Knob>) -> Arc<Gate> {
        Gate::new(Limit::Knob(knob))
    }

    fn new(limit: Limit) -> Arc<Gate> {
        Arc::new(Gate {
            limit,
            out: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Threads let through at once now.
    pub(crate) fn limit(&self) -> usize {
        match &self.limit {
            Limit::Fixed(n) => *n,
            Limit::Knob(k) => k.get(),
        }
    }

    /// Waits for a permit; `None` if `stop()` turned true first.
    pub(crate) fn acquire(self: &Arc<Self>, stop: impl Fn() -> bool) -> Option<Permit> {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if *out < self.limit() {
                *out += 1;
                return Some(Permit {
                    gate: Arc::clone(self),
                });
            }
            if stop() {
                return None;
            }
            out = self
                .freed
                .wait_timeout(out, STOP_POLL)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// One thread's passage through a [`Gate`], returned when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    gate: Arc<Gate>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut out = self.gate.out.lock().unwrap_or_else(|p| p.into_inner());
        *out -= 1;
        drop(out);
        self.gate.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn no_more_than_the_limit_hold_a_permit_at_once() {
        let gate = Gate::fixed(2);
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    for _ in 0..50 {
                        let _permit = gate.acquire(|| false).expect("no stop");
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_waiting_thread_stops_when_told() {
        let gate = Gate::fixed(1);
        let held = gate.acquire(|| false).expect("free");
        assert!(gate.acquire(|| true).is_none());
        drop(held);
        assert!(gate.acquire(|| true).is_some());
    }
}
