//! `kubevents.pleg.PodCache`, and pod statuses and inspection errors as the cache keeps them.

use std::sync::Arc;

use pyo3::exceptions::{PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::aio;
use super::pod::{same_str, string};
use crate::gate::Owned;
use crate::pleg::cache::{Lookup, Waiter};
use crate::pleg::pod::StatusFields;
use crate::pleg::{PodCache, StatusView};
use crate::py::clock::{timeout_arg, to_datetime, to_time};
use crate::py::convert::{expected, get};
use crate::py::lifecycle;
use crate::time::Time;

/// A status dict with the fields the PLEG reads parsed once.
#[derive(Clone)]
pub struct PyStatus(Arc<(Py<PyAny>, StatusFields)>);

impl PyStatus {
    /// Reads `ips`, `sandbox_statuses` (`id`, `state` SANDBOX_READY / SANDBOX_NOTREADY), `timestamp`, and the
    /// state of the `container_statuses` entry whose `id` is the first sandbox's.
    pub(super) fn from_py(v: &Bound<'_, PyAny>, path: &str) -> PyResult<Self> {
        let d = v.cast::<PyDict>().map_err(|_| expected(path, "a status dict", v))?;
        let ips = match get(d, "ips")? {
            None => Vec::new(),
            Some(l) => l
                .try_iter()
                .map_err(|_| expected(format_args!("{path}.ips"), "a list of str", &l))?
                .enumerate()
                .map(|(i, x)| string(&x?, &|| format!("{path}.ips[{i}]")))
                .collect::<PyResult<_>>()?,
        };
        let mut sandbox_ready = false;
        let mut sandboxes = Vec::new();
        if let Some(l) = get(d, "sandbox_statuses")? {
            let it =
                l.try_iter().map_err(|_| expected(format_args!("{path}.sandbox_statuses"), "a list of dicts", &l))?;
            for (i, s) in it.enumerate() {
                let s = s?;
                let p = format!("{path}.sandbox_statuses[{i}]");
                let sd = s.cast::<PyDict>().map_err(|_| expected(&p, "a dict", &s))?;
                if let Some(id) = get(sd, "id")? {
                    sandboxes.push(string(&id, &|| format!("{p}.id"))?);
                }
                if let Some(st) = get(sd, "state")? {
                    let st = string(&st, &|| format!("{p}.state"))?;
                    sandbox_ready |= StatusFields::sandbox_state_ready(&st)
                        .map_err(|e| PyValueError::new_err(format!("{p}.state: {e}")))?;
                }
            }
        }
        let timestamp = get(d, "timestamp")?.map(|t| to_time(&t, &format!("{path}.timestamp"))).transpose()?;
        // `getPodSandboxState`: only the container status carrying the first sandbox's id matters.
        let mut sandbox_running = false;
        if let (Some(first), Some(l)) = (sandboxes.first(), get(d, "container_statuses")?) {
            for c in l.try_iter()? {
                let c = c?;
                let Ok(cd) = c.cast::<PyDict>() else { continue };
                let is_sandbox = get(cd, "id")?.is_some_and(|id| same_str(&id, first));
                if is_sandbox && get(cd, "state")?.is_some_and(|st| same_str(&st, "running")) {
                    sandbox_running = true;
                }
            }
        }
        let fields = StatusFields { ips, sandboxes, sandbox_ready, timestamp, sandbox_running };
        Ok(PyStatus(Arc::new((v.clone().unbind(), fields))))
    }

    pub(super) fn object<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.0 .0.bind(py).clone()
    }
}

impl StatusView for PyStatus {
    fn fields(&self) -> &StatusFields {
        &self.0 .1
    }

    /// A shallow copy of the dict with the other IPs: the caller's dict is left alone.
    fn with_ips(&self, ips: Vec<String>) -> Self {
        let (obj, fields) = &*self.0;
        let copy = lifecycle::attach(|py| {
            let copy = || -> PyResult<Py<PyAny>> {
                let d = obj.bind(py).cast::<PyDict>()?.copy()?;
                d.set_item("ips", PyList::new(py, &ips)?)?;
                Ok(d.into_any().unbind())
            };
            copy().unwrap_or_else(|_| obj.clone_ref(py))
        });
        PyStatus(Arc::new((copy, StatusFields { ips, ..fields.clone() })))
    }
}

/// An exception instance stored with a status.
#[derive(Clone)]
pub struct PyErrValue(pub(super) Arc<Py<PyAny>>);

impl PyErrValue {
    pub(super) fn from_err(py: Python<'_>, e: PyErr) -> Self {
        PyErrValue(Arc::new(e.into_value(py).into_any()))
    }
}

type Cache = PodCache<PyStatus, PyErrValue>;

/// The Python form of a cache read: `(status, error)`, with `{"id": uid}` for a miss.
fn lookup_to_py<'py>(py: Python<'py>, uid: &str, l: &Lookup<PyStatus, PyErrValue>) -> PyResult<Bound<'py, PyTuple>> {
    let (status, err) = match l {
        Lookup::Missing => {
            let d = PyDict::new(py);
            d.set_item("id", uid)?;
            (d.into_any(), py.None().into_bound(py))
        }
        Lookup::Found(e) => (
            e.status.as_ref().map_or_else(|| py.None().into_bound(py), |s| s.object(py)),
            e.err.as_ref().map_or_else(|| py.None().into_bound(py), |x| x.0.bind(py).clone()),
        ),
    };
    PyTuple::new(py, [status, err])
}

/// The pod status cache (`kubecontainer.Cache`): the latest status and inspection error per pod, a global
/// timestamp, and waiters for fresh data.
#[pyclass(module = "kubevents.pleg", name = "PodCache", frozen)]
pub struct PyPodCache {
    pub(super) inner: Owned<Cache>,
}

#[pymethods]
impl PyPodCache {
    /// `evented=True` applies the EventedPLEG rule: `set` rejects data older than the stored entry.
    #[new]
    #[pyo3(signature = (*, evented=false))]
    fn new(evented: bool) -> Self {
        PyPodCache { inner: Owned::new(Arc::new(PodCache::new(evented)), "PodCache") }
    }

    #[getter]
    fn evented(&self) -> PyResult<bool> {
        Ok(self.inner.checked()?.evented())
    }

    /// `(status, error)`; a miss gives `({"id": uid}, None)`.
    fn get<'py>(&self, py: Python<'py>, uid: &str) -> PyResult<Bound<'py, PyTuple>> {
        lookup_to_py(py, uid, &self.inner.checked()?.get(uid))
    }

    /// Stores the status and error; the timestamp (datetime or epoch seconds, None for Go's zero time) is
    /// the entry's modification time. Returns False when the evented rule rejected it.
    #[pyo3(signature = (uid, status, error=None, timestamp=None))]
    fn set(
        &self,
        py: Python<'_>,
        uid: &str,
        status: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let cache = self.inner.checked()?;
        let status = status.map(|s| PyStatus::from_py(s, "status")).transpose()?;
        let err = error.map(|e| PyErrValue(Arc::new(e.clone().unbind())));
        // None is Go's zero time.Time: older than any real instant.
        let ts = timestamp.map(|t| to_time(t, "timestamp")).transpose()?.unwrap_or(Time(i64::MIN));
        Ok(lifecycle::detach(py, || cache.set(uid, status, err, ts)))
    }

    /// Removes the entry (waiters are not woken).
    fn delete(&self, uid: &str) -> PyResult<()> {
        self.inner.checked()?.delete(uid);
        Ok(())
    }

    /// Sets the global timestamp and wakes the waiters it satisfies.
    fn update_time(&self, py: Python<'_>, timestamp: &Bound<'_, PyAny>) -> PyResult<()> {
        let cache = self.inner.checked()?;
        let t = to_time(timestamp, "timestamp")?;
        lifecycle::detach(py, || cache.update_time(t));
        Ok(())
    }

    /// `SetObservedTime` (Era C): the pod is fresh as of `timestamp` though its status is unchanged. Wakes
    /// that pod's waiters as `update_time` would; later waits before that time return at once.
    fn set_observed_time(&self, py: Python<'_>, uid: &str, timestamp: &Bound<'_, PyAny>) -> PyResult<()> {
        let cache = self.inner.checked()?;
        let t = to_time(timestamp, "timestamp")?;
        lifecycle::detach(py, || cache.set_observed_time(uid, t));
        Ok(())
    }

    /// The pod's latest `set_observed_time`, None if it has none.
    fn observed_time<'py>(&self, py: Python<'py>, uid: &str) -> PyResult<Option<Bound<'py, pyo3::types::PyDateTime>>> {
        self.inner.checked()?.observed_time(uid).map(|t| to_datetime(py, t)).transpose()
    }

    /// The global timestamp, None before the first `update_time`.
    #[getter]
    fn timestamp<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDateTime>>> {
        self.inner.checked()?.timestamp().map(|t| to_datetime(py, t)).transpose()
    }

    /// Number of pods with an entry.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.inner.checked()?.len())
    }

    /// Number of pending `get_newer_than` waiters.
    #[getter]
    fn waiters(&self) -> PyResult<usize> {
        Ok(self.inner.checked()?.waiters())
    }

    /// `GetNewerThan`: `(status, error)` once the pod's data (or the global timestamp) is newer than `t`.
    /// Blocks with the GIL released; raises TimeoutError after `timeout` seconds (None waits forever). Ctrl-C
    /// interrupts the wait.
    #[pyo3(signature = (uid, t, timeout=None))]
    fn get_newer_than<'py>(
        &self,
        py: Python<'py>,
        uid: &str,
        t: &Bound<'py, PyAny>,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let cache = self.inner.checked()?;
        let min = to_time(t, "t")?;
        let timeout = timeout_arg(timeout)?;
        let got = cache.get_newer_than_with(uid, min, |ready| lifecycle::wait_until(py, timeout, ready).map(drop))?;
        match got {
            Some(v) => lookup_to_py(py, uid, &v),
            None => Err(PyTimeoutError::new_err(format!(
                "no status of pod {uid:?} newer than {} within the timeout",
                min.to_rfc3339_micro()
            ))),
        }
    }

    /// The awaitable form of `get_newer_than` (no thread is blocked while it waits).
    fn get_newer_than_async<'py>(
        &self,
        py: Python<'py>,
        uid: &str,
        t: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cache = self.inner.checked()?;
        let min = to_time(t, "t")?;
        let loop_ = py.import("asyncio")?.call_method0("get_running_loop")?;
        let fut = loop_.call_method0("create_future")?;
        let resolve = aio(py)?.getattr("resolve")?;
        let (l, f, r, id) = (loop_.unbind(), fut.clone().unbind(), resolve.unbind(), uid.to_owned());
        let cb = move |v: Lookup<PyStatus, PyErrValue>| {
            lifecycle::attach(|py| {
                let Ok(value) = lookup_to_py(py, &id, &v) else { return };
                // The loop may be closed by now; nobody is waiting then.
                let _ = l.bind(py).call_method1("call_soon_threadsafe", (r.bind(py), f.bind(py), value));
            })
        };
        lifecycle::detach(py, || cache.subscribe(uid, min, Waiter::Callback(Box::new(cb))));
        Ok(fut)
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|c| format!("PodCache({} pods, evented={})", c.len(), c.evented()))
    }
}
