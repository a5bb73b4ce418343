//! events.k8s.io/v1 recording (client-go `tools/events`): events grouped into series by an isomorphic
//! key, the first occurrence created, the second turned into a series patch, later ones counted in a cache
//! that timers write out.
//!
//! Decisions are client-go's released ("1.36-level") ones, with these differences:
//! the cache is a bounded LRU (an evicted live series is written on its way out), every timer and
//! timestamp reads the engine's clock, retries are scheduled instead of sleeping, shutdown writes the
//! final count of every live series, and a note over the server's 1024-byte limit is cut.
//!
//! Sink errors, their classification and the retry schedule are `crate::sink`'s, shared with core/v1.

pub mod broadcaster;
pub mod cache;
pub mod engine;
pub mod event;
pub mod key;
pub mod make;
pub mod record;

#[cfg(test)]
mod tests;

pub use broadcaster::{structured_line, EventsBroadcaster, EventsBroadcasterStats, EventsOptions, Host, StartError};
pub use cache::{CacheStats, SeriesCache, Write, WriteCause};
pub use engine::{EngineOptions, EngineStats, SeriesEngine};
pub use event::EventV1;
pub use key::write_key;
pub use make::{make_event_v1, truncate_note, EventV1Call, NOTE_LENGTH_LIMIT};
pub use record::{record_event, series_patch, Recorded, SinkV1};

const MINUTE: i64 = 60 * crate::time::NANOS_PER_SECOND;

/// `finishTime`: how often `finishSeries` runs, and how long a series or singleton stays after its last
/// occurrence.
pub const FINISH_TIME: i64 = 6 * MINUTE;
/// `refreshTime`: how often every live series is written.
pub const REFRESH_TIME: i64 = 30 * MINUTE;
/// The cache bound (client-go's map has none); the size of client-go's core/v1 LRU caches.
pub const DEFAULT_CACHE_SIZE: usize = 4096;
