//! One policy for a poisoned lock, everywhere: the guard is taken as it
//! is. A panic while a lock was held never stops the requests that come
//! after it; every lock of the crate guards data that each write leaves
//! whole (a table's insert or remove, a value's assignment), so what a
//! panicking holder left is a state another request could have seen.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// `mutex`, locked.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `lock`, read.
pub(crate) fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// `lock`, written.
pub(crate) fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_is_used_as_it_was_left() {
        let (mutex, rwlock) = (Mutex::new(vec![1]), RwLock::new(1));
        std::thread::scope(|scope| {
            let _ = scope
                .spawn(|| {
                    let (_held, mut written) = (mutex.lock().unwrap(), rwlock.write().unwrap());
                    *written = 2;
                    panic!("a holder panics");
                })
                .join();
        });
        assert!(mutex.is_poisoned() && rwlock.is_poisoned());
        lock(&mutex).push(2);
        assert_eq!(*lock(&mutex), [1, 2]);
        assert_eq!(*read(&rwlock), 2);
        *write(&rwlock) = 3;
        assert_eq!(*read(&rwlock), 3);
    }
}
