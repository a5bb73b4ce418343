//! `kubevents.simulate` and `Simulation`, and traces from Python (a path or an iterable of record dicts).

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatchReader;
use pyo3::exceptions::{PyImportError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyIterator, PyList, PyString};
use pythonize::pythonize;

use super::arrow::{arrow_error, is_table, stream_from_py, table_from_py, PyArrowTable};
use super::clock::seconds_arg;
use super::convert::{record_from_py, type_name};
use super::correlator::{key_funcs_from_py, CorrelatorArgs};
use super::errors::{external, int_arg, int_opt, str_arg};
use super::lifecycle;
use crate::correlator::KeyFuncs;
use crate::error::Error;
use crate::sim::cluster::{self, Correlators, NewKeyFuncs, Replayer, Setup, SourceKey};
use crate::sim::metrics::DEFAULT_WINDOW_NS;
use crate::sim::records::{Decisions, Records, SharedDecisions, BATCH};
use crate::sim::sweep::sweep_workers_option;
use crate::sim::table::{rows_to_batch, Table};
use crate::sim::{Part, Record, Replay, Report};

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

/// `key_func`, `message_func` and `spam_key_func`.
type PyKeyFuncs = (Option<Py<PyAny>>, Option<Py<PyAny>>, Option<Py<PyAny>>);

/// What makes the key functions of each correlator of a replay: client-go's, or the Python ones (checked
/// here), each correlator with its own references to them.
fn new_key_funcs(py: Python<'_>, funcs: &PyKeyFuncs) -> PyResult<NewKeyFuncs> {
    let clone = |py: Python<'_>, f: &Option<Py<PyAny>>| f.as_ref().map(|x| x.clone_ref(py));
    let (k, m, s) = funcs;
    if k.is_none() && m.is_none() && s.is_none() {
        return Ok(Arc::new(|| Ok(KeyFuncs::default())));
    }
    key_funcs_from_py(clone(py, k), clone(py, m), clone(py, s))?;
    let (k, m, s) = (clone(py, k), clone(py, m), clone(py, s));
    Ok(Arc::new(move || {
        lifecycle::attach(|py| key_funcs_from_py(clone(py, &k), clone(py, &m), clone(py, &s))).map_err(external)
    }))
}

/// `correlators="per-source"` or `"shared"`.
pub fn correlators_arg(v: &Bound<'_, PyAny>) -> PyResult<Correlators> {
    Ok(Correlators::parse(&str_arg(v, "correlators")?.to_cow()?)?)
}

/// The options of `simulate` that say how to replay, checked.
struct SimArgs {
    setup: Setup,
    correlators: Correlators,
    /// As given; see `threads`.
    threads: Option<usize>,
    /// With Python key functions, which would only wait for each other's GIL on several threads.
    custom: bool,
}

impl SimArgs {
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        args: CorrelatorArgs,
        funcs: PyKeyFuncs,
        per_object: bool,
        metrics: bool,
        window: Option<&Bound<'_, PyAny>>,
        correlators: &Bound<'_, PyAny>,
        threads: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<SimArgs> {
        let options = args.options()?;
        let window_ns = window_from_py(window)?;
        let correlators = correlators_arg(correlators)?;
        let threads = match threads.filter(|t| !t.is_none()) {
            None => None,
            Some(t) => match int_arg::<i64>(t, "threads")? {
                n if n < 1 => return Err(PyValueError::new_err(format!("threads must be >= 1, got {n}"))),
                n => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            },
        };
        let custom = funcs.0.is_some() || funcs.1.is_some() || funcs.2.is_some();
        let setup =
            Setup { options, per_object, window_ns: metrics.then_some(window_ns), funcs: new_key_funcs(py, &funcs)? };
        Ok(SimArgs { setup, correlators, threads, custom })
    }

    /// The threads of a replay per source: as given, else one per CPU for a table (in memory already) and
    /// one for other traces (read as they replay, which their reading would hold back anyway); one for a
    /// shared correlator or with Python key functions.
    fn threads(&self, table: bool) -> usize {
        if self.custom || self.correlators == Correlators::Shared {
            return 1;
        }
        match self.threads {
            Some(n) => n,
            None if table => sweep_workers_option(None).unwrap_or(1),
            None => 1,
        }
    }

    fn simulation(&self, report: Report, trace: Option<Trace>) -> PySimulation {
        PySimulation { report, trace, setup: self.setup.clone(), correlators: self.correlators }
    }
}

/// The result of a replay: totals, per-object counts and metrics when asked for, and the decisions on demand.
#[pyclass(module = "kubevents", name = "Simulation", frozen)]
pub struct PySimulation {
    report: Report,
    /// None for a replay put together from parts replayed elsewhere, with nothing to replay again here.
    trace: Option<Trace>,
    setup: Setup,
    correlators: Correlators,
}

/// `n` as an optional count of rows (None for all).
fn n_arg(n: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    n.filter(|n| !n.is_none()).map(|n| int_arg::<usize>(n, "n")).transpose()
}

/// `by="source"` or `"component"`, or None.
fn by_arg(by: Option<&Bound<'_, PyAny>>) -> PyResult<Option<bool>> {
    match by.filter(|b| !b.is_none()) {
        None => Ok(None),
        Some(b) => match &*str_arg(b, "by")?.to_cow()? {
            "source" => Ok(Some(false)),
            "component" => Ok(Some(true)),
            other => Err(PyValueError::new_err(format!("by must be \"source\", \"component\" or None, got {other:?}"))),
        },
    }
}

#[pymethods]
impl PySimulation {
    /// `{"events", "creates", "patches", "skips", "aggregated"}`; creates + patches + skips == events.
    #[getter]
    fn totals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, &self.report.totals)?)
    }

    /// `"per-source"` (one correlator per event source, as in a cluster) or `"shared"` (one for the trace).
    #[getter]
    fn correlators(&self) -> &'static str {
        self.correlators.as_str()
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

    /// Each source's counts (`source_component`, `source_host`, events, writes, creates, patches, skips,
    /// aggregated), most API writes first (`n` of them, or all).
    #[pyo3(signature = (n=None))]
    fn by_source<'py>(&self, py: Python<'py>, n: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, self.report.top_sources(false, n_arg(n)?))?)
    }

    /// Each component's counts, its sources (hosts) added up: `source_component`, `sources`, then the counts
    /// as in `by_source()`.
    #[pyo3(signature = (n=None))]
    fn by_component<'py>(&self, py: Python<'py>, n: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, self.report.top_sources(true, n_arg(n)?))?)
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
        Ok(pythonize(py, self.report.object_metrics(n_arg(n)?)?)?)
    }

    /// The metrics of each source (its own replay's), most API writes first (`n` of them, or all); needs
    /// `metrics=True` and one correlator per source.
    #[pyo3(signature = (n=None))]
    fn source_metrics<'py>(&self, py: Python<'py>, n: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, self.report.source_metrics(false, n_arg(n)?)?)?)
    }

    /// The metrics of each component, its sources' writes taken together, most API writes first; needs
    /// `metrics=True` and one correlator per source.
    #[pyo3(signature = (n=None))]
    fn component_metrics<'py>(&self, py: Python<'py>, n: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, self.report.source_metrics(true, n_arg(n)?)?)?)
    }

    /// The metrics as a pandas DataFrame: one row for the whole replay, or one row per object
    /// (`objects=True`), per source (`by="source"`) or per component (`by="component"`).
    #[pyo3(signature = (objects=false, by=None))]
    fn to_pandas<'py>(
        &self,
        py: Python<'py>,
        objects: bool,
        by: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let rows = match (objects, by_arg(by)?) {
            (true, Some(_)) => return Err(both_tables()),
            (true, None) => self.object_metrics(py, None)?,
            (false, Some(c)) => pythonize(py, self.report.source_metrics(c, None)?)?,
            (false, None) => PyList::new(py, [self.metrics(py)?])?.into_any(),
        };
        let pandas = py.import("pandas").map_err(|e| {
            PyImportError::new_err(format!(
                "to_pandas() needs pandas ({}); install it with: pip install 'kubevents[lab]'",
                e.value(py)
            ))
        })?;
        pandas.getattr("DataFrame")?.call1((rows,))
    }

    /// The metrics as an Arrow table (`pyarrow.table(...)`, `polars.DataFrame(...)`): one row for the whole
    /// replay, or one row per object (`objects=True`, as `object_metrics()`), per source (`by="source"`) or per
    /// component (`by="component"`), typed columns built in Rust.
    #[pyo3(signature = (objects=false, by=None))]
    fn to_arrow(&self, objects: bool, by: Option<&Bound<'_, PyAny>>) -> PyResult<PyArrowTable> {
        let batch = match (objects, by_arg(by)?) {
            (true, Some(_)) => return Err(both_tables()),
            (true, None) => rows_to_batch(self.report.object_metrics(None)?)?,
            (false, Some(c)) => rows_to_batch(self.report.source_metrics(c, None)?)?,
            (false, None) => rows_to_batch(std::slice::from_ref(self.report.metrics()?))?,
        };
        Ok(PyArrowTable::new(batch.schema(), vec![batch]))
    }

    /// Replays the trace again and yields one dict per input event: `index`, `action` ("create", "patch"
    /// or "skip"), `name`, `count`, `message` and `patch` (str; the last four are None for a skip), and the
    /// input event's `source_component` and `source_host`.
    fn decisions(&self, py: Python<'_>) -> PyResult<PyDecisions> {
        let trace = match &self.trace {
            None => {
                return Err(PyTypeError::new_err(
                    "decisions() replays the trace, but this replay was put together from parts replayed on an \
                     executor; replay a part locally (simulate(part)) to see its decisions",
                ))
            }
            Some(Trace::Iterator(_)) => {
                return Err(PyTypeError::new_err(
                    "decisions() replays the trace, but it was a one-shot iterator that simulate() consumed; \
                     pass a path, a list, or a re-iterable trace such as kubevents.traces.generate(...)",
                ))
            }
            Some(t) => t,
        };
        let setup = Setup { per_object: false, window_ns: None, ..self.setup.clone() };
        let replayer = Replayer::new(setup, self.correlators)?;
        Ok(PyDecisions { inner: SharedDecisions::new(Decisions::new(replayer, trace.records(py)?)) })
    }

    fn __repr__(&self) -> String {
        let t = &self.report.totals;
        format!(
            "Simulation(events={}, creates={}, patches={}, skips={}, aggregated={}, correlators={:?}, sources={})",
            t.events,
            t.creates,
            t.patches,
            t.skips,
            t.aggregated,
            self.correlators.as_str(),
            self.report.sources.len()
        )
    }
}

fn both_tables() -> PyErr {
    PyValueError::new_err("objects=True and by= ask for two different tables; give one of them")
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
/// whose memory grows with the distinct (object, reason, message) of the trace (`kubevents.lab`). Each event
/// source has its own correlator (`correlators="per-source"`), its sources spread over `threads` threads, or
/// one correlator replays everything (`"shared"`).
#[pyfunction]
#[pyo3(signature = (trace, *, lru_cache_size=4096, burst=25, qps=CorrelatorArgs::DEFAULT.qps, max_events=10,
                    max_interval=600, key_func=None, message_func=None, spam_key_func=None, per_object=false,
                    metrics=false, window=None, correlators=None, threads=None))]
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
    correlators: Option<&Bound<'_, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<PySimulation> {
    let options = CorrelatorArgs { lru_cache_size, burst, qps, max_events, max_interval };
    let funcs: PyKeyFuncs = (key_func, message_func, spam_key_func);
    let per_source = PyString::new(py, Correlators::PerSource.as_str());
    let correlators = correlators.unwrap_or(per_source.as_any());
    let args = SimArgs::new(py, options, funcs, per_object, metrics, window, correlators, threads)?;
    let (report, trace) = replay(py, trace, &args)?;
    Ok(args.simulation(report, Some(trace)))
}

/// Replays a trace as `args` say; returns what it found and the trace to replay again for the decisions.
fn replay(py: Python<'_>, trace: &Bound<'_, PyAny>, args: &SimArgs) -> PyResult<(Report, Trace)> {
    let setup = &args.setup;
    let split = |table: &Table, threads: usize| -> crate::error::Result<Report> {
        let parts = cluster::replay_split(table, setup, threads)?;
        cluster::report(parts, setup.per_object, setup.window_ns)
    };
    if is_table(trace) {
        let threads = args.threads(true);
        let mut reader = stream_from_py(trace)?;
        let schema = reader.schema();
        // A stream made in Python (a generator of batches) needs the GIL; the reader thread takes it.
        let next = move || lifecycle::attach(|_| reader.next()).map(|b| b.map_err(arrow_error));
        let (report, table) = lifecycle::detach(py, || {
            if threads > 1 {
                let table = Table::each_streamed(&schema, next, |_| Ok(()))?;
                return Ok::<_, Error>((split(&table, threads)?, table));
            }
            // Read as it replays: decoding the next batches (a Parquet scan's) overlaps the replay.
            let mut replayer = Replayer::new(setup.clone(), args.correlators)?;
            let table = Table::each_streamed(&schema, next, |r| replayer.replay(r).map(drop))?;
            Ok((replayer.report()?, table))
        })?;
        return Ok((report, Trace::Table(Arc::new(table))));
    }
    let trace = Trace::from_py(trace)?;
    let mut records = trace.records(py)?;
    let threads = args.threads(false);
    if threads > 1 {
        let report = lifecycle::detach(py, || split(&*records.into_table()?, threads))?;
        return Ok((report, trace));
    }
    let mut replayer = Replayer::new(setup.clone(), args.correlators)?;
    let report = lifecycle::detach(py, || records.run(&mut replayer).and_then(|()| replayer.report()))?;
    Ok((report, trace))
}

/// `simulate`'s options given as keywords (`**options`), checked as `simulate` checks them; `threads` only
/// where `with_threads`.
fn sim_args_from(py: Python<'_>, options: Option<&Bound<'_, PyDict>>, with_threads: bool) -> PyResult<SimArgs> {
    let mut args = CorrelatorArgs::DEFAULT;
    let mut funcs: PyKeyFuncs = (None, None, None);
    let (mut per_object, mut metrics) = (false, false);
    let (mut window, mut threads) = (None, None);
    let func = |v: &Bound<'_, PyAny>| (!v.is_none()).then(|| v.clone().unbind());
    for (k, v) in options.into_iter().flat_map(|o| o.iter()) {
        match &*str_arg(&k, "option")?.to_cow()? {
            "lru_cache_size" => args.lru_cache_size = int_opt::lru_cache_size(&v)?,
            "burst" => args.burst = int_opt::burst(&v)?,
            "qps" => {
                args.qps = v
                    .extract()
                    .map_err(|_| PyTypeError::new_err(format!("qps must be a number, got {}", type_name(&v))))?
            }
            "max_events" => args.max_events = int_opt::max_events(&v)?,
            "max_interval" => args.max_interval = int_opt::max_interval(&v)?,
            "key_func" => funcs.0 = func(&v),
            "message_func" => funcs.1 = func(&v),
            "spam_key_func" => funcs.2 = func(&v),
            "per_object" => per_object = v.is_truthy()?,
            "metrics" => metrics = v.is_truthy()?,
            "window" => window = (!v.is_none()).then_some(v),
            "threads" if with_threads => threads = Some(v),
            other => return Err(PyTypeError::new_err(format!("unexpected option {other:?}"))),
        }
    }
    let per_source = PyString::new(py, Correlators::PerSource.as_str());
    SimArgs::new(py, args, funcs, per_object, metrics, window.as_ref(), per_source.as_any(), threads.as_ref())
}

/// The replays of a trace's sources, one correlator each, under `simulate`'s `**options` (`threads` among
/// them), encoded for `_merge_sources`: what a worker of `kubevents.simulate(..., executor=...)` sends back.
#[pyfunction]
#[pyo3(signature = (trace, **options))]
pub fn _replay_sources<'py>(
    py: Python<'py>,
    trace: &Bound<'py, PyAny>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let args = sim_args_from(py, options, true)?;
    let table = match Trace::from_py(trace)? {
        Trace::Table(t) => t,
        other => {
            let records = other.records(py)?;
            lifecycle::detach(py, || records.into_table())?
        }
    };
    let bytes = lifecycle::detach(py, || {
        let parts = cluster::replay_split(&*table, &args.setup, args.threads(true))?;
        let mut out = Vec::new();
        ciborium::into_writer(&parts, &mut out)
            .map_err(|e| Error::value("", format!("cannot encode a replay: {e}")))?;
        Ok::<_, Error>(out)
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// A `Simulation` of the sources replayed apart by `_replay_sources` (each source in one of `parts`), under
/// the `**options` they were replayed with; `trace`, if given, is replayed again for `decisions()`.
#[pyfunction]
#[pyo3(signature = (parts, trace=None, **options))]
pub fn _merge_sources(
    py: Python<'_>,
    parts: &Bound<'_, PyAny>,
    trace: Option<&Bound<'_, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PySimulation> {
    let args = sim_args_from(py, options, false)?;
    let mut encoded: Vec<Vec<u8>> = Vec::new();
    for (i, part) in parts.try_iter()?.enumerate() {
        let part = part?;
        let bytes = part.cast::<PyBytes>().map_err(|_| {
            PyTypeError::new_err(format!("parts[{i}]: expected the bytes of _replay_sources, got {}", type_name(&part)))
        })?;
        encoded.push(bytes.as_bytes().to_vec());
    }
    let setup = &args.setup;
    let report = lifecycle::detach(py, || {
        let mut all: Vec<(SourceKey, Part)> = Vec::new();
        for (i, bytes) in encoded.iter().enumerate() {
            let parts: Vec<(SourceKey, Part)> = ciborium::from_reader(bytes.as_slice())
                .map_err(|e| Error::value(format!("parts[{i}]"), format!("not a replay of _replay_sources: {e}")))?;
            all.extend(parts);
        }
        cluster::report(all, setup.per_object, setup.window_ns)
    })?;
    let trace = trace.filter(|t| !t.is_none()).map(Trace::from_py).transpose()?;
    Ok(args.simulation(report, trace))
}

/// The records of each source of a trace as a table of their own: `[(component, host, table), ...]`, the
/// sources in the order they first appear and each one's records in trace order.
#[pyfunction]
pub fn _split_sources<'py>(py: Python<'py>, trace: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    let table = match Trace::from_py(trace)? {
        Trace::Table(t) => t,
        other => {
            let records = other.records(py)?;
            lifecycle::detach(py, || records.into_table())?
        }
    };
    let parts = lifecycle::detach(py, || cluster::split(&*table))?;
    let out = PyList::empty(py);
    for ((component, host), batch) in parts {
        out.append((component, host, PyArrowTable::new(batch.schema(), vec![batch])))?;
    }
    Ok(out)
}
