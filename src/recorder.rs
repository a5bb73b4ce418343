//! client-go's `recorderImpl` (`tools/record/event.go`): a recorder stamps an occurrence with its source and
//! the clock's time and queues it on its broadcaster, never waiting for a slow watcher. What it cannot queue
//! is counted and warned about by the pipeline (`Pipeline::record_or_warn`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::broadcaster::{EventBroadcaster, Occurrence};
use crate::error::Result;
use crate::event::{EventSource, EventType, ObjectReference};
use crate::time::Time;

/// A broadcaster and its recorders.
pub struct RecorderHub {
    broadcaster: EventBroadcaster,
}

impl RecorderHub {
    pub fn new(broadcaster: EventBroadcaster) -> Self {
        RecorderHub { broadcaster }
    }

    pub fn broadcaster(&self) -> &EventBroadcaster {
        &self.broadcaster
    }

    /// `NewRecorder`: a recorder whose events have `source`.
    pub fn new_recorder(self: &Arc<Self>, source: EventSource) -> Recorder {
        Recorder { hub: self.clone(), source: Arc::new(source) }
    }

    /// The end of a shutdown that waited; see `Pipeline::end_shutdown`.
    pub fn end_shutdown(&self, done: bool) -> Result<()> {
        self.broadcaster.pipeline().end_shutdown(done, self.broadcaster.stats().pending)
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
        Ok(broadcaster.pipeline().record_or_warn(o))
    }

    /// The back-pressure choice after a queued event: true when some watcher is behind, and a caller that may
    /// block should then `catch_up`. Under pressure, one call in `DROP_CHECK_EVERY` also warns about drops at
    /// the watchers' queues, which happen only then.
    pub fn should_catch_up(&self) -> bool {
        self.hub.broadcaster.pipeline().should_catch_up()
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
