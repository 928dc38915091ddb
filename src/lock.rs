//! In-process locks that outlive a panic: every lock in the crate guards state that is whole
//! between statements, so a lock poisoned by a panicking holder is taken as it is.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A [`Mutex`] locked whether or not it is poisoned.
pub(crate) trait Locked<T: ?Sized> {
    /// The guard, even after a panic in another holder.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An [`RwLock`] read or written whether or not it is poisoned.
pub(crate) trait ReadWriteLocked<T: ?Sized> {
    /// The read guard, even after a panic in a writer.
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    /// The write guard, even after a panic in another writer.
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> ReadWriteLocked<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_as_it_is() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let rw = std::sync::Arc::new(RwLock::new(2));
        let (m2, rw2) = (m.clone(), rw.clone());
        let _ = std::thread::spawn(move || {
            let _m = m2.lock().unwrap();
            let _w = rw2.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && rw.is_poisoned());
        *m.locked() += 1;
        *rw.write_locked() += 1;
        assert_eq!((*m.locked(), *rw.read_locked()), (2, 3));
    }
}
