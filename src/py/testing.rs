//! `Recorder`'s argument checks without the recording, for `kubevents.testing.FakeRecorder`: each method takes
//! the arguments of the `Recorder` method of its name, with the same types in the same order, runs the same
//! checks in the same order, and answers the event's message and object reference instead of recording.

use std::collections::BTreeMap;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use super::broadcaster::{checked_call, format_message, recorder_methods};
use super::clock::to_time;
use super::convert::reference_to_py;
use super::errors::str_opt;
use crate::time::Time;

/// The checks of `Recorder`'s methods: each raises what the `Recorder` method of its name raises for the same
/// arguments, and returns `(message, object_reference)` instead of recording. Used by
/// `kubevents.testing.FakeRecorder`.
#[pyclass(module = "kubevents._native", name = "RecorderCheck", frozen)]
pub struct PyRecorderCheck;

impl PyRecorderCheck {
    /// What `PyRecorder::generate` checks before it records, and what the call would record.
    #[allow(clippy::too_many_arguments)]
    fn generate<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        _annotations: Option<BTreeMap<String, String>>,
        type_: &Bound<'_, PyString>,
        _reason: String,
        message: String,
        _time: Option<Time>,
        field_path: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let (_, reference) = checked_call(obj, type_, field_path)?;
        Ok(Some((message, reference_to_py(obj.py(), &reference)?).into_pyobject(obj.py())?))
    }
}

recorder_methods!(PyRecorderCheck {
    #[new]
    fn new() -> Self {
        PyRecorderCheck
    }
});
