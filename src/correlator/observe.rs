//! `eventLogger`: counts identical events and builds the patch for a repeat (`eventObserve`,
//! `updateState`).

use std::num::NonZeroUsize;

use lru::LruCache;

use super::keys::event_key_into;
use super::patch::count_patch_into;
use crate::event::Event;
use crate::time::Time;

/// `eventLog`: what the last observation of an event key left behind.
struct EventLog {
    /// Go's `uint`, stored from an int32 count with sign extension.
    count: u64,
    first_timestamp: Option<Time>,
    name: String,
    resource_version: String,
}

pub struct Observer {
    cache: LruCache<String, EventLog>,
    spare: Option<EventLog>,
}

impl Observer {
    pub fn new(size: NonZeroUsize) -> Self {
        Observer { cache: LruCache::new(size), spare: None }
    }

    /// `eventObserve`, in place: when the key was seen with a positive count, the event takes the cached
    /// name, resourceVersion and firstTimestamp, its count becomes the cached count + 1, and the patch is
    /// written to `patch` (returns true). The cache then records this observation. `key` may be taken and
    /// replaced by a cleared buffer.
    pub fn observe(&mut self, event: &mut Event, key: &mut String, patch: &mut Vec<u8>) -> bool {
        if let Some(log) = self.cache.get_mut(key.as_str()) {
            let repeat = log.count > 0;
            if repeat {
                event.metadata.name.clone_from(&log.name);
                event.metadata.resource_version.clone_from(&log.resource_version);
                event.first_timestamp = log.first_timestamp;
                // Go: int32(uint count) + 1, truncating and wrapping.
                event.count = (log.count as u32 as i32).wrapping_add(1);
                count_patch_into(patch, event.count, event.last_timestamp, &event.message);
            } else {
                log.name.clone_from(&event.metadata.name);
                log.resource_version.clone_from(&event.metadata.resource_version);
            }
            log.count = event.count as i64 as u64;
            log.first_timestamp = event.first_timestamp;
            return repeat;
        }
        self.insert(key, event);
        false
    }

    /// `updateState`: records the server's answer under its own `getEventKey` (for an aggregate event that
    /// is not the key `observe` counted it under, as in client-go).
    pub fn update_state(&mut self, event: &Event, key: &mut String) {
        event_key_into(event, key);
        if let Some(log) = self.cache.get_mut(key.as_str()) {
            log.count = event.count as i64 as u64;
            log.first_timestamp = event.first_timestamp;
            log.name.clone_from(&event.metadata.name);
            log.resource_version.clone_from(&event.metadata.resource_version);
            return;
        }
        self.insert(key, event);
    }

    fn insert(&mut self, key: &mut String, event: &Event) {
        let mut log = match self.spare.take() {
            Some(mut spare) => {
                spare.name.clone_from(&event.metadata.name);
                spare.resource_version.clone_from(&event.metadata.resource_version);
                spare
            }
            None => EventLog {
                count: 0,
                first_timestamp: None,
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        };
        log.count = event.count as i64 as u64;
        log.first_timestamp = event.first_timestamp;
        // An evicted entry's buffers serve the next insertion.
        if let Some((mut old_key, old_log)) = self.cache.push(std::mem::take(key), log) {
            old_key.clear();
            *key = old_key;
            self.spare = Some(old_log);
        }
    }

    pub fn len(&self) -> usize {
        self.cache.len()
    }

}
