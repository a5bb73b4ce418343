//! `kubevents.pleg.GenericPLEG`, and the Python runtime and watch conditions it calls.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyException, PyRuntimeError, PyTimeoutError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use super::cache::{PyErrValue, PyPodCache, PyStatus};
use super::channel::PyEventChannel;
use super::pod::{pods_from_py, shared_pod};
use super::{raise_abort, runtime_err, to_py};
use crate::error::count_option;
use crate::error::Error;
use crate::gate::Owned;
use crate::metrics::Registration;
use crate::pleg::generic::{Abort, Condition, GenericPleg, Inspection, PlegOptions, RelistDuration, Runtime};
use crate::pleg::records::PodRecords;
use crate::pleg::{EventChannel, Pod};
use crate::py::clock::{clock_arg, duration_into, seconds_arg, timeout_arg, to_datetime, to_duration};
use crate::py::convert::type_name;
use crate::py::errors::{external, int_opt};
use crate::py::lifecycle;

/// A Python object with `get_pods()`, `get_pod_status(pod)` and, for the on-demand relist, `get_pod(uid)`.
pub struct PyRuntime(Py<PyAny>);

impl Runtime for PyRuntime {
    type Status = PyStatus;
    type Error = PyErrValue;

    fn get_pods(&self, known: &PodRecords) -> Result<Vec<Arc<Pod>>, Error> {
        lifecycle::attach(|py| {
            let get_pods = self.0.bind(py).getattr(intern!(py, "get_pods"));
            get_pods.and_then(|f| pods_from_py(&lifecycle::call(&f, [])?, known)).map_err(|e| runtime_err(py, e))
        })
    }

    /// A pod as `get_pods()` lists it; None for a pod the runtime has nothing of.
    fn get_pod(&self, uid: &str) -> Result<Option<Arc<Pod>>, Error> {
        lifecycle::attach(|py| {
            let method = self.0.bind(py).getattr(intern!(py, "get_pod"));
            let got = method.and_then(|m| lifecycle::call(&m, [PyString::new(py, uid).as_any()]));
            let pod = got.and_then(|v| (!v.is_none()).then(|| shared_pod(&v, &|| "get_pod()".into())).transpose());
            pod.map_err(|e| runtime_err(py, e))
        })
    }

    /// Only an `Exception` is the pod's inspection error; anything else raised on the way is an `Abort`.
    fn get_pod_status(&self, pod: &Pod) -> Result<Inspection<PyStatus, PyErrValue>, Abort> {
        let failed = |py: Python<'_>, e: PyErr| {
            if e.is_instance_of::<PyException>(py) {
                Ok(Inspection { status: None, err: Some(PyErrValue::from_err(py, e)), invalid: None })
            } else {
                Err(Abort(external(e)))
            }
        };
        lifecycle::attach(|py| {
            let method = self.0.bind(py).getattr(intern!(py, "get_pod_status"));
            let out = match to_py(py, pod).and_then(|arg| lifecycle::call(&method?, [arg.as_any()])) {
                Ok(o) => o,
                Err(e) => return failed(py, e),
            };
            // A (status, error) pair stores a partial status with the runtime's error, as Go's runtime can.
            let (status, err) = match out.cast::<PyTuple>() {
                Ok(t) if t.len() == 2 => {
                    let (s, e) = (t.get_item(0).ok(), t.get_item(1).ok());
                    (s.filter(|s| !s.is_none()), e.filter(|e| !e.is_none()))
                }
                _ => (Some(out.clone()).filter(|s| !s.is_none()), None),
            };
            let err = err.map(|e| PyErrValue(Arc::new(e.unbind())));
            match status.map(|s| PyStatus::from_py(&s, "get_pod_status()")).transpose() {
                Ok(status) => Ok(Inspection { status, err, invalid: None }),
                Err(e) if !e.is_instance_of::<PyException>(py) => Err(Abort(external(e))),
                Err(e) => {
                    let msg = e.value(py).to_string();
                    let typed =
                        if e.is_instance_of::<PyTypeError>(py) { Error::type_("", msg) } else { Error::value("", msg) };
                    Ok(Inspection { status: None, err: Some(PyErrValue::from_err(py, e)), invalid: Some(typed) })
                }
            }
        })
    }

    fn timeout_error(&self, message: String) -> PyErrValue {
        lifecycle::attach(|py| PyErrValue::from_err(py, PyTimeoutError::new_err(message)))
    }

    /// Ctrl-C while a relist called from Python waits for the loop's relist or for inspection threads.
    fn check_interrupt(&self) -> Result<(), Abort> {
        lifecycle::check_signals().map_err(|e| Abort(external(e)))
    }

    /// Logs the exception that stopped `what`, with its traceback, at ERROR on the `kubevents` logger.
    fn loop_aborted(&self, what: &str, err: &Error) {
        lifecycle::attach(|py| {
            let log = || -> PyResult<()> {
                let e = Abort::external::<PyErr>(err);
                let raised = match e {
                    Some(e) => e.value(py).repr()?.to_string(),
                    None => err.to_string(),
                };
                let msg = format!("{what} stopped: {raised} was raised; the next stop() or healthy() raises it again");
                let kwargs = PyDict::new(py);
                if let Some(e) = e {
                    kwargs.set_item(intern!(py, "exc_info"), (e.get_type(py), e.value(py), e.traceback(py)))?;
                }
                py.import(intern!(py, "logging"))?
                    .call_method1(intern!(py, "getLogger"), ("kubevents",))?
                    .call_method(intern!(py, "error"), (msg,), Some(&kwargs))?;
                Ok(())
            };
            // A broken logging set-up must not keep the loop from ending.
            let _ = log();
        })
    }
}

fn condition_from_py(f: Py<PyAny>) -> Condition<PyStatus> {
    Arc::new(move |s: &PyStatus| {
        lifecycle::attach(|py| {
            lifecycle::call(f.bind(py), [s.object(py).as_any()])
                .and_then(|r| r.is_truthy())
                .map_err(|e| runtime_err(py, e))
        })
    })
}

type Generic = GenericPleg<PyRuntime>;

/// GenericPLEG: relists `runtime` and turns the differences into pod lifecycle events on `watch()`.
#[pyclass(module = "kubevents.pleg", name = "GenericPLEG", frozen, weakref)]
pub struct PyGenericPLEG {
    pub(super) inner: Owned<Generic>,
    cache: Py<PyPodCache>,
    /// Among the live components, for `kubevents.metrics`.
    _registration: Registration,
}

#[pymethods]
impl PyGenericPLEG {
    #[new]
    #[pyo3(signature = (runtime, *, cache, clock=None, relist_period=None, relist_threshold=None, channel_capacity=1000, inspect_concurrency=1, inspect_timeout=None, pod_sync_on_reinspect=false, on_demand_relist=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runtime: Py<PyAny>,
        cache: Py<PyPodCache>,
        clock: Option<&Bound<'_, PyAny>>,
        relist_period: Option<&Bound<'_, PyAny>>,
        relist_threshold: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = int_opt::channel_capacity)] channel_capacity: i64,
        #[pyo3(from_py_with = int_opt::inspect_concurrency)] inspect_concurrency: i64,
        inspect_timeout: Option<&Bound<'_, PyAny>>,
        pod_sync_on_reinspect: bool,
        on_demand_relist: bool,
    ) -> PyResult<Self> {
        for m in ["get_pods", "get_pod_status"] {
            if !runtime.bind(py).hasattr(m)? {
                return Err(PyTypeError::new_err(format!(
                    "runtime: expected an object with get_pods() and get_pod_status(pod), {} has no {m}",
                    type_name(runtime.bind(py))
                )));
            }
        }
        let cache_arc = cache.get().inner.checked()?.clone();
        if on_demand_relist && !runtime.bind(py).hasattr("get_pod")? {
            return Err(PyTypeError::new_err(format!(
                "runtime: on_demand_relist needs get_pod(uid), {} has none",
                type_name(runtime.bind(py))
            )));
        }
        let channel_capacity = count_option("channel_capacity", channel_capacity)?.get();
        let mut options = PlegOptions {
            inspect_concurrency: count_option("inspect_concurrency", inspect_concurrency)?.get(),
            pod_sync_on_reinspect,
            on_demand_relist,
            ..PlegOptions::default()
        };
        duration_into(relist_period, "relist_period", &mut options.duration.period)?;
        duration_into(relist_threshold, "relist_threshold", &mut options.duration.threshold)?;
        if let Some(t) = inspect_timeout {
            options.inspect_timeout = Some(Duration::from_nanos(seconds_arg(t, "inspect_timeout", true)? as u64));
        }
        let channel = Arc::new(EventChannel::new(channel_capacity));
        let inner = Arc::new(GenericPleg::new(PyRuntime(runtime), cache_arc, clock_arg(clock)?, channel, options)?);
        let _registration = crate::metrics::register("GenericPLEG", None, &inner, |p| p.stats());
        Ok(PyGenericPLEG { inner: Owned::new(inner, "GenericPLEG"), cache, _registration })
    }

    /// One relist. Raises what the runtime's `get_pods()` raised (nothing changed then), or, after the relist
    /// completed, the first malformed status or failing watch condition. A `KeyboardInterrupt` or
    /// `SystemExit` from the runtime or a condition stops the relist where it is and is raised; so is Ctrl-C
    /// while it waits for the loop's relist or for inspection threads.
    pub(super) fn relist(&self, py: Python<'_>) -> PyResult<()> {
        let pleg = self.inner.checked()?;
        lifecycle::detach(py, || pleg.relist())?;
        Ok(())
    }

    /// The event channel (the same object every time).
    pub(super) fn watch(&self) -> PyResult<PyEventChannel> {
        let pleg = self.inner.checked()?;
        Ok(PyEventChannel { inner: self.inner.part(pleg.channel().clone(), "EventChannel") })
    }

    /// Relists now and then `relist_period` after each relist ends, on the clock, in a background thread;
    /// with `on_demand_relist`, serves relist requests in between. `RuntimeError` while a loop told to stop
    /// has not ended yet (see `stop`).
    fn start(slf: &Bound<'_, Self>) -> PyResult<()> {
        if !slf.get().inner.checked()?.start()? {
            return Err(PyRuntimeError::new_err(
                "start(): the relist loop told to stop has not ended yet (a runtime call has not returned); \
                 stop() waits for it",
            ));
        }
        lifecycle::track(slf.as_any())?;
        Ok(())
    }

    /// Stops the relist loop, waiting for a relist in progress: up to `timeout` seconds (None: until it
    /// ends), then `TimeoutError`, and the loop ends by itself once the runtime call it is in returns. Ctrl-C
    /// interrupts the wait. Raises, once, the `KeyboardInterrupt` or `SystemExit` that stopped the loop.
    #[pyo3(signature = (timeout=None))]
    fn stop(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let pleg = self.inner.checked()?;
        let timeout = timeout_arg(timeout)?;
        pleg.not_reentered("stop()")?;
        pleg.signal_stop();
        let ended = lifecycle::wait_until(py, timeout, |slice| pleg.wait_stopped(Some(slice)))?;
        raise_abort(py, pleg.take_abort())?;
        if !ended {
            return Err(PyTimeoutError::new_err(
                "stop() timed out: the relist loop ends when the runtime call in progress returns",
            ));
        }
        Ok(())
    }

    /// The loop runs (started, and neither stopped nor ended by a `KeyboardInterrupt` or `SystemExit`).
    #[getter]
    fn running(&self) -> PyResult<bool> {
        Ok(self.inner.checked()?.running())
    }

    /// When the loop's next relist is due on the clock; None while it relists or is stopped. On a fake
    /// clock, wait for this to be set before stepping the clock past it.
    #[getter]
    fn next_relist_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDateTime>>> {
        self.inner.checked()?.next_relist_at().map(|t| to_datetime(py, t)).transpose()
    }

    /// `(True, None)`, or `(False, message)` with the kubelet's message. Raises, once, the
    /// `KeyboardInterrupt` or `SystemExit` that stopped the loop.
    fn healthy(&self, py: Python<'_>) -> PyResult<(bool, Option<String>)> {
        let pleg = self.inner.checked()?;
        raise_abort(py, pleg.take_abort())?;
        Ok(lifecycle::detach(py, || pleg.healthy()))
    }

    /// `SetPodWatchCondition`: `condition(status)` runs after each successful inspection of the pod; when
    /// it returns true it is removed and one `ConditionMet` event is sent (per pod and relist).
    pub(super) fn set_pod_watch_condition(
        &self,
        py: Python<'_>,
        uid: &str,
        key: &str,
        condition: Py<PyAny>,
    ) -> PyResult<()> {
        let pleg = self.inner.checked()?;
        if !condition.bind(py).is_callable() {
            return Err(PyTypeError::new_err("condition must be callable"));
        }
        let cond = condition_from_py(condition);
        lifecycle::detach(py, || pleg.set_pod_watch_condition(uid, key, cond));
        Ok(())
    }

    /// The pod's watch conditions as `{key: version}`, None when the pod has no entry.
    fn watch_conditions(&self, uid: &str) -> PyResult<Option<std::collections::BTreeMap<String, u32>>> {
        Ok(self.inner.checked()?.watch_conditions(uid).map(|v| v.into_iter().collect()))
    }

    /// Pods whose inspection failed and will be inspected again at the next relist.
    fn pods_to_reinspect(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let pleg = self.inner.checked()?;
        Ok(lifecycle::detach(py, || pleg.pods_to_reinspect())?)
    }

    /// Queues a pod for inspection at the next relist even if it did not change (Go's tests write
    /// `podsToReinspect`; with `pod_sync_on_reinspect` this is Era C's `RequestReinspect`).
    fn request_reinspect(&self, py: Python<'_>, uid: &str) -> PyResult<()> {
        let pleg = self.inner.checked()?;
        Ok(lifecycle::detach(py, || pleg.request_reinspect(uid))?)
    }

    /// `RequestRelist` (Era C, `on_demand_relist`): queues an on-demand relist of the pod for the loop, stamped
    /// with the clock's time. Returns False when nothing was queued: the option is off (nothing happens, as
    /// with the gate off) or the queue holds 200 requests already (dropped, counted in `stats()`).
    fn request_relist(&self, py: Python<'_>, uid: &str) -> PyResult<bool> {
        let pleg = self.inner.checked()?;
        Ok(lifecycle::detach(py, || pleg.request_relist(uid))?)
    }

    /// One pass of the relist loop (`workerLoopIteration`) on this thread, without its wait: the global
    /// relist if due (`"relist"`), else one queued relist request (`"relist_pod"`, or `"skipped"` when a
    /// global relist started after it was made); None when nothing was due. Raises what the relist raised
    /// (`get_pod()`'s error included) and, as `relist()` does, a `KeyboardInterrupt` or `SystemExit`. For
    /// driving the loop step by step on a fake clock while it is not started; a stopped PLEG's first pass
    /// relists, as `start()` does.
    fn loop_iteration(&self, py: Python<'_>) -> PyResult<Option<&'static str>> {
        let pleg = self.inner.checked()?;
        Ok(lifecycle::detach(py, || pleg.step())?.name())
    }

    /// `Update`: a new period and threshold (seconds), used from the next wait of the loop.
    fn update(&self, relist_period: &Bound<'_, PyAny>, relist_threshold: &Bound<'_, PyAny>) -> PyResult<()> {
        let pleg = self.inner.checked()?;
        let period = to_duration(relist_period, "relist_period")?;
        let threshold = to_duration(relist_threshold, "relist_threshold")?;
        pleg.update(RelistDuration { period, threshold }.checked("relist")?);
        Ok(())
    }

    #[getter]
    fn relist_period(&self) -> PyResult<f64> {
        Ok(self.inner.checked()?.duration().seconds().0)
    }

    #[getter]
    fn relist_threshold(&self) -> PyResult<f64> {
        Ok(self.inner.checked()?.duration().seconds().1)
    }

    /// When the last successful relist started, None before the first.
    #[getter]
    fn relist_time<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDateTime>>> {
        self.inner.checked()?.relist_time().map(|t| to_datetime(py, t)).transpose()
    }

    #[getter]
    fn cache(&self, py: Python<'_>) -> PyResult<Py<PyPodCache>> {
        self.inner.checked()?;
        Ok(self.cache.clone_ref(py))
    }

    /// The last error of a relist run by the background loop, as text.
    #[getter]
    fn last_error(&self) -> PyResult<Option<String>> {
        Ok(self.inner.checked()?.last_error())
    }

    /// Counters: relists, failures, durations on the clock (seconds), events sent and dropped, inspections,
    /// inspection errors and timeouts, reinspections, on-demand pod relists and their failures, relist
    /// requests queued, skipped and dropped, running pods and containers by state; the kubelet's relist
    /// duration and interval histograms, and `last_seen` (the last successful relist's start, epoch seconds).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.checked()?.stats())
    }

    /// For the exit hook: stops the loop and waits up to `timeout` seconds for it to end. A PLEG holds
    /// nothing to deliver.
    fn _exit_flush(&self, py: Python<'_>, timeout: f64) -> (&'static str, u64, u64) {
        if let Some(pleg) = self.inner.unforked() {
            pleg.signal_stop();
            let wait = Duration::try_from_secs_f64(timeout).unwrap_or_default();
            lifecycle::detach(py, || pleg.wait_stopped(Some(wait)));
        }
        ("GenericPLEG", 0, 0)
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|pleg| {
            let (period, threshold) = pleg.duration().seconds();
            format!("GenericPLEG(relist_period={period}s, relist_threshold={threshold}s)")
        })
    }
}

impl Drop for PyGenericPLEG {
    fn drop(&mut self) {
        // No wait here: the loop may be waiting for the GIL this thread holds.
        if let Some(pleg) = self.inner.unforked() {
            pleg.signal_stop();
        }
    }
}
