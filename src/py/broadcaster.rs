//! `kubevents.Broadcaster` and `kubevents.Recorder`: the Python face of the core/v1 recording pipeline. Rust
//! threads run it; they take the GIL only to call Python sinks, callbacks and loggers.

use std::collections::BTreeMap;
use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use super::clock::to_time;
use super::convert::event_to_py;
use super::correlator::{key_funcs_from_py, CorrelatorArgs};
use super::errors::{int_opt, str_opt};
use super::gil::GilTurns;
use super::lifecycle;
use super::pipeline::{aclose, broadcaster_pymethods, retry_arg, PipelineArgs, PyReporter, PyWatcher, Watching};
use super::reference::reference_of;
use super::sink::{Guard, PySink};
use crate::broadcaster::{
    delivery_workers_option, full_channel_option, log_line, structured_line, EventBroadcaster, Occurrence, Options,
    DEFAULT_FULL_CHANNEL, DEFAULT_QUEUE_LENGTH, DEFAULT_WORKERS,
};
use crate::event::{Event, EventSource, EventType, ObjectReference};
use crate::metrics::Registration;
use crate::recorder::{Recorder, RecorderHub};
use crate::sink::DEFAULT_MAX_TRIES;

// The keyword defaults are spelt out for Python to show them (pyo3 shows `...` for any other expression);
// they must be the core's. `kubevents._native` exports the core's for Python code to read.
const _: () = assert!(
    DEFAULT_MAX_TRIES == 12
        && DEFAULT_QUEUE_LENGTH == 1000
        && DEFAULT_WORKERS == 1
        && matches!(DEFAULT_FULL_CHANNEL.as_bytes(), b"drop")
);

/// The Python side of a broadcaster, shared with its recorders and watcher threads.
struct BroadcasterBinding {
    hub: Arc<RecorderHub>,
    key_func: Option<Py<PyAny>>,
    message_func: Option<Py<PyAny>>,
    spam_key_func: Option<Py<PyAny>>,
    watching: Watching<Occurrence, Arc<Event>>,
    /// `asyncio._get_running_loop`.
    running_loop: Py<PyAny>,
    /// Among the live components, for `kubevents.metrics`.
    registration: Registration,
}

impl BroadcasterBinding {
    fn core(&self) -> &EventBroadcaster {
        self.hub.broadcaster()
    }

    fn guard(&self) -> &Guard {
        &self.watching.guard
    }

    fn check(&self) -> PyResult<()> {
        self.guard().check()
    }

    fn turns(&self) -> &Arc<GilTurns> {
        &self.watching.turns
    }

    fn key_funcs(&self, py: Python<'_>) -> PyResult<crate::correlator::KeyFuncs> {
        let f = |f: &Option<Py<PyAny>>| f.as_ref().map(|f| f.clone_ref(py));
        key_funcs_from_py(f(&self.key_func), f(&self.message_func), f(&self.spam_key_func))
    }
}

/// client-go's `EventBroadcaster` (`record.NewBroadcaster`).
#[pyclass(module = "kubevents", name = "Broadcaster", frozen, weakref)]
pub struct PyBroadcaster {
    shared: Arc<BroadcasterBinding>,
}

impl Drop for PyBroadcaster {
    fn drop(&mut self) {
        // Inherited through a fork: its threads and the locks they held stayed in the parent, so the core's
        // drop could wait forever on a lock; the child leaves it be.
        if self.shared.guard().is_forked() {
            std::mem::forget(self.shared.clone());
        }
    }
}

broadcaster_pymethods!(PyBroadcaster {
    #[new]
    #[pyo3(signature = (*, clock=None, sleep_duration=None, max_tries=12, queue_length=1000, full_channel="drop",
                        lru_cache_size=4096, burst=25, qps=CorrelatorArgs::DEFAULT.qps, max_events=10, max_interval=600,
                        key_func=None, message_func=None, spam_key_func=None, catch_up_wait=None, name=None,
                        log_interval=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        clock: Option<&Bound<'_, PyAny>>,
        sleep_duration: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = int_opt::max_tries)] max_tries: i64,
        #[pyo3(from_py_with = int_opt::queue_length)] queue_length: i64,
        full_channel: &str,
        #[pyo3(from_py_with = int_opt::lru_cache_size)] lru_cache_size: i64,
        #[pyo3(from_py_with = int_opt::burst)] burst: i64,
        qps: f64,
        #[pyo3(from_py_with = int_opt::max_events)] max_events: i64,
        #[pyo3(from_py_with = int_opt::max_interval)] max_interval: i64,
        key_func: Option<Py<PyAny>>,
        message_func: Option<Py<PyAny>>,
        spam_key_func: Option<Py<PyAny>>,
        catch_up_wait: Option<&Bound<'_, PyAny>>,
        name: Option<String>,
        log_interval: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let correlator = CorrelatorArgs { lru_cache_size, burst, qps, max_events, max_interval }.options()?;
        let pipeline = PipelineArgs { name, queue_length, clock, catch_up_wait, log_interval };
        let options = Options {
            pipeline: pipeline.options("Broadcaster", full_channel_option(full_channel)?)?,
            retry: retry_arg(max_tries, sleep_duration)?,
            correlator,
        };
        let name = options.pipeline.name.clone();
        let core = EventBroadcaster::new(options, Arc::new(PyReporter::new(py)?))?;
        let pipeline = core.pipeline().clone();
        let hub = Arc::new(RecorderHub::new(core));
        let registration = crate::metrics::register("Broadcaster", Some(name), &hub, |h| h.broadcaster().stats());
        let shared = BroadcasterBinding {
            hub,
            key_func,
            message_func,
            spam_key_func,
            watching: Watching {
                pipeline,
                turns: Arc::new(GilTurns::default()),
                guard: Arc::new(Guard::new(py, "Broadcaster")),
            },
            running_loop: py.import(intern!(py, "asyncio"))?.getattr(intern!(py, "_get_running_loop"))?.unbind(),
            registration,
        };
        // Checks the key functions now; every sink gets its own wrappers later.
        shared.key_funcs(py)?;
        Ok(PyBroadcaster { shared: Arc::new(shared) })
    }

    /// The name that labels this broadcaster's metrics (`kubevents.metrics`).
    #[getter]
    fn name(&self) -> &str {
        self.shared.registration.name()
    }

    /// A recorder whose events have source `component` (and `host`).
    #[pyo3(signature = (component, host=None))]
    fn new_recorder(&self, component: String, host: Option<String>) -> PyResult<PyRecorder> {
        self.shared.check()?;
        let source = EventSource { component, host: host.unwrap_or_default() };
        Ok(PyRecorder { core: self.shared.hub.new_recorder(source), binding: self.shared.clone() })
    }

    /// Correlates every later event with a fresh correlator and writes it to `sink` with client-go's retries.
    /// `workers` writes may run at once; the writes of one event stay in order.
    #[pyo3(signature = (sink, *, workers=1))]
    fn start_recording_to_sink(
        slf: &Bound<'_, Self>,
        sink: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = int_opt::workers)] workers: i64,
    ) -> PyResult<PyWatcher> {
        let py = slf.py();
        let s = &slf.get().shared;
        s.check()?;
        let workers = delivery_workers_option(workers)?;
        let sink = Arc::new(PySink::new(sink, s.turns().clone(), s.guard().failures.clone())?);
        let funcs = s.key_funcs(py)?;
        let w = lifecycle::detach(py, || s.core().start_recording_to_sink(sink.clone(), workers, funcs))?;
        s.guard().add_sink(py, &sink)?;
        lifecycle::track(slf.as_any())?;
        Ok(PyWatcher::new(w))
    }

    /// Logs every later event as client-go's `StartLogging` does, at INFO on `logger` (default: the
    /// `kubevents` logger), or by calling `logger(line)` when it is a plain callable.
    #[pyo3(signature = (logger=None))]
    fn start_logging(slf: &Bound<'_, Self>, logger: Option<&Bound<'_, PyAny>>) -> PyResult<PyWatcher> {
        Self::start_lines(slf, "logging", logger, log_line)
    }

    /// Logs every later event as client-go's `StartStructuredLogging` does (`Event occurred object="ns/name"
    /// fieldPath=... kind=... apiVersion=... type=... reason=... message=...`), like `start_logging`.
    #[pyo3(signature = (logger=None))]
    fn start_structured_logging(slf: &Bound<'_, Self>, logger: Option<&Bound<'_, PyAny>>) -> PyResult<PyWatcher> {
        Self::start_lines(slf, "structured-logging", logger, structured_line)
    }

    /// Calls `callback(event)` (a dict) for every later event, in order, on a thread of the broadcaster.
    fn start_event_watcher(slf: &Bound<'_, Self>, callback: Py<PyAny>) -> PyResult<PyWatcher> {
        if !callback.bind(slf.py()).is_callable() {
            return Err(PyTypeError::new_err("callback must be callable"));
        }
        fn arg(py: Python<'_>, e: Arc<Event>) -> PyResult<Bound<'_, PyAny>> {
            Ok(event_to_py(py, &e)?.into_any())
        }
        let w = slf.get().shared.watching.start(
            slf.py(),
            "watcher",
            "event watcher callback",
            callback,
            Arc::clone,
            arg,
        )?;
        lifecycle::track(slf.as_any())?;
        Ok(w)
    }

    /// Stops accepting events, distributes what is queued and lets every sink deliver what it holds (once
    /// shut down, a failing event gets one more try). Returns the final `stats()` when all of that is done;
    /// raises `TimeoutError` saying how many deliveries are still pending when `timeout` (seconds) passes
    /// first. Idempotent; callers on several threads each wait for the end (or their own timeout). Ctrl-C
    /// interrupts the wait. A `KeyboardInterrupt` or `SystemExit` raised in a sink is raised again here.
    /// On the asyncio loop of an async sink it raises `RuntimeError`: use `aclose()` there.
    #[pyo3(signature = (timeout=None))]
    fn shutdown<'py>(&self, py: Python<'py>, timeout: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.shared;
        let done = s.watching.shutdown(py, timeout, || s.core().begin_shutdown())?;
        let stats = self.stats(py)?;
        s.hub.end_shutdown(done)?;
        Ok(stats)
    }

    /// `shutdown()` for a coroutine: awaits it on a thread of the loop's default executor, so that the loop
    /// goes on running the async sinks' last writes. Returns the final `stats()`.
    #[pyo3(signature = (timeout=None))]
    fn aclose<'py>(slf: &Bound<'py, Self>, timeout: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        slf.get().shared.check()?;
        aclose(slf.as_any(), timeout)
    }

    /// Waits until nothing can happen without the clock moving: every queue is empty, or its worker sleeps
    /// until a later instant between retries. Returns False if `timeout` (seconds) passed first. For tests
    /// with a FakeClock: step the clock, then wait_idle(). Ctrl-C interrupts it; a `KeyboardInterrupt` or
    /// `SystemExit` raised in a sink is raised again here. `RuntimeError` on the asyncio loop of an async sink.
    #[pyo3(signature = (timeout=None))]
    fn wait_idle(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        self.shared.watching.wait_idle(py, timeout)
    }

    /// Counters: received, dropped_incoming, dropped_after_shutdown, dropped_watchers (per watcher name),
    /// aggregated, deduplicated, skipped (spam filter), created, patched, create_errors, patch_errors (sink
    /// calls by verb and result), retries, abandoned, handler_errors,
    /// recorder_waits (recorder calls that waited for fast watchers to catch up), pending (deliveries queued
    /// or under way), and sinks: each sink's health by its watcher's name (up, failing_since, last_success,
    /// last_error, failed_writes, given_up by reason).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.shared.check()?;
        let s = lifecycle::detach(py, || self.shared.core().stats());
        Ok(pythonize::pythonize(py, &s)?.cast_into::<PyDict>()?)
    }
});

impl PyBroadcaster {
    fn start_lines(
        slf: &Bound<'_, Self>,
        kind: &str,
        logger: Option<&Bound<'_, PyAny>>,
        format: fn(&Event) -> String,
    ) -> PyResult<PyWatcher> {
        slf.get().shared.watching.start_lines(slf.as_any(), kind, logger, move |e: &Arc<Event>| format(e))
    }
}

/// client-go's `EventRecorder`: builds events for objects and queues them; never waits for a slow watcher.
#[pyclass(module = "kubevents", name = "Recorder", frozen)]
pub struct PyRecorder {
    core: Recorder,
    binding: Arc<BroadcasterBinding>,
}

/// `fmt % args`, or `fmt` as it is without args.
pub(crate) fn format_message(fmt: &Bound<'_, PyString>, args: &Bound<'_, PyTuple>) -> PyResult<String> {
    if args.is_empty() {
        return Ok(fmt.to_str()?.to_owned());
    }
    let out = fmt.as_any().rem(args)?;
    Ok(out.cast::<PyString>()?.to_str()?.to_owned())
}

/// A recorder call's checks, in client-go's order: the type, then the object's reference.
// Inlined, the reference is built where the recorder call uses it instead of being copied out.
#[inline(always)]
pub(crate) fn checked_call(
    obj: &Bound<'_, PyAny>,
    type_: &Bound<'_, PyString>,
    field_path: Option<&str>,
) -> PyResult<(EventType, ObjectReference)> {
    let type_ = EventType::parse(type_.to_str()?)?;
    Ok((type_, reference_of(obj, field_path)?))
}

impl PyRecorder {
    #[allow(clippy::too_many_arguments)]
    fn generate<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        annotations: Option<BTreeMap<String, String>>,
        type_: &Bound<'_, PyString>,
        reason: String,
        message: String,
        time: Option<crate::time::Time>,
        field_path: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let (b, py) = (&self.binding, obj.py());
        b.check()?;
        let (type_, reference) = checked_call(obj, type_, field_path)?;
        if !self.core.record(reference, annotations.filter(|a| !a.is_empty()), type_, reason, message, time)? {
            return Ok(None);
        }
        b.turns().hand_over(py);
        // Never on an asyncio loop's thread, which the wait would stall, async sinks included.
        if self.core.should_catch_up() && b.running_loop.bind(py).call0()?.is_none() {
            lifecycle::detach(py, || self.core.catch_up());
        }
        Ok(None)
    }
}

/// The `#[pymethods]` of `Recorder` for `$ty`, with `$extra` methods: each converts its arguments, in the same
/// order with the same errors, for `$ty::generate(obj, annotations, type, reason, message, time, field_path)`.
/// `testing::PyRecorderCheck` takes them too, so that its checks cannot drift from the recorder's. The caller
/// imports `str_opt`, `format_message` and `to_time`.
macro_rules! recorder_methods {
    ($ty:ty { $($extra:tt)* }) => {
        #[pymethods]
        impl $ty {
            /// Records an event for `obj` with `message` as given.
            #[pyo3(signature = (obj, r#type, reason, message, *, field_path=None))]
            fn event<'py>(
                &self,
                obj: &Bound<'py, PyAny>,
                #[pyo3(from_py_with = str_opt::event_type)] r#type: Bound<'_, PyString>,
                #[pyo3(from_py_with = str_opt::reason)] reason: String,
                #[pyo3(from_py_with = str_opt::message)] message: String,
                field_path: Option<&str>,
            ) -> PyResult<Option<Bound<'py, PyTuple>>> {
                self.generate(obj, None, &r#type, reason, message, None, field_path)
            }

            /// Records an event whose message is `fmt % args` (or `fmt` as it is when no args are given).
            #[pyo3(signature = (obj, r#type, reason, fmt, *args, field_path=None))]
            #[allow(clippy::too_many_arguments)]
            fn eventf<'py>(
                &self,
                obj: &Bound<'py, PyAny>,
                #[pyo3(from_py_with = str_opt::event_type)] r#type: Bound<'_, PyString>,
                #[pyo3(from_py_with = str_opt::reason)] reason: String,
                #[pyo3(from_py_with = str_opt::fmt)] fmt: Bound<'_, PyString>,
                args: &Bound<'_, PyTuple>,
                field_path: Option<&str>,
            ) -> PyResult<Option<Bound<'py, PyTuple>>> {
                let message = format_message(&fmt, args)?;
                self.generate(obj, None, &r#type, reason, message, None, field_path)
            }

            /// `eventf` with annotations on the event.
            #[pyo3(signature = (obj, annotations, r#type, reason, fmt, *args, field_path=None))]
            #[allow(clippy::too_many_arguments)]
            fn annotated_eventf<'py>(
                &self,
                obj: &Bound<'py, PyAny>,
                annotations: Option<BTreeMap<String, String>>,
                #[pyo3(from_py_with = str_opt::event_type)] r#type: Bound<'_, PyString>,
                #[pyo3(from_py_with = str_opt::reason)] reason: String,
                #[pyo3(from_py_with = str_opt::fmt)] fmt: Bound<'_, PyString>,
                args: &Bound<'_, PyTuple>,
                field_path: Option<&str>,
            ) -> PyResult<Option<Bound<'py, PyTuple>>> {
                let message = format_message(&fmt, args)?;
                self.generate(obj, annotations, &r#type, reason, message, None, field_path)
            }

            /// `eventf` for something that happened at `timestamp` (a datetime or epoch seconds), which becomes
            /// the event's first and last timestamp.
            #[pyo3(signature = (obj, timestamp, r#type, reason, fmt, *args, field_path=None))]
            #[allow(clippy::too_many_arguments)]
            fn past_eventf<'py>(
                &self,
                obj: &Bound<'py, PyAny>,
                timestamp: &Bound<'_, PyAny>,
                #[pyo3(from_py_with = str_opt::event_type)] r#type: Bound<'_, PyString>,
                #[pyo3(from_py_with = str_opt::reason)] reason: String,
                #[pyo3(from_py_with = str_opt::fmt)] fmt: Bound<'_, PyString>,
                args: &Bound<'_, PyTuple>,
                field_path: Option<&str>,
            ) -> PyResult<Option<Bound<'py, PyTuple>>> {
                let t = to_time(timestamp, "timestamp")?;
                let message = format_message(&fmt, args)?;
                self.generate(obj, None, &r#type, reason, message, Some(t), field_path)
            }

            $($extra)*
        }
    };
}
pub(crate) use recorder_methods;

recorder_methods!(PyRecorder {
    /// The event source: `{"component": ..., "host": ...}`.
    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let source = self.core.source();
        let d = PyDict::new(py);
        d.set_item("component", &source.component)?;
        d.set_item("host", &source.host)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let source = self.core.source();
        format!("Recorder(component={:?}, host={:?})", source.component, source.host)
    }
});
