//! The series cache: `tools/events` `recordToSink`, `finishSeries` and `refreshExistingEventSeries` over a
//! bounded LRU instead of client-go's unbounded map.
//!
//! The cache decides; it never talks to a sink. Each decision that needs a write comes back as a `Write`,
//! and the rounds take the function that performs one write attempt.

use std::num::NonZeroUsize;

use lru::LruCache;

use super::event::EventV1;
use super::key::SeriesKey;
use super::FINISH_TIME;
use crate::event::EventSeries;
use crate::time::Time;

/// Why a write is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCause {
    /// The first occurrence: create.
    First,
    /// The second occurrence: the cached first event with `series {count: 2}`.
    SeriesStart,
    /// `refresh_round`.
    Refresh,
    /// `finish_round`: the series ended.
    Finish,
    /// A live series pushed out of the full cache.
    Evicted,
    /// `drain` at shutdown.
    Shutdown,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub event: EventV1,
    pub cause: WriteCause,
}

/// The outcome of one write attempt: the object the server returned, and whether to try again.
pub type Attempt = (Option<EventV1>, bool);

/// What the cache has decided so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub observed: u64,
    /// First occurrences (creates).
    pub created: u64,
    /// Second occurrences (series patches).
    pub series_started: u64,
    /// Later occurrences, counted in the cache only.
    pub counted: u64,
    pub refresh_writes: u64,
    pub finish_writes: u64,
    /// Singletons dropped by `finish_round`.
    pub forgotten: u64,
    /// Entries pushed out by the size bound, and how many of them were live series written on the way out.
    pub evicted: u64,
    pub evicted_writes: u64,
    pub shutdown_writes: u64,
}

struct Entry {
    event: EventV1,
    /// The series count the last write carried (1 for the create), so that eviction and shutdown write
    /// only counts the server has not seen.
    written: i32,
}

impl Entry {
    fn unwritten_series(&self) -> bool {
        self.event.series.as_ref().is_some_and(|s| s.count != self.written)
    }
}

pub struct SeriesCache {
    entries: LruCache<SeriesKey, Entry>,
    stats: CacheStats,
}

impl SeriesCache {
    pub fn new(capacity: NonZeroUsize) -> Self {
        SeriesCache { entries: LruCache::new(capacity), stats: CacheStats::default() }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// One occurrence at `now`: the write it needs, if any, and the write of a live series the new entry
    /// pushed out of a full cache.
    pub fn observe(&mut self, event: EventV1, now: Time) -> (Option<Write>, Option<Write>) {
        self.stats.observed += 1;
        let key = SeriesKey::of(&event);
        if let Some(entry) = self.entries.get_mut(&key) {
            if let Some(series) = entry.event.series.as_mut() {
                series.count = series.count.saturating_add(1);
                series.last_observed_time = Some(now);
                self.stats.counted += 1;
                return (None, None);
            }
            entry.event.series = Some(EventSeries { count: 2, last_observed_time: Some(now) });
            entry.written = 2;
            self.stats.series_started += 1;
            return (Some(Write { event: entry.event.clone(), cause: WriteCause::SeriesStart }), None);
        }
        self.stats.created += 1;
        let first = Write { event: event.clone(), cause: WriteCause::First };
        let evicted = self.entries.push(key, Entry { event, written: 1 }).and_then(|(_, old)| {
            self.stats.evicted += 1;
            old.unwritten_series().then(|| {
                self.stats.evicted_writes += 1;
                Write { event: old.event, cause: WriteCause::Evicted }
            })
        });
        (Some(first), evicted)
    }

    /// Keys from least to most recently used, so that rounds go in a fixed order.
    fn keys_oldest_first(&self) -> Vec<SeriesKey> {
        self.entries.iter().rev().map(|(k, _)| k.clone()).collect()
    }

    /// `finishSeries` at `now`: every series last seen before `now - 6 min` gets one write attempt and is
    /// dropped unless the attempt asks for a retry (then the next round tries again); every singleton whose
    /// `eventTime` is before `now - 6 min` is dropped without a write.
    pub fn finish_round(&mut self, now: Time, mut attempt: impl FnMut(Write) -> Attempt) {
        let cutoff = now.add_nanos(-FINISH_TIME);
        for key in self.keys_oldest_first() {
            let Some(entry) = self.entries.peek(&key) else { continue };
            match &entry.event.series {
                Some(s) => {
                    if s.last_observed_time.is_none_or(|t| t < cutoff) {
                        self.stats.finish_writes += 1;
                        let (_, retry) = attempt(Write { event: entry.event.clone(), cause: WriteCause::Finish });
                        if !retry {
                            self.entries.pop(&key);
                        }
                    }
                }
                None => {
                    if entry.event.event_time.is_none_or(|t| t < cutoff) {
                        self.entries.pop(&key);
                        self.stats.forgotten += 1;
                    }
                }
            }
        }
    }

    /// `refreshExistingEventSeries`: one write attempt for every series; when it succeeds with an object,
    /// that object replaces the cached event.
    pub fn refresh_round(&mut self, mut attempt: impl FnMut(Write) -> Attempt) {
        for key in self.keys_oldest_first() {
            let Some(entry) = self.entries.peek(&key) else { continue };
            let Some(count) = entry.event.series.as_ref().map(|s| s.count) else { continue };
            self.stats.refresh_writes += 1;
            let (answer, retry) = attempt(Write { event: entry.event.clone(), cause: WriteCause::Refresh });
            if let (false, Some(e)) = (retry, self.entries.peek_mut(&key)) {
                e.written = count;
                if let Some(server) = answer {
                    e.event = server;
                }
            }
        }
    }

    /// Empties the cache, returning the write of every live series whose count the server has not seen.
    pub fn drain(&mut self) -> Vec<Write> {
        let mut out = Vec::new();
        while let Some((_, entry)) = self.entries.pop_lru() {
            if entry.unwritten_series() {
                self.stats.shutdown_writes += 1;
                out.push(Write { event: entry.event, cause: WriteCause::Shutdown });
            }
        }
        out
    }

    /// The cached event of `key`, without touching its recency.
    pub fn peek(&self, key: &SeriesKey) -> Option<&EventV1> {
        self.entries.peek(key).map(|e| &e.event)
    }
}
