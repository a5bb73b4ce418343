//! The series cache: `tools/events` `recordToSink`, `finishSeries` and `refreshExistingEventSeries` over a
//! bounded LRU instead of client-go's unbounded map.
//!
//! The cache decides; it never talks to a sink. Each decision that needs a write comes back as a `Write`,
//! and the rounds take the function that performs one write attempt.

use std::num::NonZeroUsize;
use std::sync::Arc;

use foldhash::fast::RandomState;
use std::hash::BuildHasher;

use super::event::EventV1;
use super::key::write_key;
use super::FINISH_TIME;
use crate::event::EventSeries;
use crate::lru::Lru;
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
    /// Shared with the cache until one of them changes it: a write keeps the event as it was decided.
    pub event: Arc<EventV1>,
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

#[derive(Default)]
struct SeriesEntry {
    event: Arc<EventV1>,
    /// The series count the last write carried (1 for the create), so that eviction and shutdown write
    /// only counts the server has not seen.
    written: i32,
}

impl SeriesEntry {
    fn unwritten_series(&self) -> bool {
        self.event.series.as_ref().is_some_and(|s| s.count != self.written)
    }
}

/// The LRU is keyed by the isomorphic key's bytes, built into a reused buffer, so that a repeat allocates
/// nothing.
pub struct SeriesCache<S = RandomState> {
    entries: Lru<SeriesEntry, S>,
    scratch: Vec<u8>,
    stats: CacheStats,
}

impl SeriesCache {
    pub fn new(capacity: NonZeroUsize) -> Self {
        Self::with_hasher(capacity, RandomState::default())
    }
}

impl<S: BuildHasher> SeriesCache<S> {
    pub fn with_hasher(capacity: NonZeroUsize, hasher: S) -> Self {
        SeriesCache { entries: Lru::with_hasher(capacity, hasher), scratch: Vec::new(), stats: CacheStats::default() }
    }

    /// Entries cached (distinct keys).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// One occurrence at `now`: the write it needs, if any, and the writes of live series the new entry
    /// pushed out of a full cache.
    pub fn observe(&mut self, event: impl Into<Arc<EventV1>>, now: Time) -> (Option<Write>, Vec<Write>) {
        let event = event.into();
        self.stats.observed += 1;
        write_key(&event, &mut self.scratch);
        let hash = self.entries.hash(&self.scratch);
        if let Some(entry) = self.entries.get(hash, &self.scratch) {
            // Copied only while a write not made yet (or a watcher) still holds the event.
            let cached = Arc::make_mut(&mut entry.event);
            if let Some(series) = cached.series.as_mut() {
                series.count = series.count.saturating_add(1);
                series.last_observed_time = Some(now);
                self.stats.counted += 1;
                return (None, Vec::new());
            }
            cached.series = Some(EventSeries { count: 2, last_observed_time: Some(now) });
            entry.written = 2;
            self.stats.series_started += 1;
            return (Some(Write { event: Arc::clone(&entry.event), cause: WriteCause::SeriesStart }), Vec::new());
        }
        self.stats.created += 1;
        let first = Write { event: Arc::clone(&event), cause: WriteCause::First };
        let mut evicted = Vec::new();
        if let Some(old) = self.entries.push(hash, &self.scratch, SeriesEntry { event, written: 1 }) {
            self.stats.evicted += 1;
            if old.unwritten_series() {
                self.stats.evicted_writes += 1;
                evicted.push(Write { event: old.event, cause: WriteCause::Evicted });
            }
        }
        (Some(first), evicted)
    }

    /// Every key, from least to most recently used, so that rounds go in a fixed order.
    fn keys_oldest_first(&self) -> Vec<(u64, Box<[u8]>)> {
        self.entries.keys_oldest_first().map(|(h, k)| (h, k.into())).collect()
    }

    /// `finishSeries` at `now`: every series last seen before `now - 6 min` gets one write attempt and is
    /// dropped unless the attempt asks for a retry (then the next round tries again); every singleton whose
    /// `eventTime` is before `now - 6 min` is dropped without a write.
    pub fn finish_round(&mut self, now: Time, mut attempt: impl FnMut(Write) -> Attempt) {
        let cutoff = now.add_nanos(-FINISH_TIME);
        for (hash, key) in self.keys_oldest_first() {
            let Some(entry) = self.entries.peek_mut(hash, &key) else { continue };
            match &entry.event.series {
                Some(s) => {
                    if s.last_observed_time.is_none_or(|t| t < cutoff) {
                        let event = entry.event.clone();
                        self.stats.finish_writes += 1;
                        let (_, retry) = attempt(Write { event, cause: WriteCause::Finish });
                        if !retry {
                            self.entries.remove(hash, &key);
                        }
                    }
                }
                None => {
                    if entry.event.event_time.is_none_or(|t| t < cutoff) {
                        self.entries.remove(hash, &key);
                        self.stats.forgotten += 1;
                    }
                }
            }
        }
    }

    /// `refreshExistingEventSeries`: one write attempt for every series; when it succeeds with an object,
    /// that object replaces the cached event.
    pub fn refresh_round(&mut self, mut attempt: impl FnMut(Write) -> Attempt) {
        for (hash, key) in self.keys_oldest_first() {
            let Some(entry) = self.entries.peek_mut(hash, &key) else { continue };
            let Some(count) = entry.event.series.as_ref().map(|s| s.count) else { continue };
            let event = entry.event.clone();
            self.stats.refresh_writes += 1;
            let (answer, retry) = attempt(Write { event, cause: WriteCause::Refresh });
            if let (false, Some(e)) = (retry, self.entries.peek_mut(hash, &key)) {
                e.written = count;
                if let Some(server) = answer {
                    e.event = Arc::new(server);
                }
            }
        }
    }

    /// Empties the cache, returning the write of every live series whose count the server has not seen.
    pub fn drain(&mut self) -> Vec<Write> {
        let mut out = Vec::new();
        while let Some((_, entry)) = self.entries.pop_back() {
            if entry.unwritten_series() {
                self.stats.shutdown_writes += 1;
                out.push(Write { event: entry.event, cause: WriteCause::Shutdown });
            }
        }
        out
    }
}
