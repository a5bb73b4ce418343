//! `kubevents.pleg`: the PLEG's pods, statuses, cache, channel and PLEG classes, one file per core module.

use std::sync::Arc;

use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;

use super::errors::external;
use crate::error::Error;
use crate::pleg::evented::MAX_STREAM_RETRIES;
use crate::pleg::generic::{Abort, CHANNEL_CAPACITY, INSPECT_CONCURRENCY};

mod cache;
mod channel;
mod evented;
mod generic;
mod pod;

// The keyword defaults are spelt out for Python to show them (pyo3 shows `...` for any other expression);
// they must be the core's.
const _: () = assert!(CHANNEL_CAPACITY == 1000 && INSPECT_CONCURRENCY == 1 && MAX_STREAM_RETRIES == 5);

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

/// The `KeyboardInterrupt` or `SystemExit` a loop kept (shared), raised once.
fn raise_abort(py: Python<'_>, kept: Option<Arc<Error>>) -> PyResult<()> {
    let Some(e) = kept else { return Ok(()) };
    Err(Abort::external::<PyErr>(&e).map_or_else(|| PyRuntimeError::new_err(e.to_string()), |p| p.clone_ref(py)))
}

fn aio(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("kubevents._pleg_aio")
}

/// A core struct as Python data (dicts, lists).
fn to_py<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize::pythonize(py, v)?)
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
