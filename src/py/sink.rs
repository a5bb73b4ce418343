//! Python objects as event sinks: `create(event) -> dict`, `patch(event, patch: bytes) -> dict`, plain or
//! `async def`. Async methods run on the asyncio loop that was running when the sink was attached
//! (pyo3-async-runtimes); the calling worker thread waits for them without the GIL.
//!
//! `call` and `classify` are independent of the event API, for recorders of other event types.

use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString};
use pyo3_async_runtimes::TaskLocals;
use std::sync::Arc;
use std::time::Duration;

use super::gil::GilTurns;
use super::lifecycle;

use super::convert::{event_from_py, event_to_py};
use crate::event::{AnswerState, Event};
use crate::gate::Birth;
use crate::sink::{EventSink, WriteError};

/// How often a wait for an async sink's call looks whether its loop still runs.
const LOOP_CHECK: Duration = Duration::from_millis(100);

/// A failed sink call as a write error, as `WriteError::from_call` classifies it: by the exception's HTTP
/// `status` (the official clients' `ApiException`) and `body`, else `TypeError`/`ValueError` give up.
pub fn classify(py: Python<'_>, err: &PyErr) -> WriteError {
    let value = err.value(py);
    let kind = value.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    let message = format!("{kind}: {value}");
    let attr = |name| value.getattr_opt(name).ok().flatten();
    let status = attr(intern!(py, "status")).filter(|s| s.is_instance_of::<PyInt>()).and_then(|s| s.extract().ok());
    let body = attr(intern!(py, "body"));
    let body = body.as_ref().and_then(|b| match b.cast::<PyBytes>() {
        Ok(b) => Some(b.as_bytes()),
        Err(_) => b.cast::<PyString>().ok()?.to_str().ok().map(str::as_bytes),
    });
    let invalid = err.is_instance_of::<PyTypeError>(py) || err.is_instance_of::<PyValueError>(py);
    WriteError::from_call(status, body, invalid, message).with_kind(kind)
}

/// What a broadcaster keeps of what its sinks and callbacks raised.
pub type Failures = crate::sink::Failures<PyErr>;

/// Keeps `err` for a caller's thread to raise again if it is not an `Exception` (`KeyboardInterrupt`,
/// `SystemExit`), and says so.
pub fn keep_interrupt(failures: &Failures, py: Python<'_>, err: &PyErr) -> bool {
    if err.is_instance_of::<PyException>(py) {
        return false;
    }
    failures.keep(|| err.clone_ref(py));
    true
}

/// `err`'s traceback, the first time an error of its type is raised at its place; else None.
pub fn traceback_once(failures: &Failures, py: Python<'_>, err: &PyErr) -> Option<String> {
    let mut place = err.get_type(py).name().map(|n| n.to_string()).unwrap_or_default();
    let mut tb = err.traceback(py);
    while let Some(t) = tb {
        let next = t.getattr(intern!(py, "tb_next")).ok().and_then(|n| n.cast_into().ok());
        if next.is_none() {
            let line = t.getattr(intern!(py, "tb_lineno")).map(|l| l.to_string()).unwrap_or_default();
            let file = t
                .getattr(intern!(py, "tb_frame"))
                .and_then(|f| f.getattr(intern!(py, "f_code")))
                .and_then(|c| c.getattr(intern!(py, "co_filename")))
                .map(|f| f.to_string())
                .unwrap_or_default();
            place = format!("{place} at {file}:{line}");
        }
        tb = next;
    }
    if !failures.first_report(place) {
        return None;
    }
    // Type, value and traceback apart: before Python 3.12 the value alone may not carry its traceback.
    let lines = py
        .import(intern!(py, "traceback"))
        .and_then(|m| {
            m.call_method1(intern!(py, "format_exception"), (err.get_type(py), err.value(py), err.traceback(py)))
        })
        .and_then(|l| l.extract::<Vec<String>>());
    lines.ok().map(|l| l.concat().trim_end().to_owned())
}

/// What both broadcasters' bindings keep besides their core: the fork generation they were made in, the
/// asyncio loops of their async sinks (a blocking wait on one would stop the loop its sink needs) and what
/// their sinks and callbacks raised.
pub struct Guard {
    birth: Birth,
    sink_loops: Py<PyList>,
    pub failures: Arc<Failures>,
}

impl Guard {
    /// The guard of a `what` (the class's name, for the errors) made now.
    pub fn new(py: Python<'_>, what: &'static str) -> Self {
        let sink_loops = PyList::empty(py).unbind();
        Guard { birth: Birth::now(what), sink_loops, failures: Arc::default() }
    }

    /// Inherited through `os.fork()`.
    pub fn is_forked(&self) -> bool {
        self.birth.is_forked()
    }

    /// Raises when inherited through `os.fork()`.
    pub fn check(&self) -> PyResult<()> {
        Ok(self.birth.check()?)
    }

    /// Raises for a blocking call `what` on the asyncio loop of an async sink.
    pub fn refuse_on_sink_loop(&self, py: Python<'_>, what: &str) -> PyResult<()> {
        lifecycle::refuse_on_sink_loop(py, self.sink_loops.bind(py), what)
    }

    /// `lifecycle::wait_until`, then raises the `KeyboardInterrupt` or `SystemExit` a sink raised, if any.
    pub fn wait(
        &self,
        py: Python<'_>,
        timeout: Option<Duration>,
        done: impl FnMut(Duration) -> bool + Send,
    ) -> PyResult<bool> {
        let done = lifecycle::wait_until(py, timeout, done)?;
        self.failures.take().map_or(Ok(done), Err)
    }

    /// Remembers the loop of `sink`, once it records, if it is async.
    pub fn add_sink(&self, py: Python<'_>, sink: &PySink) -> PyResult<()> {
        match sink.locals.as_ref() {
            Some(l) => self.sink_loops.bind(py).append(l.event_loop(py)),
            None => Ok(()),
        }
    }
}

/// A Python sink's methods and, for async ones, the loop they run on.
pub struct PySink {
    /// The sink's class, for the lines of its health.
    class: String,
    pub create: Py<PyAny>,
    pub patch: Py<PyAny>,
    locals: Option<TaskLocals>,
    turns: Arc<GilTurns>,
    failures: Arc<Failures>,
}

fn is_running(event_loop: &Bound<'_, PyAny>) -> bool {
    let py = event_loop.py();
    event_loop.call_method0(intern!(py, "is_running")).and_then(|r| r.is_truthy()).unwrap_or(false)
}

fn is_coroutine_function(py: Python<'_>, f: &Bound<'_, PyAny>) -> PyResult<bool> {
    py.import(intern!(py, "inspect"))?.call_method1(intern!(py, "iscoroutinefunction"), (f,))?.is_truthy()
}

impl PySink {
    /// A sink's `create` and `patch`, or a TypeError saying which is missing.
    pub fn methods<'py>(sink: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let method = |name: &str| -> PyResult<Bound<'py, PyAny>> {
            match sink.getattr_opt(name)? {
                Some(m) if m.is_callable() => Ok(m),
                _ => Err(PyTypeError::new_err(format!(
                    "sink: '{}' object has no {name}() method; a sink needs create(event) and patch(event, patch)",
                    sink.get_type().name()?
                ))),
            }
        };
        Ok((method("create")?, method("patch")?))
    }

    /// Checks the sink and, if any of its methods is `async def`, captures the running loop.
    pub fn new(sink: &Bound<'_, PyAny>, turns: Arc<GilTurns>, failures: Arc<Failures>) -> PyResult<Self> {
        let py = sink.py();
        let (create, patch) = Self::methods(sink)?;
        let is_async = is_coroutine_function(py, &create)? || is_coroutine_function(py, &patch)?;
        let locals = if is_async {
            let event_loop = pyo3_async_runtimes::get_running_loop(py).map_err(|_| {
                PyValueError::new_err(
                    "sink: an async sink runs on the asyncio loop that is running when it is attached; call \
                     start_recording_to_sink from a coroutine",
                )
            })?;
            Some(TaskLocals::new(event_loop))
        } else {
            None
        };
        let class = sink.get_type().name()?.to_string();
        Ok(PySink { class, create: create.unbind(), patch: patch.unbind(), locals, turns, failures })
    }

    /// The sink's class.
    pub fn class(&self) -> &str {
        &self.class
    }

    /// A failed call as a write error. An exception that is not an `Exception` (`KeyboardInterrupt`,
    /// `SystemExit`) is never retried: it is kept for the broadcaster to raise again on a caller's thread.
    /// An error that is not an API error carries its traceback the first time it is seen at its place.
    pub fn fail(&self, py: Python<'_>, err: &PyErr) -> WriteError {
        if keep_interrupt(&self.failures, py, err) {
            return WriteError::interrupted(&err.get_type(py).name().map(|n| n.to_string()).unwrap_or_default());
        }
        let mut e = classify(py, err);
        if e.status.is_none() {
            e.traceback = traceback_once(&self.failures, py, err);
        }
        e
    }

    /// Calls `method(*args)`; an awaitable result is awaited on the sink's loop, without the GIL.
    pub fn call<'py, const N: usize>(
        &self,
        py: Python<'py>,
        method: &Py<PyAny>,
        args: [&Bound<'py, PyAny>; N],
    ) -> Result<Bound<'py, PyAny>, WriteError> {
        let out = lifecycle::call(method.bind(py), args).map_err(|e| self.fail(py, &e))?;
        // A dict or None is the common answer; looking up `__await__` on it would raise and catch inside.
        if out.is_none() || out.cast::<PyDict>().is_ok() || !out.hasattr(intern!(py, "__await__")).unwrap_or(false) {
            return Ok(out);
        }
        let Some(locals) = &self.locals else {
            return Err(WriteError::give_up(
                "the sink returned an awaitable from a method that is not async def; no loop to run it on",
            ));
        };
        let event_loop = locals.event_loop(py);
        if !is_running(&event_loop) {
            let _ = out.call_method0(intern!(py, "close"));
            return Err(WriteError::give_up("the asyncio loop of the async sink is not running (stopped or closed)"));
        }
        let future = pyo3_async_runtimes::into_future_with_locals(locals, out).map_err(|e| self.fail(py, &e))?;
        let event_loop = event_loop.unbind();
        // A loop that stops while the call is pending would leave this thread waiting forever.
        let result = lifecycle::detach(py, || {
            crate::threads::block_on(future, LOOP_CHECK, || lifecycle::attach(|py| is_running(event_loop.bind(py))))
        });
        match result {
            Some(r) => r.map(|v| v.into_bound(py)).map_err(|e| self.fail(py, &e)),
            None => Err(WriteError::give_up("the asyncio loop of the async sink stopped during the call")),
        }
    }

    /// The server's event from a sink's answer, or None when it is `sent` updated in place: for None (written
    /// as sent) and for the very dict that was sent, read back only for what the correlator keeps of an answer.
    fn answer(
        &self,
        sent: &mut Event,
        sent_dict: &Bound<'_, PyDict>,
        out: Bound<'_, PyAny>,
    ) -> Result<Option<Event>, WriteError> {
        let py = out.py();
        if out.is_none() {
            return Ok(None);
        }
        if out.is(sent_dict) {
            return state_fields(py, sent, sent_dict)
                .map(|()| None)
                .map_err(|e| WriteError::give_up(format!("sink answer: {e}")));
        }
        event_from_py(&out).map(Some).map_err(|e| WriteError::give_up(format!("sink answer: {}", e.value(py))))
    }
}

/// Takes the fields `UpdateState` keeps (name, resourceVersion, count, firstTimestamp) from `d` into `e`.
fn state_fields<'py>(py: Python<'py>, e: &mut Event, d: &Bound<'py, PyDict>) -> PyResult<()> {
    let text = |v: Option<Bound<'py, PyAny>>, what: &str| -> PyResult<Option<Bound<'py, PyString>>> {
        match v.filter(|v| !v.is_none()) {
            None => Ok(None),
            Some(v) => v
                .cast_into::<PyString>()
                .map(Some)
                .map_err(|_| PyTypeError::new_err(format!("event.{what}: expected str"))),
        }
    };
    let mut meta = None;
    if let Some(m) = d.get_item(intern!(py, "metadata"))?.filter(|m| !m.is_none()) {
        let m = m.cast::<PyDict>().map_err(|_| PyTypeError::new_err("event.metadata: expected a dict"))?;
        let name = text(m.get_item(intern!(py, "name"))?, "metadata.name")?;
        let resource_version = text(m.get_item(intern!(py, "resourceVersion"))?, "metadata.resourceVersion")?;
        meta = Some((name, resource_version));
    }
    let count = match d.get_item(intern!(py, "count"))?.filter(|v| !v.is_none()) {
        None => 0,
        Some(v) => v.extract::<i32>().map_err(|_| PyTypeError::new_err("event.count: expected an int32"))?,
    };
    let first = text(d.get_item(intern!(py, "firstTimestamp"))?, "firstTimestamp")?;
    let meta = match &meta {
        Some((name, resource_version)) => Some((str_or_empty(name)?, str_or_empty(resource_version)?)),
        None => None,
    };
    let first_timestamp = str_or_empty(&first)?;
    Ok(e.take_state(&AnswerState { meta, count, first_timestamp })?)
}

/// The text of an optional str; empty when absent.
fn str_or_empty<'a>(s: &'a Option<Bound<'_, PyString>>) -> PyResult<&'a str> {
    s.as_ref().map_or(Ok(""), |s| s.to_str())
}

impl EventSink for PySink {
    fn create(&self, event: &Event) -> Result<Event, WriteError> {
        let mut e = event.clone();
        self.create_in_place(&mut e).map(|answer| answer.unwrap_or(e))
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> Result<Event, WriteError> {
        let mut e = event.clone();
        self.patch_in_place(&mut e, patch).map(|answer| answer.unwrap_or(e))
    }

    fn create_in_place(&self, event: &mut Event) -> Result<Option<Event>, WriteError> {
        lifecycle::attach(|py| {
            let d = event_to_py(py, event).map_err(|e| classify(py, &e))?;
            let out = self.call(py, &self.create, [d.as_any()])?;
            self.answer(event, &d, out)
        })
    }

    fn patch_in_place(&self, event: &mut Event, patch: &[u8]) -> Result<Option<Event>, WriteError> {
        lifecycle::attach(|py| {
            let d = event_to_py(py, event).map_err(|e| classify(py, &e))?;
            let out = self.call(py, &self.patch, [d.as_any(), PyBytes::new(py, patch).as_any()])?;
            self.answer(event, &d, out)
        })
    }

    fn batch(&self, f: &mut dyn FnMut()) {
        self.turns.attach(|_| f())
    }

    fn describe(&self) -> String {
        self.class.clone()
    }
}
