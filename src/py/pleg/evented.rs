//! `kubevents.pleg.EventedPLEG`, and CRI events from Python data.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::cache::PyStatus;
use super::channel::PyEventChannel;
use super::generic::{PyGenericPLEG, PyRuntime};
use super::pod::string;
use super::{raise_abort, runtime_err, to_py};
use crate::error::{int_option, Error};
use crate::gate::Owned;
use crate::metrics::Registration;
use crate::pleg::evented::{ContainerEventSource, CriEvent, CriEventType, EventedOptions, EventedPleg};
use crate::py::clock::duration_into;
use crate::py::convert::{expected, get};
use crate::py::errors::int_opt;
use crate::py::lifecycle;
use crate::time::Time;

fn cri_event_from_py(v: &Bound<'_, PyAny>, path: &str) -> PyResult<CriEvent<PyStatus>> {
    let d = v.cast::<PyDict>().map_err(|_| expected(path, "a dict", v))?;
    let need = |k: &str| get(d, k)?.ok_or_else(|| PyValueError::new_err(format!("{path}: missing {k:?}")));
    let container_id = string(&need("container_id")?, &|| format!("{path}.container_id"))?;
    let pod_uid = get(d, "pod_uid")?.map(|u| string(&u, &|| format!("{path}.pod_uid"))).transpose()?;
    let t = need("type")?;
    let type_text =
        if let Ok(n) = t.extract::<i64>() { n.to_string() } else { string(&t, &|| format!("{path}.type"))? };
    let kind = CriEventType::parse(&type_text).map_err(|e| PyValueError::new_err(format!("{path}.{e}")))?;
    let created = need("created_at")?;
    let created_at = created
        .extract::<i64>()
        .map(Time)
        .map_err(|_| expected(format_args!("{path}.created_at"), "int nanoseconds", &created))?;
    let status = PyStatus::from_py(&need("pod_status")?, &format!("{path}.pod_status"))?;
    Ok(CriEvent { container_id, pod_uid, kind, created_at, status })
}

/// A Python object whose `get_container_events()` returns an iterable of CRI event dicts.
struct PySource(Py<PyAny>);

impl ContainerEventSource<PyStatus> for PySource {
    fn stream(&self, sink: &mut dyn FnMut(CriEvent<PyStatus>) -> bool) -> Result<(), Error> {
        lifecycle::attach(|py| {
            let mut stream = || -> PyResult<()> {
                let events = lifecycle::call(&self.0.bind(py).getattr(intern!(py, "get_container_events"))?, [])?;
                // Each item may wait on the runtime's stream: fetched through the exit fence, as the calls are.
                let next = events.try_iter()?.getattr(intern!(py, "__next__"))?;
                for i in 0.. {
                    let item = match lifecycle::call(&next, []) {
                        Ok(item) => item,
                        Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => break,
                        Err(e) => return Err(e),
                    };
                    if !sink(cri_event_from_py(&item, &format!("event[{i}]"))?) {
                        break;
                    }
                }
                Ok(())
            };
            stream().map_err(|e| runtime_err(py, e))
        })
    }
}

/// EventedPLEG: CRI container events into the shared cache and event channel of a GenericPLEG.
#[pyclass(module = "kubevents.pleg", name = "EventedPLEG", frozen, weakref)]
pub struct PyEventedPLEG {
    inner: Owned<EventedPleg<PyRuntime>>,
    generic: Py<PyGenericPLEG>,
    source: Option<Arc<dyn ContainerEventSource<PyStatus>>>,
    /// Among the live components, for `kubevents.metrics`.
    _registration: Registration,
}

#[pymethods]
impl PyEventedPLEG {
    #[new]
    #[pyo3(signature = (generic, *, runtime_service=None, max_stream_retries=5, relist_period=None, relist_threshold=None, fallback_relist_period=None, fallback_relist_threshold=None, cache_update_period=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        generic: Py<PyGenericPLEG>,
        runtime_service: Option<Py<PyAny>>,
        #[pyo3(from_py_with = int_opt::max_stream_retries)] max_stream_retries: i64,
        relist_period: Option<&Bound<'_, PyAny>>,
        relist_threshold: Option<&Bound<'_, PyAny>>,
        fallback_relist_period: Option<&Bound<'_, PyAny>>,
        fallback_relist_threshold: Option<&Bound<'_, PyAny>>,
        cache_update_period: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let g = generic.get().inner.checked()?.clone();
        let max_stream_retries = int_option("max_stream_retries", max_stream_retries, 0, u32::MAX.into())? as u32;
        if let Some(s) = &runtime_service {
            if !s.bind(py).hasattr("get_container_events")? {
                return Err(PyTypeError::new_err("runtime_service: expected an object with get_container_events()"));
            }
        }
        let mut options = EventedOptions { max_stream_retries, ..EventedOptions::default() };
        duration_into(relist_period, "relist_period", &mut options.relist.period)?;
        duration_into(relist_threshold, "relist_threshold", &mut options.relist.threshold)?;
        duration_into(fallback_relist_period, "fallback_relist_period", &mut options.fallback.period)?;
        duration_into(fallback_relist_threshold, "fallback_relist_threshold", &mut options.fallback.threshold)?;
        duration_into(cache_update_period, "cache_update_period", &mut options.cache_update_period)?;
        let evented = Arc::new(EventedPleg::new(g, options)?);
        let _registration = crate::metrics::register("EventedPLEG", None, &evented, |e| e.stats());
        let inner = Owned::new(evented, "EventedPLEG");
        let source = runtime_service.map(|s| Arc::new(PySource(s)) as Arc<dyn ContainerEventSource<PyStatus>>);
        Ok(PyEventedPLEG { inner, generic, source, _registration })
    }

    /// Marks evented in use (the generic PLEG then stores the runtime's status timestamps), starts the
    /// 2-second global cache tick and, with a runtime service, the event stream.
    fn start(slf: &Bound<'_, Self>) -> PyResult<()> {
        let this = slf.get();
        this.inner.checked()?.start(this.source.clone())?;
        lifecycle::track(slf.as_any())?;
        Ok(())
    }

    /// No longer in use; the loops end (without waiting: a stream blocked in the runtime service ends at its
    /// next event). Raises, once, the `KeyboardInterrupt` or `SystemExit` that stopped the event stream.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let evented = self.inner.checked()?;
        evented.stop();
        raise_abort(py, evented.take_abort())
    }

    #[getter]
    fn in_use(&self) -> PyResult<bool> {
        Ok(self.inner.checked()?.in_use())
    }

    /// Processes CRI event dicts (`container_id`, `pod_uid`, `type`, `created_at` in ns, `pod_status`);
    /// returns how many lifecycle events were sent. All events are checked before any is processed.
    fn process_events(&self, py: Python<'_>, events: &Bound<'_, PyAny>) -> PyResult<usize> {
        let evented = self.inner.checked()?;
        let evs = events
            .try_iter()
            .map_err(|_| expected("events", "an iterable of dicts", events))?
            .enumerate()
            .map(|(i, e)| cri_event_from_py(&e?, &format!("events[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(lifecycle::detach(py, || evs.into_iter().map(|e| evented.process_event(e)).sum()))
    }

    /// `(True, None)` unless the event channel is full. Raises, once, the `KeyboardInterrupt` or
    /// `SystemExit` that stopped the event stream.
    fn healthy(&self, py: Python<'_>) -> PyResult<(bool, Option<String>)> {
        let evented = self.inner.checked()?;
        raise_abort(py, evented.take_abort())?;
        Ok(evented.healthy())
    }

    /// The shared event channel.
    fn watch(&self) -> PyResult<PyEventChannel> {
        self.generic.get().watch()
    }

    /// A relist of the generic PLEG.
    fn relist(&self, py: Python<'_>) -> PyResult<()> {
        self.generic.get().relist(py)
    }

    /// Forwarded to the generic PLEG.
    fn set_pod_watch_condition(&self, py: Python<'_>, uid: &str, key: &str, condition: Py<PyAny>) -> PyResult<()> {
        self.generic.get().set_pod_watch_condition(py, uid, key, condition)
    }

    #[getter]
    fn generic(&self, py: Python<'_>) -> PyResult<Py<PyGenericPLEG>> {
        self.inner.checked()?;
        Ok(self.generic.clone_ref(py))
    }

    /// The last stream error, as text.
    #[getter]
    fn last_error(&self) -> PyResult<Option<String>> {
        Ok(self.inner.checked()?.last_error())
    }

    /// Counters: events received, ignored (no sandbox metadata), rejected (older than the cache), sent;
    /// stream failures and connections (streams that delivered an event); whether it fell back to generic
    /// relisting; running pods (`kubelet_running_pods`); the histogram of event latencies (from `created_at`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let evented = self.inner.checked()?;
        to_py(py, &evented.stats())
    }

    /// For the exit hook: stops it and waits up to `timeout` seconds for its threads to end (the event
    /// stream's at its next event). It holds nothing to deliver.
    fn _exit_flush(&self, py: Python<'_>, timeout: f64) -> (&'static str, u64, u64) {
        if let Some(evented) = self.inner.unforked() {
            evented.stop();
            let wait = Duration::try_from_secs_f64(timeout).unwrap_or_default();
            lifecycle::detach(py, || evented.wait_stopped(wait));
        }
        ("EventedPLEG", 0, 0)
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|e| format!("EventedPLEG(in_use={})", e.in_use()))
    }
}

impl Drop for PyEventedPLEG {
    fn drop(&mut self) {
        if let Some(evented) = self.inner.unforked() {
            evented.stop();
        }
    }
}
