//! `kubevents.simulate` and `Simulation`.

use crate::sync::lock;
use std::collections::VecDeque;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator, PyList};

use super::convert::record_from_py;
use super::correlator::{key_funcs_from_py, CorrelatorArgs};
use super::errors::{int_arg, int_opt};
use super::lab::{data_frame, object_dict, summary_dict, window_from_py, DEFAULT_WINDOW_NS};
use crate::correlator::CorrelatorOptions;
use crate::error::Error;
use crate::sim::{Action, JsonLines, ObjectKey, ObjectTotals, Record, Simulator, Step, Summary, Totals};

/// Records converted per GIL hold when the trace is a Python iterable.
pub(super) const BATCH: usize = 1024;

enum Source {
    Path(PathBuf),
    /// A trace that `iter()` can walk again (a list, or a re-iterable object).
    Iterable(Py<PyAny>),
    /// A one-shot iterator: it was consumed by `simulate`.
    Consumed,
}

type PyKeyFuncs = (Option<Py<PyAny>>, Option<Py<PyAny>>, Option<Py<PyAny>>);

fn clone_funcs(py: Python<'_>, f: &PyKeyFuncs) -> PyKeyFuncs {
    (
        f.0.as_ref().map(|x| x.clone_ref(py)),
        f.1.as_ref().map(|x| x.clone_ref(py)),
        f.2.as_ref().map(|x| x.clone_ref(py)),
    )
}

fn new_simulator(
    py: Python<'_>,
    options: CorrelatorOptions,
    funcs: &PyKeyFuncs,
    per_object: bool,
) -> PyResult<Simulator> {
    let (k, m, s) = clone_funcs(py, funcs);
    Ok(Simulator::new(options, key_funcs_from_py(k, m, s)?, per_object)?)
}

/// Where records come from while replaying.
enum Records {
    File(JsonLines<BufReader<File>>),
    Python(Py<PyIterator>, u64),
}

impl Records {
    fn open(py: Python<'_>, source: &Source) -> PyResult<Records> {
        match source {
            Source::Path(p) => Ok(Records::File(JsonLines::new(BufReader::new(File::open(p).map_err(|e| {
                PyErr::from(Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))))
            })?)))),
            Source::Iterable(obj) => Ok(Records::Python(obj.bind(py).try_iter()?.unbind(), 0)),
            Source::Consumed => Err(PyTypeError::new_err(
                "decisions() replays the trace, but it was a one-shot iterator that simulate() consumed; \
                 pass a path, a list, or a re-iterable trace such as kubevents.traces.generate(...)",
            )),
        }
    }
}

/// Up to `BATCH` records from a Python iterable, converted with the GIL held; errors name the record.
pub(super) fn next_batch(
    py: Python<'_>,
    it: &Py<PyIterator>,
    seen: &mut u64,
    out: &mut Vec<Record<'static>>,
) -> PyResult<()> {
    let it = it.bind(py);
    for item in it.clone().take(BATCH) {
        *seen += 1;
        let item = item?;
        let record = record_from_py(&item).map_err(|e| {
            let msg = format!("trace item {}: {}", *seen - 1, e.value(py));
            if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err(msg)
            } else {
                pyo3::exceptions::PyValueError::new_err(msg)
            }
        })?;
        out.push(record);
    }
    Ok(())
}

/// The metrics of a replay (`simulate(..., metrics=True)`); per object only with `per_object=True`,
/// sorted as `top_objects` sorts.
struct ReplayMetrics {
    window_ns: i64,
    overall: Summary,
    objects: Option<Vec<(ObjectKey, Summary)>>,
}

/// The result of a replay: totals, per-object counts and metrics when asked for, and the decisions on demand.
#[pyclass(module = "kubevents", name = "Simulation", frozen)]
pub struct PySimulation {
    totals: Totals,
    objects: Option<Vec<(ObjectKey, ObjectTotals)>>,
    metrics: Option<ReplayMetrics>,
    source: Source,
    options: CorrelatorOptions,
    funcs: PyKeyFuncs,
}

fn totals_dict<'py>(py: Python<'py>, t: &Totals) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("events", t.events)?;
    d.set_item("creates", t.creates)?;
    d.set_item("patches", t.patches)?;
    d.set_item("skips", t.skips)?;
    d.set_item("aggregated", t.aggregated)?;
    Ok(d)
}

impl PySimulation {
    fn replay_metrics(&self) -> PyResult<&ReplayMetrics> {
        self.metrics
            .as_ref()
            .ok_or_else(|| PyTypeError::new_err("metrics were not collected: call simulate(..., metrics=True)"))
    }
}

#[pymethods]
impl PySimulation {
    /// `{"events", "creates", "patches", "skips", "aggregated"}`; creates + patches + skips == events.
    #[getter]
    fn totals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        totals_dict(py, &self.totals)
    }

    /// The `n` objects with the most API writes (creates + patches), as dicts; needs `per_object=True`.
    #[pyo3(signature = (n=10))]
    fn top_objects<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = int_opt::n)] n: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let objects = self.objects.as_ref().ok_or_else(|| {
            PyTypeError::new_err("per-object totals were not kept: call simulate(..., per_object=True)")
        })?;
        let list = PyList::empty(py);
        for ((kind, namespace, name), o) in objects.iter().take(n) {
            let d = PyDict::new(py);
            d.set_item("kind", kind)?;
            d.set_item("namespace", namespace)?;
            d.set_item("name", name)?;
            d.set_item("events", o.events)?;
            d.set_item("writes", o.creates + o.patches)?;
            d.set_item("creates", o.creates)?;
            d.set_item("patches", o.patches)?;
            d.set_item("skips", o.skips)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The metrics of the replay (see `kubevents.Simulation`); needs `metrics=True`.
    #[getter]
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.replay_metrics()?;
        summary_dict(py, &m.overall, m.window_ns, true)
    }

    /// The metrics of each object, most API writes first (`n` of them, or all); needs `metrics=True` and
    /// `per_object=True`.
    #[pyo3(signature = (n=None))]
    fn object_metrics<'py>(&self, py: Python<'py>, n: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyList>> {
        let n = n.filter(|n| !n.is_none()).map(|n| int_arg::<usize>(n, "n")).transpose()?;
        let m = self.replay_metrics()?;
        let objects = m.objects.as_ref().ok_or_else(|| {
            PyTypeError::new_err("per-object metrics were not kept: call simulate(..., metrics=True, per_object=True)")
        })?;
        let list = PyList::empty(py);
        for (key, s) in objects.iter().take(n.unwrap_or(usize::MAX)) {
            list.append(object_dict(py, key, s, m.window_ns)?)?;
        }
        Ok(list)
    }

    /// The metrics as a pandas DataFrame: one row for the whole replay, or with `objects=True` one row per
    /// object (as `object_metrics()`).
    #[pyo3(signature = (objects=false))]
    fn to_pandas<'py>(&self, py: Python<'py>, objects: bool) -> PyResult<Bound<'py, PyAny>> {
        let rows = if objects { self.object_metrics(py, None)? } else { PyList::new(py, [self.metrics(py)?])? };
        data_frame(py, rows)
    }

    /// Replays the trace again and yields one dict per input event: `index`, `action` ("create", "patch"
    /// or "skip"), `name`, `count`, `message` and `patch` (str; the last four are None for a skip).
    fn decisions(&self, py: Python<'_>) -> PyResult<PyDecisions> {
        let records = Records::open(py, &self.source)?;
        let sim = new_simulator(py, self.options, &self.funcs, false)?;
        Ok(PyDecisions { state: Mutex::new(DecisionState { sim, records, ready: VecDeque::new(), done: false }) })
    }

    fn __repr__(&self) -> String {
        let t = &self.totals;
        format!(
            "Simulation(events={}, creates={}, patches={}, skips={}, aggregated={})",
            t.events, t.creates, t.patches, t.skips, t.aggregated
        )
    }
}

struct Row {
    index: u64,
    action: Action,
    name: Option<String>,
    count: Option<i32>,
    message: Option<String>,
    patch: Option<String>,
}

impl Row {
    fn new(step: Step, sim: &Simulator) -> Row {
        let (name, count, message) = match step.action {
            Action::Skip => (None, None, None),
            _ => {
                let e = sim.event();
                (Some(e.metadata.name.clone()), Some(e.count), Some(e.message.clone()))
            }
        };
        Row {
            index: step.index,
            action: step.action,
            name,
            count,
            message,
            patch: sim.patch().map(|p| String::from_utf8_lossy(p).into_owned()),
        }
    }
}

struct DecisionState {
    sim: Simulator,
    records: Records,
    ready: VecDeque<Row>,
    done: bool,
}

/// Iterator over the decisions of a replay, computed in batches with the GIL released.
#[pyclass(module = "kubevents", name = "Decisions", frozen)]
pub struct PyDecisions {
    state: Mutex<DecisionState>,
}

#[pymethods]
impl PyDecisions {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        if st.ready.is_empty() && !st.done {
            fill(py, st)?;
        }
        let Some(row) = st.ready.pop_front() else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("index", row.index)?;
        d.set_item("action", row.action.as_str())?;
        d.set_item("name", row.name)?;
        d.set_item("count", row.count)?;
        d.set_item("message", row.message)?;
        d.set_item("patch", row.patch)?;
        Ok(Some(d))
    }
}

fn fill(py: Python<'_>, st: &mut DecisionState) -> PyResult<()> {
    let DecisionState { sim, records, ready, done } = st;
    match records {
        Records::File(lines) => py.detach(|| -> Result<(), Error> {
            for _ in 0..BATCH {
                match lines.next_record() {
                    None => {
                        *done = true;
                        break;
                    }
                    Some(r) => {
                        let step = sim.step(&r?)?;
                        ready.push_back(Row::new(step, sim));
                    }
                }
            }
            Ok(())
        })?,
        Records::Python(it, seen) => {
            let mut batch = Vec::with_capacity(BATCH);
            next_batch(py, it, seen, &mut batch)?;
            *done = batch.len() < BATCH;
            py.detach(|| -> Result<(), Error> {
                for r in &batch {
                    let step = sim.step(r)?;
                    ready.push_back(Row::new(step, sim));
                }
                Ok(())
            })?;
        }
    }
    Ok(())
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
    let window_ns = window.map(window_from_py).transpose()?.unwrap_or(DEFAULT_WINDOW_NS);
    let funcs: PyKeyFuncs = (key_func, message_func, spam_key_func);
    let mut sim = new_simulator(py, options, &funcs, per_object)?;
    if metrics {
        sim = sim.with_metrics(window_ns);
    }

    let source = if trace.is_instance_of::<pyo3::types::PyString>() || trace.hasattr("__fspath__")? {
        Source::Path(trace.extract::<PathBuf>()?)
    } else {
        let it = trace.try_iter().map_err(|_| {
            PyTypeError::new_err(format!(
                "trace: expected a path or an iterable of records, got {}",
                trace.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
        })?;
        if it.is(trace) {
            Source::Consumed
        } else {
            Source::Iterable(trace.clone().unbind())
        }
    };

    let records = match &source {
        Source::Consumed => Records::Python(trace.try_iter()?.unbind(), 0),
        other => Records::open(py, other)?,
    };
    match records {
        Records::File(mut lines) => {
            py.detach(|| sim.run_jsonl(&mut lines))?;
        }
        Records::Python(it, mut seen) => {
            let mut batch = Vec::with_capacity(BATCH);
            loop {
                batch.clear();
                next_batch(py, &it, &mut seen, &mut batch)?;
                let n = batch.len();
                py.detach(|| batch.iter().try_for_each(|r| sim.step(r).map(drop)))?;
                if n < BATCH {
                    break;
                }
            }
        }
    }

    let objects = sim.objects().map(|m| {
        let mut v: Vec<_> = m.iter().map(|(k, o)| (k.clone(), *o)).collect();
        v.sort_by(|a, b| {
            let w = |o: &ObjectTotals| o.creates + o.patches;
            w(&b.1).cmp(&w(&a.1)).then(b.1.events.cmp(&a.1.events)).then(a.0.cmp(&b.0))
        });
        v
    });
    let metrics = sim.metrics().map(|m| {
        let objects = m.objects().map(|mut v| {
            v.sort_by(|a, b| b.1.writes().cmp(&a.1.writes()).then(b.1.events.cmp(&a.1.events)).then(a.0.cmp(&b.0)));
            v
        });
        ReplayMetrics { window_ns, overall: m.summary(), objects }
    });
    Ok(PySimulation { totals: sim.totals(), objects, metrics, source, options, funcs })
}
