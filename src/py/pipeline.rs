//! What the bindings of both broadcasters share: the `kubevents` logger as the pipeline's reporter, the
//! `Watcher` class, watchers that call Python, the shutdown and idle waits, and `aclose`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::clock::{clock_arg, seconds_arg, timeout_arg, to_duration};
use super::gil::GilTurns;
use super::lifecycle;
use super::sink::{keep_interrupt, traceback_once, Guard};
use crate::broadcaster::DEFAULT_CATCH_UP_WAIT;
use crate::error::count_option;
use crate::health::{log_interval_option, Reporter, DEFAULT_LOG_INTERVAL_NANOS};
use crate::pipeline::{Pipeline, PipelineOptions, WatcherHandle};
use crate::sink::{RetryPolicy, DEFAULT_SLEEP_NANOS};
use crate::watch::FullChannel;

/// Logs to the `kubevents` logger.
pub(crate) struct PyReporter {
    pub(crate) logger: Py<PyAny>,
}

impl PyReporter {
    pub(crate) fn new(py: Python<'_>) -> PyResult<Self> {
        let logger = py.import(intern!(py, "logging"))?.call_method1(intern!(py, "getLogger"), ("kubevents",))?;
        Ok(PyReporter { logger: logger.unbind() })
    }

    /// Calls the logger's `level` method with `message`; what it raises is returned, not raised.
    fn log(&self, level: &str, message: &str) -> PyResult<()> {
        lifecycle::attach(|py| {
            let f = self.logger.bind(py).getattr(level)?;
            // Passed as an argument of "%s": a message with a % in it is not a format.
            let args = [PyString::new(py, "%s").into_any(), PyString::new(py, message).into_any()];
            lifecycle::call(&f, args.each_ref()).map(drop)
        })
    }
}

// A broken logging set-up must not stop the pipeline.
impl Reporter for PyReporter {
    fn warn(&self, message: &str) {
        let _ = self.log("warning", message);
    }
    fn error(&self, message: &str) {
        let _ = self.log("error", message);
    }
    fn info(&self, message: &str) {
        let _ = self.log("info", message);
    }
    fn debug(&self, message: &str) {
        let _ = self.log("debug", message);
    }
}

/// The `log_interval` option in seconds: at most one line per failing sink in this time.
pub fn log_interval_arg(v: Option<&Bound<'_, PyAny>>) -> PyResult<i64> {
    match v.filter(|v| !v.is_none()) {
        None => Ok(DEFAULT_LOG_INTERVAL_NANOS),
        Some(v) => Ok(log_interval_option(seconds_arg(v, "log_interval", true)?)?),
    }
}

/// The options both broadcasters' constructors take for their pipeline.
pub struct PipelineArgs<'a, 'py> {
    pub name: Option<String>,
    pub queue_length: i64,
    pub clock: Option<&'a Bound<'py, PyAny>>,
    pub catch_up_wait: Option<&'a Bound<'py, PyAny>>,
    pub log_interval: Option<&'a Bound<'py, PyAny>>,
}

impl PipelineArgs<'_, '_> {
    /// The options of a `kind` of broadcaster (its default name is `<kind>-<n>`), checked.
    pub fn options(self, kind: &'static str, full_channel: FullChannel) -> PyResult<PipelineOptions> {
        let catch_up_wait = match self.catch_up_wait {
            None => DEFAULT_CATCH_UP_WAIT,
            Some(d) => Duration::from_nanos(seconds_arg(d, "catch_up_wait", false)? as u64),
        };
        Ok(PipelineOptions {
            name: crate::metrics::component_name(kind, self.name),
            queue_length: count_option("queue_length", self.queue_length)?.get(),
            full_channel,
            clock: clock_arg(self.clock)?,
            catch_up_wait,
            log_interval: log_interval_arg(self.log_interval)?,
        })
    }
}

/// The retry options: `max_tries` attempts in all, `sleep_duration` apart (client-go's 10 s when None).
pub fn retry_arg(max_tries: i64, sleep_duration: Option<&Bound<'_, PyAny>>) -> PyResult<RetryPolicy> {
    let sleep = sleep_duration.map(|d| to_duration(d, "sleep_duration")).transpose()?;
    Ok(RetryPolicy::new(max_tries, sleep.unwrap_or(DEFAULT_SLEEP_NANOS))?)
}

/// A started watcher of either broadcaster; `stop()` ends it.
#[pyclass(module = "kubevents", name = "Watcher", frozen)]
pub struct PyWatcher {
    inner: Box<dyn WatcherHandle>,
}

impl PyWatcher {
    pub fn new(inner: impl WatcherHandle + 'static) -> Self {
        PyWatcher { inner: Box::new(inner) }
    }
}

#[pymethods]
impl PyWatcher {
    /// Stops the watcher: it gets no more events, and what it had queued is discarded (as in client-go).
    fn stop(&self, py: Python<'_>) {
        lifecycle::detach(py, || self.inner.stop())
    }

    /// The watcher's name in the broadcaster's `stats()["dropped_watchers"]`.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Events this watcher lost because its queue was full.
    #[getter]
    fn dropped(&self) -> u64 {
        self.inner.dropped()
    }

    fn __repr__(&self) -> String {
        format!("Watcher({:?})", self.inner.name())
    }
}

/// What a broadcaster's binding keeps for its watchers: the pipeline, the GIL turns its threads take, and
/// its guard (fork generation, async sinks' loops, what callbacks raised).
pub struct Watching<I, O> {
    pub pipeline: Arc<Pipeline<I, O>>,
    pub turns: Arc<GilTurns>,
    pub guard: Arc<Guard>,
}

impl<I: Send + 'static, O: Clone + Send + 'static> Watching<I, O> {
    /// A logger target: `logger.info` for a `logging.Logger` (or adapter), the callable itself otherwise, the
    /// `kubevents` logger's `info` when None.
    pub fn line_target(py: Python<'_>, logger: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        Ok(match logger.filter(|l| !l.is_none()) {
            None => PyReporter::new(py)?.logger.into_bound(py).getattr("info")?,
            Some(l) if l.hasattr("isEnabledFor")? => l.getattr("info")?,
            Some(l) if l.is_callable() => l.clone(),
            Some(l) => {
                return Err(PyTypeError::new_err(format!(
                    "logger: expected a logging.Logger or a callable taking the line, got {}",
                    l.get_type().name()?
                )))
            }
        }
        .unbind())
    }

    /// Starts a watcher `kind` that calls `target` with `arg` of what `prepare` made of each item without the
    /// GIL; what `target` raises is reported as raised by `what`.
    pub fn start<T: Send + 'static>(
        &self,
        py: Python<'_>,
        kind: &str,
        what: &'static str,
        target: Py<PyAny>,
        prepare: impl Fn(&O) -> T + Send + 'static,
        arg: for<'py> fn(Python<'py>, T) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<PyWatcher> {
        self.guard.check()?;
        // A watcher thread must not keep the broadcaster alive: dropping it is what ends the thread.
        let (pipeline, guard, turns) =
            (Arc::downgrade(&self.pipeline), Arc::downgrade(&self.guard), self.turns.clone());
        let handler = move |items: &[O]| {
            let prepared: Vec<T> = items.iter().map(&prepare).collect();
            turns.attach(|py| {
                for p in prepared {
                    if let Err(e) = arg(py, p).and_then(|a| lifecycle::call(target.bind(py), [&a])) {
                        handler_failed(&pipeline, &guard, py, what, e);
                    }
                }
            })
        };
        let w = lifecycle::detach(py, || self.pipeline.start_event_watcher(kind, handler))?;
        Ok(PyWatcher::new(w))
    }

    /// Starts a watcher `kind` that logs each item as the line `format` makes of it, to `logger` (see
    /// `line_target`), and tracks `owner` for the exit hook.
    pub fn start_lines(
        &self,
        owner: &Bound<'_, PyAny>,
        kind: &str,
        logger: Option<&Bound<'_, PyAny>>,
        format: impl Fn(&O) -> String + Send + 'static,
    ) -> PyResult<PyWatcher> {
        let py = owner.py();
        fn arg(py: Python<'_>, line: String) -> PyResult<Bound<'_, PyAny>> {
            Ok(PyString::new(py, &line).into_any())
        }
        let w = self.start(py, kind, "logger", Self::line_target(py, logger)?, format, arg)?;
        lifecycle::track(owner)?;
        Ok(w)
    }

    /// Waits until nothing can happen without the clock moving (see the broadcasters' `wait_idle`).
    pub fn wait_idle(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        self.guard.check()?;
        let timeout = timeout_arg(timeout)?;
        self.guard.refuse_on_sink_loop(py, "wait_idle()")?;
        self.guard.wait(py, timeout, |slice| self.pipeline.wait_idle(Some(slice)))
    }

    /// Begins the shutdown (`begin`) and waits for its end; returns whether it ended within `timeout`.
    pub fn shutdown(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>, begin: impl FnOnce()) -> PyResult<bool> {
        self.guard.check()?;
        let timeout = timeout_arg(timeout)?;
        self.guard.refuse_on_sink_loop(py, "shutdown()")?;
        begin();
        self.guard.wait(py, timeout, |slice| self.pipeline.wait_shut_down(Some(slice)))
    }

    /// The exit hook's flush: `flush(wait)` answers what was not delivered and what was given up meanwhile;
    /// nothing for a broadcaster inherited through a fork.
    pub fn exit_flush(
        &self,
        py: Python<'_>,
        timeout: f64,
        flush: impl Send + FnOnce(Duration) -> (u64, u64),
    ) -> (u64, u64) {
        if self.guard.is_forked() {
            return (0, 0);
        }
        let wait = Duration::try_from_secs_f64(timeout).unwrap_or_default();
        lifecycle::detach(py, || flush(wait))
    }
}

/// `shutdown(timeout)` of `obj`, awaited on a thread of the running loop's default executor, so that the loop
/// goes on running the async sinks' last writes.
pub fn aclose<'py>(obj: &Bound<'py, PyAny>, timeout: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let event_loop = pyo3_async_runtimes::get_running_loop(py)?;
    let shutdown = py
        .import(intern!(py, "functools"))?
        .getattr(intern!(py, "partial"))?
        .call1((obj.getattr(intern!(py, "shutdown"))?, timeout))?;
    event_loop.call_method1(intern!(py, "run_in_executor"), (py.None(), shutdown))
}

/// `async with`'s entry: a future already done with `obj`.
pub fn aenter<'py>(obj: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let fut = pyo3_async_runtimes::get_running_loop(py)?.call_method0("create_future")?;
    fut.call_method1("set_result", (obj,))?;
    Ok(fut)
}

/// Counts and logs an exception raised by a callback or logger, with its traceback the first time; the
/// watcher goes on. A `KeyboardInterrupt` or `SystemExit` is kept to be raised by `shutdown`/`wait_idle`.
fn handler_failed<I: Send + 'static, O: Clone + Send + 'static>(
    pipeline: &Weak<Pipeline<I, O>>,
    guard: &Weak<Guard>,
    py: Python<'_>,
    what: &str,
    e: PyErr,
) {
    let (Some(p), Some(g)) = (pipeline.upgrade(), guard.upgrade()) else { return e.print(py) };
    let error = e.value(py).repr().map(|r| r.to_string()).unwrap_or_default();
    let kept = keep_interrupt(&g.failures, py, &e);
    let traceback = if kept { None } else { traceback_once(&g.failures, py, &e) };
    p.handler_failed(what, &error, kept, traceback.as_deref());
}

/// `#[pymethods]` for a broadcaster class `$ty`: its own methods, then what both broadcaster classes have alike
/// (pyo3 takes one `#[pymethods]` block per class): the exit hook's `_exit_flush` and the context managers over
/// `$ty`'s `shutdown` and `aclose`. `$ty` holds `shared`, with `watching`, `registration` and a `core()` whose
/// `exit_flush(wait)` answers the events not delivered and those given up.
macro_rules! broadcaster_pymethods {
    ($ty:ty { $($methods:tt)* }) => {
        #[pyo3::pymethods]
        impl $ty {
            $($methods)*

            /// For the exit hook: shuts down, waiting up to `timeout` seconds, and answers what was not delivered.
            fn _exit_flush(&self, py: pyo3::Python<'_>, timeout: f64) -> (String, u64, u64) {
                let s = &self.shared;
                let (undelivered, given_up) = s.watching.exit_flush(py, timeout, |wait| s.core().exit_flush(wait));
                (s.registration.name().to_owned(), undelivered, given_up)
            }

            fn __enter__(slf: pyo3::Py<Self>) -> pyo3::Py<Self> {
                slf
            }

            #[pyo3(signature = (*_exc))]
            fn __exit__(
                &self,
                py: pyo3::Python<'_>,
                _exc: &pyo3::Bound<'_, pyo3::types::PyTuple>,
            ) -> pyo3::PyResult<()> {
                self.shutdown(py, None)?;
                Ok(())
            }

            fn __aenter__<'py>(slf: pyo3::Bound<'py, Self>) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                $crate::py::pipeline::aenter(slf.into_any())
            }

            /// `aclose()`: shuts down off the loop, so that async sinks can still run on it.
            #[pyo3(signature = (*_exc))]
            fn __aexit__<'py>(
                slf: pyo3::Bound<'py, Self>,
                _exc: &pyo3::Bound<'py, pyo3::types::PyTuple>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                Self::aclose(&slf, None)
            }
        }
    };
}
pub(crate) use broadcaster_pymethods;
