//! `replay_grid`, the threaded sweep behind `kubevents.sweep`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pythonize::pythonize;

use super::convert::type_name;
use super::correlator::CorrelatorArgs;
use super::errors::int_arg;
use super::lifecycle;
use super::sim::{correlators_arg, window_from_py, Trace};
use crate::correlator::CorrelatorOptions;
use crate::sim::cluster::Correlators;
use crate::sim::sweep::{sweep, sweep_workers_option, SharedTrace, SweepProgress};
use crate::sim::Summary;

/// The sweep on native threads with the GIL released; `on_result` and signal checks on the calling thread.
fn run_sweep<T: SharedTrace + ?Sized>(
    py: Python<'_>,
    trace: &T,
    options: &[CorrelatorOptions],
    correlators: Correlators,
    window_ns: i64,
    workers: usize,
    on_result: Option<&Py<PyAny>>,
) -> PyResult<Vec<Summary>> {
    lifecycle::detach(py, || {
        sweep::<T, PyErr>(trace, options, correlators, window_ns, workers, |p| {
            lifecycle::attach(|py| {
                if let (SweepProgress::Done(i, s), Some(f)) = (&p, on_result) {
                    f.bind(py).call1((*i, pythonize(py, &s.row(window_ns, true))?))?;
                }
                py.check_signals()
            })
        })
    })
}

/// The options of each entry of `grid`, checked.
fn grid_options(grid: &Bound<'_, PyAny>) -> PyResult<Vec<CorrelatorOptions>> {
    let entries = grid
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("grid: expected a list of dicts, got {}", type_name(grid))))?;
    entries.enumerate().map(|(i, entry)| CorrelatorArgs::from_grid(&entry?, i)).collect()
}

/// Checks every entry of `grid` as `replay_grid` does, without replaying anything (for a sweep whose replays
/// run elsewhere).
#[pyfunction]
pub fn _check_grid(grid: &Bound<'_, PyAny>) -> PyResult<()> {
    grid_options(grid).map(drop)
}

/// Replays one trace under each entry of `grid` (dicts of `simulate` options; missing ones take client-go's
/// defaults), each with one correlator per source or one shared (`correlators`), on `workers` native threads
/// with the GIL released, and returns the metrics of each replay in grid order. `on_result(index, metrics)`
/// is called on the calling thread as each replay finishes.
#[pyfunction]
#[pyo3(signature = (trace, grid, *, window=None, workers=None, on_result=None, correlators=None))]
pub fn replay_grid<'py>(
    py: Python<'py>,
    trace: &Bound<'py, PyAny>,
    grid: &Bound<'py, PyAny>,
    window: Option<&Bound<'py, PyAny>>,
    workers: Option<&Bound<'py, PyAny>>,
    on_result: Option<Py<PyAny>>,
    correlators: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let window_ns = window_from_py(window)?;
    let correlators = correlators.map(correlators_arg).transpose()?.unwrap_or_default();
    let options = grid_options(grid)?;
    let workers =
        sweep_workers_option(workers.filter(|w| !w.is_none()).map(|w| int_arg::<i64>(w, "workers")).transpose()?)?;
    if let Some(f) = &on_result {
        if !f.bind(py).is_callable() {
            return Err(PyTypeError::new_err("on_result must be callable"));
        }
    }
    let summaries = match Trace::from_py(trace)? {
        Trace::Table(table) => run_sweep(py, &*table, &options, correlators, window_ns, workers, on_result.as_ref())?,
        other => {
            let records = other.records(py)?;
            let records = lifecycle::detach(py, || records.collect())?;
            run_sweep(py, &records[..], &options, correlators, window_ns, workers, on_result.as_ref())?
        }
    };
    let rows: Vec<_> = summaries.iter().map(|s| s.row(window_ns, true)).collect();
    Ok(pythonize(py, &rows)?)
}
