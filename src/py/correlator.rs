//! `kubevents.Correlator` and `kubevents.make_event`.

use std::collections::BTreeMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyMapping, PyString};

use super::clock::clock_arg;
use super::convert::{event_from_py, event_to_py, expected, reference_from_py, source_from_py, type_name};
use super::errors::{external, int_arg, int_opt};
use super::lifecycle;
use crate::correlator::{
    Correlation, CorrelatorOptions, EventCorrelator, KeyFuncs, SharedCorrelator, DEFAULT_BURST, DEFAULT_LRU_CACHE_SIZE,
    DEFAULT_MAX_EVENTS, DEFAULT_MAX_INTERVAL_SECONDS, DEFAULT_QPS, OPTION_NAMES,
};
use crate::error::Error;
use crate::event::{make_event as core_make_event, EventInput, UuidSource};
use crate::event::{Event, EventSource};

/// The correlator's options as Python passes them, to `Correlator`, `Broadcaster` and `simulate` as keywords
/// and to `replay_grid` as grid entries. `options()` is the one conversion; the core checks the values.
#[derive(Clone, Copy)]
pub struct CorrelatorArgs {
    pub lru_cache_size: i64,
    pub burst: i64,
    pub qps: f64,
    pub max_events: i64,
    pub max_interval: i64,
}

// The keyword defaults of `Correlator`, `Broadcaster` and `simulate` are spelt out for Python to show them
// (pyo3 shows `...` for any other expression); they must be the core's.
const _: () = assert!(
    DEFAULT_LRU_CACHE_SIZE == 4096
        && DEFAULT_BURST == 25
        && DEFAULT_MAX_EVENTS == 10
        && DEFAULT_MAX_INTERVAL_SECONDS == 600
);

impl CorrelatorArgs {
    /// client-go's defaults.
    pub const DEFAULT: CorrelatorArgs = CorrelatorArgs {
        lru_cache_size: DEFAULT_LRU_CACHE_SIZE as i64,
        burst: DEFAULT_BURST,
        qps: DEFAULT_QPS as f64,
        max_events: DEFAULT_MAX_EVENTS as i64,
        max_interval: DEFAULT_MAX_INTERVAL_SECONDS,
    };

    /// Checked options with zeros replaced by the defaults; errors name the option.
    pub fn options(&self) -> PyResult<CorrelatorOptions> {
        let CorrelatorArgs { lru_cache_size, burst, qps, max_events, max_interval } = *self;
        Ok(CorrelatorOptions::from_args(lru_cache_size, burst, qps, max_events, max_interval)?)
    }

    /// The options of `replay_grid`'s entry `i`, a mapping of some of `NAMES`; the others keep their defaults.
    pub fn from_grid(entry: &Bound<'_, PyAny>, i: usize) -> PyResult<CorrelatorOptions> {
        let map =
            entry.cast::<PyMapping>().map_err(|_| expected(format_args!("grid[{i}]"), "a dict of options", entry))?;
        let mut args = CorrelatorArgs::DEFAULT;
        for item in map.items()?.iter() {
            let (k, v): (String, Bound<'_, PyAny>) = item.extract()?;
            let int = |v: &Bound<'_, PyAny>| -> PyResult<i64> {
                if v.is_instance_of::<PyBool>() {
                    return Err(PyTypeError::new_err(format!("grid[{i}]: {k} must be an int, got bool")));
                }
                int_arg(v, &format!("grid[{i}]: {k}"))
            };
            match k.as_str() {
                "lru_cache_size" => args.lru_cache_size = int(&v)?,
                "burst" => args.burst = int(&v)?,
                "max_events" => args.max_events = int(&v)?,
                "max_interval" => args.max_interval = int(&v)?,
                "qps" => {
                    args.qps = v.extract::<f64>().map_err(|_| {
                        PyTypeError::new_err(format!("grid[{i}]: qps must be a number, got {}", type_name(&v)))
                    })?
                }
                other => {
                    return Err(PyValueError::new_err(format!(
                        "grid[{i}]: unknown option {other:?}; the grid takes {}",
                        OPTION_NAMES.join(", ")
                    )))
                }
            }
        }
        args.options().map_err(|e| PyValueError::new_err(format!("grid[{i}]: {}", e.value(entry.py()))))
    }
}

/// Python callables as the correlator's key functions; each gets the event as a dict.
pub fn key_funcs_from_py(
    key_func: Option<Py<PyAny>>,
    message_func: Option<Py<PyAny>>,
    spam_key_func: Option<Py<PyAny>>,
) -> PyResult<KeyFuncs> {
    let check = |name: &str, f: &Option<Py<PyAny>>| -> PyResult<()> {
        match f {
            Some(f) if !Python::attach(|py| f.bind(py).is_callable()) => {
                Err(PyTypeError::new_err(format!("{name} must be callable")))
            }
            _ => Ok(()),
        }
    };
    check("key_func", &key_func)?;
    check("message_func", &message_func)?;
    check("spam_key_func", &spam_key_func)?;
    let str_of = |o: &Bound<'_, PyAny>| o.cast::<PyString>().map(|s| s.to_string()).ok();
    Ok(KeyFuncs {
        aggregate: key_func.map(|f| {
            let pair = |o: &Bound<'_, PyAny>| o.extract::<(String, String)>().ok();
            Box::new(call_key("key_func", "a (aggregate_key, local_key) tuple of str", f, pair)) as Box<_>
        }),
        message: message_func.map(|f| Box::new(call_key("message_func", "a str", f, str_of)) as Box<_>),
        spam: spam_key_func.map(|f| Box::new(call_key("spam_key_func", "a str", f, str_of)) as Box<_>),
    })
}

/// A key function calling `f` with the event as a dict and reading its answer with `read`; a TypeError
/// `{name} must return {what}, got ...` when it cannot.
fn call_key<T>(
    name: &'static str,
    what: &'static str,
    f: Py<PyAny>,
    read: impl Fn(&Bound<'_, PyAny>) -> Option<T>,
) -> impl Fn(&Event) -> Result<T, Error> {
    move |e| {
        lifecycle::attach(|py| {
            let out = lifecycle::call(f.bind(py), [event_to_py(py, e)?.as_any()])?;
            read(&out)
                .ok_or_else(|| PyTypeError::new_err(format!("{name} must return {what}, got {}", type_name(&out))))
        })
        .map_err(external)
    }
}

/// What `Correlator.correlate` decided for one event.
#[pyclass(module = "kubevents", name = "CorrelateResult", frozen, get_all)]
pub struct PyCorrelateResult {
    /// The event to write (a dict), or None when skipped.
    event: Option<Py<PyAny>>,
    /// The strategic merge patch for a repeat (bytes), or None.
    patch: Option<Py<PyBytes>>,
    /// True when the spam filter rejected the event.
    skip: bool,
    /// True when the event was replaced by its group's aggregate event.
    aggregated: bool,
}

#[pymethods]
impl PyCorrelateResult {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let (skip, aggregated) = (PyBool::new(py, self.skip).repr()?, PyBool::new(py, self.aggregated).repr()?);
        let (patch, event) =
            (self.patch.as_ref().into_pyobject(py)?.repr()?, self.event.as_ref().into_pyobject(py)?.repr()?);
        Ok(format!("CorrelateResult(skip={skip}, aggregated={aggregated}, patch={patch}, event={event})"))
    }
}

pub fn correlation_to_py(py: Python<'_>, c: Correlation) -> PyResult<PyCorrelateResult> {
    Ok(PyCorrelateResult {
        event: c.event.map(|e| event_to_py(py, &e).map(|d| d.into_any().unbind())).transpose()?,
        patch: c.patch.map(|p| PyBytes::new(py, &p).unbind()),
        skip: c.skip,
        aggregated: c.aggregated,
    })
}

/// client-go's `EventCorrelator`.
#[pyclass(module = "kubevents", name = "Correlator", frozen)]
pub struct PyCorrelator {
    inner: SharedCorrelator,
}

#[pymethods]
impl PyCorrelator {
    #[new]
    #[pyo3(signature = (*, clock=None, lru_cache_size=4096, burst=25, qps=CorrelatorArgs::DEFAULT.qps,
                        max_events=10, max_interval=600, key_func=None, message_func=None, spam_key_func=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        clock: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = int_opt::lru_cache_size)] lru_cache_size: i64,
        #[pyo3(from_py_with = int_opt::burst)] burst: i64,
        qps: f64,
        #[pyo3(from_py_with = int_opt::max_events)] max_events: i64,
        #[pyo3(from_py_with = int_opt::max_interval)] max_interval: i64,
        key_func: Option<Py<PyAny>>,
        message_func: Option<Py<PyAny>>,
        spam_key_func: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let options = CorrelatorArgs { lru_cache_size, burst, qps, max_events, max_interval }.options()?;
        let funcs = key_funcs_from_py(key_func, message_func, spam_key_func)?;
        let correlator = EventCorrelator::new(options, clock_arg(clock)?, funcs)?;
        Ok(PyCorrelator { inner: SharedCorrelator::new(correlator) })
    }

    /// Aggregates, counts and spam-filters one event (a dict of the core/v1 Event JSON shape).
    fn correlate(&self, py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<PyCorrelateResult> {
        let event = event_from_py(event)?;
        let c = lifecycle::detach(py, || self.inner.lock().and_then(|mut c| c.correlate(event)))?;
        correlation_to_py(py, c)
    }

    /// Records what the API server answered for a write (its name, resourceVersion, count, firstTimestamp).
    fn update_state(&self, py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<()> {
        let event = event_from_py(event)?;
        lifecycle::detach(py, || self.inner.lock().map(|mut c| c.update_state(&event)))?;
        Ok(())
    }
}

/// The event client-go's recorder builds for `reference` at the clock's current time.
#[pyfunction]
#[pyo3(signature = (obj_ref, r#type, reason, message, *, source, clock=None, annotations=None))]
#[allow(clippy::too_many_arguments)]
pub fn make_event<'py>(
    py: Python<'py>,
    obj_ref: &Bound<'py, PyAny>,
    r#type: String,
    reason: String,
    message: String,
    source: &Bound<'py, PyAny>,
    clock: Option<&Bound<'py, PyAny>>,
    annotations: Option<BTreeMap<String, String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let reference = reference_from_py(obj_ref, "obj_ref")?;
    let source = match source.extract::<String>() {
        Ok(component) => EventSource { component, host: String::new() },
        Err(_) => source_from_py(source, "source")?,
    };
    let now = clock_arg(clock)?.now()?;
    let input = EventInput {
        reference: &reference,
        annotations: annotations.as_ref(),
        type_: &r#type,
        reason: &reason,
        message: &message,
        source: &source,
    };
    event_to_py(py, &core_make_event(&input, now, &mut UuidSource::Random))
}
