//! Taking turns at the GIL between the threads that record events and the broadcaster's threads that call
//! Python (sinks, callbacks, loggers).
//!
//! CPython hands the GIL to a waiting thread only after the switch interval (5 ms): a recording loop would
//! queue thousands of events meanwhile and overflow the queues, while the sink waits for the GIL. So a
//! recorder call that sees a broadcaster thread waiting releases the GIL until that thread has it, and the
//! thread then does a batch of Python calls at once. The turns are `crate::threads::Handoff`'s.

use std::time::Duration;

use pyo3::prelude::*;

use crate::threads::Handoff;

/// How long a recorder call waits at most for a broadcaster thread to take the GIL it released.
const HANDOFF_LIMIT: Duration = Duration::from_millis(1);

#[derive(Debug, Default)]
pub struct GilTurns(Handoff);

impl GilTurns {
    /// `lifecycle::attach`, announcing the wait so that recorder calls give way.
    pub fn attach<R>(&self, f: impl FnOnce(Python<'_>) -> R) -> R {
        self.0.announce();
        super::lifecycle::attach(|py| {
            self.0.arrived();
            f(py)
        })
    }

    /// Releases the GIL until the broadcaster threads waiting for it have it (bounded).
    pub fn hand_over(&self, py: Python<'_>) {
        if self.0.anyone_waiting() {
            super::lifecycle::detach(py, || self.0.give_way(HANDOFF_LIMIT));
        }
    }
}
