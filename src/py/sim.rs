//! `kubevents.simulate` and `Simulation`, and traces from Python (a path or an iterable of record dicts).

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatchReader;
use pyo3::exceptions::{PyImportError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList, PyString};
use pythonize::pythonize;

use super::arrow::{arrow_error, is_table, stream_from_py, table_from_py, PyArrowTable};
use super::clock::seconds_arg;
use super::convert::{record_from_py, type_name};
use super::correlator::{key_funcs_from_py, CorrelatorArgs};
use super::errors::{external, int_arg, int_opt};
use super::lifecycle;
use crate::correlator::CorrelatorOptions;
use crate::sim::metrics::DEFAULT_WINDOW_NS;
use crate::sim::records::{Decisions, Records, SharedDecisions, BATCH};
use crate::sim::table::{rows_to_batch, Table};
use crate::sim::{Record, Report, Simulator};

/// A trace as given: a path, a table, or an iterable of records.
pub enum Trace {
    /// Anything with `__arrow_c_stream__`, read once (its buffers are kept, not copied).
    Table(Arc<Table>),
    Path(PathBuf),
    /// An iterable that `iter()` can walk again (a list, or a re-iterable object).
    Iterable(Py<PyAny>),
    /// A one-shot iterator: it can be walked once.
    Iterator(Py<PyIterator>),
}

impl Trace {
    pub fn from_py(trace: &Bound<'_, PyAny>) -> PyResult<Trace> {
        if is_table(trace) {
            return Ok(Trace::Table(Arc::new(table_from_py(trace)?)));
        }
        if trace.is_instance_of::<PyString>() || trace.hasattr("__fspath__")? {
            return Ok(Trace::Path(trace.extract()?));
        }
        let it = trace.try_iter().map_err(|_| {
            PyTypeError::new_err(format!("trace: expected a path or an iterable of records, got {}", type_name(trace)))
        })?;
        Ok(if it.is(trace) { Trace::Iterator(it.unbind()) } else { Trace::Iterable(trace.clone().unbind()) })
    }

    /// The records, read from the file or converted a batch at a time from the iterable.
    pub fn records(&self, py: Python<'_>) -> PyResult<Records> {
        let it = match self {
            Trace::Path(p) => return Ok(Records::open(p)?),
            Trace::Table(t) => return Ok(Records::Table(Arc::clone(t), 0, 0)),
            Trace::Iterable(obj) => obj.bind(py).try_iter()?.unbind(),
            Trace::Iterator(it) => it.clone_ref(py),
        };
        let mut seen = 0u64;
        Ok(Records::Batches(Box::new(move |out| {
            lifecycle::attach(|py| next_batch(py, it.bind(py), &mut seen, out)).map_err(external)
        })))
    }
}

/// Up to `BATCH` records from a Python iterator; errors name the record.
fn next_batch(
    py: Python<'_>,
    it: &Bound<'_, PyIterator>,
    seen: &mut u64,
    out: &mut Vec<Record<'static>>,
) -> PyResult<()> {
    for item in it.clone().take(BATCH) {
        *seen += 1;
        let record = record_from_py(&item?).map_err(|e| {
            let msg = format!("trace item {}: {}", *seen - 1, e.value(py));
            if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err(msg)
            } else {
                PyValueError::new_err(msg)
            }
        })?;
        out.push(record);
    }
    Ok(())
}

/// A metrics window in seconds or a timedelta, as nanoseconds (> 0).
pub fn window_from_py(window: Option<&Bound<'_, PyAny>>) -> PyResult<i64> {
    window.map_or(Ok(DEFAULT_WINDOW_NS), |w| seconds_arg(w, "window", true))
}

type PyKeyFuncs = (Option<Py<PyAny>>, Option<Py<PyAny>>, Option<Py<PyAny>>);

fn new_simulator(
    py: Python<'_>,
    options: CorrelatorOptions,
    (k, m, s): &PyKeyFuncs,
    per_object: bool,
) -> PyResult<Simulator> {
    let clone = |f: &Option<Py<PyAny>>| f.as_ref().map(|x| x.clone_ref(py));
    Ok(Simulator::new(options, key_funcs_from_py(clone(k), clone(m), clone(s))?, per_object)?)
}

/// The result of a replay: totals, per-object counts and metrics when asked for, and the decisions on demand.
#[pyclass(module = "kubevents", name = "Simulation", frozen)]
pub struct PySimulation {
    report: Report,
    trace: Trace,
    options: CorrelatorOptions,
    funcs: PyKeyFuncs,
}

#[pymethods]
impl PySimulation {
    /// `{"events", "creates", "patches", "skips", "aggregated"}`; creates + patches + skips == events.
    #[getter]
    fn totals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, &self.report.totals)?)
    }

    /// The `n` objects with the most API writes (creates + patches), as dicts; needs `per_object=True`.
    #[pyo3(signature = (n=10))]
    fn top_objects<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = int_opt::n)] n: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, self.report.top_objects(n)?)?)
    }

    /// The metrics of the replay (see `kubevents.Simulation`); needs `metrics=True`.
    #[getter]
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, self.report.metrics()?)?)
    }

    /// The metrics of each object, most API writes first (`n` of them, or all); needs `metrics=True` and
    /// `per_object=True`.
    #[pyo3(signature = (n=None))]
    fn object_metrics<'py>(&self, py: Python<'py>, n: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let n = n.filter(|n| !n.is_none()).map(|n| int_arg::<usize>(n, "n")).transpose()?;
        Ok(pythonize(py, self.report.object_metrics(n)?)?)
    }

    /// The metrics as a pandas DataFrame: one row for the whole replay, or with `objects=True` one row per
    /// object (as `object_metrics()`).
    #[pyo3(signature = (objects=false))]
    fn to_pandas<'py>(&self, py: Python<'py>, objects: bool) -> PyResult<Bound<'py, PyAny>> {
        let rows =
            if objects { self.object_metrics(py, None)? } else { PyList::new(py, [self.metrics(py)?])?.into_any() };
        let pandas = py.import("pandas").map_err(|e| {
            PyImportError::new_err(format!(
                "to_pandas() needs pandas ({}); install it with: pip install 'kubevents[lab]'",
                e.value(py)
            ))
        })?;
        pandas.getattr("DataFrame")?.call1((rows,))
    }

    /// The metrics as an Arrow table (`pyarrow.table(...)`, `polars.DataFrame(...)`): one row for the whole
    /// replay, or with `objects=True` one row per object (as `object_metrics()`), typed columns built in Rust.
    #[pyo3(signature = (objects=false))]
    fn to_arrow(&self, objects: bool) -> PyResult<PyArrowTable> {
        let batch = if objects {
            rows_to_batch(self.report.object_metrics(None)?)?
        } else {
            rows_to_batch(std::slice::from_ref(self.report.metrics()?))?
        };
        Ok(PyArrowTable::new(batch.schema(), vec![batch]))
    }

    /// Replays the trace again and yields one dict per input event: `index`, `action` ("create", "patch"
    /// or "skip"), `name`, `count`, `message` and `patch` (str; the last four are None for a skip).
    fn decisions(&self, py: Python<'_>) -> PyResult<PyDecisions> {
        if let Trace::Iterator(_) = self.trace {
            return Err(PyTypeError::new_err(
                "decisions() replays the trace, but it was a one-shot iterator that simulate() consumed; \
                 pass a path, a list, or a re-iterable trace such as kubevents.traces.generate(...)",
            ));
        }
        let sim = new_simulator(py, self.options, &self.funcs, false)?;
        Ok(PyDecisions { inner: SharedDecisions::new(Decisions::new(sim, self.trace.records(py)?)) })
    }

    fn __repr__(&self) -> String {
        let t = &self.report.totals;
        format!(
            "Simulation(events={}, creates={}, patches={}, skips={}, aggregated={})",
            t.events, t.creates, t.patches, t.skips, t.aggregated
        )
    }
}

/// Iterator over the decisions of a replay, computed in batches with the GIL released.
#[pyclass(module = "kubevents", name = "Decisions", frozen)]
pub struct PyDecisions {
    inner: SharedDecisions,
}

#[pymethods]
impl PyDecisions {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        // A decision computed already comes without giving up the GIL.
        let next = match self.inner.ready() {
            Some(d) => Some(Ok(d)),
            None => lifecycle::detach(py, || self.inner.next()),
        };
        match next {
            None => Ok(None),
            Some(d) => Ok(Some(pythonize(py, &d?)?)),
        }
    }

    /// The Arrow PyCapsule interface: the decisions not iterated yet as a table with the columns of the
    /// dicts (`pyarrow.table(sim.decisions())`, `polars.DataFrame(sim.decisions())`). It replays the rest of
    /// the trace, after which the iterator is exhausted.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, pyo3::types::PyCapsule>> {
        let columns = lifecycle::detach(py, || self.inner.drain_columns())?;
        let batch = columns.finish();
        PyArrowTable::new(batch.schema(), vec![batch]).__arrow_c_stream__(py, requested_schema)
    }
}

/// Replays a trace through client-go's correlator on a virtual clock (see the module docs of `kubevents`).
/// With `metrics=True` it also collects the metrics of `kubevents.lab` (peak rates over `window` seconds),
/// whose memory grows with the distinct (object, reason, message) of the trace (`kubevents.lab`).
#[pyfunction]
#[pyo3(signature = (trace, *, lru_cache_size=4096, burst=25, qps=CorrelatorArgs::DEFAULT.qps, max_events=10,
                    max_interval=600, key_func=None, message_func=None, spam_key_func=None, per_object=false,
                    metrics=false, window=None))]
#[allow(clippy::too_many_arguments)]
pub fn simulate(
    py: Python<'_>,
    trace: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = int_opt::lru_cache_size)] lru_cache_size: i64,
    #[pyo3(from_py_with = int_opt::burst)] burst: i64,
    qps: f64,
    #[pyo3(from_py_with = int_opt::max_events)] max_events: i64,
    #[pyo3(from_py_with = int_opt::max_interval)] max_interval: i64,
    key_func: Option<Py<PyAny>>,
    message_func: Option<Py<PyAny>>,
    spam_key_func: Option<Py<PyAny>>,
    per_object: bool,
    metrics: bool,
    window: Option<&Bound<'_, PyAny>>,
) -> PyResult<PySimulation> {
    let options = CorrelatorArgs { lru_cache_size, burst, qps, max_events, max_interval }.options()?;
    let window_ns = window_from_py(window)?;
    let funcs: PyKeyFuncs = (key_func, message_func, spam_key_func);
    let mut sim = new_simulator(py, options, &funcs, per_object)?;
    if metrics {
        sim = sim.with_metrics(window_ns);
    }
    if is_table(trace) {
        // Read as it replays: decoding the next batches (a Parquet scan's) overlaps the replay.
        let mut reader = stream_from_py(trace)?;
        let schema = reader.schema();
        // A stream made in Python (a generator of batches) needs the GIL; the reader thread takes it.
        let next = move || lifecycle::attach(|_| reader.next()).map(|b| b.map_err(arrow_error));
        let table = lifecycle::detach(py, || Table::each_streamed(&schema, next, |r| sim.step(r).map(drop)))?;
        let trace = Trace::Table(Arc::new(table));
        return Ok(PySimulation { report: sim.report(), trace, options, funcs });
    }
    let trace = Trace::from_py(trace)?;
    let mut records = trace.records(py)?;
    let report = lifecycle::detach(py, || records.run(&mut sim).map(|()| sim.report()))?;
    Ok(PySimulation { report, trace, options, funcs })
}
