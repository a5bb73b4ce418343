//! The one way kubevents takes a mutex.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning: a panic in one caller (user code on a worker, say) must not make every
/// later caller panic too; the state a lock guards here stays consistent between statements.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
