//! Named threads whose failure to start is an error, not a panic: the OS can refuse a thread (limits,
//! memory), and that must reach Python as an exception.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sync::lock;

pub fn spawn<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<JoinHandle<T>> {
    std::thread::Builder::new()
        .name(format!("kubevents-{name}"))
        .spawn(f)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("cannot start thread kubevents-{name}: {e}"))))
}

/// `spawn` for a thread of `scope`.
pub fn spawn_scoped<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    name: &str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> Result<std::thread::ScopedJoinHandle<'scope, T>> {
    std::thread::Builder::new()
        .name(format!("kubevents-{name}"))
        .spawn_scoped(scope, f)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("cannot start thread kubevents-{name}: {e}"))))
}

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark()
    }
}

/// Runs `future` to completion on this thread; every `check` interval without progress, `go_on()` may give
/// up (returns None), e.g. when the loop that would complete the future has stopped.
pub fn block_on<F: Future>(future: F, check: Duration, mut go_on: impl FnMut() -> bool) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let mut last = Instant::now();
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return Some(v);
        }
        std::thread::park_timeout(check);
        if last.elapsed() >= check {
            if !go_on() {
                return None;
            }
            last = Instant::now();
        }
    }
}

/// Turns at a resource that is handed over late (the GIL: CPython gives it to a waiting thread only after its
/// switch interval): threads that want it announce it, and a thread holding it gives way, releasing it until
/// they have it (bounded).
#[derive(Debug, Default)]
pub struct Handoff {
    waiting: AtomicUsize,
    /// Threads giving way (they sleep rather than spin: the waiting thread may need the very CPU they would
    /// spin on).
    giving_way: Mutex<usize>,
    handed_over: Condvar,
}

impl Handoff {
    /// This thread is about to wait for the resource.
    pub fn announce(&self) {
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }

    /// This thread, having announced, has the resource: wakes whoever gives way to it.
    pub fn arrived(&self) {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        if *lock(&self.giving_way) > 0 {
            self.handed_over.notify_all();
        }
    }

    pub fn anyone_waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// Waits up to `limit` for every announced thread to arrive; the caller has released the resource.
    pub fn give_way(&self, limit: Duration) {
        let mut g = lock(&self.giving_way);
        *g += 1;
        let (mut g, _) =
            self.handed_over.wait_timeout_while(g, limit, |_| self.anyone_waiting()).unwrap_or_else(|p| p.into_inner());
        *g -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_runs_a_ready_future_and_gives_up_when_told() {
        assert_eq!(block_on(async { 7 }, Duration::from_millis(1), || true), Some(7));
        let mut asked = 0;
        let out = block_on(std::future::pending::<()>(), Duration::from_millis(1), || {
            asked += 1;
            asked < 3
        });
        assert_eq!((out, asked), (None, 3));
    }

    #[test]
    fn giving_way_ends_when_the_waiter_arrives() {
        let h = Arc::new(Handoff::default());
        let start = Instant::now();
        h.give_way(Duration::from_secs(10));
        assert!(start.elapsed() < Duration::from_secs(5), "nobody waits: no wait");
        h.announce();
        assert!(h.anyone_waiting());
        let waiter = {
            let h = h.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                h.arrived();
            })
        };
        h.give_way(Duration::from_secs(10));
        assert!(!h.anyone_waiting() && start.elapsed() < Duration::from_secs(5));
        waiter.join().unwrap();
        h.announce();
        let start = Instant::now();
        h.give_way(Duration::from_millis(20));
        assert!(start.elapsed() >= Duration::from_millis(20), "bounded: ends at the limit");
    }

    #[test]
    fn block_on_wakes_when_the_future_is_woken() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = done.clone();
        let fut = std::future::poll_fn(move |cx| {
            if d.load(std::sync::atomic::Ordering::SeqCst) {
                return Poll::Ready(1);
            }
            let _ = tx.send(());
            let w = cx.waker().clone();
            let d = d.clone();
            std::thread::spawn(move || {
                d.store(true, std::sync::atomic::Ordering::SeqCst);
                w.wake();
            });
            Poll::Pending
        });
        // A check interval far beyond the test's life: only the wake can end the wait.
        assert_eq!(block_on(fut, Duration::from_secs(3600), || false), Some(1));
        assert!(rx.recv().is_ok() && done.load(std::sync::atomic::Ordering::SeqCst));
    }
}
