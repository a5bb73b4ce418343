//! The recording side of an events.k8s.io/v1 broadcaster, single-threaded and driven by its clock: the
//! series cache, the `finishSeries`/`refreshExistingEventSeries` timers and the retry schedule of
//! `attemptRecording`. Whoever owns it feeds it events and calls `run_due` when `next_due` has come.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::num::NonZeroUsize;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;

use super::cache::{Attempt, CacheStats, SeriesCache, Write};
use super::event::EventV1;
use super::record::{record_event, Recorded, SinkV1};
use super::{DEFAULT_CACHE_SIZE, FINISH_TIME, REFRESH_TIME};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::sink::{Abandoned, Attempts, Jitter, Next, RetryPolicy, SinkCalls, Written};
use crate::time::Time;

#[derive(Clone, Copy, Debug)]
pub struct EngineOptions {
    /// Attempts per event, the first included, and the base retry sleep (each sleep jittered up to +25 %).
    pub retry: RetryPolicy,
    pub cache_size: NonZeroUsize,
    /// Seeds the jitter; `None` draws the seed from the OS.
    pub seed: Option<u64>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            retry: RetryPolicy::default(),
            cache_size: NonZeroUsize::new(DEFAULT_CACHE_SIZE).unwrap_or(NonZeroUsize::MIN),
            seed: None,
        }
    }
}

impl EngineOptions {
    pub fn checked(self) -> Result<Self> {
        if self.retry.sleep_nanos < 0 {
            return Err(Error::Option(format!("sleep_duration must be >= 0, got {} ns", self.retry.sleep_nanos)));
        }
        if self.retry.max_tries == 0 {
            return Err(Error::Option("max_tries must be >= 1".into()));
        }
        Ok(self)
    }
}

/// `CacheStats` as serde writes it (`cache.rs` keeps serde out of its types).
#[derive(Serialize)]
#[serde(remote = "CacheStats")]
struct CacheStatsDef {
    observed: u64,
    created: u64,
    series_started: u64,
    counted: u64,
    refresh_writes: u64,
    finish_writes: u64,
    forgotten: u64,
    evicted: u64,
    evicted_writes: u64,
    shutdown_writes: u64,
}

/// What the engine has done, besides the cache's decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EngineStats {
    #[serde(flatten, with = "CacheStatsDef")]
    pub cache: CacheStats,
    /// Writes that succeeded and that failed; failures scheduled again, and events given up.
    pub writes_ok: u64,
    pub write_errors: u64,
    /// Sink calls by verb and result (a patch that finds nothing and its create are two calls).
    pub sink_creates: u64,
    pub sink_create_errors: u64,
    pub sink_patches: u64,
    pub sink_patch_errors: u64,
    pub retries: u64,
    pub abandoned: u64,
    pub finish_rounds: u64,
    pub refresh_rounds: u64,
    /// Events still waiting for a retry.
    pub pending_retries: u64,
    pub cache_len: u64,
}

struct PendingWrite {
    event: EventV1,
    attempts: Attempts,
}

pub struct SeriesEngine {
    cache: SeriesCache,
    clock: Arc<dyn Clock>,
    options: EngineOptions,
    next_finish: Time,
    next_refresh: Time,
    retry_at: BinaryHeap<Reverse<(Time, u64)>>,
    pending: HashMap<u64, PendingWrite>,
    seq: u64,
    rng: SmallRng,
    stats: EngineStats,
    calls: SinkCalls,
}

impl SeriesEngine {
    /// An engine whose rounds are due at once (`wait.Until` runs its function before the first period).
    pub fn new(clock: Arc<dyn Clock>, options: EngineOptions) -> Result<Self> {
        let options = options.checked()?;
        let now = clock.now()?;
        let rng = match options.seed {
            Some(s) => SmallRng::seed_from_u64(s),
            None => SmallRng::from_os_rng(),
        };
        Ok(SeriesEngine {
            cache: SeriesCache::new(options.cache_size),
            clock,
            options,
            next_finish: now,
            next_refresh: now,
            retry_at: BinaryHeap::new(),
            pending: HashMap::new(),
            seq: 0,
            rng,
            stats: EngineStats::default(),
            calls: SinkCalls::default(),
        })
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn stats(&self) -> EngineStats {
        EngineStats {
            cache: self.cache.stats(),
            pending_retries: self.pending.len() as u64,
            cache_len: self.cache.len() as u64,
            sink_creates: self.calls.get(Written::Created, true),
            sink_create_errors: self.calls.get(Written::Created, false),
            sink_patches: self.calls.get(Written::Patched, true),
            sink_patch_errors: self.calls.get(Written::Patched, false),
            ..self.stats
        }
    }

    /// The earliest instant something is due: a retry or a round.
    pub fn next_due(&self) -> Time {
        let rounds = self.next_finish.min(self.next_refresh);
        self.retry_at.peek().map_or(rounds, |Reverse((t, _))| rounds.min(*t))
    }

    /// One occurrence (`recordToSink`): the writes it needs are attempted now. The occurrence is dated by
    /// its `eventTime` (client-go reads its clock when the goroutine gets to it), the clock's present when
    /// it has none.
    pub fn observe(&mut self, event: EventV1, sink: &mut dyn SinkV1) -> Result<()> {
        for e in self.decide(event)? {
            self.write(e, sink)?;
        }
        Ok(())
    }

    /// `observe` without the writes: the events to write, in order, each to be passed to `write`.
    pub fn decide(&mut self, event: EventV1) -> Result<Vec<EventV1>> {
        let now = match event.event_time {
            Some(t) => t,
            None => self.clock.now()?,
        };
        let (write, evicted) = self.cache.observe(event, now);
        Ok(evicted.into_iter().chain(write).map(|w| w.event).collect())
    }

    /// The first attempt at a write `decide` asked for.
    pub fn write(&mut self, event: EventV1, sink: &mut dyn SinkV1) -> Result<()> {
        self.attempt(event, Attempts { tries: 0, jitter: Jitter::Quarter }, sink)
    }

    fn record(&mut self, sink: &mut dyn SinkV1, event: &EventV1) -> Recorded {
        counted(&mut self.stats, &self.calls, sink, event, false)
    }

    /// `attemptRecording` without blocking: a retryable failure is scheduled a jittered sleep later.
    fn attempt(&mut self, event: EventV1, mut attempts: Attempts, sink: &mut dyn SinkV1) -> Result<()> {
        let Some(e) = self.record(sink, &event).error else { return Ok(()) };
        match attempts.after_failure(e, &self.options.retry, false, &mut self.rng) {
            Next::Abandon(Abandoned::GaveUp(_)) => {}
            Next::Abandon(_) => self.stats.abandoned += 1,
            Next::SleepThenRetry { delay_nanos } => {
                self.stats.retries += 1;
                let at = self.clock.now()?.add_nanos(delay_nanos);
                self.seq += 1;
                self.retry_at.push(Reverse((at, self.seq)));
                self.pending.insert(self.seq, PendingWrite { event, attempts });
            }
        }
        Ok(())
    }

    /// Runs whatever is due at the clock's present: retries first, then `finishSeries`, then
    /// `refreshExistingEventSeries`.
    pub fn run_due(&mut self, sink: &mut dyn SinkV1) -> Result<()> {
        let now = self.clock.now()?;
        self.run_due_at(now, sink)
    }

    /// `run_due` as of `now`: what was due by then. A round's next run is one period after `now`, so that the
    /// rounds follow the clock's timeline, not the moments this thread got to them.
    pub fn run_due_at(&mut self, now: Time, sink: &mut dyn SinkV1) -> Result<()> {
        while let Some(&Reverse((at, id))) = self.retry_at.peek() {
            if at > now {
                break;
            }
            self.retry_at.pop();
            if let Some(p) = self.pending.remove(&id) {
                self.attempt(p.event, p.attempts, sink)?;
            }
        }
        if self.next_finish <= now {
            self.stats.finish_rounds += 1;
            let (stats, calls) = (&mut self.stats, &self.calls);
            self.cache.finish_round(now, |w| one_attempt(stats, calls, sink, &w, false));
            self.next_finish = now.add_nanos(FINISH_TIME);
        }
        if self.next_refresh <= now {
            self.stats.refresh_rounds += 1;
            let (stats, calls) = (&mut self.stats, &self.calls);
            self.cache.refresh_round(|w| one_attempt(stats, calls, sink, &w, true));
            self.next_refresh = now.add_nanos(REFRESH_TIME);
        }
        Ok(())
    }

    /// Shutdown: one last attempt for every event waiting for a retry, then one write of every live series
    /// whose count the server has not seen; returns how many series were written. The cache is empty
    /// afterwards.
    pub fn shutdown(&mut self, sink: &mut dyn SinkV1) -> usize {
        let mut pending: Vec<_> = self.pending.drain().collect();
        pending.sort_by_key(|(id, _)| *id);
        self.retry_at.clear();
        for (_, p) in pending {
            if self.record(sink, &p.event).retry() {
                self.stats.abandoned += 1;
            }
        }
        let series = self.cache.drain();
        for w in &series {
            if self.record(sink, &w.event).retry() {
                self.stats.abandoned += 1;
            }
        }
        series.len()
    }
}

/// A round's single attempt at one write (no retry loop, as in client-go's rounds).
fn one_attempt(stats: &mut EngineStats, calls: &SinkCalls, sink: &mut dyn SinkV1, w: &Write, answer: bool) -> Attempt {
    let r = counted(stats, calls, sink, &w.event, answer);
    let retry = r.retry();
    (r.answer, retry)
}

/// One `recordEvent`, counted.
fn counted(
    stats: &mut EngineStats,
    calls: &SinkCalls,
    sink: &mut dyn SinkV1,
    event: &EventV1,
    answer: bool,
) -> Recorded {
    let r = record_event(sink, event, answer, calls);
    if r.error.is_some() {
        stats.write_errors += 1;
    } else {
        stats.writes_ok += 1;
    }
    r
}
