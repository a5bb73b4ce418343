//! client-go's `recorderImpl` (`tools/record/event.go`): a recorder stamps an occurrence with its source and
//! the clock's time and queues it on its broadcaster, never waiting for a slow watcher. What it cannot queue
//! is counted (by the broadcaster) and warned about, at most once every `DROP_WARNING_INTERVAL` for all the
//! recorders of a broadcaster.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::broadcaster::{EventBroadcaster, Occurrence};
use crate::error::{Error, Result};
use crate::event::{EventSource, EventType, ObjectReference};
use crate::sync::lock;
use crate::time::Time;

/// Under pressure, one recorder call in this many looks for drops at the watchers' queues: summing them
/// takes their locks, and a queue of 1000 fills in more calls than that (`report_shut_down` looks too).
const DROP_CHECK_EVERY: u64 = 64;

/// How often at most the recorders of a broadcaster warn that they are dropping events.
const DROP_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// A broadcaster and what its recorders share: the account of the drops they warned about.
pub struct RecorderHub {
    broadcaster: EventBroadcaster,
    last_drop_warning: Mutex<Option<Instant>>,
    /// Drops at the watchers' queues warned about so far.
    watcher_drops_warned: AtomicU64,
    /// Recorder calls that found a watcher behind.
    pressured_calls: AtomicU64,
}

impl RecorderHub {
    pub fn new(broadcaster: EventBroadcaster) -> Self {
        RecorderHub {
            broadcaster,
            last_drop_warning: Mutex::new(None),
            watcher_drops_warned: AtomicU64::new(0),
            pressured_calls: AtomicU64::new(0),
        }
    }

    pub fn broadcaster(&self) -> &EventBroadcaster {
        &self.broadcaster
    }

    /// `NewRecorder`: a recorder whose events have `source`.
    pub fn new_recorder(self: &Arc<Self>, source: EventSource) -> Recorder {
        Recorder { hub: self.clone(), source: Arc::new(source) }
    }

    /// The end of a shutdown that waited: when it finished (`done`), `report_shut_down`; else a timeout error
    /// saying how many deliveries are still pending.
    pub fn end_shutdown(&self, done: bool) -> Result<()> {
        if !done {
            let pending = self.broadcaster.stats().pending;
            return Err(Error::Timeout(format!(
                "shutdown timed out with {pending} deliveries still pending; they go on in the background"
            )));
        }
        self.report_shut_down();
        Ok(())
    }

    /// After a shutdown that finished: warns about the drops at the watchers' queues not warned about yet
    /// (if no drop warning came in the last `DROP_WARNING_INTERVAL`), then logs the shutdown's summary line.
    pub fn report_shut_down(&self) {
        self.warn_watcher_drops();
        self.broadcaster.pipeline().report_shutdown("shut down", 0);
    }

    /// Warns about a drop, unless a drop warning came in the last `DROP_WARNING_INTERVAL`; returns whether it
    /// did.
    fn warn_dropped(&self, why: &str) -> bool {
        let mut last = lock(&self.last_drop_warning);
        if last.is_some_and(|t| t.elapsed() < DROP_WARNING_INTERVAL) {
            return false;
        }
        *last = Some(Instant::now());
        let s = self.broadcaster.stats();
        let s = s.pipeline;
        let watchers: u64 = s.dropped_watchers.iter().map(|(_, n)| n).sum();
        self.broadcaster.reporter().warn(&format!(
            "dropping events: {why} ({} dropped at the incoming queue, {watchers} at full watcher queues, {} after \
             shutdown so far)",
            s.dropped_incoming, s.dropped_after_shutdown
        ));
        true
    }

    /// Warns about drops at the watchers' queues (sinks included) not warned about yet.
    fn warn_watcher_drops(&self) {
        let total = self.broadcaster.watcher_drops();
        if total > self.watcher_drops_warned.load(Ordering::Relaxed)
            && self.warn_dropped("a watcher's queue is full (a sink or callback is behind)")
        {
            self.watcher_drops_warned.store(total, Ordering::Relaxed);
        }
    }
}

/// client-go's `EventRecorder`: builds events for objects and queues them; never waits for a slow watcher.
pub struct Recorder {
    hub: Arc<RecorderHub>,
    source: Arc<EventSource>,
}

impl Recorder {
    pub fn source(&self) -> &EventSource {
        &self.source
    }

    /// `generateEvent`: queues an event about `reference`, which happened at `time` (by default now on the
    /// broadcaster's clock). Returns whether it was queued; a drop (a full incoming queue, or a broadcaster
    /// shut down) is counted and warned about. Fails only when the clock cannot be read.
    pub fn record(
        &self,
        reference: ObjectReference,
        annotations: Option<BTreeMap<String, String>>,
        type_: EventType,
        reason: String,
        message: String,
        time: Option<Time>,
    ) -> Result<bool> {
        let broadcaster = &self.hub.broadcaster;
        let time = match time {
            Some(t) => t,
            None => broadcaster.clock().now()?,
        };
        let o = Occurrence { reference, annotations, type_, reason, message, time, source: self.source.clone() };
        match broadcaster.record(o) {
            Ok(true) => return Ok(true),
            Ok(false) => self.hub.warn_dropped("the incoming queue is full"),
            Err(_) => self.hub.warn_dropped("the broadcaster is shut down"),
        };
        Ok(false)
    }

    /// The back-pressure choice after a queued event: true when some watcher is behind, and a caller that may
    /// block should then `catch_up`. Under pressure, one call in `DROP_CHECK_EVERY` also warns about drops at
    /// the watchers' queues, which happen only then.
    pub fn should_catch_up(&self) -> bool {
        let hub = &*self.hub;
        if !hub.broadcaster.under_pressure() {
            return false;
        }
        if hub.pressured_calls.fetch_add(1, Ordering::Relaxed) % DROP_CHECK_EVERY == 0 {
            hub.warn_watcher_drops();
        }
        true
    }

    /// Waits for the fast watchers that fell behind, up to the broadcaster's `catch_up_wait` (a watcher that
    /// needs the GIL may also be short of a CPU: the wait keeps a burst from overflowing its queue). Returns
    /// whether it waited.
    pub fn catch_up(&self) -> bool {
        self.hub.broadcaster.relieve()
    }
}

#[cfg(test)]
mod tests;
