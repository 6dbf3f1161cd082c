//! Recycling of large tensor buffers.
//!
//! A pipeline allocates its large buffers (batches) on one thread and frees them on
//! another, a pattern in which the system allocator tends to hand the memory back to the
//! kernel and fault fresh pages in for the next batch: that costs as much as the copying
//! itself and makes throughput vary from run to run. Buffers of at least
//! [`MIN_POOLED_BYTES`] are therefore kept when their last reference drops and reused for
//! the next buffer of a similar size, the most recently returned first (its memory is the
//! likeliest to still be in the cache). The pool holds at most [`MAX_POOLED`] buffers and
//! [`MAX_POOLED_BYTES`] per value type. New buffers get ordinary pages unless
//! `SLUICE_HUGE_PAGES=1` asks for transparent huge pages (see `advise_huge_pages`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Smallest buffer worth recycling.
pub const MIN_POOLED_BYTES: usize = 128 << 10;
/// Most buffers kept per value type.
pub const MAX_POOLED: usize = 16;
/// Most bytes kept per value type.
pub const MAX_POOLED_BYTES: usize = 256 << 20;

mod sealed {
    pub trait Sealed {}
}

/// A value type whose buffers are recycled: `i32`, `i64`, `f32`, `f64` and byte strings
/// (and `u8`, whose tensors are `Bytes`: recycled when built by [`recycled_bytes`], as decoded
/// image crops are).
pub trait Poolable: Sized + Send + Sync + 'static + sealed::Sealed {
    #[doc(hidden)]
    fn pool() -> &'static Pool<Self>;
}

macro_rules! poolable {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Poolable for $t {
            fn pool() -> &'static Pool<$t> {
                static POOL: Pool<$t> = Pool::new();
                &POOL
            }
        }
    )*};
}

poolable!(u8, i32, i64, f32, f64, Bytes);

fn bytes_of<T>(capacity: usize) -> usize {
    capacity.saturating_mul(std::mem::size_of::<T>())
}

/// Whether a buffer of `bytes` is one the pool recycles.
fn pooled_size(bytes: usize) -> bool {
    (MIN_POOLED_BYTES..=MAX_POOLED_BYTES).contains(&bytes)
}

/// One value type's recycled buffers (behind the free functions of this module, which use
/// the type's own pool).
#[doc(hidden)]
pub struct Pool<T> {
    buffers: Mutex<Vec<Vec<T>>>,
    /// Notified whenever a buffer is given back.
    returned: Condvar,
    /// Buffers of a recycled size handed out and not given back yet, as far as the pool can
    /// tell (a buffer dropped without [`give`] stays counted; one given back that it never
    /// handed out is not subtracted below zero).
    lent: AtomicUsize,
    /// Whether [`take_filled_aligned_or_wait`] still waits: cleared the first time a wait
    /// runs out (the buffers out are kept by their holder, so waiting does not pay).
    patient: AtomicBool,
}

impl<T> Pool<T> {
    /// An empty pool.
    pub const fn new() -> Self {
        Pool {
            buffers: Mutex::new(Vec::new()),
            returned: Condvar::new(),
            lent: AtomicUsize::new(0),
            patient: AtomicBool::new(true),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Vec<T>>> {
        self.buffers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes out of `buffers` the most recently given one with room for `len` values and
    /// at most twice that, counting it as lent.
    fn reuse(&self, buffers: &mut Vec<Vec<T>>, len: usize) -> Option<Vec<T>> {
        let i = buffers
            .iter()
            .rposition(|v| v.capacity() >= len && v.capacity() <= len.saturating_mul(2))?;
        self.lent.fetch_add(1, Ordering::Relaxed);
        Some(buffers.swap_remove(i))
    }

    /// Counts a new buffer of `len` values as lent when it is of a recycled size.
    fn lend_new(&self, len: usize) {
        if pooled_size(bytes_of::<T>(len)) {
            self.lent.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn take(&self, capacity: usize) -> Vec<T> {
        if pooled_size(bytes_of::<T>(capacity)) {
            let reused = self.reuse(&mut self.lock(), capacity);
            if let Some(mut v) = reused {
                v.clear();
                return v;
            }
        }
        self.lend_new(capacity);
        let v = Vec::with_capacity(capacity);
        advise_huge_pages(&v);
        v
    }

    fn take_filled(&self, len: usize, patience: Duration) -> Vec<T>
    where
        T: Copy + Default,
    {
        if pooled_size(bytes_of::<T>(len)) {
            let mut buffers = self.lock();
            let mut deadline = None;
            loop {
                if let Some(mut v) = self.reuse(&mut buffers, len) {
                    drop(buffers);
                    v.resize(len, T::default());
                    return v;
                }
                if patience.is_zero()
                    || !self.patient.load(Ordering::Relaxed)
                    || self.lent.load(Ordering::Relaxed) == 0
                {
                    break;
                }
                let now = Instant::now();
                let until = *deadline.get_or_insert(now + patience);
                if now >= until {
                    self.patient.store(false, Ordering::Relaxed);
                    break;
                }
                buffers = self
                    .returned
                    .wait_timeout(buffers, until - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        self.lend_new(len);
        let v = vec![T::default(); len];
        advise_huge_pages(&v);
        v
    }

    fn give(&self, mut v: Vec<T>) {
        let size = bytes_of::<T>(v.capacity());
        if !pooled_size(size) {
            return;
        }
        // Back from its holder, whether the pool keeps it or not.
        let _ = self
            .lent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        // Plain values stay (`take` clears them, `take_filled` reuses them); references go.
        if std::mem::needs_drop::<T>() {
            v.clear();
        }
        let mut buffers = self.lock();
        let mut held: usize = buffers.iter().map(|b| bytes_of::<T>(b.capacity())).sum();
        while buffers.len() >= MAX_POOLED || held + size > MAX_POOLED_BYTES {
            let Some((i, smallest)) = buffers
                .iter()
                .enumerate()
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, b)| (i, bytes_of::<T>(b.capacity())))
            else {
                break;
            };
            if smallest >= size {
                return;
            }
            buffers.swap_remove(i);
            held -= smallest;
        }
        buffers.push(v);
        drop(buffers);
        self.returned.notify_all();
    }
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool::new()
    }
}

/// An empty vector with room for `capacity` values, recycled when one fits.
pub fn take<T: Poolable>(capacity: usize) -> Vec<T> {
    T::pool().take(capacity)
}

/// A vector of `len` values, recycled when one fits, whose values are unspecified (stale
/// values of an earlier buffer, or the default): for a caller that overwrites every value.
/// A recycled buffer is not cleared first, so this costs no pass over the memory when the
/// recycled buffer already held at least `len` values.
pub fn take_filled<T: Poolable + Copy + Default>(len: usize) -> Vec<T> {
    T::pool().take_filled(len, Duration::ZERO)
}

/// [`take_filled`] with room for `len` values starting at an `align`-byte boundary: the
/// vector (at least `len` values, all unspecified) and the index of that start. For a
/// buffer written with aligned vector stores (a batch whose rows are streamed out);
/// `align` a power of two. `Shared::new(v).slice(start..start + len)` makes it a tensor's
/// values without a copy.
pub fn take_filled_aligned<T: Poolable + Copy + Default>(
    len: usize,
    align: usize,
) -> (Vec<T>, usize) {
    take_filled_aligned_or_wait(len, align, Duration::ZERO)
}

/// [`take_filled_aligned`] that, when no buffer fits but buffers are out (taken and not
/// given back), waits up to `patience` for one to come back before making a new one.
///
/// For a stage that fills one large buffer after another (a batch's rows): its consumer
/// usually drops the batch before while the next one starts, but on busy CPUs the drop
/// can come a millisecond or two after the next batch needs its buffer, and a new 38 MB
/// buffer then costs its ~9,400 fresh pages (2–30 µs each where the host backs a VM's
/// memory on first touch, BENCHMARKS.md) where a short wait costs nothing. The first wait
/// that runs out (a consumer that keeps its batches, as a cache or a training loop with a
/// prefetch buffer do) ends the waiting for this value type, for the rest of the process.
pub fn take_filled_aligned_or_wait<T: Poolable + Copy + Default>(
    len: usize,
    align: usize,
    patience: Duration,
) -> (Vec<T>, usize) {
    assert!(
        align.is_power_of_two(),
        "take_filled_aligned: align {align} is not a power of two"
    );
    let slack = (align / std::mem::size_of::<T>().max(1)).saturating_sub(1);
    let v = T::pool().take_filled(len + slack, patience);
    // The allocation is aligned for `T`, so the start is at most `slack` values in.
    let start = v.as_ptr().align_offset(align).min(slack);
    (v, start)
}

/// Size of a transparent huge page on x86_64 and most aarch64 kernels.
const HUGE_PAGE: usize = 2 << 20;

/// Whether `SLUICE_HUGE_PAGES=1` asks for huge pages (read once per process).
#[cfg(target_os = "linux")]
fn huge_pages_wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| std::env::var("SLUICE_HUGE_PAGES").as_deref() == Ok("1"))
}

/// With `SLUICE_HUGE_PAGES=1` in the environment, asks the kernel to back the whole 2 MiB
/// pages inside `v`'s allocation with transparent huge pages, when it is large enough to
/// hold one (Linux; elsewhere nothing): a batch buffer (38 MB for 64 images of 224×224×3
/// `f32`) then takes ~20 page faults instead of ~9,400 and its writes miss the TLB less.
///
/// Off by default: in a VM whose host takes back the guest's free memory (free page
/// reporting hands it free 2 MiB blocks), a huge page touched for the first time is backed
/// by the host then, and a process's first batch buffers cost far more than with 4 KiB
/// pages, which come from memory the guest used recently (`augment` right after another
/// process freed its memory: 5,157–5,575 images/s with huge pages, 5,728–5,919 without;
/// with warm memory the same either way; BENCHMARKS.md). On a machine where huge pages
/// measure faster (+3.8 % on an earlier VM), set the variable.
fn advise_huge_pages<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    if huge_pages_wanted() {
        let start = v.as_ptr() as usize;
        let end = start + bytes_of::<T>(v.capacity());
        let first = start.next_multiple_of(HUGE_PAGE);
        let last = end - end % HUGE_PAGE;
        if last > first {
            #[allow(unsafe_code)]
            // SAFETY: `[first, last)` lies inside `v`'s allocation, which this process
            // owns, and MADV_HUGEPAGE changes neither its contents nor its validity (only
            // how the kernel backs it: an advice call with no memory-safety effect). Its
            // result is ignored: failing only means ordinary pages.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (v, HUGE_PAGE);
}

/// `v` as [`Bytes`] whose allocation goes back to the pool when the last reference drops
/// (for `u8` tensors, such as decoded and cropped images).
#[inline]
pub fn recycled_bytes(v: Vec<u8>) -> Bytes {
    if bytes_of::<u8>(v.capacity()) >= MIN_POOLED_BYTES {
        Bytes::from_owner(Recycled(v))
    } else {
        Bytes::from(v)
    }
}

/// A byte vector that goes back to the pool when dropped.
struct Recycled(Vec<u8>);

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.0));
    }
}

/// Keeps `v`'s allocation for reuse if it is large. When the pool is full, smaller buffers
/// make room for a larger one (a batch buffer is worth more than an image's).
pub fn give<T: Poolable>(v: Vec<T>) {
    T::pool().give(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_come_back_small_ones_do_not() {
        let n = MIN_POOLED_BYTES / 8 + 1;
        let mut v: Vec<f64> = take(n);
        v.extend(std::iter::repeat_n(1.0, n));
        let ptr = v.as_ptr();
        give(v);
        let again: Vec<f64> = take(n);
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), ptr, "the same allocation is reused");
        give(again);
        let small: Vec<f64> = take(10);
        assert!(small.capacity() < n);
    }

    #[test]
    fn recycled_bytes_come_back_to_the_pool() {
        // No other test here uses u8 buffers of this size.
        let n = MIN_POOLED_BYTES * 3 + 7;
        let mut v: Vec<u8> = take(n);
        v.resize(n, 9);
        let ptr = v.as_ptr();
        let bytes = recycled_bytes(v);
        assert_eq!(bytes.len(), n);
        assert!(bytes.iter().all(|&b| b == 9));
        let clone = bytes.clone();
        drop(bytes);
        assert_eq!(clone.as_ptr(), ptr);
        drop(clone);
        let again: Vec<u8> = take(n);
        assert_eq!(again.as_ptr(), ptr, "the allocation came back");
        assert!(again.is_empty());
    }

    #[test]
    fn take_filled_aligned_has_room_from_an_aligned_start() {
        for len in [MIN_POOLED_BYTES / 4 + 3, 1000] {
            for _ in 0..3 {
                let (v, start): (Vec<f32>, usize) = take_filled_aligned(len, 64);
                assert!(v.len() >= start + len);
                assert_eq!((v[start..].as_ptr() as usize) % 64, 0);
                give(v);
            }
        }
    }

    #[test]
    fn take_filled_gives_the_length_asked_for() {
        // No other test here uses i64 buffers of this size.
        let n = MIN_POOLED_BYTES / 8 * 5 + 5;
        let mut v: Vec<i64> = take_filled(n);
        assert_eq!(v.len(), n);
        v.iter_mut().for_each(|x| *x = 7);
        let ptr = v.as_ptr();
        give(v);
        let shorter: Vec<i64> = take_filled(n - 3);
        assert_eq!(shorter.len(), n - 3);
        assert_eq!(shorter.as_ptr(), ptr, "recycled");
        give(shorter);
        let again: Vec<i64> = take(n);
        assert!(again.is_empty(), "take always gives an empty vector");
    }

    #[test]
    fn a_take_waits_for_a_buffer_out_to_come_back() {
        // A pool of its own: waiting is per pool.
        let pool = Pool::<f32>::new();
        let n = MIN_POOLED_BYTES;
        let out = pool.take_filled(n, Duration::ZERO);
        let ptr = out.as_ptr() as usize;
        let again = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(30));
                pool.give(out);
            });
            pool.take_filled(n, Duration::from_secs(30))
        });
        assert_eq!(
            again.as_ptr() as usize,
            ptr,
            "the buffer given back was waited for"
        );
        assert!(pool.patient.load(Ordering::Relaxed));
    }

    #[test]
    fn a_wait_that_runs_out_ends_the_waiting() {
        let pool = Pool::<f32>::new();
        let n = MIN_POOLED_BYTES;
        let kept = pool.take_filled(n, Duration::ZERO);
        let new = pool.take_filled(n, Duration::from_millis(20));
        assert_ne!(
            new.as_ptr(),
            kept.as_ptr(),
            "nothing came back: a new buffer"
        );
        assert!(!pool.patient.load(Ordering::Relaxed));
        // Both still out: the pool no longer waits, however patient the caller.
        let start = Instant::now();
        let third = pool.take_filled(n, Duration::from_secs(30));
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(third.len(), n);
    }

    #[test]
    fn nothing_out_nothing_to_wait_for() {
        let pool = Pool::<f64>::new();
        let start = Instant::now();
        let v = pool.take_filled(MIN_POOLED_BYTES, Duration::from_secs(30));
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(pool.lent.load(Ordering::Relaxed), 1);
        pool.give(v);
        assert_eq!(pool.lent.load(Ordering::Relaxed), 0);
        assert!(pool.patient.load(Ordering::Relaxed), "no wait ran out");
    }

    #[test]
    fn a_full_pool_keeps_the_larger_buffers() {
        // i32 is used by no other test here.
        let unit = MIN_POOLED_BYTES / 4;
        for _ in 0..MAX_POOLED {
            give(Vec::<i32>::with_capacity(unit));
        }
        let big = Vec::<i32>::with_capacity(unit * 8);
        let ptr = big.as_ptr();
        give(big);
        let again: Vec<i32> = take(unit * 8);
        assert_eq!(
            again.as_ptr(),
            ptr,
            "the large buffer displaced a small one"
        );
    }
}
