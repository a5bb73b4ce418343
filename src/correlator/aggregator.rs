//! `EventAggregator`: groups similar events (same aggregate key, different local keys) and, once
//! `max_events` distinct local keys have been seen with no gap over `max_interval`, replaces the event by
//! one "(combined from similar events)" event per group.
//!
//! Deliberate difference from client-go: when the set of local keys is full, Go drops an arbitrary one
//! (`PopAny`, random in practice); kubevents drops the oldest inserted one, so replays are deterministic.

use std::num::NonZeroUsize;

use indexmap::IndexSet;
use lru::LruCache;

use crate::event::{Event, ObjectMeta};
use crate::names::push_go_hex;
use crate::time::Time;

struct AggregateRecord {
    /// Distinct local keys (messages) in first-insertion order.
    local_keys: IndexSet<String>,
    last_timestamp: Time,
}

pub struct Aggregator {
    cache: LruCache<String, AggregateRecord>,
    max_events: usize,
    /// `time.Duration(maxIntervalInSeconds) * time.Second`, with Go's wrapping multiplication.
    max_interval_nanos: i64,
}

impl Aggregator {
    pub fn new(size: NonZeroUsize, max_events: usize, max_interval_seconds: i64) -> Self {
        Aggregator {
            cache: LruCache::new(size),
            max_events,
            max_interval_nanos: max_interval_seconds.wrapping_mul(1_000_000_000),
        }
    }

    /// The bookkeeping half of `EventAggregate`: records `local_key` in the group of `aggregate_key` at the
    /// aggregator's clock reading `now` and says whether the event must be replaced by the group's aggregate
    /// event. When it returns false, `aggregate_key` may have been taken for the cache and replaced by a
    /// cleared buffer; when true, it is left as it was (the observer counts the aggregate under it).
    pub fn record(&mut self, aggregate_key: &mut String, local_key: &str, now: Time) -> bool {
        match self.cache.get_mut(aggregate_key.as_str()) {
            Some(record) => {
                if now.sub(record.last_timestamp) > self.max_interval_nanos {
                    record.local_keys.clear();
                }
                if !record.local_keys.contains(local_key) {
                    record.local_keys.insert(local_key.to_owned());
                }
                record.last_timestamp = now;
                if record.local_keys.len() < self.max_events {
                    return false;
                }
                record.local_keys.shift_remove_index(0);
                true
            }
            None => {
                // A group seen for the first time (or evicted): its set holds just this local key.
                let mut record = AggregateRecord { local_keys: IndexSet::new(), last_timestamp: now };
                record.local_keys.insert(local_key.to_owned());
                if record.local_keys.len() < self.max_events {
                    if let Some((mut old_key, _)) = self.cache.push(std::mem::take(aggregate_key), record) {
                        old_key.clear();
                        *aggregate_key = old_key;
                    }
                    return false;
                }
                record.local_keys.shift_remove_index(0);
                self.cache.push(aggregate_key.clone(), record);
                true
            }
        }
    }

    pub fn len(&self) -> usize {
        self.cache.len()
    }

}

/// The aggregate event that replaces `event`: named `<involvedObject.name>.<hex UnixNano>` with Go's
/// `Sprintf` (not `GenerateEventName`: no validation, no UUID fallback), count 1, first = last = `now`, and
/// none of the annotations, reporting fields, eventTime, action or related of the original.
pub fn aggregate_event(event: Event, message: String, now: Time) -> Event {
    let mut name = String::with_capacity(event.involved_object.name.len() + 17);
    name.push_str(&event.involved_object.name);
    name.push('.');
    push_go_hex(&mut name, now.unix_nanos());
    Event {
        metadata: ObjectMeta { name, namespace: event.metadata.namespace, ..Default::default() },
        count: 1,
        first_timestamp: Some(now),
        last_timestamp: Some(now),
        involved_object: event.involved_object,
        message,
        type_: event.type_,
        reason: event.reason,
        source: event.source,
        ..Default::default()
    }
}
