//! `kubevents.pleg`: the PLEG's pods, statuses, cache, channel and PLEG classes, one file per core module.

use std::sync::Arc;

use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;

use super::errors::external;
use super::lifecycle;
use crate::error::Error;
use crate::pleg::generic::Abort;

mod cache;
mod channel;
mod evented;
mod generic;
mod pod;

/// An exception raised by the runtime, a watch condition or the event source, for the core: one that is not
/// an `Exception` (`KeyboardInterrupt`, `SystemExit`) is an `Abort`, which stops the relist instead of being
/// stored or logged.
fn runtime_err(py: Python<'_>, e: PyErr) -> Error {
    if e.is_instance_of::<PyException>(py) {
        external(e)
    } else {
        Abort(external(e)).into_error()
    }
}

/// The Python exception inside a core error (through an `Abort`), if it carries one.
fn py_err_in(e: &Error) -> Option<&PyErr> {
    let Error::External(b) = e else { return None };
    match b.downcast_ref::<Abort>() {
        Some(a) => py_err_in(&a.0),
        None => b.downcast_ref::<PyErr>(),
    }
}

/// The `KeyboardInterrupt` or `SystemExit` a loop kept (shared), raised once.
fn raise_abort(py: Python<'_>, kept: Option<Arc<Error>>) -> PyResult<()> {
    let Some(e) = kept else { return Ok(()) };
    Err(py_err_in(&e).map_or_else(|| PyRuntimeError::new_err(e.to_string()), |p| p.clone_ref(py)))
}

fn aio(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("kubevents._pleg_aio")
}

/// A core struct as Python data (dicts, lists).
fn to_py<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize::pythonize(py, v)?)
}

/// A core object shared with the core's threads. In a child forked after it was made those threads are gone
/// and the locks they held may stay held: using it raises, and dropping it leaves it be.
struct Owned<T> {
    inner: Arc<T>,
    generation: u64,
    what: &'static str,
}

impl<T> Owned<T> {
    fn new(inner: Arc<T>, what: &'static str) -> Self {
        Owned { inner, generation: lifecycle::generation(), what }
    }

    /// The object, or `RuntimeError` in a forked child.
    fn checked(&self) -> PyResult<&Arc<T>> {
        lifecycle::check_not_forked(self.generation, self.what)?;
        Ok(&self.inner)
    }

    /// The object, None in a forked child.
    fn unforked(&self) -> Option<&Arc<T>> {
        (!lifecycle::is_forked(self.generation)).then_some(&self.inner)
    }

    /// Another object of the same generation (a PLEG's channel).
    fn part<U>(&self, inner: Arc<U>, what: &'static str) -> Owned<U> {
        Owned { inner, generation: self.generation, what }
    }

    fn repr(&self, f: impl FnOnce(&T) -> String) -> String {
        match self.unforked() {
            Some(t) => f(t),
            None => format!("{}(created before os.fork(): unusable in this process)", self.what),
        }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if self.unforked().is_none() {
            std::mem::forget(self.inner.clone());
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<pod::PyPod>()?;
    m.add_class::<pod::PyPodList>()?;
    m.add_class::<pod::PyPodLifecycleEvent>()?;
    m.add_class::<cache::PyPodCache>()?;
    m.add_class::<channel::PyEventChannel>()?;
    m.add_class::<generic::PyGenericPLEG>()?;
    m.add_class::<evented::PyEventedPLEG>()?;
    m.add_function(wrap_pyfunction!(pod::diff, m)?)?;
    Ok(())
}
