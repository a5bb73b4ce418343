//! The one place core errors become Python exceptions.

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::PyErr;

use crate::error::Error;

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::Type { .. } => PyTypeError::new_err(e.to_string()),
            Error::Value { .. } | Error::Option(_) => PyValueError::new_err(e.to_string()),
            Error::Clock(m) => PyRuntimeError::new_err(m),
            Error::Io(io) => PyErr::from(io),
            Error::External(inner) => match inner.downcast::<PyErr>() {
                Ok(py_err) => *py_err,
                Err(other) => match other.downcast::<crate::pleg::generic::Abort>() {
                    // A KeyboardInterrupt or SystemExit that stopped a PLEG's relist, raised as it was.
                    Ok(abort) => PyErr::from(abort.0),
                    Err(other) => PyRuntimeError::new_err(other.to_string()),
                },
            },
            Error::Trace { line, source } => match *source {
                // A Python error raised while iterating a trace keeps its class; only core errors get the line.
                Error::External(inner) => PyErr::from(Error::External(inner)),
                Error::Io(io) => PyOSError::new_err(format!("line {line}: {io}")),
                inner => {
                    let base = PyErr::from(inner);
                    pyo3::Python::attach(|py| {
                        let msg = format!("line {line}: {}", base.value(py));
                        if base.is_instance_of::<PyTypeError>(py) {
                            PyTypeError::new_err(msg)
                        } else if base.is_instance_of::<PyValueError>(py) {
                            PyValueError::new_err(msg)
                        } else {
                            PyRuntimeError::new_err(msg)
                        }
                    })
                }
            },
        }
    }
}

/// Carries a Python exception through the core unchanged.
pub fn external(e: PyErr) -> Error {
    Error::External(Box::new(e))
}
