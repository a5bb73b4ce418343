//! The events.k8s.io/v1 broadcaster (`tools/events` `eventBroadcasterImpl` with `StartRecordingToSink`):
//! the series engine on a thread of its own.
//!
//! Callers make events on their own thread and hand them over through a bounded queue (full: dropped,
//! never blocking). The engine thread owns the series engine and the sink, and holds no lock while it calls
//! the sink: it publishes its counters after every write for `stats()`, and `wait_idle`/`wait_finished` wait
//! on a condition, a slice at a time, any number of callers at once.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use serde::Serialize;

use super::engine::{EngineStats, SeriesEngine};
use super::event::EventV1;
use super::make::{make_event_v1, EventV1Input};
use super::record::SinkV1;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::event::UuidSource;
use crate::sync::lock;
use crate::time::Time;

/// client-go's `maxQueuedEvents`: events waiting for the engine thread beyond this are dropped.
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// The engine thread waits up to `LINGER` for more events when it has fewer than `LINGER_BATCH`.
const LINGER: Duration = Duration::from_micros(200);
const LINGER_BATCH: usize = 64;
/// Writes made per `Host::attached` on the engine thread.
const ATTACHED_CHUNK: usize = 64;
/// How often the engine thread looks at a clock it cannot wait on (a fake or user clock): reading a Python
/// clock takes the GIL, so not as often as `VIRTUAL_CLOCK_POLL`.
const POLL: Duration = Duration::from_millis(20);
/// The longest wait on the system clock, so that a clock stepped by the OS is noticed.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// What the engine thread needs from the program it runs in (the Python binding: the GIL).
pub trait Host: Send + 'static {
    /// Runs `f` holding what the sink's calls and the text of user code's errors need, taken once for many
    /// calls rather than once per call (taking the GIL from a busy Python thread can cost a switch interval).
    fn attached(&self, f: &mut dyn FnMut());
}

/// Why `start` refused.
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
            StartError::Started => f.write_str("the broadcaster is already recording to its sink"),
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

/// Counters: the engine's as of its last write, and the queue's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EventsBroadcasterStats {
    #[serde(flatten)]
    pub engine: EngineStats,
    /// Every `record` call.
    pub received: u64,
    pub queued: u64,
    /// Events dropped: the queue was full, or (`dropped_after_shutdown`, a part of `dropped`) the broadcaster
    /// was stopping.
    pub dropped: u64,
    pub dropped_after_shutdown: u64,
    pub truncated_notes: u64,
    /// A clock that failed on the engine thread, as text.
    pub last_error: Option<String>,
}

#[derive(Default)]
struct EngineState {
    queue: VecDeque<EventV1>,
    started: bool,
    stopping: bool,
    /// The engine thread has ended (or was never started and never will be).
    finished: bool,
    /// The engine thread ended with a panic.
    failed: bool,
    /// `kick` calls so far, and the last one the engine thread answered with an idle pass.
    kicks: u64,
    idle_for: u64,
    received: u64,
    dropped: u64,
    dropped_after_shutdown: u64,
    truncated: u64,
    last_error: Option<String>,
    /// Published by the engine thread, so that `stats()` never waits for a sink call to end.
    engine: EngineStats,
    /// Events or writes the engine thread has taken from the queue and not made yet.
    in_hand: u64,
}

struct Shared {
    state: Mutex<EngineState>,
    wake: Condvar,
    idle: Condvar,
    worker: OnceLock<ThreadId>,
}

/// Marks the engine thread finished when it ends, a panic included, and wakes whoever waits for that.
struct Finish<'a>(&'a Shared);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state();
        st.finished = true;
        st.failed = std::thread::panicking();
        st.idle_for = st.kicks;
        self.0.idle.notify_all();
    }
}

/// The events.k8s.io/v1 broadcaster: a queue in front of a `SeriesEngine` run by a thread of its own.
pub struct EventsBroadcaster {
    shared: Arc<Shared>,
    /// The engine's clock, read here too so that making an event never waits for a sink call.
    clock: Arc<dyn Clock>,
    /// The series engine until `start` hands it to the engine thread.
    unstarted: Mutex<Option<SeriesEngine>>,
}

impl EventsBroadcaster {
    pub fn new(engine: SeriesEngine) -> Self {
        EventsBroadcaster {
            shared: Arc::new(Shared {
                state: Mutex::new(EngineState::default()),
                wake: Condvar::new(),
                idle: Condvar::new(),
                worker: OnceLock::new(),
            }),
            clock: engine.clock().clone(),
            unstarted: Mutex::new(Some(engine)),
        }
    }

    /// Makes the event of one occurrence at the clock's present, shows it to `seen`, and queues it if
    /// recording (dropped when the queue is full or the broadcaster stopping). Returns what `seen` returned,
    /// and whether the engine thread is behind (half a queue to catch up on), when the caller should let it
    /// run.
    pub fn record<R>(&self, input: &EventV1Input<'_>, seen: impl FnOnce(&EventV1) -> R) -> Result<(R, bool)> {
        let now = self.clock.now()?;
        let (event, truncated) = make_event_v1(input, now, &mut UuidSource::Random);
        let out = seen(&event);
        let mut st = self.shared.state();
        st.truncated += u64::from(truncated);
        st.received += 1;
        if st.started && !st.stopping {
            if st.queue.len() >= MAX_QUEUED_EVENTS {
                st.dropped += 1;
            } else {
                // The engine thread takes the whole queue at once, so only the first event needs to wake it.
                if st.queue.is_empty() {
                    self.shared.wake.notify_one();
                }
                st.queue.push_back(event);
            }
        } else if st.stopping {
            st.dropped += 1;
            st.dropped_after_shutdown += 1;
        }
        Ok((out, st.queue.len() >= MAX_QUEUED_EVENTS / 2))
    }

    /// Why `start` would refuse now, if it would.
    pub fn can_start(&self) -> Result<(), StartError> {
        Self::startable(&self.shared.state())
    }

    fn startable(st: &EngineState) -> Result<(), StartError> {
        if st.stopping {
            Err(StartError::ShutDown)
        } else if st.started {
            Err(StartError::Started)
        } else {
            Ok(())
        }
    }

    /// Starts the engine thread, writing to `sink`; `host` gives it what the sink's calls need.
    pub fn start<S: SinkV1 + Send + 'static>(&self, sink: S, host: impl Host) -> Result<(), StartError> {
        let mut st = self.shared.state();
        Self::startable(&st)?;
        let engine = lock(&self.unstarted).take().ok_or(StartError::ShutDown)?;
        let shared = self.shared.clone();
        let spawned = crate::threads::spawn("events-v1", move || {
            let _ = shared.worker.set(std::thread::current().id());
            let _finish = Finish(&shared);
            shared.run(engine, sink, &host);
        });
        if let Err(e) = spawned {
            // The sink and the engine went with the thread that did not start.
            st.stopping = true;
            st.finished = true;
            return Err(StartError::Spawn(e));
        }
        st.started = true;
        Ok(())
    }

    /// Refuses a call that waits for the engine thread (`what`) on the engine thread, from the sink: it would
    /// never end.
    pub fn refuse_on_worker(&self, what: &str) -> Result<()> {
        if self.shared.worker.get() == Some(&std::thread::current().id()) {
            return Err(Error::State(format!("{what} called from the sink, on the engine thread")));
        }
        Ok(())
    }

    /// Stops taking events; the engine thread writes what it holds, and ends. Never waits.
    pub fn begin_stop(&self) {
        {
            let mut st = self.shared.state();
            st.stopping = true;
            if !st.started {
                st.finished = true;
            }
            self.shared.wake.notify_all();
        }
        // An engine never started is released here.
        drop(lock(&self.unstarted).take());
    }

    /// Inherited through a fork: the engine thread stayed in the parent, maybe holding the state's lock, and
    /// what it guards may be half changed; the state is never touched, nor freed, again.
    pub fn abandon(&self) {
        std::mem::forget(self.shared.clone());
    }

    /// Asks the engine thread for an idle pass: handle every queued event and everything due at the clock's
    /// present. Returns the ticket to pass to `wait_idle`, or None when no thread runs (idle already).
    pub fn kick(&self) -> Option<u64> {
        let mut st = self.shared.state();
        if st.started && !st.finished {
            st.kicks += 1;
            self.shared.wake.notify_all();
            Some(st.kicks)
        } else {
            None
        }
    }

    /// Waits up to `slice` for the idle pass `kick` asked for; returns whether it came.
    pub fn wait_idle(&self, kick: u64, slice: Duration) -> bool {
        self.shared.wait_while(slice, |st| st.idle_for < kick)
    }

    /// Waits up to `slice` for the engine thread to end; returns whether it has.
    pub fn wait_finished(&self, slice: Duration) -> bool {
        self.shared.wait_while(slice, |st| !st.finished)
    }

    /// An error if the engine thread ended with a panic.
    pub fn check_failed(&self) -> Result<()> {
        if self.shared.state().failed {
            return Err(Error::State("the engine thread failed".into()));
        }
        Ok(())
    }

    /// Events or writes not made yet: queued, under way, waiting for a retry.
    pub fn undelivered(&self) -> u64 {
        let st = self.shared.state();
        st.queue.len() as u64 + st.in_hand + st.engine.pending_retries
    }

    /// For the exit hook: `begin_stop`, waiting up to `wait` for the engine thread; returns `undelivered()`.
    pub fn exit_flush(&self, wait: Duration) -> u64 {
        self.begin_stop();
        self.wait_finished(wait);
        self.undelivered()
    }

    /// Never waits for the engine thread: its counters are as of its last write.
    pub fn stats(&self) -> EventsBroadcasterStats {
        let st = self.shared.state();
        EventsBroadcasterStats {
            engine: st.engine,
            received: st.received,
            queued: st.queue.len() as u64,
            dropped: st.dropped,
            dropped_after_shutdown: st.dropped_after_shutdown,
            truncated_notes: st.truncated,
            last_error: st.last_error.clone(),
        }
    }
}

/// The text of an error, with what user code's errors need (a Python error's text needs the GIL).
fn describe(host: &dyn Host, e: &Error) -> String {
    let mut text = String::new();
    host.attached(&mut || text = e.to_string());
    text
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, EngineState> {
        lock(&self.state)
    }

    /// Waits on `idle` for at most `timeout` while `pending` holds; returns whether it stopped holding.
    fn wait_while(&self, timeout: Duration, pending: impl FnMut(&mut EngineState) -> bool) -> bool {
        !self.idle.wait_timeout_while(self.state(), timeout, pending).unwrap_or_else(|p| p.into_inner()).1.timed_out()
    }

    fn note_error(&self, host: &dyn Host, e: &Error) {
        let text = describe(host, e);
        self.state().last_error = Some(text);
    }

    fn publish(&self, engine: &SeriesEngine, in_hand: usize) {
        let mut st = self.state();
        st.engine = engine.stats();
        st.in_hand = in_hand as u64;
    }

    /// Waits for events, a `kick`, shutdown or the next due instant, then takes the queue: returns it, the
    /// kick it answers, whether the engine is stopping, and the clock's reading taken just before the queue
    /// was (whatever was recorded before the clock read that is in the batch).
    fn next_batch(&self, engine: &SeriesEngine, host: &dyn Host) -> (VecDeque<EventV1>, u64, bool, Option<Time>) {
        let wanted = |st: &EngineState| !st.queue.is_empty() || st.stopping || st.kicks > st.idle_for;
        let mut st = loop {
            // Read without the state lock: a Python clock takes the GIL, which a recorder call holding the
            // lock has.
            let due = until_due(engine).map_err(|e| describe(host, &e));
            let mut st = self.state();
            if wanted(&st) {
                break st;
            }
            let wait = match due {
                Ok(None) => break st,
                Ok(Some(d)) => d,
                Err(e) => {
                    st.last_error = Some(e);
                    POLL
                }
            };
            let st = self.wake.wait_timeout(st, wait).unwrap_or_else(|p| p.into_inner()).0;
            if wanted(&st) {
                break st;
            }
        };
        // Woken by a few events with nobody waiting on this thread: linger once for a fuller batch, rather
        // than wake for every event (recorder calls only wake it for the first).
        if st.queue.len() < LINGER_BATCH && !st.stopping && st.kicks <= st.idle_for {
            st = self.wake.wait_timeout(st, LINGER).unwrap_or_else(|p| p.into_inner()).0;
        }
        // The clock without the state lock (a Python clock takes the GIL), then the queue.
        drop(st);
        let now = engine.clock().now().map_err(|e| self.note_error(host, &e)).ok();
        let mut st = self.state();
        st.in_hand = st.queue.len() as u64;
        (std::mem::take(&mut st.queue), st.kicks, st.stopping, now)
    }

    /// Makes the writes `decide` asked for, in chunks attached once each, short enough not to starve a
    /// Python thread of the GIL.
    fn write(&self, engine: &mut SeriesEngine, sink: &mut dyn SinkV1, host: &dyn Host, writes: &mut Vec<EventV1>) {
        let mut writes = writes.drain(..);
        while writes.len() > 0 {
            host.attached(&mut || {
                for _ in 0..ATTACHED_CHUNK {
                    let Some(event) = writes.next() else { break };
                    if let Err(e) = engine.write(event, sink) {
                        self.note_error(host, &e);
                    }
                    self.publish(engine, writes.len());
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
        writes: &mut Vec<EventV1>,
    ) {
        if engine.next_due() > at {
            return;
        }
        self.write(engine, sink, host, writes);
        if let Err(e) = engine.run_due_at(at, sink) {
            self.note_error(host, &e);
        }
    }

    /// The engine thread. It owns the engine: no lock is held while it calls the sink.
    fn run<S: SinkV1>(&self, mut engine: SeriesEngine, mut sink: S, host: &dyn Host) {
        loop {
            let (batch, kick, stopping, now) = self.next_batch(&engine, host);
            // Each occurrence comes after the rounds due by the time it happened and before those due later,
            // whatever this thread's timing: the rounds at start run before any event is cached, and a clock
            // stepped past a round right after a recorder call still finds that call's event counted. Deciding
            // needs no host; the writes are made in chunks (`write`).
            let mut writes = Vec::new();
            for event in batch {
                if let Some(t) = event.event_time {
                    self.run_due_at(t, &mut engine, &mut sink, host, &mut writes);
                }
                match engine.decide(event) {
                    Ok(w) => writes.extend(w),
                    Err(e) => self.note_error(host, &e),
                }
            }
            self.publish(&engine, writes.len());
            self.write(&mut engine, &mut sink, host, &mut writes);
            if let Some(now) = now {
                self.run_due_at(now, &mut engine, &mut sink, host, &mut writes);
            }
            self.publish(&engine, 0);
            if stopping {
                // Nothing was queued after the last batch: recorder calls drop events once stopping is set.
                engine.shutdown(&mut sink);
                self.publish(&engine, 0);
                break;
            }
            let mut st = self.state();
            if st.queue.is_empty() {
                st.idle_for = st.idle_for.max(kick);
                self.idle.notify_all();
            }
        }
        // Attached: the sink may hold user objects, and so may the engine's clock.
        let mut parts = Some((sink, engine));
        host.attached(&mut || drop(parts.take()));
    }
}

/// How long until something is due: `None` if it is due now.
fn until_due(engine: &SeriesEngine) -> Result<Option<Duration>> {
    let due = engine.next_due();
    let now = engine.clock().now()?;
    if due <= now {
        return Ok(None);
    }
    if engine.clock().is_real() {
        Ok(Some(Duration::from_nanos(due.since(now) as u64).min(MAX_WAIT)))
    } else {
        Ok(Some(POLL))
    }
}

#[cfg(test)]
mod tests;
