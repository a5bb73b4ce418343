//! Clocks. Everything time-dependent takes one, so tests and replays run on virtual time.

use crate::sync::lock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::error::Error;
use crate::time::Time;

/// A source of the current instant. Reads may fail when the clock is user code (a Python object).
pub trait Clock: Send + Sync {
    fn now(&self) -> Result<Time, Error>;

    /// Whether this is the system clock: waits on it sleep until the deadline; waits on any other clock
    /// read it again every `VIRTUAL_CLOCK_POLL`, so that stepping a fake clock ends them at once.
    fn is_real(&self) -> bool {
        false
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Result<Time, Error> {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| Error::Clock("the system clock is before 1970".into()))?;
        i64::try_from(d.as_nanos()).map(Time).map_err(|_| Error::Clock("the system clock is past 2262".into()))
    }

    fn is_real(&self) -> bool {
        true
    }
}

/// A clock that moves only when told to (client-go's `testclocks.FakeClock`).
#[derive(Debug, Default)]
pub struct FakeClock {
    now: AtomicI64,
}

impl FakeClock {
    pub fn new(start: Time) -> Self {
        FakeClock { now: AtomicI64::new(start.0) }
    }

    pub fn get(&self) -> Time {
        Time(self.now.load(Ordering::Acquire))
    }

    pub fn set(&self, t: Time) {
        self.now.store(t.0, Ordering::Release);
    }

    pub fn step(&self, nanos: i64) -> Time {
        let prev = self.now.fetch_add(nanos, Ordering::AcqRel);
        Time(prev.saturating_add(nanos))
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Result<Time, Error> {
        Ok(self.get())
    }
}

/// A clock that advances by a fixed interval before every read (client-go's `SimpleIntervalClock`),
/// which the correlator tests use to give every clock read its own instant.
#[derive(Debug)]
pub struct IntervalClock {
    now: AtomicI64,
    interval: i64,
}

impl IntervalClock {
    pub fn new(start: Time, interval_nanos: i64) -> Self {
        IntervalClock { now: AtomicI64::new(start.0), interval: interval_nanos }
    }

    pub fn interval_nanos(&self) -> i64 {
        self.interval
    }

    /// The last instant handed out, without advancing.
    pub fn peek(&self) -> Time {
        Time(self.now.load(Ordering::Acquire))
    }
}

impl Clock for IntervalClock {
    fn now(&self) -> Result<Time, Error> {
        let prev = self.now.fetch_add(self.interval, Ordering::AcqRel);
        Ok(Time(prev.saturating_add(self.interval)))
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Result<Time, Error> {
        (**self).now()
    }

    fn is_real(&self) -> bool {
        (**self).is_real()
    }
}

/// How often a wait on a clock that is not the system clock reads it again.
pub const VIRTUAL_CLOCK_POLL: Duration = Duration::from_micros(500);

/// A stop flag that interrupts waits on it, including waits on a clock.
#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl StopSignal {
    pub fn stop(&self) {
        *lock(&self.stopped) = true;
        self.cv.notify_all();
    }

    pub fn is_stopped(&self) -> bool {
        *lock(&self.stopped)
    }

    /// Waits up to `d` or until stopped; returns whether stopped.
    pub fn wait(&self, d: Duration) -> bool {
        let g = lock(&self.stopped);
        let (g, _) = self.cv.wait_timeout_while(g, d, |s| !*s).unwrap_or_else(|p| p.into_inner());
        *g
    }

    /// Waits until `clock` reads `deadline`: true then, false once stopped (or when the clock cannot be
    /// read). The system clock is slept on; any other clock is read again every `VIRTUAL_CLOCK_POLL`.
    pub fn sleep_until(&self, clock: &dyn Clock, deadline: Time) -> bool {
        self.sleep_until_or(clock, deadline, |d| self.wait(d))
    }

    /// `sleep_until` with the pause between clock reads supplied: `pause(d)` waits up to `d` and returns
    /// true to end the wait early, which returns true unless this signal is stopped (something else is
    /// ready), so a pause must also end when the signal is stopped.
    pub fn sleep_until_or(&self, clock: &dyn Clock, deadline: Time, mut pause: impl FnMut(Duration) -> bool) -> bool {
        loop {
            if self.is_stopped() {
                return false;
            }
            let Ok(now) = clock.now() else { return false };
            if now >= deadline {
                return true;
            }
            let wait = if clock.is_real() {
                Duration::from_nanos(deadline.since(now).max(0) as u64)
            } else {
                VIRTUAL_CLOCK_POLL
            };
            if pause(wait) {
                return !self.is_stopped();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_told() {
        let c = FakeClock::new(Time(10));
        assert_eq!(c.now().unwrap(), Time(10));
        assert_eq!(c.now().unwrap(), Time(10));
        assert_eq!(c.step(5), Time(15));
        c.set(Time(3));
        assert_eq!(c.now().unwrap(), Time(3));
    }

    #[test]
    fn interval_clock_advances_before_every_read() {
        let c = IntervalClock::new(Time(0), 7);
        assert_eq!(c.now().unwrap(), Time(7));
        assert_eq!(c.now().unwrap(), Time(14));
        assert_eq!(c.peek(), Time(14));
    }

    #[test]
    fn real_clock_is_after_2020() {
        assert!(RealClock.now().unwrap() > Time(1_577_836_800_000_000_000));
    }

    #[test]
    fn a_fake_clock_step_ends_a_sleep() {
        let clock = Arc::new(FakeClock::new(Time(0)));
        let stop = Arc::new(StopSignal::default());
        let (c, s) = (clock.clone(), stop.clone());
        let t = std::thread::spawn(move || s.sleep_until(c.as_ref(), Time(10)));
        clock.step(10);
        assert!(t.join().unwrap());
    }

    #[test]
    fn stop_ends_a_sleep() {
        let clock = Arc::new(FakeClock::new(Time(0)));
        let stop = Arc::new(StopSignal::default());
        let (c, s) = (clock.clone(), stop.clone());
        let t = std::thread::spawn(move || s.sleep_until(c.as_ref(), Time(10)));
        stop.stop();
        assert!(!t.join().unwrap());
        assert!(!stop.sleep_until(clock.as_ref(), Time(0)));
    }
}
