//! Events and trace records between Python dicts (Kubernetes JSON shape) and the core types.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyMapping;
use serde::Serialize;

use crate::event::Event;
use crate::sim::Record;

/// Deserializes a mapping, naming the offending field (`event.involvedObject.name: invalid type ...`) in a
/// `TypeError` for a wrong type and a `ValueError` for a missing field or a bad value.
fn from_mapping<'a, T: serde::Deserialize<'a>>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    if obj.cast::<PyMapping>().is_err() {
        return Err(PyTypeError::new_err(format!("{what}: expected a dict, got {}", obj.get_type().name()?)));
    }
    let mut de = pythonize::Depythonizer::from_object(obj);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.into_inner().to_string();
        let full = if path == "." { format!("{what}: {msg}") } else { format!("{what}.{path}: {msg}") };
        if msg.starts_with("invalid type") || msg.contains("unsupported type") || msg.contains("expected a") {
            PyTypeError::new_err(full)
        } else {
            PyValueError::new_err(full)
        }
    })
}

pub fn event_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Event> {
    from_mapping(obj, "event")
}

pub fn record_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Record<'static>> {
    // Python strings cannot be borrowed past the call, so the record owns its strings.
    from_mapping::<Record<'_>>(obj, "record").map(Record::into_owned)
}

/// A plain dict of the Kubernetes JSON shape.
pub fn to_py<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, value).map_err(|e| PyValueError::new_err(e.to_string()))
}
