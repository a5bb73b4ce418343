//! A correlator shared between threads. A key function or clock that calls back into the correlator it
//! serves, on the thread that holds it, gets an error instead of deadlocking on its own lock.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::EventCorrelator;
use crate::error::{Error, Result};
use crate::sync::lock;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
thread_local! {
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

pub struct SharedCorrelator {
    inner: Mutex<EventCorrelator>,
    /// The thread holding `inner` (0: none).
    owner: AtomicU64,
}

/// The correlator, locked by this thread.
pub struct Locked<'a> {
    guard: MutexGuard<'a, EventCorrelator>,
    owner: &'a AtomicU64,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.owner.store(0, Ordering::Release);
    }
}

impl Deref for Locked<'_> {
    type Target = EventCorrelator;

    fn deref(&self) -> &EventCorrelator {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut EventCorrelator {
        &mut self.guard
    }
}

impl SharedCorrelator {
    pub fn new(correlator: EventCorrelator) -> Self {
        SharedCorrelator { inner: Mutex::new(correlator), owner: AtomicU64::new(0) }
    }

    /// Waits for the correlator; an error if this thread holds it already.
    pub fn lock(&self) -> Result<Locked<'_>> {
        let me = THREAD.with(|t| *t);
        if self.owner.load(Ordering::Acquire) == me {
            return Err(Error::External(
                "Correlator called again from its own key function or clock while correlating".into(),
            ));
        }
        // Poisoning would turn one panic into an error on every later call; the caches stay usable.
        let guard = lock(&self.inner);
        self.owner.store(me, Ordering::Release);
        Ok(Locked { guard, owner: &self.owner })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::FakeClock;
    use crate::correlator::{CorrelatorOptions, KeyFuncs};
    use crate::time::Time;

    fn shared() -> Arc<SharedCorrelator> {
        let clock = Arc::new(FakeClock::new(Time(0)));
        let c = EventCorrelator::new(CorrelatorOptions::default(), clock, KeyFuncs::default()).unwrap();
        Arc::new(SharedCorrelator::new(c))
    }

    #[test]
    fn the_holding_thread_gets_an_error_others_wait() {
        let s = shared();
        let held = s.lock().unwrap();
        let err = s.lock().err().expect("re-entry is refused");
        assert!(err.to_string().contains("called again from its own key function or clock"), "{err}");
        let other = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || s.lock().map(|c| c.cache_lens()).is_ok())
        };
        drop(held);
        assert!(other.join().unwrap(), "another thread waits for the lock and gets it");
        assert!(s.lock().is_ok(), "released on drop");
    }
}
