//! The one place core errors become Python exceptions, and int and str arguments whose errors name them.

use pyo3::exceptions::{PyOSError, PyOverflowError, PyRuntimeError, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3::{intern, PyErr};

use super::convert::type_name;
use crate::error::Error;

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::Io(io) => PyErr::from(io),
            Error::External(inner) => match inner.downcast::<PyErr>() {
                Ok(py_err) => *py_err,
                Err(other) => match other.downcast::<crate::pleg::generic::Abort>() {
                    // A KeyboardInterrupt or SystemExit that stopped a PLEG's relist, raised as it was.
                    Ok(abort) => PyErr::from(abort.0),
                    Err(other) => PyRuntimeError::new_err(other.to_string()),
                },
            },
            Error::Trace { file, line, source } => {
                let at = match file {
                    Some(file) => format!("{file}: line {line}"),
                    None => format!("line {line}"),
                };
                match *source {
                    // A Python error raised while iterating a trace keeps its class; only core errors get the line.
                    Error::External(inner) => PyErr::from(Error::External(inner)),
                    Error::Io(io) => PyOSError::new_err(format!("{at}: {io}")),
                    inner => new_err(&inner, format!("{at}: {inner}")),
                }
            }
            e => new_err(&e, e.to_string()),
        }
    }
}

/// The exception of `e`'s class, saying `message`.
fn new_err(e: &Error, message: String) -> PyErr {
    match e {
        Error::Type { .. } => PyTypeError::new_err(message),
        Error::Value { .. } | Error::Option(_) => PyValueError::new_err(message),
        Error::Timeout(_) => PyTimeoutError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// Carries a Python exception through the core unchanged.
pub fn external(e: PyErr) -> Error {
    Error::External(Box::new(e))
}

/// An int option as `T` (anything with `__index__`, bools included, as pyo3 takes them): a TypeError naming
/// `what` for anything else, and a ValueError naming it for an int out of `T`'s range, where pyo3's own
/// extraction raises a bare OverflowError before the function runs.
pub fn int_arg<'py, T: FromPyObjectOwned<'py>>(v: &Bound<'py, PyAny>, what: &str) -> PyResult<T> {
    let e: PyErr = match v.extract::<T>() {
        Ok(n) => return Ok(n),
        Err(e) => e.into(),
    };
    let py = v.py();
    if e.is_instance_of::<PyTypeError>(py) {
        return Err(PyTypeError::new_err(format!("{what} must be an int, got {}", type_name(v))));
    }
    if !e.is_instance_of::<PyOverflowError>(py) {
        return Err(e);
    }
    let int = v.call_method0(intern!(py, "__index__"))?;
    let side = if int.lt(0)? { "small" } else { "large" };
    // str() refuses ints beyond sys.get_int_max_str_digits().
    let shown = match int.str() {
        Ok(s) => s.to_string(),
        Err(_) => format!("an int of {} bits", int.call_method0(intern!(py, "bit_length"))?),
    };
    Err(PyValueError::new_err(format!("{what} is too {side}: {shown}")))
}

/// pyo3's `from_py_with` takes a plain function, so each int option with a literal default gets one that
/// names it: `#[pyo3(from_py_with = int_opt::burst)] burst: i64`.
macro_rules! int_options {
    ($($name:ident: $t:ty),* $(,)?) => {
        pub mod int_opt {
            use pyo3::prelude::*;
            $(pub fn $name(v: &Bound<'_, PyAny>) -> PyResult<$t> {
                super::int_arg(v, stringify!($name))
            })*
        }
    };
}

int_options! {
    lru_cache_size: i64, burst: i64, max_events: i64, max_interval: i64, max_tries: i64, queue_length: i64,
    workers: i64, cache_size: i64, capacity: i64, channel_capacity: i64, inspect_concurrency: i64,
    max_stream_retries: i64, n: usize,
}

/// A str argument, or a TypeError naming it (pyo3's own says only "'int' object is not an instance of 'str'").
pub fn str_arg<'py>(v: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyString>> {
    v.cast::<PyString>()
        .cloned()
        .map_err(|_| PyTypeError::new_err(format!("{what}: expected str, got {}", type_name(v))))
}

/// The recorders' str arguments for `from_py_with`, each naming itself.
pub mod str_opt {
    use pyo3::prelude::*;
    use pyo3::types::PyString;

    pub fn event_type<'py>(v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
        super::str_arg(v, "type")
    }

    pub fn fmt<'py>(v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
        super::str_arg(v, "fmt")
    }

    pub fn reason(v: &Bound<'_, PyAny>) -> PyResult<String> {
        Ok(super::str_arg(v, "reason")?.to_str()?.to_owned())
    }

    pub fn message(v: &Bound<'_, PyAny>) -> PyResult<String> {
        Ok(super::str_arg(v, "message")?.to_str()?.to_owned())
    }
}
