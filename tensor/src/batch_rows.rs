//! A batch's buffer written row by row in parallel, taken from the [`pool`](crate::pool)
//! only when the first row is ready to be written.
//!
//! A stage that decodes and augments a batch's images straight into the batch's buffer
//! needs the buffer only once the first image is decoded, a few hundred microseconds after
//! the batch starts. Taken then rather than at the start, the buffer is usually the one of
//! the batch before, which the consumer has dropped in the meantime, instead of a new one:
//! a pipeline whose consumer keeps one batch at a time touches one batch buffer's worth
//! of fresh memory instead of two. Fresh memory is expensive where the host backs a VM's
//! pages on first touch (6–20 µs per 4 KiB page measured on VM-5: 38 MB cost 60–190 ms of
//! CPU, BENCHMARKS.md). When the consumer has not dropped it yet, the first row waits a
//! few milliseconds for it before a new buffer is made (and stops waiting for good once
//! such a wait runs out: a consumer that keeps its batches).
//!
//! ```
//! use sluice_tensor::BatchRows;
//!
//! let rows = BatchRows::<f32>::new(3, 4, 64);
//! std::thread::scope(|s| {
//!     for i in 0..3 {
//!         let rows = &rows;
//!         s.spawn(move || rows.row(i).fill(i as f32));
//!     }
//! });
//! let values = rows.into_shared();
//! assert_eq!(&values[..], &[0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]);
//! assert_eq!(values.as_ptr() as usize % 64, 0);
//! ```

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::pool::{self, Poolable};
use crate::tensor::Shared;

/// How long the first row waits for the batch before's buffer to come back when the pool
/// has none (`pool::take_filled_aligned_or_wait`): a consumer on a busy machine was seen
/// dropping its batch up to 1.6 ms after the next batch's first row was ready; a new buffer
/// costs far more (tens to hundreds of milliseconds of page faults for 38 MB).
const RETURN_PATIENCE: std::time::Duration = std::time::Duration::from_millis(5);

/// A buffer of `rows × plane` values whose rows are handed out once each, to be written
/// from any threads (see the [module docs](self)).
pub struct BatchRows<T: Poolable + Copy + Default> {
    rows: usize,
    plane: usize,
    align: usize,
    taken: OnceLock<Taken<T>>,
    /// Which rows were handed out.
    claimed: Vec<AtomicBool>,
}

/// The pooled vector, the start of the batch's values in it, and a pointer to that start.
struct Taken<T> {
    vec: Vec<T>,
    start: usize,
    /// `vec`'s buffer at `start`, from `as_mut_ptr` (which makes no reference to the
    /// values, so writes through it stay valid while `vec` is moved but not touched).
    first: *mut T,
}

// SAFETY: `Taken` owns its vector like a `Vec<T>`; the raw pointer is only used by
// `BatchRows::row` to hand out disjoint rows (each at most once), so sharing it between
// threads is as safe as sending `&mut` slices of a `Vec<T>` to them, which needs
// `T: Send`.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for Taken<T> {}
// SAFETY: as above: through `&Taken`, threads only ever reach disjoint rows.
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for Taken<T> {}

impl<T: Poolable + Copy + Default> BatchRows<T> {
    /// A batch of `rows` rows of `plane` values, starting at an `align`-byte boundary
    /// (a power of two). Nothing is taken from the pool yet.
    pub fn new(rows: usize, plane: usize, align: usize) -> Self {
        assert!(
            align.is_power_of_two(),
            "BatchRows: align {align} is not a power of two"
        );
        BatchRows {
            rows,
            plane,
            align,
            taken: OnceLock::new(),
            claimed: (0..rows).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    fn take(&self) -> &Taken<T> {
        self.taken.get_or_init(|| {
            let len = self.rows * self.plane;
            let (mut vec, start) =
                pool::take_filled_aligned_or_wait::<T>(len, self.align, RETURN_PATIENCE);
            assert!(
                vec.len() >= start + len,
                "take_filled_aligned gave too few values"
            );
            // SAFETY: `start + len <= vec.len()`, so the offset stays inside the vector.
            #[allow(unsafe_code)]
            let first = unsafe { vec.as_mut_ptr().add(start) };
            Taken { vec, start, first }
        })
    }

    /// Row `i` to write (its values are unspecified until written), taking the buffer from
    /// the pool if no row was handed out before.
    ///
    /// # Panics
    /// If `i` is out of range or row `i` was handed out before.
    #[allow(clippy::mut_from_ref)]
    pub fn row(&self, i: usize) -> &mut [T] {
        assert!(i < self.rows, "BatchRows: row {i} of {}", self.rows);
        assert!(
            !self.claimed[i].swap(true, Ordering::AcqRel),
            "BatchRows: row {i} handed out twice"
        );
        let taken = self.take();
        // SAFETY: rows `i * plane .. (i + 1) * plane` lie inside the `rows * plane` values
        // from `first` (checked when taken); row `i` is handed out once (the flag above), so
        // no other reference to these values exists while the returned one lives, which
        // borrows `self`, so the vector is neither dropped nor moved nor read before then.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(taken.first.add(i * self.plane), self.plane)
        }
    }

    /// The batch's `rows × plane` values (taken from the pool now if no row was handed
    /// out), without a copy. Rows never handed out hold unspecified values.
    pub fn into_shared(self) -> Shared<T> {
        let len = self.rows * self.plane;
        self.take();
        let Taken { vec, start, .. } = self.taken.into_inner().expect("taken above");
        Shared::new(vec).slice(start..start + len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_written_from_threads_make_the_batch() {
        let (rows, plane) = (8, 50_000);
        let batch = BatchRows::<f32>::new(rows, plane, 64);
        std::thread::scope(|s| {
            for t in 0..2 {
                let batch = &batch;
                s.spawn(move || {
                    for i in (t..rows).step_by(2) {
                        batch.row(i).fill(i as f32 + 0.5);
                    }
                });
            }
        });
        let values = batch.into_shared();
        assert_eq!(values.len(), rows * plane);
        assert_eq!(values.as_ptr() as usize % 64, 0);
        for (i, row) in values.chunks(plane).enumerate() {
            assert!(row.iter().all(|&v| v == i as f32 + 0.5), "row {i}");
        }
    }

    #[test]
    fn the_buffer_is_taken_when_the_first_row_is() {
        // The buffer dropped before the first row is handed out is the one reused.
        let plane = pool::MIN_POOLED_BYTES / 8 + 7;
        let before: Vec<i64> = pool::take_filled(2 * plane + 7);
        let ptr = before.as_ptr() as usize;
        let batch = BatchRows::<i64>::new(2, plane, 8);
        pool::give(before);
        batch.row(1).fill(3);
        batch.row(0).fill(2);
        let values = batch.into_shared();
        assert_eq!(
            values.as_ptr() as usize,
            ptr,
            "the dropped buffer was reused"
        );
        assert!(values[..plane].iter().all(|&v| v == 2));
        assert!(values[plane..].iter().all(|&v| v == 3));
    }

    #[test]
    #[should_panic(expected = "row 1 handed out twice")]
    fn a_row_is_handed_out_once() {
        let batch = BatchRows::<f32>::new(2, 4, 16);
        let _first = batch.row(1);
        let _again = batch.row(1);
    }

    #[test]
    fn a_batch_without_rows_or_values_is_empty() {
        assert!(BatchRows::<f32>::new(0, 10, 64).into_shared().is_empty());
        let batch = BatchRows::<f32>::new(3, 0, 64);
        assert!(batch.row(2).is_empty());
        assert!(batch.into_shared().is_empty());
    }
}
