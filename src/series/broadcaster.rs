//! The events.k8s.io/v1 broadcaster (`tools/events` `eventBroadcasterImpl`): as in client-go it embeds the
//! watch mux (`crate::pipeline`, shared with core/v1), and `StartRecordingToSink` is a watcher whose thread
//! owns the series engine and the sink.
//!
//! Recorders make events on their own thread and hand them to the mux (dropped when full, never blocking).
//! The sink's thread takes them a batch at a time, decides and writes, and runs the rounds and retries when
//! they are due on the clock; it holds no lock while it calls the sink, and publishes its counters after
//! every write for `stats()`.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::engine::{EngineOptions, EngineStats, SeriesEngine};
use super::event::EventV1;
use super::make::{make_event_v1, EventV1Call};
use super::record::SinkV1;
use crate::broadcaster::BATCH_SLICE;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::event::UuidSource;
use crate::health::{Reporter, SinkHealth};
use crate::pipeline::{Pipeline, PipelineOptions, PipelineStats, SinksHealth, Watcher, BATCH};
use crate::sink::WriteStats;
use crate::sync::lock;
use crate::time::Time;
use crate::watch::{Lane, Popped};

/// client-go's `maxQueuedEvents`: the mux's incoming queue and each watcher's hold this many events.
pub const MAX_QUEUED_EVENTS: usize = 1000;

/// What the sink's thread needs from the program it runs in (the Python binding: the GIL).
pub trait Host: Send + 'static {
    /// Runs `f` holding what the sink's calls and the text of user code's errors need, taken once for many
    /// calls rather than once per call (taking the GIL from a busy Python thread can cost a switch interval).
    fn attached(&self, f: &mut dyn FnMut());
}

/// Why `start_recording_to_sink` refused.
#[derive(Debug)]
pub enum StartError {
    ShutDown,
    Started,
    Spawn(Error),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::ShutDown => f.write_str("the broadcaster is shut down"),
            StartError::Started => f.write_str("the broadcaster is already recording to a sink"),
            StartError::Spawn(e) => write!(f, "{e}"),
        }
    }
}

impl From<StartError> for Error {
    fn from(e: StartError) -> Error {
        match e {
            StartError::Spawn(e) => e,
            e => Error::State(e.to_string()),
        }
    }
}

/// The broadcaster's settings.
#[derive(Clone)]
pub struct EventsOptions {
    pub pipeline: PipelineOptions,
    pub engine: EngineOptions,
}

/// Counters, in the order `EventsBroadcaster.stats()` lists them: the pipeline's and the sink calls' as
/// core/v1's, then the series engine's as of its last write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EventsBroadcasterStats {
    #[serde(flatten)]
    pub pipeline: PipelineStats,
    /// Sink calls that succeeded, and that failed, by verb (a patch that finds nothing and its create are
    /// two calls).
    #[serde(flatten)]
    pub writes: WriteStats,
    pub handler_errors: u64,
    pub recorder_waits: u64,
    /// Events queued, decided and not written yet, or waiting for a retry.
    pub pending: u64,
    #[serde(flatten)]
    pub engine: EngineStats,
    pub truncated_notes: u64,
    /// A clock that failed on the sink's thread, as text.
    pub last_error: Option<String>,
    pub sinks: SinksHealth,
}

/// What the sink's thread publishes for `stats()`.
#[derive(Default)]
struct Published {
    engine: EngineStats,
    /// Writes decided and not made yet.
    in_hand: u64,
    last_error: Option<String>,
}

struct Shared {
    pipeline: Arc<Pipeline<EventV1, Arc<EventV1>>>,
    published: Mutex<Published>,
    /// The sink's thread, once started.
    worker: OnceLock<ThreadId>,
    truncated: AtomicU64,
}

/// The events.k8s.io/v1 broadcaster.
pub struct EventsBroadcaster {
    shared: Arc<Shared>,
    /// The series engine until `start_recording_to_sink` hands it to the sink's thread.
    unstarted: Mutex<Option<SeriesEngine>>,
    started: Mutex<bool>,
}

impl EventsBroadcaster {
    pub fn new(options: EventsOptions, reporter: Arc<dyn Reporter>) -> Result<Self> {
        let engine = SeriesEngine::new(options.pipeline.clock.clone(), options.engine)?;
        let pipeline = Pipeline::new(options.pipeline, reporter, Arc::new)?;
        Ok(EventsBroadcaster {
            shared: Arc::new(Shared {
                pipeline,
                published: Mutex::new(Published::default()),
                worker: OnceLock::new(),
                truncated: AtomicU64::new(0),
            }),
            unstarted: Mutex::new(Some(engine)),
            started: Mutex::new(false),
        })
    }

    pub fn pipeline(&self) -> &Arc<Pipeline<EventV1, Arc<EventV1>>> {
        &self.shared.pipeline
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        self.shared.pipeline.clock()
    }

    /// Makes the event of one occurrence reported by `controller` and `instance` at the clock's present, shows
    /// it to `seen`, and hands it to the mux (dropped when its queue is full or the broadcaster shut down,
    /// counted either way). Returns what `seen` returned, and whether some watcher is behind (the caller may
    /// then `relieve`).
    pub fn record<R>(
        &self,
        call: EventV1Call,
        controller: &str,
        instance: &str,
        seen: impl FnOnce(&EventV1) -> R,
    ) -> Result<(R, bool)> {
        let p = &self.shared.pipeline;
        let now = p.clock().now()?;
        let (event, truncated) = make_event_v1(call, controller, instance, now, &mut UuidSource::Random);
        if truncated {
            self.shared.truncated.fetch_add(1, Ordering::Relaxed);
        }
        let out = seen(&event);
        let queued = p.record_or_warn(event);
        Ok((out, queued && p.should_catch_up()))
    }

    /// Why `start_recording_to_sink` would refuse now, if it would.
    pub fn can_start(&self) -> Result<(), StartError> {
        self.startable(*lock(&self.started))
    }

    fn startable(&self, started: bool) -> Result<(), StartError> {
        if self.shared.pipeline.is_shutting_down() {
            Err(StartError::ShutDown)
        } else if started {
            Err(StartError::Started)
        } else {
            Ok(())
        }
    }

    /// `StartEventWatcher`: `handler` gets the events in order, a batch at a time, on a thread of its own.
    pub fn start_event_watcher(
        &self,
        kind: &str,
        handler: impl FnMut(&[Arc<EventV1>]) + Send + 'static,
    ) -> Result<Watcher<EventV1, Arc<EventV1>>> {
        self.shared.pipeline.start_event_watcher(kind, handler)
    }

    /// `StartRecordingToSink`: a watcher whose thread runs the series engine against `sink` (`describe`
    /// names its class in the lines of its health); `host` gives it what the sink's calls need. Once only.
    pub fn start_recording_to_sink<S: SinkV1 + Send + 'static>(
        &self,
        sink: S,
        describe: String,
        host: impl Host,
    ) -> Result<Watcher<EventV1, Arc<EventV1>>> {
        let mut started = lock(&self.started);
        self.startable(*started)?;
        let p = &self.shared.pipeline;
        let lane = p.watch("sink")?;
        let health = p.sink_health(&lane, describe);
        let Some(mut engine) = lock(&self.unstarted).take() else { return Err(StartError::ShutDown.into()) };
        let weak = Arc::downgrade(&self.shared);
        engine.set_health(health.clone(), Box::new(move || weak.upgrade().map_or(0, |s| s.pending())));
        let shared = self.shared.clone();
        let l = lane.clone();
        let watcher = p.watcher(&lane);
        let spawned = p.spawn(&lane.name, move || {
            let _ = shared.worker.set(std::thread::current().id());
            shared.run(&l, engine, sink, &health, &host);
        });
        if let Err(e) = spawned {
            watcher.stop();
            return Err(e);
        }
        *started = true;
        Ok(watcher)
    }

    /// Refuses a call that waits for the sink's thread (`what`) on that very thread, from the sink: it would
    /// never end.
    pub fn refuse_on_worker(&self, what: &str) -> Result<()> {
        if self.shared.worker.get() == Some(&std::thread::current().id()) {
            return Err(Error::State(format!("{what} called from the sink, on the broadcaster's thread")));
        }
        Ok(())
    }

    /// Stops taking events: the watchers get what is queued, the sink's thread writes what it holds, gives
    /// each pending retry one last attempt and every live series its final count, and ends. Never waits.
    pub fn begin_shutdown(&self) {
        self.shared.pipeline.begin_shutdown();
        // An engine never started is released here.
        drop(lock(&self.unstarted).take());
    }

    /// Nothing can happen any more without the clock moving: the queues are empty and the sink's thread
    /// waits for a later instant (a round or a retry).
    pub fn wait_idle(&self, slice: Duration) -> bool {
        self.shared.pipeline.wait_idle(Some(slice))
    }

    /// Waits up to `slice` for every thread to end after `begin_shutdown`; returns whether they have.
    pub fn wait_shut_down(&self, slice: Duration) -> bool {
        self.shared.pipeline.wait_shut_down(Some(slice))
    }

    /// For the exit hook: `begin_shutdown`, waiting up to `wait`; returns the events not written and the
    /// events the sink gave up meanwhile.
    pub fn exit_flush(&self, wait: Duration) -> (u64, u64) {
        let before = self.stats().writes.abandoned;
        self.begin_shutdown();
        self.wait_shut_down(wait);
        (self.shared.pending(), self.stats().writes.abandoned - before)
    }

    /// Never waits for the sink's thread: its counters are as of its last write.
    pub fn stats(&self) -> EventsBroadcasterStats {
        let s = &self.shared;
        let p = &s.pipeline;
        let published = lock(&s.published);
        let e = published.engine;
        EventsBroadcasterStats {
            pipeline: p.stats(),
            writes: e.writes,
            handler_errors: p.handler_errors(),
            recorder_waits: p.recorder_waits(),
            pending: p.pending() + published.in_hand + e.pending_retries,
            engine: e,
            truncated_notes: s.truncated.load(Ordering::Relaxed),
            last_error: published.last_error.clone(),
            sinks: p.sinks(),
        }
    }
}

impl Drop for EventsBroadcaster {
    fn drop(&mut self) {
        // Nobody can record any more: the threads deliver what is queued and end.
        self.begin_shutdown();
    }
}

/// The text of an error, with what user code's errors need (a Python error's text needs the GIL).
fn describe(host: &dyn Host, e: &Error) -> String {
    let mut text = String::new();
    host.attached(&mut || text = e.to_string());
    text
}

impl Shared {
    fn pending(&self) -> u64 {
        let published = lock(&self.published);
        self.pipeline.pending() + published.in_hand + published.engine.pending_retries
    }

    fn note_error(&self, host: &dyn Host, e: &Error) {
        let text = describe(host, e);
        lock(&self.published).last_error = Some(text);
    }

    fn publish(&self, engine: &SeriesEngine, in_hand: usize) {
        let mut p = lock(&self.published);
        p.engine = engine.stats();
        p.in_hand = in_hand as u64;
    }

    /// Makes the writes `decide` asked for, in slices attached once each: as core/v1's sinks, a slice lasts
    /// `BATCH_SLICE` at most, short enough not to starve a Python thread of the GIL and long enough that the
    /// hand-offs of the GIL do not cost more than the writes.
    fn write(&self, engine: &mut SeriesEngine, sink: &mut dyn SinkV1, host: &dyn Host, writes: &mut Vec<Arc<EventV1>>) {
        self.write_in_slices(engine, sink, host, writes, BATCH_SLICE)
    }

    fn write_in_slices(
        &self,
        engine: &mut SeriesEngine,
        sink: &mut dyn SinkV1,
        host: &dyn Host,
        writes: &mut Vec<Arc<EventV1>>,
        slice: Duration,
    ) {
        let mut writes = writes.drain(..);
        while writes.len() > 0 {
            host.attached(&mut || {
                let end = Instant::now().checked_add(slice);
                while let Some(event) = writes.next() {
                    if let Err(e) = engine.write(event, sink) {
                        self.note_error(host, &e);
                    }
                    self.publish(engine, writes.len());
                    if end.is_some_and(|end| Instant::now() >= end) {
                        break;
                    }
                }
            });
        }
    }

    /// The rounds and retries due by `at`, after the writes asked for so far.
    fn run_due_at(
        &self,
        at: Time,
        engine: &mut SeriesEngine,
        sink: &mut dyn SinkV1,
        host: &dyn Host,
        writes: &mut Vec<Arc<EventV1>>,
    ) {
        if engine.next_due() > at {
            return;
        }
        self.write(engine, sink, host, writes);
        host.attached(&mut || {
            if let Err(e) = engine.run_due_at(at, sink) {
                self.note_error(host, &e);
            }
        });
    }

    /// How long to wait for events before something is due (a round, a retry, a line of the sink's health),
    /// and when it is due; `None` when it is due now.
    fn until_due(&self, engine: &SeriesEngine, health: &SinkHealth, host: &dyn Host) -> Option<(Duration, Time)> {
        let due = health.next_line_at().map_or(engine.next_due(), |at| at.min(engine.next_due()));
        let now = match engine.clock().now() {
            Ok(now) => now,
            Err(e) => {
                self.note_error(host, &e);
                return Some((Duration::from_millis(20), due));
            }
        };
        if due <= now {
            return None;
        }
        Some((crate::broadcaster::until(engine.clock().as_ref(), due), due))
    }

    /// The sink's thread. It owns the engine: no lock is held while it calls the sink.
    fn run<S: SinkV1>(
        &self,
        lane: &Lane<Arc<EventV1>>,
        mut engine: SeriesEngine,
        mut sink: S,
        health: &SinkHealth,
        host: &dyn Host,
    ) {
        let mut batch = Vec::with_capacity(BATCH);
        let mut writes = Vec::new();
        loop {
            health.tick(&|| self.pending());
            let popped = match self.until_due(&engine, health, host) {
                Some((wait, due)) => lane.pop_batch_until(&mut batch, BATCH, wait, due),
                None => {
                    // Due now: but whatever was recorded before this clock reading goes first (its rounds are
                    // those due by its own time), from the mux and from this queue.
                    let Ok(now) = engine.clock().now() else { continue };
                    let distributed = self.pipeline.distributed();
                    match lane.pop_batch_until(&mut batch, BATCH, Duration::ZERO, now) {
                        Popped::TimedOut if distributed => {
                            self.run_due_at(now, &mut engine, &mut sink, host, &mut writes);
                            self.publish(&engine, 0);
                            continue;
                        }
                        Popped::TimedOut => {
                            std::thread::yield_now();
                            continue;
                        }
                        other => other,
                    }
                }
            };
            match popped {
                Popped::TimedOut => continue,
                Popped::Closed => break,
                Popped::Items => {}
            }
            // Each occurrence comes after the rounds due by the time it happened and before those due later,
            // whatever this thread's timing: a clock stepped past a round right after a recorder call still
            // finds that call's event counted. Deciding needs no host; the writes are made in chunks.
            let n = batch.len();
            for event in batch.drain(..) {
                if let Some(t) = event.event_time {
                    self.run_due_at(t, &mut engine, &mut sink, host, &mut writes);
                }
                if let Err(e) = engine.decide(event, &mut writes) {
                    self.note_error(host, &e);
                }
            }
            self.publish(&engine, writes.len());
            self.write(&mut engine, &mut sink, host, &mut writes);
            self.publish(&engine, 0);
            lane.done(n);
        }
        // Everything queued before the shutdown was taken: the last attempts and the final counts.
        host.attached(&mut || {
            engine.shutdown(&mut sink);
        });
        self.publish(&engine, 0);
        // Attached: the sink may hold user objects, and so may the engine's clock.
        let mut parts = Some((sink, engine));
        host.attached(&mut || drop(parts.take()));
    }
}

/// The message client-go's `StartStructuredLogging` writes for an events.k8s.io/v1 event (klog's key/value
/// form).
pub fn structured_line(e: &EventV1) -> String {
    let r = &e.regarding;
    let pairs = [
        ("kind", &r.kind),
        ("apiVersion", &r.api_version),
        ("type", &e.type_),
        ("reason", &e.reason),
        ("action", &e.action),
        ("note", &e.note),
    ];
    crate::broadcaster::klog_line("Event occurred", r, &pairs)
}

#[cfg(test)]
mod tests;
