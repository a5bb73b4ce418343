//! `kubevents.pleg.EventChannel`.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use super::aio;
use super::pod::PyPodLifecycleEvent;
use crate::error::count_option;
use crate::gate::Owned;
use crate::pleg::channel::Recv;
use crate::pleg::EventChannel;
use crate::py::clock::timeout_arg;
use crate::py::errors::int_opt;
use crate::py::lifecycle;

/// The PLEG's event channel. Iterating blocks (GIL released) until an event arrives or the channel is
/// closed; `recv(timeout)` waits at most `timeout`; `async for` waits without blocking a thread.
#[pyclass(module = "kubevents.pleg", name = "EventChannel", frozen)]
pub struct PyEventChannel {
    pub(super) inner: Owned<EventChannel>,
}

impl PyEventChannel {
    /// The next event, None when `timeout` ran out or the channel is closed and empty.
    fn next(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Option<PyPodLifecycleEvent>> {
        let channel = self.inner.checked()?;
        let mut got = Recv::Timeout;
        lifecycle::wait_until(py, timeout, |slice| {
            got = channel.recv_timeout(Some(slice));
            got != Recv::Timeout
        })?;
        Ok(match got {
            Recv::Item(e) => Some(PyPodLifecycleEvent(e)),
            Recv::Timeout | Recv::Closed => None,
        })
    }
}

#[pymethods]
impl PyEventChannel {
    /// A standalone channel (a PLEG makes its own; pass one to share it).
    #[new]
    #[pyo3(signature = (capacity=1000))]
    fn new(#[pyo3(from_py_with = int_opt::capacity)] capacity: i64) -> PyResult<Self> {
        let capacity = count_option("capacity", capacity)?.get();
        Ok(PyEventChannel { inner: Owned::new(Arc::new(EventChannel::new(capacity)), "EventChannel") })
    }

    /// The next event; None when `timeout` (seconds) ran out or the channel is closed and empty. Ctrl-C
    /// interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<PyPodLifecycleEvent>> {
        self.next(py, timeout_arg(timeout)?)
    }

    /// The next event if one is buffered, else None.
    fn try_recv(&self) -> PyResult<Option<PyPodLifecycleEvent>> {
        Ok(self.inner.checked()?.try_recv().map(PyPodLifecycleEvent))
    }

    /// Every buffered event, oldest first.
    fn drain(&self) -> PyResult<Vec<PyPodLifecycleEvent>> {
        Ok(self.inner.checked()?.drain().into_iter().map(PyPodLifecycleEvent).collect())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.inner.checked()?.len())
    }

    #[getter]
    fn capacity(&self) -> PyResult<usize> {
        Ok(self.inner.checked()?.capacity())
    }

    /// Events dropped because the channel was full (or closed).
    #[getter]
    fn dropped(&self) -> PyResult<u64> {
        Ok(self.inner.checked()?.dropped())
    }

    /// Ends iteration once the buffered events are read; later sends are dropped.
    fn close(&self) -> PyResult<()> {
        self.inner.checked()?.close();
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self.inner.checked()?.is_closed())
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyPodLifecycleEvent>> {
        self.next(py, None)
    }

    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.get().inner.checked()?;
        aio(slf.py())?.call_method1("next_event", (slf,))
    }

    /// Calls `callback()` once, from whichever thread, when an event is buffered or the channel closes.
    fn _on_ready(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        let ch = self.inner.checked()?;
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
        self.inner.repr(|c| format!("EventChannel({}/{} events, {} dropped)", c.len(), c.capacity(), c.dropped()))
    }
}
