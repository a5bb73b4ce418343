//! The PLEG's bounded queue: sends never block (a full or closed queue drops and counts), receives wait. The
//! event channel (`plegChannelCapacity`) and Era C's relist requests (`relistRequests`) are both one.

use crate::sync::lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::pod::PodLifecycleEvent;
use crate::clock::{Clock, StopSignal};
use crate::time::Time;

type ReadyCallback = Box<dyn FnOnce() + Send>;

struct State<T> {
    queue: VecDeque<T>,
    closed: bool,
    on_ready: Vec<ReadyCallback>,
}

/// What a receive saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Recv<T> {
    Item(T),
    Timeout,
    Closed,
}

pub struct BoundedQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    capacity: usize,
    dropped: AtomicU64,
}

/// The PLEG's event channel.
pub type EventChannel = BoundedQueue<PodLifecycleEvent>;

impl<T> BoundedQueue<T> {
    /// A queue holding at most `capacity` items (at least 1).
    pub fn new(capacity: usize) -> Self {
        BoundedQueue {
            state: Mutex::new(State { queue: VecDeque::new(), closed: false, on_ready: Vec::new() }),
            ready: Condvar::new(),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        lock(&self.state)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items dropped because the queue was full or closed.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// `select { case ch <- e: default: }`: false (and counted) when full or closed.
    pub fn try_send(&self, e: T) -> bool {
        let callbacks = {
            let mut s = self.lock();
            if s.closed || s.queue.len() >= self.capacity {
                drop(s);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            s.queue.push_back(e);
            std::mem::take(&mut s.on_ready)
        };
        self.ready.notify_one();
        // Outside the lock: a callback may take the GIL.
        for cb in callbacks {
            cb();
        }
        true
    }

    pub fn try_recv(&self) -> Option<T> {
        self.lock().queue.pop_front()
    }

    /// Waits up to `timeout` (forever when None) for an item.
    pub fn recv_timeout(&self, timeout: Option<Duration>) -> Recv<T> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.lock();
        loop {
            if let Some(e) = s.queue.pop_front() {
                return Recv::Item(e);
            }
            if s.closed {
                return Recv::Closed;
            }
            match deadline {
                None => s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Recv::Timeout;
                    }
                    s = self.ready.wait_timeout(s, d - now).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
    }

    /// Waits, without taking it, until an item is queued or `clock` reads `deadline` (true), or `stop` is
    /// set or the clock cannot be read (false). The clock is read outside the lock: it may be Python code,
    /// and a Python thread holding the GIL may be sending.
    pub fn wait_until(&self, stop: &StopSignal, clock: &dyn Clock, deadline: Time) -> bool {
        stop.sleep_until_or(clock, deadline, |d| {
            let s = self.lock();
            let (s, _) = self
                .ready
                .wait_timeout_while(s, d, |s| s.queue.is_empty() && !stop.is_stopped())
                .unwrap_or_else(|e| e.into_inner());
            !s.queue.is_empty() || stop.is_stopped()
        })
    }

    /// Wakes a `wait_until` to look at its stop signal again.
    pub fn wake(&self) {
        // Taken and released so that a waiter is either before its check of the signal or asleep.
        drop(self.lock());
        self.ready.notify_all();
    }

    /// Everything buffered now, oldest first.
    pub fn drain(&self) -> Vec<T> {
        self.lock().queue.drain(..).collect()
    }

    /// Runs `cb` once when an item is buffered or the queue closes (at once if that is already so).
    pub fn on_ready(&self, cb: ReadyCallback) {
        let mut s = self.lock();
        if !s.queue.is_empty() || s.closed {
            drop(s);
            cb();
        } else {
            s.on_ready.push(cb);
        }
    }

    /// Further sends drop; receivers get the buffered items, then `Closed`.
    pub fn close(&self) {
        let callbacks = {
            let mut s = self.lock();
            s.closed = true;
            std::mem::take(&mut s.on_ready)
        };
        self.ready.notify_all();
        for cb in callbacks {
            cb();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pleg::pod::PodLifecycleEventType;
    use std::sync::Arc;

    fn ev(i: usize) -> PodLifecycleEvent {
        PodLifecycleEvent::new(format!("p{i}"), PodLifecycleEventType::PodSync, None)
    }

    #[test]
    fn full_channel_drops_and_counts() {
        let c = EventChannel::new(2);
        assert!(c.try_send(ev(0)) && c.try_send(ev(1)));
        assert!(!c.try_send(ev(2)));
        assert_eq!(c.dropped(), 1);
        assert_eq!(c.try_recv(), Some(ev(0)));
        assert!(c.try_send(ev(3)));
        assert_eq!(c.drain(), [ev(1), ev(3)]);
    }

    #[test]
    fn receive_times_out_then_sees_close() {
        let c = Arc::new(EventChannel::new(4));
        assert_eq!(c.recv_timeout(Some(Duration::ZERO)), Recv::Timeout);
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.recv_timeout(None));
        c.try_send(ev(7));
        assert_eq!(t.join().unwrap(), Recv::Item(ev(7)));
        c.close();
        assert_eq!(c.recv_timeout(None), Recv::Closed);
        assert!(!c.try_send(ev(8)));
    }

    #[test]
    fn ready_callback_runs_once_on_send() {
        let c = EventChannel::new(4);
        let hits = Arc::new(AtomicU64::new(0));
        let h = hits.clone();
        c.on_ready(Box::new(move || {
            h.fetch_add(1, Ordering::Relaxed);
        }));
        assert_eq!(hits.load(Ordering::Relaxed), 0);
        c.try_send(ev(0));
        c.try_send(ev(1));
        assert_eq!(hits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn wait_until_sees_an_item_the_deadline_or_stop() {
        use crate::clock::FakeClock;
        let q = Arc::new(BoundedQueue::<u32>::new(1));
        let clock = FakeClock::new(Time(0));
        let stop = StopSignal::default();
        // Due already: true without an item, which stays unread.
        assert!(q.wait_until(&stop, &clock, Time(0)));
        q.try_send(1);
        assert!(q.wait_until(&stop, &clock, Time(i64::MAX)));
        assert_eq!(q.len(), 1);
        assert!(!q.try_send(2));
        assert_eq!((q.dropped(), q.try_recv()), (1, Some(1)));
        let stop = Arc::new(StopSignal::default());
        let (q2, s2) = (q.clone(), stop.clone());
        let t = std::thread::spawn(move || q2.wait_until(&s2, &FakeClock::new(Time(0)), Time(i64::MAX)));
        std::thread::sleep(Duration::from_millis(20));
        stop.stop();
        q.wake();
        assert!(!t.join().unwrap());
    }
}
