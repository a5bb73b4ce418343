//! The PLEG's event channel: bounded, sends never block (a full channel drops and counts), receives wait.

use crate::sync::lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::pod::PodLifecycleEvent;

type ReadyCallback = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    queue: VecDeque<PodLifecycleEvent>,
    closed: bool,
    on_ready: Vec<ReadyCallback>,
}

/// What a receive saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Recv {
    Event(PodLifecycleEvent),
    Timeout,
    Closed,
}

pub struct EventChannel {
    state: Mutex<State>,
    ready: Condvar,
    capacity: usize,
    dropped: AtomicU64,
}

impl EventChannel {
    /// A channel holding at most `capacity` events (at least 1).
    pub fn new(capacity: usize) -> Self {
        EventChannel {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
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

    /// Events dropped because the channel was full or closed.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// `select { case ch <- e: default: }`: false (and counted) when full or closed.
    pub fn try_send(&self, e: PodLifecycleEvent) -> bool {
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

    pub fn try_recv(&self) -> Option<PodLifecycleEvent> {
        self.lock().queue.pop_front()
    }

    /// Waits up to `timeout` (forever when None) for an event.
    pub fn recv_timeout(&self, timeout: Option<Duration>) -> Recv {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.lock();
        loop {
            if let Some(e) = s.queue.pop_front() {
                return Recv::Event(e);
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

    /// Everything buffered now, oldest first.
    pub fn drain(&self) -> Vec<PodLifecycleEvent> {
        self.lock().queue.drain(..).collect()
    }

    /// Runs `cb` once when an event is buffered or the channel closes (at once if that is already so).
    pub fn on_ready(&self, cb: ReadyCallback) {
        let mut s = self.lock();
        if !s.queue.is_empty() || s.closed {
            drop(s);
            cb();
        } else {
            s.on_ready.push(cb);
        }
    }

    /// Further sends drop; receivers get the buffered events, then `Closed`.
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
        assert_eq!(t.join().unwrap(), Recv::Event(ev(7)));
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
}
