//! `kubevents._native.EventsV1Engine`: the events.k8s.io/v1 recording engine on a thread of its own.
//!
//! Callers make events on their own thread and hand them over through a bounded queue (full: dropped,
//! never blocking). The engine thread owns the series engine and the Python sink; it takes the GIL only to
//! call the sink and to read a Python clock, always through the exit gate (`lifecycle`), and waits without
//! it. It holds no lock while it calls the sink: it publishes its counters after every write for `stats()`,
//! and `shutdown()`/`wait_idle()` wait on a condition, interruptibly, any number of callers at once.

use crate::sync::lock;
use std::collections::{BTreeMap, VecDeque};
use std::num::NonZeroUsize;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::clock::{clock_arg, timeout_arg, to_duration};
use super::convert::{meta_to_py, reference_to_py, series_to_py, set_str, source_to_py, time_str, type_name};
use super::errors::{int_arg, int_opt};
use super::gil::GilTurns;
use super::lifecycle;
use super::reference::reference_of;
use super::sink::{Failures, PySink};
use crate::clock::Clock;
use crate::error::Error;
use crate::event::ObjectReference;
use crate::recorder::UuidSource;
use crate::series::{
    make_event_v1, EngineOptions, EngineStats, EventV1, EventV1Input, SeriesEngine, SinkError, SinkV1,
    DEFAULT_CACHE_SIZE, MAX_TRIES_PER_EVENT,
};
use crate::sink::{Verdict, WriteError};

// The constructor's signature spells these defaults as literals, so that the stubs can show them.
const _: () = assert!(MAX_TRIES_PER_EVENT == 12 && DEFAULT_CACHE_SIZE == 4096);
use crate::time::Time;

/// client-go's `maxQueuedEvents`: events waiting for the engine thread beyond this are dropped.
const MAX_QUEUED_EVENTS: usize = 1000;
/// The engine thread waits up to `LINGER` for more events when it has fewer than `LINGER_BATCH`.
const LINGER: Duration = Duration::from_micros(200);
const LINGER_BATCH: usize = 64;
/// Writes made per GIL acquisition on the engine thread.
const GIL_CHUNK: usize = 64;
/// How often the engine thread looks at a clock it cannot wait on (a fake or user clock).
const POLL: Duration = Duration::from_millis(20);

/// An events.k8s.io/v1 Event as a dict of its JSON shape, key for key as `EventV1` serializes (by hand:
/// every write crosses here, and a JSON round trip costs several microseconds).
pub fn event_v1_to_py<'py>(py: Python<'py>, e: &EventV1) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    set_str(&d, intern!(py, "apiVersion"), &e.api_version)?;
    set_str(&d, intern!(py, "kind"), &e.kind)?;
    d.set_item(intern!(py, "metadata"), meta_to_py(py, &e.metadata)?)?;
    d.set_item(intern!(py, "eventTime"), time_str(e.event_time, true))?;
    if let Some(s) = &e.series {
        d.set_item(intern!(py, "series"), series_to_py(py, s)?)?;
    }
    set_str(&d, intern!(py, "reportingController"), &e.reporting_controller)?;
    set_str(&d, intern!(py, "reportingInstance"), &e.reporting_instance)?;
    set_str(&d, intern!(py, "action"), &e.action)?;
    set_str(&d, intern!(py, "reason"), &e.reason)?;
    d.set_item(intern!(py, "regarding"), reference_to_py(py, &e.regarding)?)?;
    if let Some(r) = &e.related {
        d.set_item(intern!(py, "related"), reference_to_py(py, r)?)?;
    }
    set_str(&d, intern!(py, "note"), &e.note)?;
    set_str(&d, intern!(py, "type"), &e.type_)?;
    if !e.deprecated_source.component.is_empty() || !e.deprecated_source.host.is_empty() {
        d.set_item(intern!(py, "deprecatedSource"), source_to_py(py, &e.deprecated_source)?)?;
    }
    if let Some(t) = e.deprecated_first_timestamp {
        d.set_item(intern!(py, "deprecatedFirstTimestamp"), t.to_rfc3339())?;
    }
    if let Some(t) = e.deprecated_last_timestamp {
        d.set_item(intern!(py, "deprecatedLastTimestamp"), t.to_rfc3339())?;
    }
    if e.deprecated_count != 0 {
        d.set_item(intern!(py, "deprecatedCount"), e.deprecated_count)?;
    }
    Ok(d.into_any())
}

/// A dict of the events.k8s.io/v1 Event JSON shape.
pub fn event_v1_from_py(v: &Bound<'_, PyAny>, what: &str) -> PyResult<EventV1> {
    if !v.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(format!("{what}: expected a dict, got {}", type_name(v))));
    }
    let text: String = v.py().import("json")?.call_method1("dumps", (v,))?.extract()?;
    serde_json::from_str(&text)
        .map_err(|e| PyValueError::new_err(format!("{what}: not an events.k8s.io/v1 Event: {e}")))
}

/// A Python sink (`create(event)`, `patch(event, patch_bytes)`, plain or `async def`), called through the
/// recording pipeline's sink caller: its exception classification, and its loop for async methods.
struct PySinkV1 {
    caller: PySink,
    create: Py<PyAny>,
    patch: Py<PyAny>,
}

impl PySinkV1 {
    fn new(sink: &Bound<'_, PyAny>, turns: Arc<GilTurns>, failures: Arc<Failures>) -> PyResult<Self> {
        let caller = PySink::new(sink, turns, failures)?;
        let (create, patch) = PySink::methods(sink)?;
        Ok(PySinkV1 { caller, create: create.unbind(), patch: patch.unbind() })
    }

    fn call(
        &self,
        create: bool,
        event: &EventV1,
        patch: Option<&[u8]>,
        answer: bool,
    ) -> Result<Option<EventV1>, SinkError> {
        lifecycle::attach(|py| {
            let arg = event_v1_to_py(py, event).map_err(|e| SinkError::RequestConstruction(e.to_string()))?;
            let method = if create { &self.create } else { &self.patch };
            let out = match patch {
                None => self.caller.call(py, method, [&arg]),
                Some(p) => self.caller.call(py, method, [&arg, PyBytes::new(py, p).as_any()]),
            };
            match out {
                // An answer that is not an event is taken as "written as sent".
                Ok(out) if answer && out.is_instance_of::<PyDict>() => Ok(event_v1_from_py(&out, "sink answer").ok()),
                Ok(_) => Ok(None),
                Err(e) => {
                    let detail = e.to_string();
                    let e = sink_error(e);
                    log_failure(py, create, &e, &detail);
                    Err(e)
                }
            }
        })
    }
}

/// The pipeline's classification in `recordEvent`'s terms: 404 and 409 are told apart, other statuses
/// and errors keep the pipeline's verdict (429 and 5xx retried, other statuses and bad requests not).
fn sink_error(e: WriteError) -> SinkError {
    match (e.status, e.verdict) {
        (Some(404), _) => SinkError::NotFound,
        (Some(409), _) => SinkError::AlreadyExists,
        (_, Verdict::Retry) => SinkError::Transient(e.to_string()),
        (Some(_), Verdict::GiveUp) => SinkError::Rejected(e.to_string()),
        (None, Verdict::GiveUp) => SinkError::RequestConstruction(e.to_string()),
    }
}

/// Logs a failed call as `recordEvent` does. Quiet are the answers it handles: a patch that finds nothing (a
/// create follows) and a create that finds the event there (a series' create is retried; client-go logs a
/// plain one at V(5) only). A create that finds nothing (a missing namespace) is rejected, as in client-go.
fn log_failure(py: Python<'_>, create: bool, e: &SinkError, detail: &str) {
    let what = match e {
        SinkError::NotFound if !create => return,
        SinkError::AlreadyExists => return,
        SinkError::Transient(_) => "Unable to write event (may retry after sleeping)",
        SinkError::NotFound | SinkError::Rejected(_) => "Server rejected event (will not retry!)",
        // No answer of the server: the sink itself failed (a bug in it, a request it could not make).
        SinkError::RequestConstruction(_) => "The sink failed (will not retry!)",
    };
    let method = if create { "create" } else { "patch" };
    let logged = py
        .import("logging")
        .and_then(|l| l.call_method1("getLogger", ("kubevents",)))
        .and_then(|l| l.call_method1("warning", ("%s: %s: %s", what, method, detail)));
    if let Err(e) = logged {
        e.write_unraisable(py, None);
    }
}

impl SinkV1 for PySinkV1 {
    fn create(&mut self, event: &EventV1, answer: bool) -> Result<Option<EventV1>, SinkError> {
        self.call(true, event, None, answer)
    }

    fn patch(&mut self, event: &EventV1, patch: &[u8], answer: bool) -> Result<Option<EventV1>, SinkError> {
        self.call(false, event, Some(patch), answer)
    }
}

/// A core error as text, on the engine thread: the text of a Python error (a Python clock's) needs the GIL.
fn describe(e: &Error) -> String {
    lifecycle::attach(|_| e.to_string())
}

#[derive(Default)]
struct State {
    queue: VecDeque<EventV1>,
    started: bool,
    stopping: bool,
    /// The engine thread has ended (or was never started and never will be).
    finished: bool,
    /// The engine thread ended with a panic.
    failed: bool,
    /// `wait_idle` calls so far, and the last one the engine thread answered with an idle pass.
    kicks: u64,
    idle_for: u64,
    dropped: u64,
    truncated: u64,
    /// A clock that failed on the engine thread, as text.
    last_error: Option<String>,
    /// The series engine's counters as of its last write, published by the engine thread: `stats()` reads
    /// them here instead of waiting for a sink call to end.
    engine: EngineStats,
    /// Events or writes the engine thread has taken from the queue and not made yet.
    in_hand: u64,
}

struct Shared {
    state: Mutex<State>,
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

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Waits on `idle` for at most `timeout` while `pending` holds; returns whether it stopped holding.
    fn wait_while(&self, timeout: Duration, pending: impl FnMut(&mut State) -> bool) -> bool {
        !self.idle.wait_timeout_while(self.state(), timeout, pending).unwrap_or_else(|p| p.into_inner()).1.timed_out()
    }

    fn on_worker(&self) -> bool {
        self.worker.get() == Some(&std::thread::current().id())
    }

    fn note_error(&self, e: &Error) {
        let text = describe(e);
        self.state().last_error = Some(text);
    }

    fn publish(&self, engine: &SeriesEngine, in_hand: usize) {
        let mut st = self.state();
        st.engine = engine.stats();
        st.in_hand = in_hand as u64;
    }

    /// Waits for events, a `wait_idle` call, shutdown or the next due instant, then takes the queue: returns
    /// it, the `wait_idle` call it answers, whether the engine is stopping, and the clock's reading taken just
    /// before the queue was (whatever was recorded before the clock read that is in the batch).
    fn next_batch(&self, engine: &SeriesEngine) -> (VecDeque<EventV1>, u64, bool, Option<Time>) {
        let wanted = |st: &State| !st.queue.is_empty() || st.stopping || st.kicks > st.idle_for;
        let mut st = loop {
            // Read without the state lock: a Python clock takes the GIL, which a recorder call holding the
            // lock has.
            let due = self.until_due(engine).map_err(|e| describe(&e));
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
        let now = engine.clock().now().map_err(|e| self.note_error(&e)).ok();
        let mut st = self.state();
        st.in_hand = st.queue.len() as u64;
        (std::mem::take(&mut st.queue), st.kicks, st.stopping, now)
    }

    /// Makes the writes `decide` asked for, taking the GIL once per chunk rather than once per sink call
    /// (taking it from a busy Python thread can cost a switch interval each time), in chunks short enough not
    /// to starve that thread.
    fn write(&self, engine: &mut SeriesEngine, sink: &mut PySinkV1, writes: &mut Vec<EventV1>) {
        let mut writes = writes.drain(..);
        while writes.len() > 0 {
            lifecycle::attach(|_| {
                for _ in 0..GIL_CHUNK {
                    let Some(event) = writes.next() else { break };
                    if let Err(e) = engine.write(event, sink) {
                        self.note_error(&e);
                    }
                    self.publish(engine, writes.len());
                }
            });
        }
    }

    /// The rounds and retries due by `at`, after the writes asked for so far.
    fn run_due_at(&self, at: Time, engine: &mut SeriesEngine, sink: &mut PySinkV1, writes: &mut Vec<EventV1>) {
        if engine.next_due() > at {
            return;
        }
        self.write(engine, sink, writes);
        if let Err(e) = engine.run_due_at(at, sink) {
            self.note_error(&e);
        }
    }

    /// The engine thread. It owns the engine: no lock is held while it calls the sink.
    fn run(&self, mut engine: SeriesEngine, mut sink: PySinkV1) {
        loop {
            let (batch, kick, stopping, now) = self.next_batch(&engine);
            // Each occurrence comes after the rounds due by the time it happened and before those due later,
            // whatever this thread's timing: the rounds at start run before any event is cached, and a clock
            // stepped past a round right after a recorder call still finds that call's event counted. Deciding
            // needs no GIL; the writes are made in chunks (`write`). This thread does not ask recorder calls to
            // give way at once: they do when the queue is half full, and until then the events pile up into
            // larger batches.
            let mut writes = Vec::new();
            for event in batch {
                if let Some(t) = event.event_time {
                    self.run_due_at(t, &mut engine, &mut sink, &mut writes);
                }
                match engine.decide(event) {
                    Ok(w) => writes.extend(w),
                    Err(e) => self.note_error(&e),
                }
            }
            self.publish(&engine, writes.len());
            self.write(&mut engine, &mut sink, &mut writes);
            if let Some(now) = now {
                self.run_due_at(now, &mut engine, &mut sink, &mut writes);
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
        // With the GIL: the sink is a Python object, and so may the engine's clock be.
        lifecycle::attach(|_| drop((sink, engine)));
    }

    /// How long until something is due: `None` if it is due now.
    fn until_due(&self, engine: &SeriesEngine) -> Result<Option<Duration>, Error> {
        let due = engine.next_due();
        let now = engine.clock().now()?;
        if due <= now {
            return Ok(None);
        }
        if engine.clock().is_real() {
            Ok(Some(Duration::from_nanos(due.since(now) as u64).min(Duration::from_secs(1))))
        } else {
            Ok(Some(POLL))
        }
    }
}

/// The events.k8s.io/v1 recording engine behind `kubevents.EventsBroadcaster`: a series cache, its
/// timers and retries, run on a thread of its own against a sink.
#[pyclass(module = "kubevents._native", name = "EventsV1Engine", frozen)]
pub struct PyEventsV1Engine {
    shared: Arc<Shared>,
    /// The engine's clock, read here too so that making an event never waits for a sink call.
    clock: Arc<dyn Clock>,
    /// The sink and the series engine until `start` hands them to the engine thread.
    unstarted: Mutex<Option<(Py<PyAny>, SeriesEngine)>>,
    turns: Arc<GilTurns>,
    /// What the sink raised that must reach a caller: `KeyboardInterrupt`, `SystemExit`.
    failures: Arc<Failures>,
    /// The asyncio loop of an async sink, once recording: a blocking wait on it would never end.
    sink_loops: Py<PyList>,
    /// The fork generation the engine was made in.
    generation: u64,
}

impl Drop for PyEventsV1Engine {
    fn drop(&mut self) {
        if lifecycle::is_forked(self.generation) {
            // Inherited through a fork: the engine thread stayed in the parent, maybe holding the state's
            // lock, and what it guards may be half changed; the child leaves it be.
            std::mem::forget(self.shared.clone());
            return;
        }
        // Nobody can record any more: the engine thread writes what it holds, and ends.
        self.begin_stop();
    }
}

impl PyEventsV1Engine {
    /// Raises when the engine was inherited through `os.fork()`, and for a call `blocking` that would wait
    /// for the engine thread on that very thread (from the sink) or on the async sink's loop.
    fn check_usable(&self, py: Python<'_>, blocking: Option<&str>) -> PyResult<()> {
        // First, before any lock: a lock a parent thread held at the fork stays held in the child.
        lifecycle::check_not_forked(self.generation, "EventsBroadcaster")?;
        if let Some(what) = blocking {
            if self.shared.on_worker() {
                return Err(PyRuntimeError::new_err(format!("{what} called from the sink, on the engine thread")));
            }
            lifecycle::refuse_on_sink_loop(py, self.sink_loops.bind(py), &format!("{what}()"))?;
        }
        Ok(())
    }

    /// Stops taking events; the engine thread writes what it holds, and ends. Never waits.
    fn begin_stop(&self) {
        {
            let mut st = self.shared.state();
            st.stopping = true;
            if !st.started {
                st.finished = true;
            }
            self.shared.wake.notify_all();
        }
        // A sink never started is released here.
        drop(lock(&self.unstarted).take());
    }

    /// Waits up to `timeout`, interruptibly, for the engine thread to end.
    fn wait_finished(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<bool> {
        let shared = &*self.shared;
        lifecycle::wait_until(py, timeout, |slice| shared.wait_while(slice, |st| !st.finished))
    }
}

#[pymethods]
impl PyEventsV1Engine {
    #[new]
    #[pyo3(signature = (sink, *, clock=None, sleep_duration=None, max_tries=12,
                        cache_size=4096, seed=None))]
    fn new(
        sink: &Bound<'_, PyAny>,
        clock: Option<&Bound<'_, PyAny>>,
        sleep_duration: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = int_opt::max_tries)] max_tries: i64,
        #[pyo3(from_py_with = int_opt::cache_size)] cache_size: i64,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let seed = seed.filter(|s| !s.is_none()).map(|s| int_arg::<u64>(s, "seed")).transpose()?;
        // Checked now; the caller is made when recording starts, on the loop running then.
        PySink::methods(sink)?;
        let clock = clock_arg(clock)?;
        let engine_clock = clock.clone();
        let mut options = EngineOptions { seed, ..EngineOptions::default() };
        if let Some(d) = sleep_duration {
            options.sleep_duration = to_duration(d, "sleep_duration")?;
        }
        if max_tries < 1 {
            return Err(PyValueError::new_err(format!("max_tries must be >= 1, got {max_tries}")));
        }
        // As in the core/v1 Broadcaster: more tries than a u32 holds are as good as unlimited.
        options.max_tries = u32::try_from(max_tries).unwrap_or(u32::MAX);
        options.cache_size = usize::try_from(cache_size)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or_else(|| PyValueError::new_err(format!("cache_size must be >= 1, got {cache_size}")))?;
        let engine = SeriesEngine::new(engine_clock, options)?;
        Ok(PyEventsV1Engine {
            clock,
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
                idle: Condvar::new(),
                worker: OnceLock::new(),
            }),
            unstarted: Mutex::new(Some((sink.clone().unbind(), engine))),
            turns: Arc::new(GilTurns::default()),
            failures: Arc::default(),
            sink_loops: PyList::empty(sink.py()).unbind(),
            generation: lifecycle::generation(),
        })
    }

    /// Makes the event of one occurrence at the clock's present (name, namespace and `eventTime` as
    /// client-go's `makeEvent`, a note over 1024 bytes cut) and hands it to the engine thread if it is
    /// recording. Returns the event as a dict when `want_event` is true, else None.
    #[pyo3(signature = (regarding, related, annotations, r#type, reason, action, note, reporting_controller,
                        reporting_instance, want_event=false))]
    #[allow(clippy::too_many_arguments)]
    fn record<'py>(
        &self,
        py: Python<'py>,
        regarding: &Bound<'py, PyAny>,
        related: Option<&Bound<'py, PyAny>>,
        annotations: Option<BTreeMap<String, String>>,
        r#type: &str,
        reason: &str,
        action: &str,
        note: &str,
        reporting_controller: &str,
        reporting_instance: &str,
        want_event: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.check_usable(py, None)?;
        let regarding = reference_of(regarding, None).map_err(|e| prefixed(py, "regarding", e))?;
        let related: Option<ObjectReference> = related
            .filter(|r| !r.is_none())
            .map(|r| reference_of(r, None).map_err(|e| prefixed(py, "related", e)))
            .transpose()?;
        let now: Time = self.clock.now()?;
        let input = EventV1Input {
            regarding: &regarding,
            related: related.as_ref(),
            annotations: annotations.as_ref().filter(|a| !a.is_empty()),
            type_: r#type,
            reason,
            action,
            note,
            reporting_controller,
            reporting_instance,
        };
        let (event, truncated) = make_event_v1(&input, now, &mut UuidSource::Random);
        let out = if want_event { Some(event_v1_to_py(py, &event)?) } else { None };
        let mut st = self.shared.state();
        st.truncated += u64::from(truncated);
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
        }
        // Behind: the engine thread has half a queue to catch up on.
        let behind = st.queue.len() >= MAX_QUEUED_EVENTS / 2;
        drop(st);
        self.turns.hand_over(py);
        if behind {
            // Its thread may be waiting for a CPU rather than the GIL.
            lifecycle::detach(py, std::thread::yield_now);
        }
        Ok(out)
    }

    /// Starts the engine thread: events recorded from now on reach the sink.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        self.check_usable(py, None)?;
        let mut st = self.shared.state();
        let shut_down = || PyRuntimeError::new_err("the broadcaster is shut down");
        if st.stopping {
            return Err(shut_down());
        }
        if st.started {
            return Err(PyRuntimeError::new_err("the broadcaster is already recording to its sink"));
        }
        let mut slot = lock(&self.unstarted);
        let (obj, engine) = slot.take().ok_or_else(shut_down)?;
        // Made here, so that an async sink runs on the loop running now.
        let sink = match PySinkV1::new(obj.bind(py), self.turns.clone(), self.failures.clone()) {
            Ok(sink) => sink,
            Err(e) => {
                *slot = Some((obj, engine));
                return Err(e);
            }
        };
        drop(slot);
        if let Some(l) = sink.caller.event_loop(py) {
            self.sink_loops.bind(py).append(l)?;
        }
        let shared = self.shared.clone();
        let spawned = crate::threads::spawn("events-v1", move || {
            let _ = shared.worker.set(std::thread::current().id());
            let _finish = Finish(&shared);
            shared.run(engine, sink);
        });
        if let Err(e) = spawned {
            // The sink and the engine went with the thread that did not start.
            st.stopping = true;
            st.finished = true;
            return Err(e.into());
        }
        st.started = true;
        Ok(())
    }

    /// Raises `RuntimeError` when the engine was created before `os.fork()` (its thread is not in this
    /// process) and, for a blocking call named `blocking`, when that call is made from the sink, on the engine
    /// thread, or on the asyncio loop of an async sink, which the wait would stall.
    #[pyo3(signature = (blocking=None))]
    fn check(&self, py: Python<'_>, blocking: Option<&str>) -> PyResult<()> {
        self.check_usable(py, blocking)
    }

    /// Waits until the engine thread has handled every queued event and everything due at the clock's
    /// present (retries, rounds). Returns False if `timeout` (seconds) ran out first. Ctrl-C interrupts the
    /// wait; a `KeyboardInterrupt` or `SystemExit` the sink raised is raised here.
    #[pyo3(signature = (timeout=None))]
    fn wait_idle(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        self.check_usable(py, Some("wait_idle"))?;
        let timeout = timeout_arg(timeout)?;
        let kick = {
            let mut st = self.shared.state();
            if st.started && !st.finished {
                st.kicks += 1;
                self.shared.wake.notify_all();
                Some(st.kicks)
            } else {
                None
            }
        };
        let shared = &*self.shared;
        let idle = match kick {
            Some(kick) => {
                lifecycle::wait_until(py, timeout, |slice| shared.wait_while(slice, |st| st.idle_for < kick))?
            }
            None => true,
        };
        self.failures.take_interrupt()?;
        Ok(idle)
    }

    /// Stops taking events, records the queued ones, gives every pending retry one last attempt and writes
    /// the final count of every live series, then ends the engine thread. Returns False if `timeout`
    /// (seconds) ran out first; the thread then finishes in the background. Any number of callers may wait
    /// at once; Ctrl-C interrupts the wait; a `KeyboardInterrupt` or `SystemExit` the sink raised is raised
    /// here.
    #[pyo3(signature = (timeout=None))]
    fn shutdown(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        self.check_usable(py, Some("shutdown"))?;
        let timeout = timeout_arg(timeout)?;
        self.begin_stop();
        let finished = self.wait_finished(py, timeout)?;
        self.failures.take_interrupt()?;
        if finished && self.shared.state().failed {
            return Err(PyRuntimeError::new_err("the engine thread failed"));
        }
        Ok(finished)
    }

    /// For the exit hook: stops, waits up to `timeout` seconds for the engine thread without raising, and
    /// answers how many events or writes it had not made (queued, under way, waiting for a retry).
    fn _exit_flush(&self, py: Python<'_>, timeout: f64) -> u64 {
        self.begin_stop();
        let wait = Duration::try_from_secs_f64(timeout).unwrap_or_default();
        let shared = &*self.shared;
        lifecycle::detach(py, || shared.wait_while(wait, |st| !st.finished));
        let st = self.shared.state();
        st.queue.len() as u64 + st.in_hand + st.engine.pending_retries
    }

    /// Counters: what the series cache decided, what the sink did, what was dropped. Never waits for the
    /// engine thread: its counters are as of its last write.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.check_usable(py, None)?;
        let (s, queued, dropped, truncated, last_error) = {
            let st = self.shared.state();
            (st.engine, st.queue.len() as u64, st.dropped, st.truncated, st.last_error.clone())
        };
        let d = PyDict::new(py);
        let c = s.cache;
        for (k, v) in [
            ("observed", c.observed),
            ("created", c.created),
            ("series_started", c.series_started),
            ("counted", c.counted),
            ("refresh_writes", c.refresh_writes),
            ("finish_writes", c.finish_writes),
            ("forgotten", c.forgotten),
            ("evicted", c.evicted),
            ("evicted_writes", c.evicted_writes),
            ("shutdown_writes", c.shutdown_writes),
            ("writes_ok", s.writes_ok),
            ("write_errors", s.write_errors),
            ("retries", s.retries),
            ("abandoned", s.abandoned),
            ("finish_rounds", s.finish_rounds),
            ("refresh_rounds", s.refresh_rounds),
            ("pending_retries", s.pending_retries),
            ("cache_len", s.cache_len),
            ("queued", queued),
            ("dropped", dropped),
            ("truncated_notes", truncated),
        ] {
            d.set_item(k, v)?;
        }
        d.set_item("last_error", last_error)?;
        Ok(d)
    }
}

/// The reference builder's error, naming the argument instead of `obj`.
fn prefixed(py: Python<'_>, what: &str, e: PyErr) -> PyErr {
    let msg = e.value(py).to_string();
    let msg = format!("{what}: {}", msg.strip_prefix("obj: ").unwrap_or(&msg));
    if e.is_instance_of::<PyTypeError>(py) {
        PyTypeError::new_err(msg)
    } else if e.is_instance_of::<PyValueError>(py) {
        PyValueError::new_err(msg)
    } else {
        e
    }
}

/// `note` cut to the API server's 1024-byte limit at a UTF-8 boundary with a `" ..."` suffix, or unchanged.
#[pyfunction]
pub fn truncate_note(note: &str) -> String {
    crate::series::truncate_note(note).unwrap_or_else(|| note.to_owned())
}

/// The strategic merge patch kubevents sends for a series: `{"series":{"count":…,"lastObservedTime":…}}`.
#[pyfunction]
pub fn series_patch<'py>(py: Python<'py>, event: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let e = event_v1_from_py(event, "event")?;
    Ok(PyBytes::new(py, &crate::series::series_patch(&e)))
}
