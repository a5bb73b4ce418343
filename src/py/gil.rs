//! Taking turns at the GIL between the threads that record events and the broadcaster's threads that call
//! Python (sinks, callbacks, loggers).
//!
//! CPython hands the GIL to a waiting thread only after the switch interval (5 ms): a recording loop would
//! queue thousands of events meanwhile and overflow the queues, while the sink waits for the GIL. So a
//! recorder call that sees a broadcaster thread waiting releases the GIL until that thread has it, and the
//! thread then does a batch of Python calls at once.

use crate::sync::lock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use pyo3::prelude::*;

/// How long a recorder call waits at most for a broadcaster thread to take the GIL it released.
const HANDOFF_LIMIT: Duration = Duration::from_millis(1);

#[derive(Debug, Default)]
pub struct GilTurns {
    waiting: AtomicUsize,
    /// Recorder calls waiting for the handoff (they sleep rather than spin: the broadcaster thread may need
    /// the very CPU they would spin on).
    giving_way: Mutex<usize>,
    handed_over: Condvar,
}

impl GilTurns {
    /// `lifecycle::attach`, announcing the wait so that recorder calls give way.
    pub fn attach<R>(&self, f: impl FnOnce(Python<'_>) -> R) -> R {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        super::lifecycle::attach(|py| {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            if *lock(&self.giving_way) > 0 {
                self.handed_over.notify_all();
            }
            f(py)
        })
    }

    /// Releases the GIL until the broadcaster threads waiting for it have it (bounded).
    pub fn hand_over(&self, py: Python<'_>) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        super::lifecycle::detach(py, || {
            let mut g = lock(&self.giving_way);
            *g += 1;
            let (mut g, _) = self
                .handed_over
                .wait_timeout_while(g, HANDOFF_LIMIT, |_| self.waiting.load(Ordering::Acquire) > 0)
                .unwrap_or_else(|p| p.into_inner());
            *g -= 1;
        });
    }
}
