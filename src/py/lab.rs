//! The tuning lab's native half: replay metrics as dicts, and `replay_grid`, the threaded sweep behind
//! `kubevents.sweep`.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use super::clock::to_duration;
use super::convert::type_name;
use super::correlator::CorrelatorArgs;
use super::errors::int_arg;
use super::sim::{next_batch, BATCH};
use crate::error::Error;
use crate::sim::sweep::{sweep, Progress};
use crate::sim::{JsonLines, ObjectKey, Record, Summary};

/// The default window of the peak write rates: one minute.
pub const DEFAULT_WINDOW_NS: i64 = 60_000_000_000;

/// A metrics window in seconds or a timedelta, as nanoseconds (> 0).
pub fn window_from_py(window: &Bound<'_, PyAny>) -> PyResult<i64> {
    let ns = to_duration(window, "window")?;
    if ns <= 0 {
        return Err(PyValueError::new_err(format!("window must be > 0 seconds, got {}", window.str()?)));
    }
    Ok(ns)
}

/// The metrics of a replay or of one object. Object summaries leave out the per-object peak (their own).
pub fn summary_dict<'py>(py: Python<'py>, s: &Summary, window_ns: i64, overall: bool) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let window_s = window_ns as f64 / 1e9;
    d.set_item("events", s.events)?;
    d.set_item("writes", s.writes())?;
    d.set_item("creates", s.creates)?;
    d.set_item("patches", s.patches)?;
    d.set_item("write_reduction", s.write_reduction())?;
    d.set_item("spam_skipped", s.spam_skipped)?;
    d.set_item("aggregated", s.aggregated)?;
    d.set_item("messages", s.messages)?;
    d.set_item("messages_kept", s.messages_kept)?;
    d.set_item("message_share", s.message_share())?;
    d.set_item("reasons", s.reasons)?;
    d.set_item("reasons_kept", s.reasons_kept)?;
    d.set_item("reason_share", s.reason_share())?;
    d.set_item("delayed", s.delayed)?;
    d.set_item("unreported", s.unreported)?;
    d.set_item("mean_delay_s", s.mean_delay_s())?;
    d.set_item("max_delay_s", s.max_delay_ns as f64 / 1e9)?;
    d.set_item("peak_writes", s.peak_writes)?;
    d.set_item("peak_write_rate", s.peak_writes as f64 / window_s)?;
    if overall {
        d.set_item("peak_object_writes", s.peak_object_writes)?;
        d.set_item("peak_object_write_rate", s.peak_object_writes as f64 / window_s)?;
    }
    d.set_item("max_count", s.max_count)?;
    Ok(d)
}

/// One object's metrics, led by its kind, namespace and name.
pub fn object_dict<'py>(py: Python<'py>, key: &ObjectKey, s: &Summary, window_ns: i64) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", &key.0)?;
    d.set_item("namespace", &key.1)?;
    d.set_item("name", &key.2)?;
    let rest = summary_dict(py, s, window_ns, false)?;
    d.update(rest.as_mapping())?;
    Ok(d)
}

/// Builds a DataFrame from rows, with a clear error when pandas is missing.
pub fn data_frame<'py>(py: Python<'py>, rows: Bound<'py, PyList>) -> PyResult<Bound<'py, PyAny>> {
    let pandas = py.import("pandas").map_err(|e| {
        pyo3::exceptions::PyImportError::new_err(format!(
            "to_pandas() needs pandas ({}); install it with: pip install 'kubevents[lab]'",
            e.value(py)
        ))
    })?;
    pandas.getattr("DataFrame")?.call1((rows,))
}

fn load_records(py: Python<'_>, trace: &Bound<'_, PyAny>) -> PyResult<Vec<Record<'static>>> {
    if trace.is_instance_of::<PyString>() || trace.hasattr("__fspath__")? {
        let path: PathBuf = trace.extract()?;
        return py
            .detach(|| -> Result<Vec<Record<'static>>, Error> {
                let file = File::open(&path)
                    .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))))?;
                let mut lines = JsonLines::new(BufReader::new(file));
                let mut out = Vec::new();
                while let Some(r) = lines.next_record() {
                    out.push(r?.into_owned());
                }
                Ok(out)
            })
            .map_err(PyErr::from);
    }
    let it = trace.try_iter().map_err(|_| {
        PyTypeError::new_err(format!("trace: expected a path or an iterable of records, got {}", type_name(trace)))
    })?;
    let it = it.unbind();
    let (mut seen, mut out) = (0u64, Vec::new());
    loop {
        let before = out.len();
        next_batch(py, &it, &mut seen, &mut out)?;
        if out.len() - before < BATCH {
            return Ok(out);
        }
    }
}

/// Replays one trace under each entry of `grid` (dicts of `simulate` options; missing ones take client-go's
/// defaults) on `workers` native threads with the GIL released, and returns the metrics of each replay in
/// grid order. `on_result(index, metrics)` is called on the calling thread as each replay finishes.
#[pyfunction]
#[pyo3(signature = (trace, grid, *, window=None, workers=None, on_result=None))]
pub fn replay_grid<'py>(
    py: Python<'py>,
    trace: &Bound<'py, PyAny>,
    grid: &Bound<'py, PyAny>,
    window: Option<&Bound<'py, PyAny>>,
    workers: Option<&Bound<'py, PyAny>>,
    on_result: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let window_ns = match window {
        Some(w) => window_from_py(w)?,
        None => DEFAULT_WINDOW_NS,
    };
    let entries = grid
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("grid: expected a list of dicts, got {}", type_name(grid))))?;
    let mut options = Vec::new();
    for (i, entry) in entries.enumerate() {
        options.push(CorrelatorArgs::from_grid(&entry?, i)?);
    }
    let workers = match workers.filter(|w| !w.is_none()).map(|w| int_arg::<i64>(w, "workers")).transpose()? {
        Some(w) if w < 1 => return Err(PyValueError::new_err(format!("workers must be >= 1, got {w}"))),
        w => w.map(|w| w as usize),
    };
    if let Some(f) = &on_result {
        if !f.bind(py).is_callable() {
            return Err(PyTypeError::new_err("on_result must be callable"));
        }
    }
    let workers = workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let records = load_records(py, trace)?;
    let summaries = super::lifecycle::detach(py, || {
        sweep::<PyErr>(&records, &options, window_ns, workers, |p| {
            super::lifecycle::attach(|py| {
                if let (Progress::Done(i, s), Some(f)) = (&p, &on_result) {
                    f.bind(py).call1((*i, summary_dict(py, s, window_ns, true)?))?;
                }
                py.check_signals()
            })
        })
    })?;
    let out = PyList::empty(py);
    for s in &summaries {
        out.append(summary_dict(py, s, window_ns, true)?)?;
    }
    Ok(out)
}
