//! `EventAggregator`: groups similar events (same aggregate key, different local keys) and, once
//! `max_events` distinct local keys have been seen with no gap over `max_interval`, replaces the event by
//! one "(combined from similar events)" event per group.
//!
//! Deliberate difference from client-go: when the set of local keys is full, Go drops an arbitrary one
//! (`PopAny`, random in practice); kubevents drops the oldest inserted one, so replays are deterministic.

use std::num::NonZeroUsize;

use lru::LruCache;

use crate::event::Event;
use crate::names::push_go_hex;
use crate::time::Time;

struct AggregateRecord {
    /// Distinct local keys (messages) in first-insertion order. At most `max_events` (10 by default), so a
    /// linear scan beats hashing them.
    local_keys: Vec<String>,
    last_timestamp: Time,
}

impl AggregateRecord {
    /// Inserts if absent (a set insert), returning the set's size.
    fn insert(&mut self, local_key: &str) -> usize {
        if !self.local_keys.iter().any(|k| k == local_key) {
            self.local_keys.push(local_key.to_owned());
        }
        self.local_keys.len()
    }
}

pub struct Aggregator {
    cache: LruCache<String, AggregateRecord>,
    /// An evicted record, kept so its buffers serve the next new group.
    spare: Option<AggregateRecord>,
    max_events: usize,
    /// `time.Duration(maxIntervalInSeconds) * time.Second`, with Go's wrapping multiplication.
    max_interval_nanos: i64,
}

impl Aggregator {
    pub fn new(size: NonZeroUsize, max_events: usize, max_interval_seconds: i64) -> Self {
        Aggregator {
            cache: LruCache::new(size),
            spare: None,
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
                record.last_timestamp = now;
                if record.insert(local_key) < self.max_events {
                    return false;
                }
                record.local_keys.remove(0);
                true
            }
            None => {
                // A group seen for the first time (or evicted): its set holds just this local key.
                let mut record = self.spare.take().unwrap_or(AggregateRecord { local_keys: Vec::new(), last_timestamp: now });
                record.local_keys.clear();
                record.last_timestamp = now;
                let combine = record.insert(local_key) >= self.max_events;
                let key = if combine {
                    record.local_keys.remove(0);
                    aggregate_key.clone()
                } else {
                    std::mem::take(aggregate_key)
                };
                if let Some((mut old_key, old_record)) = self.cache.push(key, record) {
                    self.spare = Some(old_record);
                    if !combine {
                        old_key.clear();
                        *aggregate_key = old_key;
                    }
                }
                combine
            }
        }
    }

    pub fn len(&self) -> usize {
        self.cache.len()
    }

}

/// Turns `event` into the aggregate event that replaces it: named `<involvedObject.name>.<hex UnixNano>` with
/// Go's `Sprintf` (not `GenerateEventName`: no validation, no UUID fallback), count 1, first = last = `now`,
/// the given message, and none of the annotations, reporting fields, eventTime, action or related of the
/// original. The involved object, namespace, type, reason and source stay.
pub fn make_aggregate(event: &mut Event, message: String, now: Time) {
    let name = &mut event.metadata.name;
    name.clear();
    name.push_str(&event.involved_object.name);
    name.push('.');
    push_go_hex(name, now.unix_nanos());
    event.metadata.resource_version.clear();
    event.metadata.annotations.clear();
    event.api_version.clear();
    event.kind.clear();
    event.message = message;
    event.count = 1;
    event.first_timestamp = Some(now);
    event.last_timestamp = Some(now);
    event.event_time = None;
    event.series = None;
    event.action.clear();
    event.related = None;
    event.reporting_controller.clear();
    event.reporting_instance.clear();
}
