//! `kubevents.pleg.EventChannel`.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::pod::PyPodLifecycleEvent;
use super::{aio, forked_repr};
use crate::pleg::channel::Recv;
use crate::pleg::{EventChannel, PodLifecycleEvent};
use crate::py::clock::timeout_arg;
use crate::py::errors::int_opt;
use crate::py::lifecycle;

/// The PLEG's event channel. Iterating blocks (GIL released) until an event arrives or the channel is
/// closed; `recv(timeout)` waits at most `timeout`; `async for` waits without blocking a thread.
#[pyclass(module = "kubevents.pleg", name = "EventChannel", frozen)]
pub struct PyEventChannel {
    pub(super) inner: Arc<EventChannel>,
    /// The fork generation it (or the PLEG it belongs to) was made in.
    pub(super) generation: u64,
}

impl PyEventChannel {
    fn check(&self) -> PyResult<()> {
        lifecycle::check_not_forked(self.generation, "EventChannel")
    }

    fn wait(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Recv<PodLifecycleEvent>> {
        self.check()?;
        let mut got = Recv::Timeout;
        lifecycle::wait_until(py, timeout, |slice| {
            got = self.inner.recv_timeout(Some(slice));
            got != Recv::Timeout
        })?;
        Ok(got)
    }
}

impl Drop for PyEventChannel {
    fn drop(&mut self) {
        // In a forked child a parent thread may have been sending to it: leave it be.
        if lifecycle::is_forked(self.generation) {
            std::mem::forget(self.inner.clone());
        }
    }
}

#[pymethods]
impl PyEventChannel {
    /// A standalone channel (a PLEG makes its own; pass one to share it).
    #[new]
    #[pyo3(signature = (capacity=1000))]
    fn new(#[pyo3(from_py_with = int_opt::capacity)] capacity: i64) -> PyResult<Self> {
        if capacity < 1 {
            return Err(PyValueError::new_err(format!("capacity must be >= 1, got {capacity}")));
        }
        Ok(PyEventChannel {
            inner: Arc::new(EventChannel::new(capacity as usize)),
            generation: lifecycle::generation(),
        })
    }

    /// The next event; None when `timeout` (seconds) ran out or the channel is closed and empty. Ctrl-C
    /// interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<PyPodLifecycleEvent>> {
        Ok(match self.wait(py, timeout_arg(timeout)?)? {
            Recv::Item(e) => Some(PyPodLifecycleEvent(e)),
            _ => None,
        })
    }

    /// The next event if one is buffered, else None.
    fn try_recv(&self) -> PyResult<Option<PyPodLifecycleEvent>> {
        self.check()?;
        Ok(self.inner.try_recv().map(PyPodLifecycleEvent))
    }

    /// Every buffered event, oldest first.
    fn drain(&self) -> PyResult<Vec<PyPodLifecycleEvent>> {
        self.check()?;
        Ok(self.inner.drain().into_iter().map(PyPodLifecycleEvent).collect())
    }

    fn __len__(&self) -> PyResult<usize> {
        self.check()?;
        Ok(self.inner.len())
    }

    #[getter]
    fn capacity(&self) -> PyResult<usize> {
        self.check()?;
        Ok(self.inner.capacity())
    }

    /// Events dropped because the channel was full (or closed).
    #[getter]
    fn dropped(&self) -> PyResult<u64> {
        self.check()?;
        Ok(self.inner.dropped())
    }

    /// Ends iteration once the buffered events are read; later sends are dropped.
    fn close(&self) -> PyResult<()> {
        self.check()?;
        self.inner.close();
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        self.check()?;
        Ok(self.inner.is_closed())
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyPodLifecycleEvent>> {
        Ok(match self.wait(py, None)? {
            Recv::Item(e) => Some(PyPodLifecycleEvent(e)),
            _ => None,
        })
    }

    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.get().check()?;
        aio(slf.py())?.call_method1("next_event", (slf,))
    }

    /// Calls `callback()` once, from whichever thread, when an event is buffered or the channel closes.
    fn _on_ready(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        self.check()?;
        let ch = self.inner.clone();
        lifecycle::detach(py, || {
            ch.on_ready(Box::new(move || {
                lifecycle::attach(|py| {
                    if let Err(e) = lifecycle::call(callback.bind(py), []) {
                        e.write_unraisable(py, None);
                    }
                })
            }))
        });
        Ok(())
    }

    fn __repr__(&self) -> String {
        if lifecycle::is_forked(self.generation) {
            return forked_repr("EventChannel");
        }
        format!("EventChannel({}/{} events, {} dropped)", self.inner.len(), self.inner.capacity(), self.inner.dropped())
    }
}

