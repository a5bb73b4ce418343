//! client-go's `record` EventBroadcaster: recorders send occurrences into a `watch.Broadcaster`, whose
//! watchers log them, hand them to callbacks, or correlate them and write them to a sink with retries.
//!
//! Where kubevents goes beyond client-go: every drop is counted, `shutdown` delivers what is queued and waits
//! for it (with a timeout), a sink can have several delivery workers while the writes of one event stay in
//! order, and a failing sink is reported by `crate::health`'s policy instead of a line per event and retry.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::clock::Clock;
use crate::correlator::{CorrelatorOptions, EventCorrelator, KeyFuncs};
use crate::error::{Error, Result};
use crate::event::{make_event_around, Event, EventSource, EventType, ObjectReference, UuidSource};
use crate::health::{SinkHealth, Step};
use crate::pipeline::{Pipeline, PipelineOptions, PipelineStats, SinksHealth, BATCH};
use crate::sink::{record_event, ClockSleeper, EventSink, Next, RetryPolicy, SinkCalls, WriteStats};
use crate::sync::lock;
use crate::time::Time;
use crate::watch::{Activity, FullChannel, Lane, Popped, Stopped};

pub use crate::health::Reporter;

/// One recorder call, as queued: the event is built from it on the distribution thread.
#[derive(Clone, Debug)]
pub struct Occurrence {
    pub reference: ObjectReference,
    pub annotations: Option<BTreeMap<String, String>>,
    pub type_: EventType,
    pub reason: String,
    pub message: String,
    pub time: Time,
    pub source: Arc<EventSource>,
}

/// The broadcaster's settings.
#[derive(Clone)]
pub struct Options {
    pub pipeline: PipelineOptions,
    pub retry: RetryPolicy,
    pub correlator: CorrelatorOptions,
}

#[derive(Default)]
struct DeliveryCounters {
    aggregated: AtomicU64,
    deduplicated: AtomicU64,
    skipped: AtomicU64,
    writes: SinkCalls,
    retries: AtomicU64,
    abandoned: AtomicU64,
    correlation_errors: AtomicU64,
}

/// A snapshot of the counters, in the order `Broadcaster.stats()` lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BroadcasterStats {
    #[serde(flatten)]
    pub pipeline: PipelineStats,
    pub aggregated: u64,
    pub deduplicated: u64,
    pub skipped: u64,
    #[serde(flatten)]
    pub writes: WriteStats,
    pub handler_errors: u64,
    /// Recording calls that waited for fast watchers (or the distribution) to catch up.
    pub recorder_waits: u64,
    pub pending: u64,
    /// Each sink's health, by its watcher's name.
    pub sinks: SinksHealth,
}

type EventPipeline = Pipeline<Occurrence, Arc<Event>>;
type EventLane = Lane<Arc<Event>>;

/// A started watcher of the core/v1 broadcaster.
pub type Watcher = crate::pipeline::Watcher<Occurrence, Arc<Event>>;

struct BroadcasterState {
    pipeline: Arc<EventPipeline>,
    retry: RetryPolicy,
    correlator: CorrelatorOptions,
    counters: DeliveryCounters,
}

/// The event broadcaster.
pub struct EventBroadcaster {
    shared: Arc<BroadcasterState>,
}

/// The default `catch_up_wait`. Only fast watchers are waited for (see `watch::Broadcaster::relieve`), and
/// each gets through a queue in about this time; on a busy machine their threads may get no CPU for
/// milliseconds, and without the wait a burst overflows their queues meanwhile.
pub const DEFAULT_CATCH_UP_WAIT: Duration = Duration::from_millis(5);

/// How long one `EventSink::batch` runs at most: enough for a batch of `notify_at` events. A Python sink holds
/// the GIL through it; held past CPython's switch interval (5 ms), the GIL is taken from the sink mid-batch
/// and the recording threads then run unchecked until the sink claims it back, long enough to overflow its
/// queue.
pub const BATCH_SLICE: Duration = Duration::from_millis(2);

/// A sink's delivery workers, a thread each: far more than any API server takes from one client at once.
pub const MAX_WORKERS: usize = 1024;
/// One delivery worker: client-go's single sink goroutine.
pub const DEFAULT_WORKERS: usize = 1;
/// client-go's `maxQueuedEvents`: the incoming queue's length.
pub const DEFAULT_QUEUE_LENGTH: usize = 1000;
/// What a full incoming queue does by default (`DropIfChannelFull`).
pub const DEFAULT_FULL_CHANNEL: &str = "drop";

/// The `workers` option of `start_recording_to_sink` (a sink's delivery workers), checked.
pub fn delivery_workers_option(workers: i64) -> Result<usize> {
    Ok(crate::error::int_option("workers", workers, 1, MAX_WORKERS as i64)? as usize)
}

/// The `full_channel` option: what a full incoming queue does.
pub fn full_channel_option(s: &str) -> Result<FullChannel> {
    match s {
        "drop" => Ok(FullChannel::Drop),
        "wait" => Ok(FullChannel::Wait),
        other => Err(Error::Option(format!("full_channel must be \"drop\" or \"wait\", got {other:?}"))),
    }
}

impl EventBroadcaster {
    pub fn new(options: Options, reporter: Arc<dyn Reporter>) -> Result<Self> {
        options.correlator.populated()?;
        if options.retry.max_tries == 0 {
            return Err(Error::Option("max_tries must be >= 1".into()));
        }
        if options.retry.sleep_nanos < 0 {
            return Err(Error::Option("sleep_duration must be >= 0".into()));
        }
        let pipeline = Pipeline::new(options.pipeline, reporter, move |o: Occurrence| {
            // The reference, reason and message move into the event rather than being copied
            // (`make_event_around` expects the reference there already; reason and message follow it).
            let mut event =
                Event { involved_object: o.reference, source: EventSource::clone(&o.source), ..Default::default() };
            let annotations = o.annotations.as_ref();
            make_event_around(&mut event, annotations, o.type_.as_str(), "", "", o.time, &mut UuidSource::Random);
            event.reason = o.reason;
            event.message = o.message;
            Arc::new(event)
        })?;
        Ok(EventBroadcaster {
            shared: Arc::new(BroadcasterState {
                pipeline,
                retry: options.retry,
                correlator: options.correlator,
                counters: DeliveryCounters::default(),
            }),
        })
    }

    /// The mux, watchers and sinks' health this broadcaster is made of.
    pub fn pipeline(&self) -> &Arc<Pipeline<Occurrence, Arc<Event>>> {
        &self.shared.pipeline
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        self.shared.pipeline.clock()
    }

    /// `ActionOrDrop`: never blocks. `Ok(false)` when the incoming queue is full; every drop is counted,
    /// after shutdown too.
    pub fn record(&self, o: Occurrence) -> std::result::Result<bool, Stopped> {
        self.shared.pipeline.record(o)
    }

    /// Where the pipeline reports what it drops or abandons.
    pub fn reporter(&self) -> &Arc<dyn Reporter> {
        &self.shared.pipeline.reporter
    }

    /// Some watcher is behind (its queue is more than half full).
    pub fn under_pressure(&self) -> bool {
        self.shared.pipeline.under_pressure()
    }

    /// `Pipeline::relieve`: a recorder that outpaces fast watchers waits for them a moment.
    pub fn relieve(&self) -> bool {
        self.shared.pipeline.relieve()
    }

    /// `StartEventWatcher`: `handler` gets the events in order, a batch at a time, on a thread of its own.
    /// `kind` names the watcher (`<kind>-<n>`) in the statistics.
    pub fn start_event_watcher(
        &self,
        kind: &str,
        handler: impl FnMut(&[Arc<Event>]) + Send + 'static,
    ) -> Result<Watcher> {
        self.shared.pipeline.start_event_watcher(kind, handler)
    }

    /// `StartRecordingToSink` with a fresh correlator (`sink` names the sink's class in the lines of its
    /// health). With `workers > 1`, up to that many writes run at once: a write goes to the worker with the
    /// least to do, unless earlier writes of the same event (same namespace and name) are still under way, in
    /// which case it follows them on their worker, in order.
    pub fn start_recording_to_sink(
        &self,
        sink: Arc<dyn EventSink>,
        workers: usize,
        funcs: KeyFuncs,
    ) -> Result<Watcher> {
        let p = &self.shared.pipeline;
        let correlator = EventCorrelator::new(self.shared.correlator, p.clock().clone(), funcs)?;
        let lane = p.watch("sink")?;
        let health = p.sink_health(&lane, sink.describe());
        let writer = Arc::new(Writer {
            shared: self.shared.clone(),
            sink,
            health,
            correlation: Mutex::new(SinkCorrelation { correlator, outstanding: HashMap::new() }),
            hasher: foldhash::fast::FixedState::with_seed(0),
            sleeper: ClockSleeper { clock: p.clock().clone(), stop: p.stop.clone() },
        });
        let watcher = p.watcher(&lane);
        let started = if workers <= 1 {
            p.spawn(&lane.name.clone(), move || writer.run_alone(&lane))
        } else {
            self.start_workers(writer, lane, workers)
        };
        // A thread the OS refuses: the watcher is removed again.
        started.inspect_err(|_| watcher.stop())?;
        Ok(watcher)
    }

    /// The delivery workers' threads, then the sink watcher's thread that hands them the writes.
    fn start_workers(&self, writer: Arc<Writer>, lane: Arc<EventLane>, workers: usize) -> Result<()> {
        let p = &self.shared.pipeline;
        let mut worker_lanes: Vec<Arc<Lane<Job>>> = Vec::with_capacity(workers);
        let close_all = |lanes: &[Arc<Lane<Job>>]| lanes.iter().for_each(|wl| wl.close());
        for i in 0..workers {
            let wl = Arc::new(Lane::new(format!("{}-worker-{i}", lane.name), p.options.queue_length));
            p.add_queue(wl.clone());
            worker_lanes.push(wl.clone());
            let writer = writer.clone();
            p.spawn(&wl.name.clone(), move || writer.run_worker(&wl)).inspect_err(|_| close_all(&worker_lanes))?;
        }
        let started = worker_lanes.clone();
        p.spawn(&lane.name.clone(), move || writer.run_dispatcher(&lane, &worker_lanes))
            .inspect_err(|_| close_all(&started))
    }

    /// The counters now.
    pub fn stats(&self) -> BroadcasterStats {
        let s = &self.shared;
        let c = &s.counters;
        let p = &s.pipeline;
        BroadcasterStats {
            pipeline: p.stats(),
            aggregated: c.aggregated.load(Ordering::Relaxed),
            deduplicated: c.deduplicated.load(Ordering::Relaxed),
            skipped: c.skipped.load(Ordering::Relaxed),
            writes: c.writes.write_stats(c.retries.load(Ordering::Relaxed), c.abandoned.load(Ordering::Relaxed)),
            handler_errors: p.handler_errors() + c.correlation_errors.load(Ordering::Relaxed),
            recorder_waits: p.recorder_waits(),
            pending: p.pending(),
            sinks: p.sinks(),
        }
    }

    /// Counts and reports what a callback or logger (`what`) raised; see `Pipeline::handler_failed`.
    pub fn handler_failed(&self, what: &str, error: &str, kept: bool, traceback: Option<&str>) {
        self.shared.pipeline.handler_failed(what, error, kept, traceback)
    }

    /// Nothing can happen any more without the clock moving.
    pub fn is_idle(&self) -> bool {
        self.shared.pipeline.is_idle()
    }

    /// Waits until `is_idle`, or the timeout; returns whether idle.
    pub fn wait_idle(&self, timeout: Option<Duration>) -> bool {
        self.shared.pipeline.wait_idle(timeout)
    }

    /// Stops accepting events; see `Pipeline::begin_shutdown`. Does not wait. Idempotent.
    pub fn begin_shutdown(&self) {
        self.shared.pipeline.begin_shutdown()
    }

    /// Waits up to `timeout` for every thread of the broadcaster to end after `begin_shutdown`.
    pub fn wait_shut_down(&self, timeout: Option<Duration>) -> bool {
        self.shared.pipeline.wait_shut_down(timeout)
    }

    /// `begin_shutdown`, then `wait_shut_down`: returns whether everything finished within `timeout` (when
    /// false, the watcher threads go on in the background).
    pub fn shutdown(&self, timeout: Option<Duration>) -> bool {
        self.begin_shutdown();
        self.wait_shut_down(timeout)
    }

    /// For the exit hook: `shutdown`, waiting up to `wait`; returns the deliveries still pending and the
    /// events the sink gave up meanwhile.
    pub fn exit_flush(&self, wait: Duration) -> (u64, u64) {
        let before = self.stats().writes.abandoned;
        self.shutdown(Some(wait));
        let after = self.stats();
        (after.pending, after.writes.abandoned - before)
    }

    /// Events the watchers' full queues dropped, all watchers together.
    pub fn watcher_drops(&self) -> u64 {
        self.shared.pipeline.watcher_drops()
    }
}

impl Drop for EventBroadcaster {
    fn drop(&mut self) {
        // Without a shutdown the watcher threads (which share the queues, not this handle) would wait for
        // events forever: close the queues; the threads deliver what is queued, one try each, and end.
        self.shared.pipeline.begin_shutdown();
    }
}

/// One write to do: the correlated event and its patch, and with delivery workers its event's key (namespace
/// and name, hashed) and worker. The event stays in the allocation the broadcaster shared it in (this
/// watcher's copy once correlated): moving it would copy about 750 bytes at every step.
struct Job {
    event: Arc<Event>,
    key: u64,
    /// The delivery worker that writes it (0 with a single writer).
    worker: usize,
    patch: Vec<u8>,
    attempts: crate::sink::Attempts,
}

/// The sink's correlator, and with delivery workers, for each event (namespace and name, hashed) the writes
/// correlated and not yet finished: an answer updates the correlator only when no later write of the same
/// event is under way, so that answers arriving after later correlations cannot roll a count back.
struct SinkCorrelation {
    correlator: EventCorrelator,
    outstanding: HashMap<u64, Outstanding>,
}

struct Outstanding {
    writes: u32,
    worker: usize,
}

/// A writer's items done since it last told its lane (for `Broadcaster::relieve`), and the end of its slice.
/// The clock is read every few items only: on a virtual machine a read can cost a good part of a write.
struct Progress<'a, T> {
    lane: &'a Lane<T>,
    done: usize,
    slice_end: Instant,
}

impl<'a, T> Progress<'a, T> {
    const EVERY: usize = 8;

    fn new(lane: &'a Lane<T>) -> Self {
        Progress { lane, done: 0, slice_end: Instant::now() + BATCH_SLICE }
    }

    fn in_slice(&mut self) -> bool {
        if self.done < Self::EVERY {
            return true;
        }
        let now = Instant::now();
        self.report(now);
        now < self.slice_end
    }

    fn report(&mut self, now: Instant) {
        self.lane.done_at(self.done, now);
        self.done = 0;
    }
}

/// What one try of a write came to.
// Matched as soon as it is returned: boxing the answer would cost an allocation per answered write.
#[allow(clippy::large_enum_variant)]
enum WriteOutcome {
    /// Written; the sink's answer, if it gave one.
    Written(Option<Event>),
    Abandoned,
    Retry {
        delay_nanos: i64,
    },
}

/// The worker with the least to do: queued or in its hands, plus `added` (handed out and not queued yet).
fn least_loaded(workers: &[Arc<Lane<Job>>], added: &[usize]) -> usize {
    (0..workers.len()).min_by_key(|&i| workers[i].load() + added[i]).unwrap_or(0)
}

struct Writer {
    shared: Arc<BroadcasterState>,
    sink: Arc<dyn EventSink>,
    health: Arc<SinkHealth>,
    correlation: Mutex<SinkCorrelation>,
    sleeper: ClockSleeper,
    hasher: foldhash::fast::FixedState,
}

impl Writer {
    /// `EventCorrelate` for one event: the write to do, or None when the spam filter skips it.
    fn correlate(&self, c: &mut SinkCorrelation, mut shared_event: Arc<Event>) -> Option<Job> {
        let counters = &self.shared.counters;
        let event = Arc::make_mut(&mut shared_event);
        let result = c.correlator.correlate_in_place(event);
        let patch = match result {
            Ok(o) => {
                if o.aggregated {
                    counters.aggregated.fetch_add(1, Ordering::Relaxed);
                }
                if o.skip {
                    counters.skipped.fetch_add(1, Ordering::Relaxed);
                    self.shared.pipeline.in_flight.fetch_sub(1, Ordering::Relaxed);
                    return None;
                }
                if event.count > 1 {
                    counters.deduplicated.fetch_add(1, Ordering::Relaxed);
                }
                if o.patched {
                    c.correlator.patch().to_vec()
                } else {
                    Vec::new()
                }
            }
            Err(e) => {
                // As client-go: a correlation failure is reported and the event is written as it is.
                counters.correlation_errors.fetch_add(1, Ordering::Relaxed);
                self.shared.pipeline.reporter.error(&format!("event correlation failed: {e}"));
                Vec::new()
            }
        };
        Some(Job { event: shared_event, key: 0, worker: 0, patch, attempts: Default::default() })
    }

    /// Correlates a batch ahead of the writes (for the delivery workers); the events to write go to `jobs`,
    /// each counted as outstanding for its event and given the worker `choose` picks (from the worker of the
    /// event's earlier writes still under way, if any).
    fn correlate_batch(
        &self,
        batch: &mut Vec<Arc<Event>>,
        jobs: &mut VecDeque<Job>,
        choose: &mut dyn FnMut(Option<usize>) -> usize,
    ) {
        let mut c = lock(&self.correlation);
        for e in batch.drain(..) {
            let Some(mut job) = self.correlate(&mut c, e) else { continue };
            job.key = self.key(&job.event);
            job.worker = choose(c.outstanding.get(&job.key).map(|o| o.worker));
            c.outstanding.entry(job.key).or_insert(Outstanding { writes: 0, worker: job.worker }).writes += 1;
            jobs.push_back(job);
        }
    }

    fn key(&self, e: &Event) -> u64 {
        self.hasher.hash_one((&e.metadata.namespace, &e.metadata.name))
    }

    /// Ends a job; returns whether it was the last outstanding write of its event.
    fn finish(&self, c: &mut SinkCorrelation, key: u64) -> bool {
        match c.outstanding.get_mut(&key) {
            Some(o) if o.writes > 1 => {
                o.writes -= 1;
                false
            }
            _ => {
                c.outstanding.remove(&key);
                true
            }
        }
    }

    /// The sink watcher's thread with one writer: each batch is correlated and written in turn.
    fn run_alone(&self, lane: &EventLane) {
        let mut rng = SmallRng::from_os_rng();
        let mut batch = Vec::with_capacity(BATCH);
        let mut events = VecDeque::with_capacity(BATCH);
        while self.next_batch(lane, &mut batch) {
            self.took(batch.len());
            events.extend(batch.drain(..));
            self.write_in_turn(&mut events, lane, &mut rng);
        }
    }

    /// The sink watcher's thread with delivery workers: correlates each batch ahead of the writes and hands
    /// each write to its worker. Closes the workers' queues at the end.
    fn run_dispatcher(&self, lane: &EventLane, workers: &[Arc<Lane<Job>>]) {
        let mut batch = Vec::with_capacity(BATCH);
        let mut jobs = VecDeque::with_capacity(BATCH);
        while self.next_batch(lane, &mut batch) {
            let n = batch.len();
            self.took(n);
            // An event whose earlier writes are still under way goes to the same worker (its writes stay in
            // order); any other to the worker with the least to do, counting what this batch handed out.
            let mut added = vec![0; workers.len()];
            self.correlate_batch(&mut batch, &mut jobs, &mut |owner| {
                let w = owner.unwrap_or_else(|| least_loaded(workers, &added));
                added[w] += 1;
                w
            });
            for job in jobs.drain(..) {
                if !workers[job.worker].push(job, FullChannel::Wait) {
                    self.shared.pipeline.in_flight.fetch_sub(1, Ordering::Relaxed);
                }
            }
            lane.done(n);
        }
        for wl in workers {
            wl.close();
        }
    }

    /// Waits for the next batch of the sink watcher's queue; meanwhile sums up the sink's failures not told
    /// yet when their line is due (`SinkHealth::next_line_at`). False once the queue is closed and empty.
    fn next_batch(&self, lane: &EventLane, batch: &mut Vec<Arc<Event>>) -> bool {
        loop {
            let Some(at) = self.health.next_line_at() else { return lane.pop_batch(batch, BATCH) };
            let wait = until(self.sleeper.clock.as_ref(), at);
            match lane.pop_batch_until(batch, BATCH, wait, at) {
                Popped::Items => return true,
                Popped::Closed => return false,
                Popped::TimedOut => self.health.tick(&|| self.shared.pipeline.pending()),
            }
        }
    }

    /// A delivery worker's thread.
    fn run_worker(&self, lane: &Lane<Job>) {
        let mut rng = SmallRng::from_os_rng();
        let mut batch = Vec::with_capacity(BATCH);
        let mut jobs = VecDeque::new();
        while lane.pop_batch(&mut batch, BATCH) {
            jobs.extend(batch.drain(..));
            self.write_jobs(&mut jobs, lane, &mut rng);
        }
    }

    /// `n` events taken off the sink watcher's queue are now under way.
    fn took(&self, n: usize) {
        self.shared.pipeline.in_flight.fetch_add(n as i64, Ordering::Relaxed);
    }

    /// A write done or abandoned.
    fn finished(&self, progress: &mut Progress<'_, impl Sized>) {
        self.shared.pipeline.in_flight.fetch_sub(1, Ordering::Relaxed);
        progress.done += 1;
    }

    /// One writer, in client-go's order: each event is correlated just before its write, after the answer to
    /// the previous write updated the correlator, as client-go's single watcher goroutine does.
    fn write_in_turn(&self, events: &mut VecDeque<Arc<Event>>, lane: &EventLane, rng: &mut SmallRng) {
        // The event being written (retried), across sink batches.
        let mut current: Option<Job> = None;
        while current.is_some() || !events.is_empty() {
            let mut retry_in = None;
            let mut progress = Progress::new(lane);
            self.sink.batch(&mut || {
                while progress.in_slice() {
                    let mut job = match current.take() {
                        Some(job) => job,
                        None => {
                            let Some(e) = events.pop_front() else { return };
                            let Some(job) = self.correlate(&mut lock(&self.correlation), e) else {
                                // Skipped by the spam filter.
                                progress.done += 1;
                                continue;
                            };
                            job
                        }
                    };
                    match self.write(&mut job, rng) {
                        WriteOutcome::Written(answer) => {
                            lock(&self.correlation).correlator.update_state(answer.as_ref().unwrap_or(&job.event));
                        }
                        WriteOutcome::Abandoned => {}
                        WriteOutcome::Retry { delay_nanos } => {
                            retry_in = Some(delay_nanos);
                            current = Some(job);
                            return;
                        }
                    }
                    self.finished(&mut progress);
                }
            });
            progress.report(Instant::now());
            self.health.tick(&|| self.shared.pipeline.pending());
            if let Some(d) = retry_in {
                self.sleep_before_retry(lane, d);
            }
        }
    }

    /// A delivery worker's writes, correlated ahead by the dispatcher, in order. The answers update the
    /// correlator after each sink batch, outside it: a Python sink holds the GIL through its batch, while the
    /// dispatcher may hold the correlator and call a Python key function.
    fn write_jobs(&self, jobs: &mut VecDeque<Job>, lane: &Lane<Job>, rng: &mut SmallRng) {
        let mut answers: Vec<(u64, Option<Event>)> = Vec::new();
        while !jobs.is_empty() {
            let mut retry_in = None;
            let mut progress = Progress::new(lane);
            self.sink.batch(&mut || {
                while progress.in_slice() {
                    let Some(job) = jobs.front_mut() else { return };
                    let answer = match self.write(job, rng) {
                        WriteOutcome::Written(answer) => {
                            Some(answer.unwrap_or_else(|| std::mem::take(Arc::make_mut(&mut job.event))))
                        }
                        WriteOutcome::Abandoned => None,
                        WriteOutcome::Retry { delay_nanos } => {
                            retry_in = Some(delay_nanos);
                            return;
                        }
                    };
                    answers.push((job.key, answer));
                    jobs.pop_front();
                    self.finished(&mut progress);
                }
            });
            progress.report(Instant::now());
            for (key, answer) in answers.drain(..) {
                self.record_answer(key, answer.as_ref());
            }
            if let Some(d) = retry_in {
                self.sleep_before_retry(lane, d);
            }
        }
    }

    /// One try of a job's write, counted and told to the sink's health; a failure is abandoned or retried
    /// later.
    fn write(&self, job: &mut Job, rng: &mut SmallRng) -> WriteOutcome {
        let c = &self.shared.counters;
        let time = job.event.last_timestamp;
        let err = match record_event(&*self.sink, Arc::make_mut(&mut job.event), &job.patch, &c.writes) {
            Ok((answer, _)) => {
                self.health.succeeded(time, job.attempts.tries);
                return WriteOutcome::Written(answer);
            }
            Err(e) => e,
        };
        let policy = &self.shared.retry;
        let describe = || describe(&job.event);
        let pending = || self.shared.pipeline.pending();
        match job.attempts.after_failure(err.clone(), policy, self.sleeper.stop.is_stopped(), rng) {
            Next::Abandon(why) => {
                c.abandoned.fetch_add(1, Ordering::Relaxed);
                self.health.failed(&err, Step::GiveUp(&why), time, job.attempts.tries, &describe, &pending);
                WriteOutcome::Abandoned
            }
            Next::SleepThenRetry { delay_nanos } => {
                c.retries.fetch_add(1, Ordering::Relaxed);
                let left = policy.max_tries.saturating_sub(job.attempts.tries);
                let step = Step::Retry { in_nanos: delay_nanos, tries_left: Some(left) };
                self.health.failed(&err, step, time, job.attempts.tries, &describe, &pending);
                WriteOutcome::Retry { delay_nanos }
            }
        }
    }

    /// Sleeps on the clock until the next try, with the lane marked sleeping (for `is_idle`); shutdown cuts
    /// the sleep short, and the next try is then the last.
    fn sleep_before_retry<T>(&self, lane: &Lane<T>, delay_nanos: i64) {
        let Ok(now) = self.sleeper.clock.now() else { return };
        let until = Time(now.0.saturating_add(delay_nanos));
        lane.set_activity(Activity::Sleeping(until));
        self.sleeper.sleep_until(until);
        lane.set_activity(Activity::Running);
    }

    /// `UpdateState` with a write's answer (None: abandoned), unless a later write of the event is pending.
    fn record_answer(&self, key: u64, answer: Option<&Event>) {
        let mut guard = lock(&self.correlation);
        if self.finish(&mut guard, key) {
            if let Some(a) = answer {
                guard.correlator.update_state(a);
            }
        }
    }
}

/// How long a thread waiting for work may wait before `at` on `clock`: until then on the system clock (at most
/// a second, so that a clock stepped by the OS is noticed), a poll interval on a clock it cannot wait on.
pub(crate) fn until(clock: &dyn Clock, at: Time) -> Duration {
    const POLL: Duration = Duration::from_millis(20);
    match clock.now() {
        Ok(now) if clock.is_real() => Duration::from_nanos(at.since(now).max(0) as u64).min(Duration::from_secs(1)),
        _ => POLL,
    }
}

/// An event as the lines of a failing sink show it: the object, type, reason and message.
fn describe(e: &Event) -> String {
    let r = &e.involved_object;
    format!("{} {}: {} {}: {:?}", r.kind, r.kref(), e.type_, e.reason, e.message)
}

/// Go's `strconv.Quote`, as `%#v` prints strings.
pub(crate) fn go_quote(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The line client-go's `StartLogging` writes for an event.
pub fn log_line(e: &Event) -> String {
    let r = &e.involved_object;
    let mut s = String::with_capacity(160 + e.message.len());
    s.push_str("Event(v1.ObjectReference{");
    for (i, (k, v)) in [
        ("Kind", &r.kind),
        ("Namespace", &r.namespace),
        ("Name", &r.name),
        ("UID", &r.uid),
        ("APIVersion", &r.api_version),
        ("ResourceVersion", &r.resource_version),
        ("FieldPath", &r.field_path),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(k);
        s.push(':');
        go_quote(&mut s, v);
    }
    s.push_str("}): type: '");
    s.push_str(&e.type_);
    s.push_str("' reason: '");
    s.push_str(&e.reason);
    s.push_str("' ");
    s.push_str(&e.message);
    s
}

/// The message client-go's `StartStructuredLogging` writes for an event (klog's key/value form).
pub fn structured_line(e: &Event) -> String {
    let r = &e.involved_object;
    let pairs = [
        ("fieldPath", &r.field_path),
        ("kind", &r.kind),
        ("apiVersion", &r.api_version),
        ("type", &e.type_),
        ("reason", &e.reason),
        ("message", &e.message),
    ];
    klog_line("Event occurred", r, &pairs)
}

/// klog's `InfoS(message, "object", klog.KRef(namespace, name), key, value, ...)` line, every value quoted
/// as Go quotes it.
pub(crate) fn klog_line(message: &str, object: &ObjectReference, pairs: &[(&str, &String)]) -> String {
    let mut s = String::with_capacity(160 + pairs.iter().map(|(_, v)| v.len()).sum::<usize>());
    s.push_str(message);
    s.push_str(" object=");
    go_quote(&mut s, &object.kref());
    for (k, v) in pairs {
        s.push(' ');
        s.push_str(k);
        s.push('=');
        go_quote(&mut s, v);
    }
    s
}

#[cfg(test)]
mod tests;
