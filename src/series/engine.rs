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

use super::cache::{CacheStats, SeriesCache};
use super::event::EventV1;
use super::record::{record_event, Recorded, SinkV1};
use super::{DEFAULT_CACHE_SIZE, FINISH_TIME, REFRESH_TIME};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::health::{SinkHealth, Step};
use crate::sink::{Abandoned, Attempts, Jitter, Next, RetryPolicy, SinkCalls, Verdict, WriteError, WriteStats};
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
    #[serde(rename = "first_occurrences")]
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
    /// Sink calls by verb and result (a patch that finds nothing and its create are two calls), retries and
    /// events given up: shown by the broadcaster's stats as core/v1's are.
    #[serde(skip)]
    pub writes: WriteStats,
    pub finish_rounds: u64,
    pub refresh_rounds: u64,
    /// Events still waiting for a retry.
    pub pending_retries: u64,
    pub cache_len: u64,
}

struct PendingWrite {
    event: Arc<EventV1>,
    attempts: Attempts,
}

/// Counts the events waiting to be written, for the lines of a failing sink.
pub type Backlog = Box<dyn Fn() -> u64 + Send>;

pub struct SeriesEngine {
    cache: SeriesCache,
    /// Told of every write's outcome (`crate::health`), once a sink is attached.
    health: Option<(Arc<SinkHealth>, Backlog)>,
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
            health: None,
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

    /// Tells `health` of every write from now on; `backlog` counts the events waiting to be written.
    pub fn set_health(&mut self, health: Arc<SinkHealth>, backlog: Backlog) {
        self.health = Some((health, backlog));
    }

    pub fn stats(&self) -> EngineStats {
        EngineStats {
            cache: self.cache.stats(),
            pending_retries: self.pending.len() as u64,
            cache_len: self.cache.len() as u64,
            writes: self.calls.write_stats(self.stats.writes.retries, self.stats.writes.abandoned),
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
    pub fn observe(&mut self, event: impl Into<Arc<EventV1>>, sink: &mut dyn SinkV1) -> Result<()> {
        let mut writes = Vec::new();
        self.decide(event, &mut writes)?;
        for e in writes {
            self.write(e, sink)?;
        }
        Ok(())
    }

    /// `observe` without the writes: appends the events to write to `out`, in order, each to be passed to
    /// `write`.
    pub fn decide(&mut self, event: impl Into<Arc<EventV1>>, out: &mut Vec<Arc<EventV1>>) -> Result<()> {
        let event = event.into();
        let now = match event.event_time {
            Some(t) => t,
            None => self.clock.now()?,
        };
        let (write, evicted) = self.cache.observe(event, now);
        out.extend(evicted.into_iter().chain(write).map(|w| w.event));
        Ok(())
    }

    /// The first attempt at a write `decide` asked for.
    pub fn write(&mut self, event: impl Into<Arc<EventV1>>, sink: &mut dyn SinkV1) -> Result<()> {
        self.attempt(event.into(), Attempts { tries: 0, jitter: Jitter::Quarter }, sink)
    }

    fn record(&mut self, sink: &mut dyn SinkV1, event: &EventV1) -> Recorded {
        counted(&mut self.stats, &self.calls, sink, event, false)
    }

    /// Tells the sink's health of a success.
    fn succeeded(&self, event: &EventV1, tries: u32) {
        if let Some((h, _)) = &self.health {
            h.succeeded(event.event_time, tries);
        }
    }

    /// Counts an event given up, and tells the sink's health.
    fn gave_up(&mut self, event: &EventV1, e: &WriteError, why: &Abandoned, tries: u32) {
        self.stats.writes.abandoned += 1;
        self.failed(event, e, Step::GiveUp(why), tries);
    }

    fn failed(&self, event: &EventV1, e: &WriteError, step: Step<'_>, tries: u32) {
        if let Some((h, backlog)) = &self.health {
            h.failed(e, step, event.event_time, tries, &|| describe(event), backlog);
        }
    }

    /// `attemptRecording` without blocking: a retryable failure is scheduled a jittered sleep later.
    fn attempt(&mut self, event: Arc<EventV1>, mut attempts: Attempts, sink: &mut dyn SinkV1) -> Result<()> {
        let Some(e) = self.record(sink, &event).error else {
            self.succeeded(&event, attempts.tries);
            return Ok(());
        };
        match attempts.after_failure(e.clone(), &self.options.retry, false, &mut self.rng) {
            Next::Abandon(why) => self.gave_up(&event, &e, &why, attempts.tries),
            Next::SleepThenRetry { delay_nanos } => {
                self.stats.writes.retries += 1;
                let left = self.options.retry.max_tries.saturating_sub(attempts.tries);
                self.failed(&event, &e, Step::Retry { in_nanos: delay_nanos, tries_left: Some(left) }, attempts.tries);
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
            let mut writes = Vec::new();
            let calls = &self.calls;
            self.cache.finish_round(now, |w| {
                let r = record_event(sink, &w.event, false, calls);
                let retry = r.retry();
                writes.push((w.event, r.error));
                (r.answer, retry)
            });
            self.rounds_done(writes, FINISH_TIME);
            self.next_finish = now.add_nanos(FINISH_TIME);
        }
        if self.next_refresh <= now {
            self.stats.refresh_rounds += 1;
            let mut writes = Vec::new();
            let calls = &self.calls;
            self.cache.refresh_round(|w| {
                let r = record_event(sink, &w.event, true, calls);
                let retry = r.retry();
                writes.push((w.event, r.error));
                (r.answer, retry)
            });
            self.rounds_done(writes, REFRESH_TIME);
            self.next_refresh = now.add_nanos(REFRESH_TIME);
        }
        Ok(())
    }

    /// Counts a round's single attempts (no retry loop, as in client-go's rounds): a retryable failure waits
    /// for the next round, `period` later; any other is given up.
    fn rounds_done(&mut self, writes: Vec<(Arc<EventV1>, Option<WriteError>)>, period: i64) {
        for (event, error) in writes {
            match error {
                None => {
                    self.stats.writes_ok += 1;
                    self.succeeded(&event, 0);
                }
                Some(e) => {
                    self.stats.write_errors += 1;
                    if e.verdict == Verdict::Retry {
                        self.failed(&event, &e, Step::Retry { in_nanos: period, tries_left: None }, 1);
                    } else {
                        self.gave_up(&event, &e, &Abandoned::GaveUp(e.clone()), 1);
                    }
                }
            }
        }
    }

    /// Shutdown: one last attempt for every event waiting for a retry, then one write of every live series
    /// whose count the server has not seen; returns how many series were written. The cache is empty
    /// afterwards. Every write that fails now is given up.
    pub fn shutdown(&mut self, sink: &mut dyn SinkV1) -> usize {
        let mut pending: Vec<_> = self.pending.drain().collect();
        pending.sort_by_key(|(id, _)| *id);
        self.retry_at.clear();
        let series = self.cache.drain();
        let n = series.len();
        let retried = pending.into_iter().map(|(_, p)| (p.event, p.attempts.tries));
        for (event, tries) in retried.chain(series.into_iter().map(|w| (w.event, 0))) {
            match self.record(sink, &event).error {
                None => self.succeeded(&event, tries),
                Some(e) => {
                    let why = match e.verdict {
                        Verdict::Retry => Abandoned::ShutDown(e.clone()),
                        Verdict::GiveUp => Abandoned::GaveUp(e.clone()),
                    };
                    self.gave_up(&event, &e, &why, tries + 1);
                }
            }
        }
        n
    }
}

/// An event as the lines of a failing sink show it: the object, type, reason, action and note.
fn describe(e: &EventV1) -> String {
    let r = &e.regarding;
    format!("{} {}: {} {} ({}): {:?}", r.kind, r.kref(), e.type_, e.reason, e.action, e.note)
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
