//! `Recorder`'s argument checks without the recording, for `kubevents.testing.FakeRecorder`: each method takes
//! the arguments of the `Recorder` method of its name, with the same types in the same order, runs the same
//! checks in the same order, and answers the event's message and object reference instead of recording.

use std::collections::BTreeMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use super::broadcaster::{checked_call, format_message};
use super::clock::to_time;
use super::convert::reference_to_py;
use super::errors::str_opt;

/// What `PyRecorder::generate` checks before it records, and what the call would record.
fn checked<'py>(
    obj: &Bound<'py, PyAny>,
    type_: &Bound<'_, PyString>,
    message: String,
    field_path: Option<&str>,
) -> PyResult<(String, Bound<'py, PyDict>)> {
    let (_, reference) = checked_call(obj, type_, field_path)?;
    Ok((message, reference_to_py(obj.py(), &reference)?))
}

/// The checks of `Recorder`'s methods: each raises what the `Recorder` method of its name raises for the same
/// arguments, and returns `(message, object_reference)` instead of recording. Used by
/// `kubevents.testing.FakeRecorder`.
#[pyclass(module = "kubevents._native", name = "RecorderCheck", frozen)]
pub struct PyRecorderCheck;

// `reason` is taken only to be checked as `Recorder` checks it.
#[pymethods]
#[allow(unused_variables)]
impl PyRecorderCheck {
    #[new]
    fn new() -> Self {
        PyRecorderCheck
    }

    /// `Recorder.event`'s checks.
    #[pyo3(signature = (obj, r#type, reason, message, *, field_path=None))]
    fn event<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = str_opt::event_type)] r#type: Bound<'_, PyString>,
        #[pyo3(from_py_with = str_opt::reason)] reason: String,
        #[pyo3(from_py_with = str_opt::message)] message: String,
        field_path: Option<&str>,
    ) -> PyResult<(String, Bound<'py, PyDict>)> {
        checked(obj, &r#type, message, field_path)
    }

    /// `Recorder.eventf`'s checks; the message is `fmt % args`.
    #[pyo3(signature = (obj, r#type, reason, fmt, *args, field_path=None))]
    #[allow(clippy::too_many_arguments)]
    fn eventf<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = str_opt::event_type)] r#type: Bound<'_, PyString>,
        #[pyo3(from_py_with = str_opt::reason)] reason: String,
        #[pyo3(from_py_with = str_opt::fmt)] fmt: Bound<'_, PyString>,
        args: &Bound<'_, PyTuple>,
        field_path: Option<&str>,
    ) -> PyResult<(String, Bound<'py, PyDict>)> {
        checked(obj, &r#type, format_message(&fmt, args)?, field_path)
    }

    /// `Recorder.annotated_eventf`'s checks (the annotations must be a dict of str).
    #[pyo3(signature = (obj, annotations, r#type, reason, fmt, *args, field_path=None))]
    #[allow(clippy::too_many_arguments)]
    fn annotated_eventf<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        annotations: Option<BTreeMap<String, String>>,
        #[pyo3(from_py_with = str_opt::event_type)] r#type: Bound<'_, PyString>,
        #[pyo3(from_py_with = str_opt::reason)] reason: String,
        #[pyo3(from_py_with = str_opt::fmt)] fmt: Bound<'_, PyString>,
        args: &Bound<'_, PyTuple>,
        field_path: Option<&str>,
    ) -> PyResult<(String, Bound<'py, PyDict>)> {
        checked(obj, &r#type, format_message(&fmt, args)?, field_path)
    }

    /// `Recorder.past_eventf`'s checks (the timestamp must be a datetime or epoch seconds in range).
    #[pyo3(signature = (obj, timestamp, r#type, reason, fmt, *args, field_path=None))]
    #[allow(clippy::too_many_arguments)]
    fn past_eventf<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        timestamp: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = str_opt::event_type)] r#type: Bound<'_, PyString>,
        #[pyo3(from_py_with = str_opt::reason)] reason: String,
        #[pyo3(from_py_with = str_opt::fmt)] fmt: Bound<'_, PyString>,
        args: &Bound<'_, PyTuple>,
        field_path: Option<&str>,
    ) -> PyResult<(String, Bound<'py, PyDict>)> {
        to_time(timestamp, "timestamp")?;
        checked(obj, &r#type, format_message(&fmt, args)?, field_path)
    }
}
