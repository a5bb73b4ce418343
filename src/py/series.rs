//! `kubevents._native.EventsV1Engine`: the binding of `crate::series::EventsBroadcaster`, the
//! events.k8s.io/v1 engine thread. Here: the conversions, the Python sink and logger, the GIL.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::broadcaster::PyReporter;
use super::clock::{clock_arg, timeout_arg, to_duration};
use super::convert::{meta_to_py, reference_to_py, series_to_py, set_str, source_to_py, time_str, type_name};
use super::errors::{int_arg, int_opt};
use super::gil::GilTurns;
use super::lifecycle;
use super::reference::reference_of;
use super::sink::{Guard, PySink};
use crate::error::{count_option, Error};
use crate::event::ObjectReference;
use crate::series::{
    EngineOptions, EventV1, EventV1Input, EventsBroadcaster, Host, SeriesEngine, SinkV1, StartError, DEFAULT_CACHE_SIZE,
};
use crate::sink::{RetryPolicy, WriteError, DEFAULT_MAX_TRIES, DEFAULT_SLEEP_NANOS};
use crate::sync::lock;

// The constructor's signature spells these defaults as literals, so that the stubs can show them.
const _: () = assert!(DEFAULT_MAX_TRIES == 12 && DEFAULT_CACHE_SIZE == 4096);

/// An events.k8s.io/v1 Event as a dict of its JSON shape, key for key as `EventV1` serializes (by hand, with
/// interned keys: every write crosses here, and `pythonize` costs it nearly twice as much, see BENCHMARKS.md).
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
    pythonize::depythonize(v).map_err(|e| PyValueError::new_err(format!("{what}: not an events.k8s.io/v1 Event: {e}")))
}

/// A Python sink (`create(event)`, `patch(event, patch_bytes)`, plain or `async def`), called through the
/// recording pipeline's sink caller: its exception classification, and its loop for async methods.
struct PySinkV1 {
    caller: PySink,
    logger: PyReporter,
}

impl PySinkV1 {
    fn call(&self, event: &EventV1, patch: Option<&[u8]>, answer: bool) -> Result<Option<EventV1>, WriteError> {
        lifecycle::attach(|py| {
            let arg = event_v1_to_py(py, event).map_err(|e| WriteError::give_up(e.to_string()))?;
            let out = match patch {
                None => self.caller.call(py, &self.caller.create, [&arg])?,
                Some(p) => self.caller.call(py, &self.caller.patch, [&arg, PyBytes::new(py, p).as_any()])?,
            };
            // An answer that is not an event is taken as "written as sent".
            if answer && out.is_instance_of::<PyDict>() {
                return Ok(event_v1_from_py(&out, "sink answer").ok());
            }
            Ok(None)
        })
    }
}

impl SinkV1 for PySinkV1 {
    fn create(&mut self, event: &EventV1, answer: bool) -> Result<Option<EventV1>, WriteError> {
        self.call(event, None, answer)
    }

    fn patch(&mut self, event: &EventV1, patch: &[u8], answer: bool) -> Result<Option<EventV1>, WriteError> {
        self.call(event, Some(patch), answer)
    }

    fn report(&mut self, message: &str) {
        if let Err(e) = self.logger.log("warning", ["%s", message]) {
            lifecycle::attach(|py| e.write_unraisable(py, None));
        }
    }
}

/// The engine thread's host: the GIL, through the exit gate.
struct Gil;

impl Host for Gil {
    fn attached(&self, f: &mut dyn FnMut()) {
        lifecycle::attach(|_| f())
    }
}

/// The events.k8s.io/v1 recording engine behind `kubevents.EventsBroadcaster`: a series cache, its
/// timers and retries, run on a thread of its own against a sink.
#[pyclass(module = "kubevents._native", name = "EventsV1Engine", frozen)]
pub struct PyEventsV1Engine {
    core: EventsBroadcaster,
    /// The sink until `start` hands it to the engine thread.
    unstarted: Mutex<Option<Py<PyAny>>>,
    guard: Guard,
}

impl Drop for PyEventsV1Engine {
    fn drop(&mut self) {
        if self.guard.is_forked() {
            self.core.abandon();
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
        self.guard.check()?;
        if let Some(what) = blocking {
            self.core.refuse_on_worker(what)?;
            self.guard.refuse_on_sink_loop(py, &format!("{what}()"))?;
        }
        Ok(())
    }

    fn begin_stop(&self) {
        self.core.begin_stop();
        // A sink never started is released here.
        drop(lock(&self.unstarted).take());
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
        let sleep = sleep_duration.map(|d| to_duration(d, "sleep_duration")).transpose()?;
        let retry = RetryPolicy::new(max_tries, sleep.unwrap_or(DEFAULT_SLEEP_NANOS))?;
        let options = EngineOptions { retry, cache_size: count_option("cache_size", cache_size)?, seed };
        Ok(PyEventsV1Engine {
            core: EventsBroadcaster::new(SeriesEngine::new(clock, options)?),
            unstarted: Mutex::new(Some(sink.clone().unbind())),
            guard: Guard::new(sink.py(), "EventsBroadcaster"),
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
        let (out, behind) = self.core.record(&input, |e| want_event.then(|| event_v1_to_py(py, e)).transpose())?;
        let out = out?;
        if behind {
            // Its thread may be waiting for a CPU rather than the GIL.
            lifecycle::detach(py, std::thread::yield_now);
        }
        Ok(out)
    }

    /// Starts the engine thread: events recorded from now on reach the sink.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        self.check_usable(py, None)?;
        self.core.can_start().map_err(Error::from)?;
        let obj = lock(&self.unstarted).as_ref().map(|s| s.clone_ref(py)).ok_or(Error::from(StartError::ShutDown))?;
        // Made here, so that an async sink runs on the loop running now. The engine thread takes the GIL a
        // chunk of writes at a time (`Gil`), not through the turns.
        let caller = PySink::new(obj.bind(py), Arc::new(GilTurns::default()), self.guard.failures.clone())?;
        self.guard.add_sink(py, &caller)?;
        self.core.start(PySinkV1 { caller, logger: PyReporter::new(py)? }, Gil).map_err(Error::from)?;
        drop(lock(&self.unstarted).take());
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
        match self.core.kick() {
            Some(kick) => self.guard.wait(py, timeout, |slice| self.core.wait_idle(kick, slice)),
            None => self.guard.failures.take().map_or(Ok(true), Err),
        }
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
        let finished = self.guard.wait(py, timeout, |slice| self.core.wait_finished(slice))?;
        if finished {
            self.core.check_failed()?;
        }
        Ok(finished)
    }

    /// For the exit hook: stops, waits up to `timeout` seconds for the engine thread without raising, and
    /// answers how many events or writes it had not made (queued, under way, waiting for a retry).
    fn _exit_flush(&self, py: Python<'_>, timeout: f64) -> u64 {
        drop(lock(&self.unstarted).take());
        let wait = Duration::try_from_secs_f64(timeout).unwrap_or_default();
        lifecycle::detach(py, || self.core.exit_flush(wait))
    }

    /// Counters: what the series cache decided, what the sink did, what was dropped. Never waits for the
    /// engine thread: its counters are as of its last write.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.check_usable(py, None)?;
        Ok(pythonize::pythonize(py, &self.core.stats())?)
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
