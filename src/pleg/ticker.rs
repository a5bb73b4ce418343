//! Waiting on a clock. The relist loop sleeps `relist_period` on the PLEG's clock, so a fake clock drives it:
//! for virtual time the wait re-reads the clock every millisecond of real time; for the system clock it
//! sleeps the whole remainder. Either wait ends early when stopped.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::clock::Clock;
use crate::time::Time;

/// How often a wait on virtual time looks at the clock again.
const VIRTUAL_POLL: Duration = Duration::from_millis(1);

/// A stop flag that wakes waiters.
#[derive(Default)]
pub struct Stop {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Stop {
    pub fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    pub fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `clock` reads at least `deadline`; false when stopped first (or the clock fails).
    pub fn wait_until(&self, clock: &dyn Clock, deadline: Time, virtual_time: bool) -> bool {
        let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if *stopped {
                return false;
            }
            let Ok(now) = clock.now() else { return false };
            if now >= deadline {
                return true;
            }
            let wait =
                if virtual_time { VIRTUAL_POLL } else { Duration::from_nanos(deadline.since(now).max(0) as u64) };
            stopped = self.cv.wait_timeout(stopped, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use std::sync::Arc;

    #[test]
    fn a_fake_clock_step_ends_the_wait() {
        let clock = Arc::new(FakeClock::new(Time(0)));
        let stop = Arc::new(Stop::default());
        let (c, s) = (clock.clone(), stop.clone());
        let t = std::thread::spawn(move || s.wait_until(c.as_ref(), Time(10), true));
        clock.step(10);
        assert!(t.join().unwrap());
    }

    #[test]
    fn stop_ends_the_wait() {
        let clock = Arc::new(FakeClock::new(Time(0)));
        let stop = Arc::new(Stop::default());
        let (c, s) = (clock.clone(), stop.clone());
        let t = std::thread::spawn(move || s.wait_until(c.as_ref(), Time(10), true));
        stop.stop();
        assert!(!t.join().unwrap());
        assert!(!stop.wait_until(clock.as_ref(), Time(0), true));
    }
}
