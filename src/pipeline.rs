//! What the broadcasters of both event APIs are made of, as client-go's both embed apimachinery's
//! `watch.Broadcaster`: the watch mux (`crate::watch`), the threads of its watchers, the sinks' health, the
//! drops counted, an idle test on the pipeline's clock, and the shutdown.
//!
//! `I` is what a recorder sends, `O` what the watchers get (made once per item on the distribution side).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

use crate::clock::{Clock, StopSignal};
use crate::error::{Error, Result};
use crate::health::{count, HealthSnapshot, Reporter, SinkHealth};
use crate::sync::lock;
use crate::time::Time;
use crate::watch::{Broadcaster, FullChannel, Lane, Stopped};

/// How many queued items a watcher takes at once (a Python callback takes the GIL once per batch).
pub const BATCH: usize = 512;

thread_local! {
    /// The current thread is a watcher or delivery thread of some broadcaster.
    static ON_PIPELINE_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the current thread is one of a pipeline's own (a callback or sink that records events).
pub fn on_pipeline_thread() -> bool {
    ON_PIPELINE_THREAD.get()
}

/// A queue whose consumer can be idle: a watcher's lane, or a delivery worker's.
pub trait Queue: Send + Sync {
    fn queued(&self) -> usize;
    /// Items queued, or taken and not done yet.
    fn load(&self) -> usize;
    fn idle_at(&self, now: Time) -> bool;
    /// Ends its consumer's wait for a fuller batch (`Lane::hurry`).
    fn hurry(&self);
}

impl<T: Send> Queue for Lane<T> {
    fn queued(&self) -> usize {
        self.len()
    }
    fn load(&self) -> usize {
        Lane::load(self)
    }
    fn idle_at(&self, now: Time) -> bool {
        self.is_idle(now)
    }
    fn hurry(&self) {
        Lane::hurry(self)
    }
}

/// Under pressure, one recorder call in this many looks for drops at the watchers' queues: summing them
/// takes their locks, and a queue of 1000 fills in more calls than that (`end_shutdown` looks too).
pub const DROP_CHECK_EVERY: u64 = 64;

/// How long `wait_idle` polls every 160 µs at most before it backs off to every millisecond.
const IDLE_FINE_POLLS: Duration = Duration::from_millis(20);

/// How often at most the recorders of a broadcaster warn that they are dropping events.
pub const DROP_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// The pipeline's settings.
#[derive(Clone)]
pub struct PipelineOptions {
    /// Labels its lines and metrics.
    pub name: String,
    pub queue_length: usize,
    pub full_channel: FullChannel,
    pub clock: Arc<dyn Clock>,
    /// How long a recording call may wait for fast watchers that fell behind (`relieve`); zero never waits.
    pub catch_up_wait: Duration,
    /// At most one line per sink in this time while it fails (`crate::health`).
    pub log_interval: i64,
}

/// The counters every pipeline keeps, in the order both broadcasters' `stats()` list them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PipelineStats {
    /// Every `record` call, including those refused after shutdown.
    pub received: u64,
    pub dropped_incoming: u64,
    pub dropped_after_shutdown: u64,
    /// Each watcher's name and the events its full queue lost, in the order the watchers started.
    #[serde(serialize_with = "as_map")]
    pub dropped_watchers: Vec<(String, u64)>,
}

/// Each sink's health, by its watcher's name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinksHealth(pub Vec<(String, HealthSnapshot)>);

impl Serialize for SinksHealth {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

fn as_map<S: Serializer>(pairs: &[(String, u64)], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

/// The mux, the threads and the counters a broadcaster shares with its watchers.
pub struct Pipeline<I, O> {
    mux: Broadcaster<I, O>,
    pub options: PipelineOptions,
    /// Set by shutdown: a failing write gets one more try, and sleeps end.
    pub stop: Arc<StopSignal>,
    pub reporter: Arc<dyn Reporter>,
    watcher_lanes: Mutex<Vec<Arc<Lane<O>>>>,
    /// Other queues whose consumers must be idle too (delivery workers).
    queues: Mutex<Vec<Arc<dyn Queue>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    sinks: Mutex<Vec<(String, Arc<SinkHealth>)>>,
    next_id: AtomicU64,
    /// Items taken off a queue and not finished yet.
    pub in_flight: AtomicI64,
    handler_errors: AtomicU64,
    recorder_waits: AtomicU64,
    after_shutdown: AtomicU64,
    /// When the recorders last warned of drops.
    pub(crate) last_drop_warning: Mutex<Option<Instant>>,
    /// Drops at the watchers' queues warned about so far.
    watcher_drops_warned: AtomicU64,
    /// Recorder calls that found a watcher behind.
    pressured_calls: AtomicU64,
}

/// A started watcher; `stop` ends it (what it had queued is discarded, as in client-go).
pub struct Watcher<I, O> {
    pipeline: Arc<Pipeline<I, O>>,
    lane: Arc<Lane<O>>,
}

/// A watcher of either API.
pub trait WatcherHandle: Send + Sync {
    fn stop(&self);
    fn name(&self) -> &str;
    /// Items this watcher lost to a full queue.
    fn dropped(&self) -> u64;
}

impl<I: Send + 'static, O: Clone + Send + 'static> Watcher<I, O> {
    pub fn stop(&self) {
        self.pipeline.mux.stop_watching(&self.lane);
    }
    pub fn name(&self) -> &str {
        &self.lane.name
    }
    pub fn dropped(&self) -> u64 {
        self.lane.dropped()
    }
}

impl<I: Send + 'static, O: Clone + Send + 'static> WatcherHandle for Watcher<I, O> {
    fn stop(&self) {
        Watcher::stop(self)
    }
    fn name(&self) -> &str {
        Watcher::name(self)
    }
    fn dropped(&self) -> u64 {
        Watcher::dropped(self)
    }
}

impl<I: Send + 'static, O: Clone + Send + 'static> Pipeline<I, O> {
    pub fn new(
        options: PipelineOptions,
        reporter: Arc<dyn Reporter>,
        convert: impl Fn(I) -> O + Send + Sync + 'static,
    ) -> Result<Arc<Self>> {
        if options.queue_length == 0 {
            return Err(Error::Option("queue_length must be >= 1".into()));
        }
        let mux = Broadcaster::new(options.queue_length, options.full_channel, convert)?;
        Ok(Arc::new(Pipeline {
            mux,
            options,
            stop: Arc::new(StopSignal::default()),
            reporter,
            watcher_lanes: Mutex::new(Vec::new()),
            queues: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            sinks: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            in_flight: AtomicI64::new(0),
            handler_errors: AtomicU64::new(0),
            recorder_waits: AtomicU64::new(0),
            after_shutdown: AtomicU64::new(0),
            last_drop_warning: Mutex::new(None),
            watcher_drops_warned: AtomicU64::new(0),
            pressured_calls: AtomicU64::new(0),
        }))
    }

    pub fn name(&self) -> &str {
        &self.options.name
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.options.clock
    }

    /// `ActionOrDrop`: never blocks. `Ok(false)` when the incoming queue is full; every drop is counted,
    /// after shutdown too.
    pub fn record(&self, item: I) -> std::result::Result<bool, Stopped> {
        let queued = self.mux.action_or_drop(item);
        if queued.is_err() {
            self.after_shutdown.fetch_add(1, Ordering::Relaxed);
        }
        queued
    }

    /// `record`, warning of a drop (a full incoming queue, or a broadcaster shut down); returns whether the
    /// item was queued.
    pub fn record_or_warn(&self, item: I) -> bool {
        match self.record(item) {
            Ok(true) => return true,
            Ok(false) => self.warn_dropped("the incoming queue is full"),
            Err(_) => self.warn_dropped("the broadcaster is shut down"),
        };
        false
    }

    /// The back-pressure choice after a queued event: true when some watcher is behind, and a caller that may
    /// block should then `relieve`. Under pressure, one call in `DROP_CHECK_EVERY` also warns about drops at
    /// the watchers' queues, which happen only then.
    pub fn should_catch_up(&self) -> bool {
        if !self.under_pressure() {
            return false;
        }
        if self.pressured_calls.fetch_add(1, Ordering::Relaxed) % DROP_CHECK_EVERY == 0 {
            self.warn_watcher_drops();
        }
        true
    }

    /// Warns about a drop, unless a drop warning came in the last `DROP_WARNING_INTERVAL`; returns whether it
    /// did.
    pub fn warn_dropped(&self, why: &str) -> bool {
        let mut last = lock(&self.last_drop_warning);
        if last.is_some_and(|t| t.elapsed() < DROP_WARNING_INTERVAL) {
            return false;
        }
        *last = Some(Instant::now());
        let s = self.stats();
        let watchers: u64 = s.dropped_watchers.iter().map(|(_, n)| n).sum();
        self.reporter.warn(&format!(
            "kubevents: {} is dropping events: {why} ({} dropped at the incoming queue, {watchers} at full watcher \
             queues, {} after shutdown so far)",
            self.options.name, s.dropped_incoming, s.dropped_after_shutdown
        ));
        true
    }

    /// Warns about drops at the watchers' queues (sinks included) not warned about yet.
    pub fn warn_watcher_drops(&self) {
        let total = self.watcher_drops();
        if total > self.watcher_drops_warned.load(Ordering::Relaxed)
            && self.warn_dropped("a watcher's queue is full (a sink or callback is behind)")
        {
            self.watcher_drops_warned.store(total, Ordering::Relaxed);
        }
    }

    /// Some watcher is behind (its queue is more than half full).
    pub fn under_pressure(&self) -> bool {
        self.mux.under_pressure()
    }

    /// `watch::Broadcaster::relieve`: a recorder that outpaces fast watchers waits for them, up to
    /// `catch_up_wait`. Returns whether it waited.
    pub fn relieve(&self) -> bool {
        let limit = self.options.catch_up_wait;
        // A callback or sink that records events would wait for the very queues its thread drains.
        if limit.is_zero() || on_pipeline_thread() {
            return false;
        }
        let waited = self.mux.relieve(limit);
        if waited {
            self.recorder_waits.fetch_add(1, Ordering::Relaxed);
        }
        waited
    }

    /// A new watcher lane named `<kind>-<n>`.
    pub fn watch(&self, kind: &str) -> Result<Arc<Lane<O>>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let lane =
            self.mux.watch(format!("{kind}-{id}")).map_err(|_| Error::State("the broadcaster is shut down".into()))?;
        lock(&self.watcher_lanes).push(lane.clone());
        Ok(lane)
    }

    /// The watcher of `lane`, for its starter to return.
    pub fn watcher(self: &Arc<Self>, lane: &Arc<Lane<O>>) -> Watcher<I, O> {
        Watcher { pipeline: self.clone(), lane: lane.clone() }
    }

    /// Another queue whose consumer must be idle for the pipeline to be.
    pub fn add_queue(&self, q: Arc<dyn Queue>) {
        lock(&self.queues).push(q);
    }

    /// Runs `f` on a thread of the pipeline.
    pub fn spawn(&self, name: &str, f: impl FnOnce() + Send + 'static) -> Result<()> {
        let t = crate::threads::spawn(name, move || {
            ON_PIPELINE_THREAD.set(true);
            f()
        })?;
        lock(&self.threads).push(t);
        Ok(())
    }

    /// `StartEventWatcher`: `handler` gets the items in order, a batch at a time, on a thread of its own.
    /// `kind` names the watcher (`<kind>-<n>`) in the statistics.
    pub fn start_event_watcher(
        self: &Arc<Self>,
        kind: &str,
        mut handler: impl FnMut(&[O]) + Send + 'static,
    ) -> Result<Watcher<I, O>> {
        let lane = self.watch(kind)?;
        let watcher = self.watcher(&lane);
        let p = self.clone();
        let l = lane.clone();
        let spawned = self.spawn(&lane.name, move || {
            let mut batch = Vec::with_capacity(BATCH);
            while l.pop_batch(&mut batch, BATCH) {
                let n = batch.len() as i64;
                p.in_flight.fetch_add(n, Ordering::Relaxed);
                handler(&batch);
                l.done(batch.len());
                batch.clear();
                p.in_flight.fetch_sub(n, Ordering::Relaxed);
            }
        });
        if let Err(e) = spawned {
            Watcher::stop(&watcher);
            return Err(e);
        }
        Ok(watcher)
    }

    /// The health of a sink written to from the watcher `lane` (`sink` names its class), kept for `stats()`.
    pub fn sink_health(&self, lane: &Lane<O>, sink: String) -> Arc<SinkHealth> {
        let o = &self.options;
        let h = Arc::new(SinkHealth::new(
            &o.name,
            &lane.name,
            sink,
            o.clock.clone(),
            self.reporter.clone(),
            o.log_interval,
        ));
        lock(&self.sinks).push((lane.name.clone(), h.clone()));
        h
    }

    pub fn sinks(&self) -> SinksHealth {
        SinksHealth(lock(&self.sinks).iter().map(|(n, h)| (n.clone(), h.snapshot())).collect())
    }

    /// Counts and reports what a callback or logger (`what`) raised (`error`); the watcher goes on. `kept`: the
    /// error is kept for the next `shutdown()` or `wait_idle()` to raise; else its `traceback`, if given, is
    /// reported with it.
    pub fn handler_failed(&self, what: &str, error: &str, kept: bool, traceback: Option<&str>) {
        self.handler_errors.fetch_add(1, Ordering::Relaxed);
        let message = match traceback {
            _ if kept => format!("{what} raised {error}; the next shutdown() or wait_idle() raises it again"),
            Some(tb) => format!("{what} raised {error}\n{tb}"),
            None => format!("{what} raised {error}"),
        };
        self.reporter.error(&message);
    }

    pub fn handler_errors(&self) -> u64 {
        self.handler_errors.load(Ordering::Relaxed)
    }

    pub fn recorder_waits(&self) -> u64 {
        self.recorder_waits.load(Ordering::Relaxed)
    }

    /// The mux's and watchers' counters.
    pub fn stats(&self) -> PipelineStats {
        let after_shutdown = self.after_shutdown.load(Ordering::Relaxed);
        PipelineStats {
            received: self.mux.received() + after_shutdown,
            dropped_incoming: self.mux.dropped(),
            dropped_after_shutdown: after_shutdown,
            dropped_watchers: lock(&self.watcher_lanes).iter().map(|l| (l.name.clone(), l.dropped())).collect(),
        }
    }

    /// Nothing waits in the mux's incoming queue and nothing is being distributed: whatever was recorded so far
    /// is in the watchers' queues.
    pub fn distributed(&self) -> bool {
        self.mux.is_idle()
    }

    /// Items queued anywhere in the pipeline, or taken and not finished.
    pub fn pending(&self) -> u64 {
        let queued = self.mux.queued()
            + lock(&self.watcher_lanes).iter().map(|l| l.len()).sum::<usize>()
            + lock(&self.queues).iter().map(|q| q.queued()).sum::<usize>();
        queued as u64 + self.in_flight.load(Ordering::Relaxed).max(0) as u64
    }

    /// Items at the other queues (delivery workers'), queued or taken and not done yet.
    pub fn queues_load(&self) -> usize {
        lock(&self.queues).iter().map(|q| q.load()).sum()
    }

    /// Events the watchers' full queues dropped, all watchers together.
    pub fn watcher_drops(&self) -> u64 {
        lock(&self.watcher_lanes).iter().map(|l| l.dropped()).sum()
    }

    /// Nothing can happen any more without the clock moving: every queue is empty or its consumer waits for
    /// a later instant.
    pub fn is_idle(&self) -> bool {
        if !self.mux.is_idle() {
            return false;
        }
        let Ok(now) = self.options.clock.now() else { return false };
        lock(&self.watcher_lanes).iter().all(|l| l.is_idle(now)) && lock(&self.queues).iter().all(|q| q.idle_at(now))
    }

    /// Waits until `is_idle`, or the timeout; returns whether idle.
    pub fn wait_idle(&self, timeout: Option<Duration>) -> bool {
        let start = Instant::now();
        let deadline = timeout.map(|t| start + t);
        let mut pause = Duration::from_micros(20);
        loop {
            if self.is_idle() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            // A consumer lingering for a fuller batch would only make this wait longer.
            self.hurry();
            std::thread::sleep(pause);
            // Most waits are short (a test that steps a FakeClock): fine polls for them, coarse ones later.
            let cap =
                if start.elapsed() < IDLE_FINE_POLLS { Duration::from_micros(160) } else { Duration::from_millis(1) };
            pause = (pause * 2).min(cap);
        }
    }

    /// Ends every consumer's wait for a fuller batch.
    fn hurry(&self) {
        self.mux.hurry();
        lock(&self.watcher_lanes).iter().for_each(|l| l.hurry());
        lock(&self.queues).iter().for_each(|q| q.hurry());
    }

    /// Stops accepting events: the distribution thread distributes what is queued and closes the watchers'
    /// queues, and every watcher finishes its queue; writes that fail get one try each from now on. Does not
    /// wait (see `wait_shut_down`). Idempotent.
    pub fn begin_shutdown(&self) {
        self.stop.stop();
        self.mux.close();
    }

    pub fn is_shutting_down(&self) -> bool {
        self.stop.is_stopped()
    }

    /// Waits up to `timeout` for every thread of the pipeline to end after `begin_shutdown`; returns whether
    /// they all have. Any number of callers may wait at once.
    pub fn wait_shut_down(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let finished = self.mux.is_finished() && {
                let mut threads = lock(&self.threads);
                threads.retain(|t| !t.is_finished());
                threads.is_empty()
            };
            if finished {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// The line a finished shutdown logs: what the sinks could not write, or that all was written (`label`:
    /// "shut down", "flushed at exit"). `undelivered` counts the events left behind.
    pub fn shutdown_line(&self, label: &str, undelivered: u64) -> (bool, String) {
        let (problems, lost): (Vec<String>, Vec<bool>) =
            lock(&self.sinks).iter().filter_map(|(_, h)| h.shutdown_text()).unzip();
        let drops = self.watcher_drops() + self.mux.dropped();
        let received = self.stats().received;
        let mut line = format!("kubevents: {} {label}: {} received", self.options.name, count(received, "event"));
        if drops > 0 {
            line.push_str(&format!(", {drops} dropped at full queues"));
        }
        if undelivered > 0 {
            line.push_str(&format!(", {undelivered} not delivered in time"));
        }
        let bad = lost.contains(&true) || drops > 0 || undelivered > 0;
        if problems.is_empty() {
            line.push_str(if lock(&self.sinks).is_empty() { "" } else { "; every sink wrote all it was given" });
        } else {
            line.push_str("; ");
            line.push_str(&problems.join("; "));
        }
        (bad, line)
    }

    /// The end of a shutdown that waited: when it finished (`done`), warns about the drops at the watchers'
    /// queues not warned about yet and logs the summary line; else a timeout error saying how many events are
    /// still `pending`.
    pub fn end_shutdown(&self, done: bool, pending: u64) -> Result<()> {
        if !done {
            return Err(Error::Timeout(format!(
                "shutdown timed out with {pending} events still pending; they go on in the background"
            )));
        }
        self.warn_watcher_drops();
        self.report_shutdown("shut down", 0);
        Ok(())
    }

    /// Logs `shutdown_line`: a warning when something was lost, else at INFO.
    pub fn report_shutdown(&self, label: &str, undelivered: u64) {
        let (bad, line) = self.shutdown_line(label, undelivered);
        if bad {
            self.reporter.warn(&line);
        } else {
            self.reporter.info(&line);
        }
    }
}
