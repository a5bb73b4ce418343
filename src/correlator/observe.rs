//! `eventLogger`: counts identical events and builds the patch for a repeat (`eventObserve`,
//! `updateState`).

use std::num::NonZeroUsize;

use crate::event::Event;
use crate::lru::Lru;
use crate::time::Time;

/// `eventLog`: what the last observation of an event key left behind.
#[derive(Default)]
struct EventLog {
    /// Go's `uint`, stored from an int32 count with sign extension.
    count: u64,
    first_timestamp: Option<Time>,
    name: String,
    resource_version: String,
}

impl EventLog {
    fn set(&mut self, event: &Event) {
        self.count = event.count as i64 as u64;
        self.first_timestamp = event.first_timestamp;
        self.name.clone_from(&event.metadata.name);
        self.resource_version.clone_from(&event.metadata.resource_version);
    }
}

pub struct Observer {
    cache: Lru<EventLog>,
}

impl Observer {
    pub fn new(size: NonZeroUsize) -> Self {
        Observer { cache: Lru::new(size) }
    }

    /// `eventObserve`, in place, without the patch: when the key was seen with a positive count, the event
    /// takes the cached name, resourceVersion and firstTimestamp, its count becomes the cached count + 1,
    /// and it returns true (a repeat, to be written as `count_patch_into`). The cache then records this
    /// observation.
    pub fn observe(&mut self, event: &mut Event, key: &[u8]) -> bool {
        // Go's Get then Add: either way the key ends up at the front.
        let hash = self.cache.hash(key);
        let (log, found) = self.cache.add(hash, key);
        if !(found && log.count > 0) {
            log.set(event);
            return false;
        }
        event.metadata.name.clone_from(&log.name);
        event.metadata.resource_version.clone_from(&log.resource_version);
        event.first_timestamp = log.first_timestamp;
        // Go: int32(uint count) + 1, truncating and wrapping.
        event.count = (log.count as u32 as i32).wrapping_add(1);
        // The name and resourceVersion stored are the cached ones.
        log.count = event.count as i64 as u64;
        log.first_timestamp = event.first_timestamp;
        true
    }

    /// `updateState`: records the server's answer under `key`, its `getEventKey` (for an aggregate event
    /// that is not the key `observe` counted it under, as in client-go).
    pub fn update_state(&mut self, event: &Event, key: &[u8]) {
        let hash = self.cache.hash(key);
        self.cache.add(hash, key).0.set(event);
    }

    /// `update_state` of `key`, which must be the most recently used key (checked in debug builds; the
    /// correlator knows it is): no lookup. False, and nothing done, when the cache is empty.
    pub fn update_front(&mut self, event: &Event, key: &[u8]) -> bool {
        let Some((front, log)) = self.cache.front_mut() else { return false };
        debug_assert_eq!(front, key, "not the most recently used key");
        log.set(event);
        true
    }

    pub fn len(&self) -> usize {
        self.cache.len()
    }
}
