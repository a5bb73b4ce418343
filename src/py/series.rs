//! `kubevents.EventsBroadcaster` and `kubevents.EventsRecorder`: the binding of `crate::series`'s
//! events.k8s.io/v1 broadcaster, a peer of `kubevents.Broadcaster` on the same pipeline. Here: the
//! conversions, the Python sink, the GIL.

use std::collections::BTreeMap;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use super::broadcaster::format_message;
use super::convert::{event_v1_to_py, type_name};
use super::errors::{int_arg, int_opt, str_arg};
use super::gil::GilTurns;
use super::lifecycle;
use super::pipeline::{aclose, broadcaster_pymethods, retry_arg, PipelineArgs, PyReporter, PyWatcher, Watching};
use super::reference::reference_of;
use super::sink::{Guard, PySink};
use crate::error::{count_option, Error};
use crate::event::{EventType, UuidSource};
use crate::metrics::Registration;
use crate::series::{
    make_event_v1, structured_line, EngineOptions, EventV1, EventV1Call, EventsBroadcaster, EventsOptions, Host,
    SinkV1, DEFAULT_CACHE_SIZE,
};
use crate::sink::{WriteError, DEFAULT_MAX_TRIES};
use crate::time::Time;
use crate::watch::FullChannel;

// The constructor's signature spells these defaults as literals, so that the stubs can show them.
const _: () = assert!(DEFAULT_MAX_TRIES == 12 && DEFAULT_CACHE_SIZE == 4096);

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
}

impl PySinkV1 {
    fn call(&self, event: &EventV1, patch: Option<&[u8]>, answer: bool) -> Result<Option<EventV1>, WriteError> {
        lifecycle::attach(|py| {
            let arg = event_v1_to_py(py, event).map_err(|e| WriteError::give_up(e.to_string()))?;
            let out = match patch {
                None => self.caller.call(py, &self.caller.create, [&arg])?,
                Some(p) => self.caller.call(py, &self.caller.patch, [&arg, PyBytes::new(py, p).as_any()])?,
            };
            // None is "written as sent"; any other answer must be an event, as core/v1's sinks' must.
            if out.is_none() || !answer {
                return Ok(None);
            }
            event_v1_from_py(&out, "sink answer")
                .map(Some)
                .map_err(|e| WriteError::give_up(format!("sink answer: {}", e.value(py))))
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
}

/// The sink thread's host: the GIL, through the exit gate, taken in turns with the recorder calls (which give
/// it way, as to core/v1's sinks): a plain wait for it could last CPython's whole switch interval.
struct Gil(Arc<GilTurns>);

impl Host for Gil {
    fn attached(&self, f: &mut dyn FnMut()) {
        self.0.attach(|_| f())
    }
}

/// A recorder call's arguments checked, in the order the core/v1 recorder checks its own: the str arguments,
/// the note formatted, the type's value, then the references.
#[allow(clippy::too_many_arguments)]
fn checked_call(
    regarding: &Bound<'_, PyAny>,
    related: Option<&Bound<'_, PyAny>>,
    annotations: Option<BTreeMap<String, String>>,
    type_: &Bound<'_, PyAny>,
    reason: &Bound<'_, PyAny>,
    action: &Bound<'_, PyAny>,
    note: &Bound<'_, PyAny>,
    args: &Bound<'_, PyTuple>,
) -> PyResult<EventV1Call> {
    let py = regarding.py();
    let type_ = str_arg(type_, "type")?;
    let reason = str_arg(reason, "reason")?.to_str()?.to_owned();
    let action = str_arg(action, "action")?.to_str()?.to_owned();
    let note = format_message(&str_arg(note, "note")?, args)?;
    let type_ = EventType::parse(type_.to_str()?)?.as_str().to_owned();
    let regarding = reference_of(regarding, None).map_err(|e| prefixed(py, "regarding", e))?;
    let related = related
        .filter(|r| !r.is_none())
        .map(|r| reference_of(r, None).map_err(|e| prefixed(py, "related", e)))
        .transpose()?;
    let annotations = annotations.filter(|a| !a.is_empty());
    Ok(EventV1Call { regarding, related, annotations, type_, reason, action, note })
}

/// The Python side of an `EventsBroadcaster`, shared with its recorders.
struct EventsBinding {
    core: Arc<EventsBroadcaster>,
    watching: Watching<EventV1, Arc<EventV1>>,
    /// Among the live components, for `kubevents.metrics`.
    registration: Registration,
    /// `asyncio._get_running_loop`.
    running_loop: Py<PyAny>,
}

impl EventsBinding {
    fn core(&self) -> &EventsBroadcaster {
        &self.core
    }

    fn guard(&self) -> &Guard {
        &self.watching.guard
    }

    /// Raises when inherited through `os.fork()`, and for a call `blocking` that would wait for the sink's
    /// thread on that very thread (from the sink).
    fn check(&self, blocking: Option<&str>) -> PyResult<()> {
        self.guard().check()?;
        if let Some(what) = blocking {
            self.core.refuse_on_worker(what)?;
        }
        Ok(())
    }
}

/// client-go's `tools/events` `EventBroadcaster` (`events.NewBroadcaster`): events.k8s.io/v1 events grouped
/// into series and written to a sink with client-go's retries.
#[pyclass(module = "kubevents", name = "EventsBroadcaster", frozen, weakref)]
pub struct PyEventsBroadcaster {
    shared: Arc<EventsBinding>,
}

impl Drop for PyEventsBroadcaster {
    fn drop(&mut self) {
        // Inherited through a fork: its threads and the locks they held stayed in the parent, so the core's
        // drop could wait forever on a lock; the child leaves it be.
        if self.shared.guard().is_forked() {
            std::mem::forget(self.shared.clone());
        }
    }
}

broadcaster_pymethods!(PyEventsBroadcaster {
    #[new]
    #[pyo3(signature = (*, clock=None, sleep_duration=None, max_tries=12, cache_size=4096, queue_length=1000,
                        catch_up_wait=None, name=None, log_interval=None, seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        clock: Option<&Bound<'_, PyAny>>,
        sleep_duration: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = int_opt::max_tries)] max_tries: i64,
        #[pyo3(from_py_with = int_opt::cache_size)] cache_size: i64,
        #[pyo3(from_py_with = int_opt::queue_length)] queue_length: i64,
        catch_up_wait: Option<&Bound<'_, PyAny>>,
        name: Option<String>,
        log_interval: Option<&Bound<'_, PyAny>>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let seed = seed.filter(|s| !s.is_none()).map(|s| int_arg::<u64>(s, "seed")).transpose()?;
        let pipeline = PipelineArgs { name, queue_length, clock, catch_up_wait, log_interval };
        let options = EventsOptions {
            // client-go's tools/events broadcaster drops when a watcher's queue is full.
            pipeline: pipeline.options("EventsBroadcaster", FullChannel::Drop)?,
            engine: EngineOptions {
                retry: retry_arg(max_tries, sleep_duration)?,
                cache_size: count_option("cache_size", cache_size)?,
                seed,
            },
        };
        let name = options.pipeline.name.clone();
        let core = Arc::new(EventsBroadcaster::new(options, Arc::new(PyReporter::new(py)?))?);
        let registration = crate::metrics::register("EventsBroadcaster", Some(name), &core, |b| b.stats());
        let watching = Watching {
            pipeline: core.pipeline().clone(),
            turns: Arc::new(GilTurns::default()),
            guard: Arc::new(Guard::new(py, "EventsBroadcaster")),
        };
        let running_loop = py.import(intern!(py, "asyncio"))?.getattr(intern!(py, "_get_running_loop"))?.unbind();
        Ok(PyEventsBroadcaster { shared: Arc::new(EventsBinding { core, watching, registration, running_loop }) })
    }

    /// The name that labels this broadcaster's metrics (`kubevents.metrics`) and its log lines.
    #[getter]
    fn name(&self) -> &str {
        self.shared.registration.name()
    }

    /// A recorder for `reporting_controller`; the instance defaults to `<controller>-<hostname>`.
    #[pyo3(signature = (reporting_controller, reporting_instance=None))]
    fn new_recorder(
        &self,
        reporting_controller: &Bound<'_, PyAny>,
        reporting_instance: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyEventsRecorder> {
        self.shared.check(None)?;
        let py = reporting_controller.py();
        let controller = str_arg(reporting_controller, "reporting_controller")?.to_str()?.to_owned();
        let instance = match reporting_instance.filter(|i| !i.is_none()) {
            Some(i) => str_arg(i, "reporting_instance")?.to_str()?.to_owned(),
            None => {
                let host: String =
                    py.import(intern!(py, "socket"))?.call_method0(intern!(py, "gethostname"))?.extract()?;
                format!("{controller}-{host}")
            }
        };
        Ok(PyEventsRecorder { binding: self.shared.clone(), controller, instance })
    }

    /// `StartRecordingToSink`: every later event goes through the series cache to `sink` (`MemorySink`,
    /// `EventsV1Sink`/`AsyncEventsV1Sink`, or any object with `create(event)` and `patch(event, patch_bytes)`,
    /// plain or `async def`: async methods run on the loop running now). Once per broadcaster.
    fn start_recording_to_sink(slf: &Bound<'_, Self>, sink: &Bound<'_, PyAny>) -> PyResult<PyWatcher> {
        let py = slf.py();
        let s = &slf.get().shared;
        s.check(None)?;
        s.core.can_start().map_err(Error::from)?;
        let caller = PySink::new(sink, s.watching.turns.clone(), s.guard().failures.clone())?;
        s.guard().add_sink(py, &caller)?;
        let describe = caller.class().to_owned();
        let w = lifecycle::detach(py, || {
            s.core.start_recording_to_sink(PySinkV1 { caller }, describe, Gil(s.watching.turns.clone()))
        })?;
        lifecycle::track(slf.as_any())?;
        Ok(PyWatcher::new(w))
    }

    /// `StartEventWatcher`: calls `callback(event)` (a dict) for every later event, in order, on a thread of
    /// the broadcaster (at most `queue_length` waiting; more are dropped and counted).
    fn start_event_watcher(slf: &Bound<'_, Self>, callback: Py<PyAny>) -> PyResult<PyWatcher> {
        if !callback.bind(slf.py()).is_callable() {
            return Err(PyTypeError::new_err("callback must be callable"));
        }
        fn arg(py: Python<'_>, e: Arc<EventV1>) -> PyResult<Bound<'_, PyAny>> {
            event_v1_to_py(py, &e).map(Bound::into_any)
        }
        let s = &slf.get().shared;
        let w = s.watching.start(slf.py(), "watcher", "event watcher callback", callback, Arc::clone, arg)?;
        lifecycle::track(slf.as_any())?;
        Ok(w)
    }

    /// `StartStructuredLogging`: logs every later event as client-go does (`Event occurred
    /// object="ns/name" kind=... apiVersion=... type=... reason=... action=... note=...`), at INFO on
    /// `logger` (default: the `kubevents` logger), or by calling `logger(line)` when it is a plain callable.
    #[pyo3(signature = (logger=None))]
    fn start_structured_logging(slf: &Bound<'_, Self>, logger: Option<&Bound<'_, PyAny>>) -> PyResult<PyWatcher> {
        let line = |e: &Arc<EventV1>| structured_line(e);
        slf.get().shared.watching.start_lines(slf.as_any(), "structured-logging", logger, line)
    }

    /// Waits until every event recorded so far and everything due at the clock's present time (retries,
    /// rounds) has been handled. With a FakeClock: step the clock, then `wait_idle()`. Returns False if
    /// `timeout` (seconds) passed first. Ctrl-C interrupts the wait; a `KeyboardInterrupt` or `SystemExit`
    /// raised in the sink is raised here. `RuntimeError` from the sink itself, or on the asyncio loop of an
    /// async sink, which the wait would stall.
    #[pyo3(signature = (timeout=None))]
    fn wait_idle(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        self.shared.check(Some("wait_idle()"))?;
        self.shared.watching.wait_idle(py, timeout)
    }

    /// Stops recording: queued events are written, every pending retry gets one last attempt, every live
    /// series its final count; watchers get their queued events. Returns the final `stats()`, or raises
    /// `TimeoutError` if `timeout` seconds ran out first (the rest then finishes in the background).
    /// Idempotent; callers on several threads each wait for the end (or their own timeout). Ctrl-C interrupts
    /// the wait; a `KeyboardInterrupt` or `SystemExit` raised in the sink is raised here. On the asyncio loop
    /// of an async sink it raises `RuntimeError`: use `await aclose()` there.
    #[pyo3(signature = (timeout=None))]
    fn shutdown<'py>(&self, py: Python<'py>, timeout: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.shared;
        s.check(Some("shutdown()"))?;
        let done = s.watching.shutdown(py, timeout, || s.core.begin_shutdown())?;
        let stats = self.stats(py)?;
        s.watching.pipeline.end_shutdown(done, s.core.stats().pending)?;
        Ok(stats)
    }

    /// `shutdown()` for a coroutine: awaits it on a thread of the loop's default executor, so that the loop
    /// goes on running the async sink's last writes. Returns the final `stats()`.
    #[pyo3(signature = (timeout=None))]
    fn aclose<'py>(slf: &Bound<'py, Self>, timeout: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        slf.get().shared.check(None)?;
        aclose(slf.as_any(), timeout)
    }

    /// Counters, in the order and with the meaning of `Broadcaster.stats()` where both APIs have them
    /// (received, dropped_incoming, dropped_after_shutdown, dropped_watchers, created, patched,
    /// create_errors, patch_errors: sink calls by verb and result; retries, abandoned, handler_errors,
    /// recorder_waits, pending), then the series cache's decisions (observed, first_occurrences,
    /// series_started, counted, refresh_writes, finish_writes, forgotten, evicted, evicted_writes,
    /// shutdown_writes), writes_ok and write_errors (one write may be two sink calls), finish_rounds,
    /// refresh_rounds, pending_retries, cache_len, truncated_notes, last_error (a clock that failed), and
    /// sinks: each sink's health. Never waits for a sink call: the counters are as of the last write.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.shared.check(None)?;
        let s = lifecycle::detach(py, || self.shared.core.stats());
        Ok(pythonize::pythonize(py, &s)?.cast_into::<PyDict>()?)
    }
});

/// client-go's `tools/events` `EventRecorder` for one reporting controller and instance; `eventf` never
/// blocks.
#[pyclass(module = "kubevents", name = "EventsRecorder", frozen)]
pub struct PyEventsRecorder {
    binding: Arc<EventsBinding>,
    controller: String,
    instance: String,
}

impl PyEventsRecorder {
    fn made(&self, py: Python<'_>, call: EventV1Call) -> PyResult<()> {
        let b = &self.binding;
        b.check(None)?;
        let ((), behind) = b.core.record(call, &self.controller, &self.instance, |_| ())?;
        b.watching.turns.hand_over(py);
        // Never on an asyncio loop's thread, which the wait would stall, async sinks included.
        if behind && b.running_loop.bind(py).call0()?.is_none() {
            lifecycle::detach(py, || b.watching.pipeline.relieve());
        }
        Ok(())
    }
}

/// The `#[pymethods]` of `EventsRecorder` for `$ty`, with `$extra` methods: each checks its arguments, in the same
/// order with the same errors, then calls `$ty::made(call)`. `EventsRecorderCheck` takes them too, so that its
/// checks cannot drift from the recorder's.
macro_rules! events_recorder_methods {
    ($ty:ty => $out:ty { $($extra:tt)* }) => {
        #[pymethods]
        impl $ty {
            /// Records an event about `regarding` (and optionally `related`): `note % args` when args are given.
            #[pyo3(signature = (regarding, related, r#type, reason, action, note, *args))]
            #[allow(clippy::too_many_arguments)]
            fn eventf<'py>(
                &self,
                regarding: &Bound<'py, PyAny>,
                related: Option<&Bound<'py, PyAny>>,
                r#type: &Bound<'py, PyAny>,
                reason: &Bound<'py, PyAny>,
                action: &Bound<'py, PyAny>,
                note: &Bound<'py, PyAny>,
                args: &Bound<'py, PyTuple>,
            ) -> PyResult<$out> {
                let call = checked_call(regarding, related, None, r#type, reason, action, note, args)?;
                self.made(regarding.py(), call)
            }

            /// `eventf` with annotations on the event's metadata.
            #[pyo3(signature = (regarding, related, annotations, r#type, reason, action, note, *args))]
            #[allow(clippy::too_many_arguments)]
            fn annotated_eventf<'py>(
                &self,
                regarding: &Bound<'py, PyAny>,
                related: Option<&Bound<'py, PyAny>>,
                annotations: Option<BTreeMap<String, String>>,
                r#type: &Bound<'py, PyAny>,
                reason: &Bound<'py, PyAny>,
                action: &Bound<'py, PyAny>,
                note: &Bound<'py, PyAny>,
                args: &Bound<'py, PyTuple>,
            ) -> PyResult<$out> {
                let call = checked_call(regarding, related, annotations, r#type, reason, action, note, args)?;
                self.made(regarding.py(), call)
            }

            $($extra)*
        }
    };
}

events_recorder_methods!(PyEventsRecorder => () {
    #[getter]
    fn reporting_controller(&self) -> &str {
        &self.controller
    }

    #[getter]
    fn reporting_instance(&self) -> &str {
        &self.instance
    }

    fn __repr__(&self) -> String {
        format!("EventsRecorder(reporting_controller={:?}, reporting_instance={:?})", self.controller, self.instance)
    }
});

/// The checks of `EventsRecorder`'s methods, for `kubevents.testing.FakeEventsRecorder`: each raises what the
/// `EventsRecorder` method of its name raises for the same arguments, and returns the note as formatted (before
/// any cut to the server's limit) and the event it would record (reported by "fake", "fake") instead of
/// recording it.
#[pyclass(module = "kubevents._native", name = "EventsRecorderCheck", frozen)]
pub struct PyEventsRecorderCheck;

impl PyEventsRecorderCheck {
    fn made<'py>(&self, py: Python<'py>, call: EventV1Call) -> PyResult<Bound<'py, PyTuple>> {
        let note = call.note.clone();
        let (event, _) = make_event_v1(call, "fake", "fake", Time(0), &mut UuidSource::Random);
        (note, event_v1_to_py(py, &event)?).into_pyobject(py)
    }
}

events_recorder_methods!(PyEventsRecorderCheck => Bound<'py, PyTuple> {
    #[new]
    fn new() -> Self {
        PyEventsRecorderCheck
    }
});

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
