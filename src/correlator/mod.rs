//! client-go's `EventCorrelator` (`tools/record/events_cache.go`): aggregate → observe (count and patch) →
//! spam filter, with three LRU caches and client-go's defaults.

mod aggregator;
pub mod keys;
mod observe;
pub mod patch;
pub mod rate;
mod shared;
mod spam;

use std::num::NonZeroUsize;
use std::sync::Arc;

pub use aggregator::make_aggregate;
use aggregator::Aggregator;
pub use keys::{AggregateKeyFn, MessageFn, SpamKeyFn};
use observe::Observer;
use patch::count_patch_into;
pub use shared::{Locked, SharedCorrelator};
use spam::SpamFilter;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::event::Event;

/// `maxLruCacheEntries`.
pub const DEFAULT_LRU_CACHE_SIZE: usize = 4096;
/// The largest cache bound accepted (entries are indexed by u32).
pub const MAX_LRU_CACHE_SIZE: usize = u32::MAX as usize - 1;
/// `defaultSpamBurst`.
pub const DEFAULT_BURST: i64 = 25;
/// `defaultSpamQPS`, as the float32 that `CorrelatorOptions.QPS` holds.
pub const DEFAULT_QPS: f32 = 1.0 / 300.0;
/// `defaultAggregateMaxEvents`.
pub const DEFAULT_MAX_EVENTS: usize = 10;
/// `defaultAggregateIntervalInSeconds`.
pub const DEFAULT_MAX_INTERVAL_SECONDS: i64 = 600;
/// The options as callers outside Rust name them (`simulate`'s keywords, the keys of a sweep's grid).
pub const OPTION_NAMES: [&str; 5] = ["lru_cache_size", "burst", "qps", "max_events", "max_interval"];

/// `CorrelatorOptions` without the clock and the key functions. As in client-go's `populateDefaults`, a
/// zero selects the default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CorrelatorOptions {
    pub lru_cache_size: usize,
    pub burst: i64,
    pub qps: f32,
    pub max_events: usize,
    pub max_interval_seconds: i64,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        CorrelatorOptions {
            lru_cache_size: DEFAULT_LRU_CACHE_SIZE,
            burst: DEFAULT_BURST,
            qps: DEFAULT_QPS,
            max_events: DEFAULT_MAX_EVENTS,
            max_interval_seconds: DEFAULT_MAX_INTERVAL_SECONDS,
        }
    }
}

impl CorrelatorOptions {
    /// Options as a caller outside Rust gives them (signed sizes, a float64 rate), checked as `populated`
    /// does; errors name the option.
    pub fn from_args(lru_cache_size: i64, burst: i64, qps: f64, max_events: i64, max_interval: i64) -> Result<Self> {
        let size =
            |name: &str, v: i64| usize::try_from(v).map_err(|_| Error::Option(format!("{name} must be >= 0, got {v}")));
        // CorrelatorOptions.QPS is a float32 in client-go; a finite f64 past its range is refused as it is.
        if qps.is_finite() && qps.abs() > f64::from(f32::MAX) {
            return Err(Error::Option(format!("qps must be a finite number >= 0, got {qps}")));
        }
        CorrelatorOptions {
            lru_cache_size: size("lru_cache_size", lru_cache_size)?,
            burst,
            qps: qps as f32,
            max_events: size("max_events", max_events)?,
            max_interval_seconds: max_interval,
        }
        .populated()
    }

    /// Replaces zeros by the defaults and rejects what client-go would turn into a correlator that drops
    /// everything (negative sizes, bursts, rates or intervals) or into undefined arithmetic (NaN, infinity).
    pub fn populated(self) -> Result<Self> {
        if self.burst < 0 {
            return Err(Error::Option(format!("burst must be >= 0, got {}", self.burst)));
        }
        if !self.qps.is_finite() || self.qps < 0.0 {
            return Err(Error::Option(format!("qps must be a finite number >= 0, got {}", self.qps)));
        }
        if self.max_interval_seconds < 0 {
            return Err(Error::Option(format!("max_interval must be >= 0, got {}", self.max_interval_seconds)));
        }
        // The caches grow as keys arrive, indexed by u32; a bound past that could never be reached anyway.
        if self.lru_cache_size > MAX_LRU_CACHE_SIZE {
            return Err(Error::Option(format!(
                "lru_cache_size must be at most {MAX_LRU_CACHE_SIZE}, got {}",
                self.lru_cache_size
            )));
        }
        let d = CorrelatorOptions::default();
        let or = |v: i64, default: i64| if v == 0 { default } else { v };
        Ok(CorrelatorOptions {
            lru_cache_size: if self.lru_cache_size == 0 { d.lru_cache_size } else { self.lru_cache_size },
            burst: or(self.burst, d.burst),
            qps: if self.qps == 0.0 { d.qps } else { self.qps },
            max_events: if self.max_events == 0 { d.max_events } else { self.max_events },
            max_interval_seconds: or(self.max_interval_seconds, d.max_interval_seconds),
        })
    }
}

/// Replacements for the native key functions (`KeyFunc`, `MessageFunc`, `SpamKeyFunc`); `None` keeps
/// client-go's default.
#[derive(Default)]
pub struct KeyFuncs {
    pub aggregate: Option<Box<AggregateKeyFn>>,
    pub message: Option<Box<MessageFn>>,
    pub spam: Option<Box<SpamKeyFn>>,
}

/// `EventCorrelateResult`, plus whether the aggregator replaced the event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Correlation {
    /// The event to write; `None` when skipped.
    pub event: Option<Event>,
    /// The strategic merge patch for a repeat; the write is a patch when `event.count > 1`.
    pub patch: Option<Vec<u8>>,
    /// The spam filter rejected the event.
    pub skip: bool,
    /// The event was replaced by its group's "(combined from similar events)" event.
    pub aggregated: bool,
}

/// What `correlate_in_place` decided; the event itself was updated in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The spam filter rejected the event.
    pub skip: bool,
    /// The event was replaced by its group's aggregate event.
    pub aggregated: bool,
    /// The event is a repeat and was not skipped: its patch is in `EventCorrelator::patch`.
    pub patched: bool,
}

/// The correlator. Not synchronised: wrap it in a lock to share it.
pub struct EventCorrelator {
    clock: Arc<dyn Clock>,
    aggregator: Aggregator,
    observer: Observer,
    spam: SpamFilter,
    funcs: KeyFuncs,
    // Scratch buffers, reused across calls.
    patch: Vec<u8>,
    event_key: Vec<u8>,
    aggregate_key: Vec<u8>,
    spam_key: Vec<u8>,
    /// `event_key` is the `getEventKey` of the event last correlated in place, whose log is the observer's
    /// most recent entry: true from an unaggregated `correlate_in_place` until the caches change again.
    last_logged: bool,
}

impl EventCorrelator {
    pub fn new(options: CorrelatorOptions, clock: Arc<dyn Clock>, funcs: KeyFuncs) -> Result<Self> {
        let o = options.populated()?;
        let size = NonZeroUsize::new(o.lru_cache_size).expect("populated() replaced zero");
        Ok(EventCorrelator {
            clock,
            aggregator: Aggregator::new(size, o.max_events, o.max_interval_seconds),
            observer: Observer::new(size),
            spam: SpamFilter::new(size, o.qps, o.burst),
            funcs,
            patch: Vec::with_capacity(256),
            event_key: Vec::with_capacity(256),
            aggregate_key: Vec::with_capacity(256),
            spam_key: Vec::with_capacity(256),
            last_logged: false,
        })
    }

    /// `EventCorrelate`. Reads the clock twice: once for the aggregator, once for the spam filter.
    pub fn correlate(&mut self, mut event: Event) -> Result<Correlation> {
        let o = self.correlate_in_place(&mut event)?;
        if o.skip {
            return Ok(Correlation { event: None, patch: None, skip: true, aggregated: o.aggregated });
        }
        let patch = o.patched.then(|| self.patch.clone());
        Ok(Correlation { event: Some(event), patch, skip: false, aggregated: o.aggregated })
    }

    /// `EventCorrelate` without moving the event: `event` becomes the observed (possibly aggregate) event and
    /// the patch, if any, is left in `self.patch()` until the next call.
    pub fn correlate_in_place(&mut self, event: &mut Event) -> Result<Outcome> {
        self.last_logged = false;
        let now = self.clock.now()?;
        // With the default key function the spam key is a prefix of the aggregate key. The aggregate event
        // keeps the source, involved object and type, so the prefix is also the observed event's spam key.
        let mut spam_end = None;
        let aggregated = match &self.funcs.aggregate {
            None => {
                spam_end = Some(keys::default_keys_into(event, &mut self.aggregate_key, &mut self.event_key));
                self.aggregator.record(&self.aggregate_key, &event.message, now)
            }
            Some(f) => {
                keys::event_key_into(event, &mut self.event_key);
                let (aggregate_key, local_key) = f(event)?;
                self.aggregate_key = aggregate_key.into_bytes();
                self.aggregator.record(&self.aggregate_key, &local_key, now)
            }
        };
        let key = if aggregated {
            let message = match &self.funcs.message {
                None => keys::aggregate_message(event),
                Some(f) => f(event)?,
            };
            make_aggregate(event, message, now);
            &self.aggregate_key
        } else {
            &self.event_key
        };
        let repeat = self.observer.observe(event, key);

        let spam_key = match (&self.funcs.spam, spam_end) {
            (Some(f), _) => {
                self.spam_key = f(event)?.into_bytes();
                &self.spam_key
            }
            (None, Some(end)) => &self.aggregate_key[..end],
            (None, None) => {
                keys::spam_key_into(event, &mut self.spam_key);
                &self.spam_key
            }
        };
        let clock = &self.clock;
        let skip = self.spam.filter(spam_key, || clock.now())?;
        // Go builds the patch in eventObserve but drops it with a skipped event, so only unskipped
        // repeats need one.
        let patched = repeat && !skip;
        if patched {
            count_patch_into(&mut self.patch, event.count, event.last_timestamp, &event.message);
        }
        // Observing changed none of the fields of the event key, so it is still the key the log is under.
        self.last_logged = !aggregated;
        Ok(Outcome { skip, aggregated, patched })
    }

    /// The patch built by the last `correlate_in_place` that returned `patched`.
    pub fn patch(&self) -> &[u8] {
        &self.patch
    }

    /// `UpdateState`: records a server's answer (name, resourceVersion, count, firstTimestamp) under its
    /// `getEventKey`.
    pub fn update_state(&mut self, event: &Event) {
        self.last_logged = false;
        keys::event_key_into(event, &mut self.event_key);
        self.observer.update_state(event, &self.event_key);
    }

    /// `update_state` of the event last correlated in place, changed since only by the server's answer (name,
    /// resourceVersion, count, firstTimestamp): the key and its log are known then, saving the key's rebuild
    /// and lookup (a replay's every write).
    pub fn update_last_state(&mut self, event: &Event) {
        debug_assert!(!self.last_logged || self.event_key == keys::event_key(event).as_bytes(), "not the last event");
        if !(self.last_logged && self.observer.update_front(event, &self.event_key)) {
            self.update_state(event);
        }
    }

    /// Entries in the (aggregator, observer, spam filter) caches.
    pub fn cache_lens(&self) -> (usize, usize, usize) {
        (self.aggregator.len(), self.observer.len(), self.spam.len())
    }
}

#[cfg(test)]
mod tests;
