//! Locks that do not panic when poisoned.
//!
//! A mutex is poisoned when a thread panicked while holding it. Every critical section in
//! this crate leaves the data it guards valid at every step (a push, an insert, a swap of
//! one value), and a panicking worker is reported as an error by whoever catches it
//! ([`Error::Panic`](crate::Error::Panic)); so a poisoned lock's data is used as it is
//! rather than turning one bug into a second panic elsewhere.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// [`Mutex::lock`] that takes the guard of a poisoned lock too.
pub(crate) trait LockExt<T: ?Sized> {
    /// The guard, poisoned or not.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_data() {
        let m = std::sync::Arc::new(Mutex::new(vec![1]));
        let m2 = std::sync::Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        m.locked().push(2);
        assert_eq!(*m.locked(), [1, 2]);
    }
}
