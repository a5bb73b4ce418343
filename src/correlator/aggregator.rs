//! `EventAggregator`: groups similar events (same aggregate key, different local keys) and, once
//! `max_events` distinct local keys have been seen with no gap over `max_interval`, replaces the event by
//! one "(combined from similar events)" event per group.
//!
//! Deliberate difference from client-go: when the set of local keys is full, Go drops an arbitrary one
//! (`PopAny`, random in practice); kubevents drops the oldest inserted one, so replays are deterministic.

use std::num::NonZeroUsize;

use crate::event::Event;
use crate::lru::Lru;
use crate::names::push_go_hex;
use crate::time::Time;

#[derive(Default)]
struct AggregateRecord {
    /// Distinct local keys (messages) in first-insertion order: the first `len`; the strings past `len` are
    /// spare buffers. At most `max_events` (10 by default), so a linear scan beats hashing them.
    local_keys: Vec<String>,
    len: usize,
    last_timestamp: Time,
}

impl AggregateRecord {
    /// Inserts if absent (a set insert), returning the set's size.
    fn insert(&mut self, local_key: &str) -> usize {
        if self.local_keys[..self.len].iter().any(|k| k == local_key) {
            return self.len;
        }
        match self.local_keys.get_mut(self.len) {
            Some(spare) => {
                spare.clear();
                spare.push_str(local_key);
            }
            None => self.local_keys.push(local_key.to_owned()),
        }
        self.len += 1;
        self.len
    }

    /// Drops the oldest key, keeping its buffer as a spare.
    fn pop_oldest(&mut self) {
        self.local_keys[..self.len].rotate_left(1);
        self.len -= 1;
    }
}

pub struct Aggregator {
    cache: Lru<AggregateRecord>,
    max_events: usize,
    /// `time.Duration(maxIntervalInSeconds) * time.Second`, with Go's wrapping multiplication.
    max_interval_nanos: i64,
}

impl Aggregator {
    pub fn new(size: NonZeroUsize, max_events: usize, max_interval_seconds: i64) -> Self {
        Aggregator {
            cache: Lru::new(size),
            max_events,
            max_interval_nanos: max_interval_seconds.wrapping_mul(1_000_000_000),
        }
    }

    /// The bookkeeping half of `EventAggregate`: records `local_key` in the group of `aggregate_key` at the
    /// aggregator's clock reading `now` and says whether the event must be replaced by the group's aggregate
    /// event.
    pub fn record(&mut self, aggregate_key: &[u8], local_key: &str, now: Time) -> bool {
        // Go's Get then Add: either way the group ends up at the front.
        let hash = self.cache.hash(aggregate_key);
        let (record, found) = self.cache.add(hash, aggregate_key);
        // A group seen for the first time (or evicted) starts from an empty set.
        if !found || now.since(record.last_timestamp) > self.max_interval_nanos {
            record.len = 0;
        }
        record.last_timestamp = now;
        if record.insert(local_key) < self.max_events {
            return false;
        }
        record.pop_oldest();
        true
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
