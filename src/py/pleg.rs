//! `kubevents.pleg`: pods, statuses and CRI events from Python data, and the PLEG classes around the core.

use crate::sync::lock;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyException, PyRuntimeError, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use super::clock::{clock_arg, seconds_arg, timeout_arg, to_datetime, to_time};
use super::convert::type_name;
use super::errors::{external, int_opt};
use super::lifecycle;
use crate::error::Error;
use crate::pleg::cache::{Lookup, Waiter};
use crate::pleg::channel::Recv;
use crate::pleg::evented::{ContainerEventSource, CriEvent, CriEventType, EventedOptions, EventedPleg};
use crate::pleg::generic::{Abort, Condition, GenericPleg, Inspection, LoopStep, PlegOptions, RelistDuration, Runtime};
use crate::pleg::{
    Container, ContainerState, EventChannel, Pod, PodCache, PodLifecycleEvent, PodLifecycleEventType, StatusView,
};
use crate::time::{Time, NANOS_PER_SECOND};

/// An exception raised by the runtime, a watch condition or the event source, for the core: one that is not
/// an `Exception` (`KeyboardInterrupt`, `SystemExit`) is an `Abort`, which stops the relist instead of being
/// stored or logged.
fn runtime_err(py: Python<'_>, e: PyErr) -> Error {
    if e.is_instance_of::<PyException>(py) {
        external(e)
    } else {
        Abort(external(e)).into_error()
    }
}

/// The Python exception inside a core error (through an `Abort`), if it carries one.
fn py_err_in(e: &Error) -> Option<&PyErr> {
    let Error::External(b) = e else { return None };
    match b.downcast_ref::<Abort>() {
        Some(a) => py_err_in(&a.0),
        None => b.downcast_ref::<PyErr>(),
    }
}

/// A core error the core keeps (shared), raised again.
fn raise_kept(py: Python<'_>, e: &Error) -> PyErr {
    match py_err_in(e) {
        Some(p) => p.clone_ref(py),
        None => PyRuntimeError::new_err(e.to_string()),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Pods

/// Where a value sits in the input, formatted only when there is an error to report.
type PathFn<'a> = &'a dyn Fn() -> String;

fn string(v: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<String> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(s.to_str()?.to_owned()),
        Err(_) => Err(PyTypeError::new_err(format!("{}: expected a str, got {}", path(), type_name(v)))),
    }
}

fn state(v: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<ContainerState> {
    let s = v
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("{}: expected a state str, got {}", path(), type_name(v))))?;
    ContainerState::parse(s.to_str()?).map_err(|e| PyValueError::new_err(format!("{}: {}", path(), strip_field(&e))))
}

/// The core's message without its own field prefix (the path here names the field).
fn strip_field(e: &Error) -> String {
    match e {
        Error::Value { message, .. } | Error::Type { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn dict_get<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key)?.filter(|v| !v.is_none()))
}

fn container(c: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<Container> {
    if let Ok(t) = c.cast::<PyTuple>() {
        if t.len() != 2 {
            return Err(PyTypeError::new_err(format!("{}: expected (id, state), got a {}-tuple", path(), t.len())));
        }
        return Ok(Container {
            id: string(&t.get_item(0)?, &|| format!("{}.id", path()))?,
            state: state(&t.get_item(1)?, &|| format!("{}.state", path()))?,
        });
    }
    if let Ok(d) = c.cast::<PyDict>() {
        let id = dict_get(d, "id")?.ok_or_else(|| PyValueError::new_err(format!("{}: missing \"id\"", path())))?;
        let st =
            dict_get(d, "state")?.ok_or_else(|| PyValueError::new_err(format!("{}: missing \"state\"", path())))?;
        return Ok(Container {
            id: string(&id, &|| format!("{}.id", path()))?,
            state: state(&st, &|| format!("{}.state", path()))?,
        });
    }
    Err(PyTypeError::new_err(format!("{}: expected a dict or an (id, state) tuple, got {}", path(), type_name(c))))
}

fn containers(v: Option<Bound<'_, PyAny>>, path: PathFn<'_>) -> PyResult<Vec<Container>> {
    let Some(v) = v else { return Ok(Vec::new()) };
    if let Ok(l) = v.cast::<PyList>() {
        return l.iter().enumerate().map(|(i, c)| container(&c, &|| format!("{}[{i}]", path()))).collect();
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return t.iter().enumerate().map(|(i, c)| container(&c, &|| format!("{}[{i}]", path()))).collect();
    }
    Err(PyTypeError::new_err(format!("{}: expected a list, got {}", path(), type_name(&v))))
}

/// A pod from a dict (`id`, `name`, `namespace`, `containers`, `sandboxes`) or a tuple
/// `(id, name, namespace, containers, sandboxes)` whose containers are `(id, state)` tuples.
pub fn pod_from_py(v: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<Pod> {
    if let Ok(t) = v.cast::<PyTuple>() {
        if t.len() != 5 {
            return Err(PyTypeError::new_err(format!(
                "{}: expected (id, name, namespace, containers, sandboxes), got a {}-tuple",
                path(),
                t.len()
            )));
        }
        return Ok(Pod {
            id: string(&t.get_item(0)?, &|| format!("{}.id", path()))?,
            name: string(&t.get_item(1)?, &|| format!("{}.name", path()))?,
            namespace: string(&t.get_item(2)?, &|| format!("{}.namespace", path()))?,
            containers: containers(Some(t.get_item(3)?), &|| format!("{}.containers", path()))?,
            sandboxes: containers(Some(t.get_item(4)?), &|| format!("{}.sandboxes", path()))?,
        });
    }
    if let Ok(p) = v.cast::<PyPod>() {
        return Ok(Pod::clone(&p.get().0));
    }
    let d = v
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err(format!("{}: expected a pod dict or tuple, got {}", path(), type_name(v))))?;
    let id = dict_get(d, "id")?.ok_or_else(|| PyValueError::new_err(format!("{}: missing \"id\"", path())))?;
    let opt = |k: &str| -> PyResult<String> {
        dict_get(d, k)?.map_or(Ok(String::new()), |x| string(&x, &|| format!("{}.{k}", path())))
    };
    Ok(Pod {
        id: string(&id, &|| format!("{}.id", path()))?,
        name: opt("name")?,
        namespace: opt("namespace")?,
        containers: containers(dict_get(d, "containers")?, &|| format!("{}.containers", path()))?,
        sandboxes: containers(dict_get(d, "sandboxes")?, &|| format!("{}.sandboxes", path()))?,
    })
}

/// A pod shared as is when it is a `Pod` already.
fn shared_pod(v: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<Arc<Pod>> {
    match v.cast::<PyPod>() {
        Ok(p) => Ok(p.get().0.clone()),
        Err(_) => pod_from_py(v, path).map(Arc::new),
    }
}

/// A listing's pods by UID, so the next conversion can reuse the unchanged ones.
#[derive(Clone)]
struct ById(Arc<Pod>);

impl PartialEq for ById {
    fn eq(&self, o: &Self) -> bool {
        self.0.id == o.0.id
    }
}
impl Eq for ById {}
impl std::hash::Hash for ById {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.id.hash(h)
    }
}
impl std::borrow::Borrow<str> for ById {
    fn borrow(&self) -> &str {
        &self.0.id
    }
}

type Previous = hashbrown::HashSet<ById, foldhash::fast::RandomState>;

fn same_str(v: &Bound<'_, PyAny>, s: &str) -> bool {
    v.cast::<PyString>().ok().and_then(|x| x.to_str().ok()).is_some_and(|x| x == s)
}

fn same_containers(v: &Bound<'_, PyAny>, cs: &[Container]) -> bool {
    let same = |c: &Bound<'_, PyAny>, want: &Container| -> bool {
        if let Ok(t) = c.cast::<PyTuple>() {
            t.len() == 2
                && t.get_item(0).is_ok_and(|x| same_str(&x, &want.id))
                && t.get_item(1).is_ok_and(|x| same_str(&x, want.state.as_str()))
        } else if let Ok(d) = c.cast::<PyDict>() {
            matches!(dict_get(d, "id"), Ok(Some(x)) if same_str(&x, &want.id))
                && matches!(dict_get(d, "state"), Ok(Some(x)) if same_str(&x, want.state.as_str()))
        } else {
            false
        }
    };
    if let Ok(l) = v.cast::<PyList>() {
        l.len() == cs.len() && l.iter().zip(cs).all(|(c, w)| same(&c, w))
    } else if let Ok(t) = v.cast::<PyTuple>() {
        t.len() == cs.len() && t.iter().zip(cs).all(|(c, w)| same(&c, w))
    } else {
        false
    }
}

/// The previous listing's pod when `v` describes exactly it (compared without copying any string).
fn unchanged_pod(v: &Bound<'_, PyAny>, previous: &Previous) -> Option<Arc<Pod>> {
    if previous.is_empty() {
        return None;
    }
    let field = |i: usize, key: &str| -> Option<Bound<'_, PyAny>> {
        if let Ok(t) = v.cast::<PyTuple>() {
            (t.len() == 5).then(|| t.get_item(i).ok()).flatten()
        } else {
            v.cast::<PyDict>().ok().and_then(|d| d.get_item(key).ok().flatten())
        }
    };
    let id = field(0, "id")?;
    let id = id.cast::<PyString>().ok()?.to_str().ok()?;
    let prev = previous.get(id)?;
    let p = &prev.0;
    let text_ok = |i, key, want: &str| match field(i, key) {
        Some(x) if !x.is_none() => same_str(&x, want),
        _ => want.is_empty(),
    };
    let list_ok = |i, key, want: &[Container]| match field(i, key) {
        Some(x) if !x.is_none() => same_containers(&x, want),
        _ => want.is_empty(),
    };
    (text_ok(1, "name", &p.name)
        && text_ok(2, "namespace", &p.namespace)
        && list_ok(3, "containers", &p.containers)
        && list_ok(4, "sandboxes", &p.sandboxes))
    .then(|| p.clone())
}

/// `get_pods()`'s answer. Pods equal to one of `previous` (the last listing) are shared rather than copied.
fn pods_from_py(v: &Bound<'_, PyAny>, previous: &Previous) -> PyResult<Vec<Arc<Pod>>> {
    if let Ok(l) = v.cast::<PyPodList>() {
        return Ok(l.get().pods.clone());
    }
    let one = |i: usize, p: &Bound<'_, PyAny>| match unchanged_pod(p, previous) {
        Some(same) => Ok(same),
        None => shared_pod(p, &|| format!("pods[{i}]")),
    };
    if let Ok(l) = v.cast::<PyList>() {
        return l.iter().enumerate().map(|(i, p)| one(i, &p)).collect();
    }
    if v.is_instance_of::<PyString>() || v.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(format!(
            "get_pods(): expected a list of pods or a PodList, got {}",
            type_name(v)
        )));
    }
    let it = v.try_iter().map_err(|_| {
        PyTypeError::new_err(format!("get_pods(): expected a list of pods or a PodList, got {}", type_name(v)))
    })?;
    it.enumerate().map(|(i, p)| one(i, &p?)).collect()
}

fn containers_to_py<'py>(py: Python<'py>, cs: &[Container]) -> PyResult<Bound<'py, PyList>> {
    let items = cs
        .iter()
        .map(|c| {
            let d = PyDict::new(py);
            d.set_item("id", &c.id)?;
            d.set_item("state", c.state.as_str())?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

pub fn pod_to_py<'py>(py: Python<'py>, p: &Pod) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", &p.id)?;
    d.set_item("name", &p.name)?;
    d.set_item("namespace", &p.namespace)?;
    d.set_item("containers", containers_to_py(py, &p.containers)?)?;
    d.set_item("sandboxes", containers_to_py(py, &p.sandboxes)?)?;
    Ok(d)
}

/// A pod checked and converted once (states validated); pass it where a pod dict is accepted.
#[pyclass(module = "kubevents.pleg", name = "Pod", frozen)]
pub struct PyPod(Arc<Pod>);

#[pymethods]
impl PyPod {
    #[new]
    #[pyo3(signature = (id, name="", namespace="", containers=None, sandboxes=None))]
    fn new(
        id: &Bound<'_, PyAny>,
        name: &str,
        namespace: &str,
        containers: Option<Bound<'_, PyAny>>,
        sandboxes: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(PyPod(Arc::new(Pod {
            id: string(id, &|| "id".into())?,
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            containers: self::containers(containers, &|| "containers".into())?,
            sandboxes: self::containers(sandboxes, &|| "sandboxes".into())?,
        })))
    }

    #[getter]
    fn id(&self) -> &str {
        &self.0.id
    }

    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }

    #[getter]
    fn namespace(&self) -> &str {
        &self.0.namespace
    }

    /// The containers as `{"id", "state"}` dicts.
    #[getter]
    fn containers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        containers_to_py(py, &self.0.containers)
    }

    /// The sandboxes as `{"id", "state"}` dicts.
    #[getter]
    fn sandboxes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        containers_to_py(py, &self.0.sandboxes)
    }

    /// The pod as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        pod_to_py(py, &self.0)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyPod>().is_ok_and(|o| o.get().0 == self.0)
    }

    fn __repr__(&self) -> String {
        format!(
            "Pod(id={:?}, name={:?}, namespace={:?}, containers={}, sandboxes={})",
            self.0.id,
            self.0.name,
            self.0.namespace,
            self.0.containers.len(),
            self.0.sandboxes.len()
        )
    }
}

/// A whole runtime listing converted in one call: the bulk form `get_pods()` may return for large nodes.
#[pyclass(module = "kubevents.pleg", name = "PodList", frozen)]
pub struct PyPodList {
    pods: Vec<Arc<Pod>>,
}

#[pymethods]
impl PyPodList {
    /// `pods`: an iterable of pod dicts, `Pod`s, or `(id, name, namespace, containers, sandboxes)` tuples
    /// with `(id, state)` containers (the fastest form).
    #[new]
    fn new(pods: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyPodList { pods: pods_from_py(pods, &Previous::default())? })
    }

    fn __len__(&self) -> usize {
        self.pods.len()
    }

    /// The pods as dicts.
    fn to_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self.pods.iter().map(|p| pod_to_py(py, p)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    fn __repr__(&self) -> String {
        format!("PodList({} pods)", self.pods.len())
    }
}

fn optional_pod(v: Option<&Bound<'_, PyAny>>, path: &str) -> PyResult<Option<Pod>> {
    match v {
        Some(p) if !p.is_none() => pod_from_py(p, &|| path.to_owned()).map(Some),
        _ => Ok(None),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Events

/// `PodLifecycleEvent`: `id` is the pod UID, `type` the event type, `data` the container id (None for
/// `PodSync` and `ConditionMet`).
#[pyclass(module = "kubevents.pleg", name = "PodLifecycleEvent", frozen, eq, hash)]
#[derive(PartialEq, Eq, Hash)]
pub struct PyPodLifecycleEvent(PodLifecycleEvent);

#[pymethods]
impl PyPodLifecycleEvent {
    #[new]
    #[pyo3(signature = (id, r#type, data=None))]
    fn new(id: String, r#type: &str, data: Option<String>) -> PyResult<Self> {
        let kind = PodLifecycleEventType::parse(r#type).ok_or_else(|| {
            PyValueError::new_err(format!(
                "type: unknown event type {type:?} (expected ContainerStarted, ContainerDied, ContainerRemoved, \
                 ContainerChanged, PodSync or ConditionMet)"
            ))
        })?;
        Ok(PyPodLifecycleEvent(PodLifecycleEvent { id, kind, data }))
    }

    #[getter]
    fn id(&self) -> &str {
        &self.0.id
    }

    #[getter]
    fn r#type(&self) -> &'static str {
        self.0.kind.as_str()
    }

    #[getter]
    fn data(&self) -> Option<&str> {
        self.0.data.as_deref()
    }

    fn __repr__(&self) -> String {
        match &self.0.data {
            Some(d) => format!("PodLifecycleEvent(id={:?}, type={:?}, data={:?})", self.0.id, self.0.kind.as_str(), d),
            None => format!("PodLifecycleEvent(id={:?}, type={:?}, data=None)", self.0.id, self.0.kind.as_str()),
        }
    }
}

/// `diff(old_pod, new_pod)`: the lifecycle events between two listings of one pod (either may be None),
/// `ContainerChanged` included.
#[pyfunction]
#[pyo3(signature = (old_pod, new_pod))]
pub fn diff(
    old_pod: Option<&Bound<'_, PyAny>>,
    new_pod: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<PyPodLifecycleEvent>> {
    let old = optional_pod(old_pod, "old_pod")?;
    let new = optional_pod(new_pod, "new_pod")?;
    Ok(crate::pleg::diff(old.as_ref(), new.as_ref()).into_iter().map(PyPodLifecycleEvent).collect())
}

// ---------------------------------------------------------------------------------------------------------
// Statuses and errors as the cache keeps them

struct StatusInner {
    obj: Py<PyAny>,
    ips: Vec<String>,
    ready: bool,
    sandboxes: Vec<String>,
    timestamp: Option<Time>,
    sandbox_running: bool,
}

/// A status dict with the fields the PLEG reads parsed once.
#[derive(Clone)]
pub struct PyStatus(Arc<StatusInner>);

impl PyStatus {
    /// Reads `ips`, `sandbox_statuses` (`id`, `state` SANDBOX_READY / SANDBOX_NOTREADY), `timestamp`, and the
    /// state of the `container_statuses` entry whose `id` is the first sandbox's.
    fn from_py(v: &Bound<'_, PyAny>, path: &str) -> PyResult<Self> {
        let d = v
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err(format!("{path}: expected a status dict, got {}", type_name(v))))?;
        let ips = match dict_get(d, "ips")? {
            None => Vec::new(),
            Some(l) => l
                .try_iter()
                .map_err(|_| {
                    PyTypeError::new_err(format!("{path}.ips: expected a list of str, got {}", type_name(&l)))
                })?
                .enumerate()
                .map(|(i, x)| string(&x?, &|| format!("{path}.ips[{i}]")))
                .collect::<PyResult<_>>()?,
        };
        let mut ready = false;
        let mut sandboxes = Vec::new();
        if let Some(l) = dict_get(d, "sandbox_statuses")? {
            let it = l.try_iter().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{path}.sandbox_statuses: expected a list of dicts, got {}",
                    type_name(&l)
                ))
            })?;
            for (i, s) in it.enumerate() {
                let s = s?;
                let p = format!("{path}.sandbox_statuses[{i}]");
                let sd = s
                    .cast::<PyDict>()
                    .map_err(|_| PyTypeError::new_err(format!("{p}: expected a dict, got {}", type_name(&s))))?;
                if let Some(id) = dict_get(sd, "id")? {
                    sandboxes.push(string(&id, &|| format!("{p}.id"))?);
                }
                match dict_get(sd, "state")? {
                    None => {}
                    Some(st) => match string(&st, &|| format!("{p}.state"))?.as_str() {
                        "SANDBOX_READY" => ready = true,
                        "SANDBOX_NOTREADY" => {}
                        other => {
                            return Err(PyValueError::new_err(format!(
                                "{p}.state: expected SANDBOX_READY or SANDBOX_NOTREADY, got {other:?}"
                            )))
                        }
                    },
                }
            }
        }
        let timestamp = dict_get(d, "timestamp")?.map(|t| to_time(&t, &format!("{path}.timestamp"))).transpose()?;
        // `getPodSandboxState`: only the container status carrying the first sandbox's id matters.
        let mut sandbox_running = false;
        if let Some(first) = sandboxes.first() {
            if let Some(l) = dict_get(d, "container_statuses")? {
                for c in l.try_iter()? {
                    let c = c?;
                    let Ok(cd) = c.cast::<PyDict>() else { continue };
                    let is_sandbox = dict_get(cd, "id")?.is_some_and(|id| same_str(&id, first));
                    if is_sandbox && dict_get(cd, "state")?.is_some_and(|st| same_str(&st, "running")) {
                        sandbox_running = true;
                    }
                }
            }
        }
        let obj = v.clone().unbind();
        Ok(PyStatus(Arc::new(StatusInner { obj, ips, ready, sandboxes, timestamp, sandbox_running })))
    }

    fn object<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.0.obj.bind(py).clone()
    }
}

impl StatusView for PyStatus {
    fn ips(&self) -> &[String] {
        &self.0.ips
    }
    fn has_ready_sandbox(&self) -> bool {
        self.0.ready
    }
    fn has_sandbox(&self, id: &str) -> bool {
        self.0.sandboxes.iter().any(|s| s == id)
    }
    fn timestamp(&self) -> Option<Time> {
        self.0.timestamp
    }
    fn has_sandboxes(&self) -> bool {
        !self.0.sandboxes.is_empty()
    }
    fn sandbox_running(&self) -> bool {
        self.0.sandbox_running
    }
    /// A shallow copy of the dict with the other IPs: the caller's dict is left alone.
    fn with_ips(&self, ips: Vec<String>) -> Self {
        let obj = lifecycle::attach(|py| {
            let copy = || -> PyResult<Py<PyAny>> {
                let d = self.0.obj.bind(py).cast::<PyDict>()?.copy()?;
                d.set_item("ips", PyList::new(py, &ips)?)?;
                Ok(d.into_any().unbind())
            };
            copy().unwrap_or_else(|_| self.0.obj.clone_ref(py))
        });
        PyStatus(Arc::new(StatusInner {
            obj,
            ips,
            ready: self.0.ready,
            sandboxes: self.0.sandboxes.clone(),
            timestamp: self.0.timestamp,
            sandbox_running: self.0.sandbox_running,
        }))
    }
}

/// An exception instance stored with a status.
#[derive(Clone)]
pub struct PyErrValue(Arc<Py<PyAny>>);

impl PyErrValue {
    fn from_err(py: Python<'_>, e: PyErr) -> Self {
        PyErrValue(Arc::new(e.into_value(py).into_any()))
    }
}

type Cache = PodCache<PyStatus, PyErrValue>;

/// The Python form of a cache read: `(status, error)`, with `{"id": uid}` for a miss.
fn lookup_to_py<'py>(py: Python<'py>, uid: &str, l: &Lookup<PyStatus, PyErrValue>) -> PyResult<Bound<'py, PyTuple>> {
    let (status, err) = match l {
        Lookup::Missing => {
            let d = PyDict::new(py);
            d.set_item("id", uid)?;
            (d.into_any(), py.None().into_bound(py))
        }
        Lookup::Found(e) => (
            e.status.as_ref().map_or_else(|| py.None().into_bound(py), |s| s.object(py)),
            e.err.as_ref().map_or_else(|| py.None().into_bound(py), |x| x.0.bind(py).clone()),
        ),
    };
    PyTuple::new(py, [status, err])
}

fn optional_time(t: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Time> {
    match t {
        Some(v) if !v.is_none() => to_time(v, what),
        // Go's zero time.Time: older than any real instant.
        _ => Ok(Time(i64::MIN)),
    }
}

fn aio(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("kubevents._pleg_aio")
}

/// What a PLEG object made before `os.fork()` says in the child, where its locks may be held for good by
/// threads that did not come along.
fn forked_repr(what: &str) -> String {
    format!("{what}(created before os.fork(): unusable in this process)")
}

/// The pod status cache (`kubecontainer.Cache`): the latest status and inspection error per pod, a global
/// timestamp, and waiters for fresh data.
#[pyclass(module = "kubevents.pleg", name = "PodCache", frozen)]
pub struct PyPodCache {
    inner: Arc<Cache>,
    /// The fork generation it was made in.
    generation: u64,
}

impl PyPodCache {
    fn check(&self) -> PyResult<()> {
        lifecycle::check_not_forked(self.generation, "PodCache")
    }
}

impl Drop for PyPodCache {
    fn drop(&mut self) {
        // In a forked child a parent thread may have been changing it: leave it be.
        if lifecycle::is_forked(self.generation) {
            std::mem::forget(self.inner.clone());
        }
    }
}

#[pymethods]
impl PyPodCache {
    /// `evented=True` applies the EventedPLEG rule: `set` rejects data older than the stored entry.
    #[new]
    #[pyo3(signature = (*, evented=false))]
    fn new(evented: bool) -> Self {
        PyPodCache { inner: Arc::new(PodCache::new(evented)), generation: lifecycle::generation() }
    }

    #[getter]
    fn evented(&self) -> PyResult<bool> {
        self.check()?;
        Ok(self.inner.evented())
    }

    /// `(status, error)`; a miss gives `({"id": uid}, None)`.
    fn get<'py>(&self, py: Python<'py>, uid: &str) -> PyResult<Bound<'py, PyTuple>> {
        self.check()?;
        lookup_to_py(py, uid, &self.inner.get(uid))
    }

    /// Stores the status and error; the timestamp (datetime or epoch seconds, None for Go's zero time) is
    /// the entry's modification time. Returns False when the evented rule rejected it.
    #[pyo3(signature = (uid, status, error=None, timestamp=None))]
    fn set(
        &self,
        py: Python<'_>,
        uid: &str,
        status: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.check()?;
        let status = status.filter(|s| !s.is_none()).map(|s| PyStatus::from_py(s, "status")).transpose()?;
        let err = error.filter(|e| !e.is_none()).map(|e| PyErrValue(Arc::new(e.clone().unbind())));
        let ts = optional_time(timestamp, "timestamp")?;
        let cache = self.inner.clone();
        Ok(lifecycle::detach(py, || cache.set(uid, status, err, ts)))
    }

    /// Removes the entry (waiters are not woken).
    fn delete(&self, uid: &str) -> PyResult<()> {
        self.check()?;
        self.inner.delete(uid);
        Ok(())
    }

    /// Sets the global timestamp and wakes the waiters it satisfies.
    fn update_time(&self, py: Python<'_>, timestamp: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check()?;
        let t = to_time(timestamp, "timestamp")?;
        let cache = self.inner.clone();
        lifecycle::detach(py, || cache.update_time(t));
        Ok(())
    }

    /// `SetObservedTime` (Era C): the pod is fresh as of `timestamp` though its status is unchanged. Wakes
    /// that pod's waiters as `update_time` would; later waits before that time return at once.
    fn set_observed_time(&self, py: Python<'_>, uid: &str, timestamp: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check()?;
        let t = to_time(timestamp, "timestamp")?;
        let cache = self.inner.clone();
        lifecycle::detach(py, || cache.set_observed_time(uid, t));
        Ok(())
    }

    /// The pod's latest `set_observed_time`, None if it has none.
    fn observed_time<'py>(&self, py: Python<'py>, uid: &str) -> PyResult<Option<Bound<'py, pyo3::types::PyDateTime>>> {
        self.check()?;
        self.inner.observed_time(uid).map(|t| to_datetime(py, t)).transpose()
    }

    /// The global timestamp, None before the first `update_time`.
    #[getter]
    fn timestamp<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDateTime>>> {
        self.check()?;
        self.inner.timestamp().map(|t| to_datetime(py, t)).transpose()
    }

    /// Number of pods with an entry.
    fn __len__(&self) -> PyResult<usize> {
        self.check()?;
        Ok(self.inner.len())
    }

    /// Number of pending `get_newer_than` waiters.
    #[getter]
    fn waiters(&self) -> PyResult<usize> {
        self.check()?;
        Ok(self.inner.waiters())
    }

    /// `GetNewerThan`: `(status, error)` once the pod's data (or the global timestamp) is newer than `t`.
    /// Blocks with the GIL released; raises TimeoutError after `timeout` seconds (None waits forever). Ctrl-C
    /// interrupts the wait.
    #[pyo3(signature = (uid, t, timeout=None))]
    fn get_newer_than<'py>(
        &self,
        py: Python<'py>,
        uid: &str,
        t: &Bound<'py, PyAny>,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.check()?;
        let min = to_time(t, "t")?;
        let timeout = timeout_arg(timeout)?;
        let slot = self.inner.subscribe_slot(uid, min);
        let mut got = None;
        let waited = lifecycle::wait_until(py, timeout, |slice| {
            got = slot.wait(slice);
            got.is_some()
        });
        if let Some(v) = got {
            return lookup_to_py(py, uid, &v);
        }
        // Given up (timeout or Ctrl-C): the slot must not linger among the waiters.
        self.inner.unsubscribe(uid, &slot);
        waited?;
        match slot.wait(Duration::ZERO) {
            Some(v) => lookup_to_py(py, uid, &v),
            None => Err(PyTimeoutError::new_err(format!(
                "no status of pod {uid:?} newer than {} within the timeout",
                min.to_rfc3339_micro()
            ))),
        }
    }

    /// The awaitable form of `get_newer_than` (no thread is blocked while it waits).
    fn get_newer_than_async<'py>(
        &self,
        py: Python<'py>,
        uid: &str,
        t: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check()?;
        let min = to_time(t, "t")?;
        let loop_ = py.import("asyncio")?.call_method0("get_running_loop")?;
        let fut = loop_.call_method0("create_future")?;
        let resolve = aio(py)?.getattr("resolve")?;
        let (l, f, r, id) = (loop_.unbind(), fut.clone().unbind(), resolve.unbind(), uid.to_owned());
        let cb = move |v: Lookup<PyStatus, PyErrValue>| {
            lifecycle::attach(|py| {
                let Ok(value) = lookup_to_py(py, &id, &v) else { return };
                // The loop may be closed by now; nobody is waiting then.
                let _ = l.bind(py).call_method1("call_soon_threadsafe", (r.bind(py), f.bind(py), value));
            })
        };
        let cache = self.inner.clone();
        let uid = uid.to_owned();
        lifecycle::detach(py, || cache.subscribe(&uid, min, Waiter::Callback(Box::new(cb))));
        Ok(fut)
    }

    fn __repr__(&self) -> String {
        if lifecycle::is_forked(self.generation) {
            return forked_repr("PodCache");
        }
        format!("PodCache({} pods, evented={})", self.inner.len(), self.inner.evented())
    }
}

// ---------------------------------------------------------------------------------------------------------
// The event channel

/// The PLEG's event channel. Iterating blocks (GIL released) until an event arrives or the channel is
/// closed; `recv(timeout)` waits at most `timeout`; `async for` waits without blocking a thread.
#[pyclass(module = "kubevents.pleg", name = "EventChannel", frozen)]
pub struct PyEventChannel {
    inner: Arc<EventChannel>,
    /// The fork generation it (or the PLEG it belongs to) was made in.
    generation: u64,
}

impl PyEventChannel {
    fn check(&self) -> PyResult<()> {
        lifecycle::check_not_forked(self.generation, "EventChannel")
    }

    fn wait(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Recv> {
        self.check()?;
        let mut got = Recv::Timeout;
        lifecycle::wait_until(py, timeout, |slice| {
            got = self.inner.recv_timeout(Some(slice));
            got != Recv::Timeout
        })?;
        Ok(got)
    }
}

impl Drop for PyEventChannel {
    fn drop(&mut self) {
        // In a forked child a parent thread may have been sending to it: leave it be.
        if lifecycle::is_forked(self.generation) {
            std::mem::forget(self.inner.clone());
        }
    }
}

#[pymethods]
impl PyEventChannel {
    /// A standalone channel (a PLEG makes its own; pass one to share it).
    #[new]
    #[pyo3(signature = (capacity=1000))]
    fn new(#[pyo3(from_py_with = int_opt::capacity)] capacity: i64) -> PyResult<Self> {
        if capacity < 1 {
            return Err(PyValueError::new_err(format!("capacity must be >= 1, got {capacity}")));
        }
        Ok(PyEventChannel {
            inner: Arc::new(EventChannel::new(capacity as usize)),
            generation: lifecycle::generation(),
        })
    }

    /// The next event; None when `timeout` (seconds) ran out or the channel is closed and empty. Ctrl-C
    /// interrupts the wait.
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<PyPodLifecycleEvent>> {
        Ok(match self.wait(py, timeout_arg(timeout)?)? {
            Recv::Event(e) => Some(PyPodLifecycleEvent(e)),
            _ => None,
        })
    }

    /// The next event if one is buffered, else None.
    fn try_recv(&self) -> PyResult<Option<PyPodLifecycleEvent>> {
        self.check()?;
        Ok(self.inner.try_recv().map(PyPodLifecycleEvent))
    }

    /// Every buffered event, oldest first.
    fn drain(&self) -> PyResult<Vec<PyPodLifecycleEvent>> {
        self.check()?;
        Ok(self.inner.drain().into_iter().map(PyPodLifecycleEvent).collect())
    }

    fn __len__(&self) -> PyResult<usize> {
        self.check()?;
        Ok(self.inner.len())
    }

    #[getter]
    fn capacity(&self) -> PyResult<usize> {
        self.check()?;
        Ok(self.inner.capacity())
    }

    /// Events dropped because the channel was full (or closed).
    #[getter]
    fn dropped(&self) -> PyResult<u64> {
        self.check()?;
        Ok(self.inner.dropped())
    }

    /// Ends iteration once the buffered events are read; later sends are dropped.
    fn close(&self) -> PyResult<()> {
        self.check()?;
        self.inner.close();
        Ok(())
    }

    #[getter]
    fn closed(&self) -> PyResult<bool> {
        self.check()?;
        Ok(self.inner.is_closed())
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyPodLifecycleEvent>> {
        Ok(match self.wait(py, None)? {
            Recv::Event(e) => Some(PyPodLifecycleEvent(e)),
            _ => None,
        })
    }

    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.get().check()?;
        aio(slf.py())?.call_method1("next_event", (slf,))
    }

    /// Calls `callback()` once, from whichever thread, when an event is buffered or the channel closes.
    fn _on_ready(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        self.check()?;
        let ch = self.inner.clone();
        lifecycle::detach(py, || {
            ch.on_ready(Box::new(move || {
                lifecycle::attach(|py| {
                    if let Err(e) = lifecycle::call(callback.bind(py), []) {
                        e.write_unraisable(py, None);
                    }
                })
            }))
        });
        Ok(())
    }

    fn __repr__(&self) -> String {
        if lifecycle::is_forked(self.generation) {
            return forked_repr("EventChannel");
        }
        format!("EventChannel({}/{} events, {} dropped)", self.inner.len(), self.inner.capacity(), self.inner.dropped())
    }
}

// ---------------------------------------------------------------------------------------------------------
// GenericPLEG

/// A Python object with `get_pods()`, `get_pod_status(pod)` and, for the on-demand relist, `get_pod(uid)`.
pub struct PyRuntime {
    obj: Py<PyAny>,
    /// The last listing converted from plain Python data.
    previous: std::sync::Mutex<Previous>,
}

impl Runtime for PyRuntime {
    type Status = PyStatus;
    type Error = PyErrValue;

    fn get_pods(&self) -> Result<Vec<Arc<Pod>>, Error> {
        lifecycle::attach(|py| {
            let list = || -> PyResult<Vec<Arc<Pod>>> {
                let v = lifecycle::call(&self.obj.bind(py).getattr(intern!(py, "get_pods"))?, [])?;
                let mut previous = lock(&self.previous);
                let pods = pods_from_py(&v, &previous)?;
                if !v.is_instance_of::<PyPodList>() {
                    previous.clear();
                    previous.extend(pods.iter().map(|p| ById(p.clone())));
                }
                Ok(pods)
            };
            list().map_err(|e| runtime_err(py, e))
        })
    }

    /// A pod as `get_pods()` lists it; None for a pod the runtime has nothing of.
    fn get_pod(&self, uid: &str) -> Result<Option<Arc<Pod>>, Error> {
        lifecycle::attach(|py| {
            let get = || -> PyResult<Option<Arc<Pod>>> {
                let v = lifecycle::call(
                    &self.obj.bind(py).getattr(intern!(py, "get_pod"))?,
                    [PyString::new(py, uid).as_any()],
                )?;
                if v.is_none() {
                    return Ok(None);
                }
                shared_pod(&v, &|| "get_pod()".into()).map(Some)
            };
            get().map_err(|e| runtime_err(py, e))
        })
    }

    /// Only an `Exception` is the pod's inspection error; anything else raised on the way is an `Abort`.
    fn get_pod_status(&self, pod: &Pod) -> Result<Inspection<PyStatus, PyErrValue>, Abort> {
        let failed = |py: Python<'_>, e: PyErr| {
            if e.is_instance_of::<PyException>(py) {
                Ok(Inspection { status: None, err: Some(PyErrValue::from_err(py, e)), invalid: None })
            } else {
                Err(Abort(external(e)))
            }
        };
        lifecycle::attach(|py| {
            let arg = match pod_to_py(py, pod) {
                Ok(a) => a,
                Err(e) => return failed(py, e),
            };
            let method = self.obj.bind(py).getattr(intern!(py, "get_pod_status"));
            let out = match method.and_then(|m| lifecycle::call(&m, [arg.as_any()])) {
                Ok(o) => o,
                Err(e) => return failed(py, e),
            };
            // A (status, error) pair stores a partial status with the runtime's error, as Go's runtime can.
            let (status, err) = match out.cast::<PyTuple>() {
                Ok(t) if t.len() == 2 => {
                    let (s, e) = (t.get_item(0).ok(), t.get_item(1).ok());
                    (s.filter(|s| !s.is_none()), e.filter(|e| !e.is_none()))
                }
                _ => (Some(out.clone()).filter(|s| !s.is_none()), None),
            };
            let err = err.map(|e| PyErrValue(Arc::new(e.unbind())));
            match status.map(|s| PyStatus::from_py(&s, "get_pod_status()")).transpose() {
                Ok(status) => Ok(Inspection { status, err, invalid: None }),
                Err(e) if !e.is_instance_of::<PyException>(py) => Err(Abort(external(e))),
                Err(e) => {
                    let msg = e.value(py).to_string();
                    let typed =
                        if e.is_instance_of::<PyTypeError>(py) { Error::type_("", msg) } else { Error::value("", msg) };
                    Ok(Inspection { status: None, err: Some(PyErrValue::from_err(py, e)), invalid: Some(typed) })
                }
            }
        })
    }

    fn timeout_error(&self, pod: &Pod, after: Duration, still_running: bool) -> PyErrValue {
        let msg = if still_running {
            format!("the previous inspection of pod {} ({}/{}) has not returned yet", pod.id, pod.namespace, pod.name)
        } else {
            format!("inspection of pod {} ({}/{}) did not return within {:?}", pod.id, pod.namespace, pod.name, after)
        };
        lifecycle::attach(|py| PyErrValue::from_err(py, PyTimeoutError::new_err(msg)))
    }

    /// Ctrl-C while a relist called from Python waits for the loop's relist or for inspection threads.
    fn check_interrupt(&self) -> Result<(), Abort> {
        lifecycle::check_signals().map_err(|e| Abort(external(e)))
    }

    /// Logs the exception that stopped `what`, with its traceback, at ERROR on the `kubevents` logger.
    fn loop_aborted(&self, what: &str, err: &Error) {
        lifecycle::attach(|py| {
            let log = || -> PyResult<()> {
                let e = py_err_in(err);
                let raised = match e {
                    Some(e) => e.value(py).repr()?.to_string(),
                    None => err.to_string(),
                };
                let msg = format!("{what} stopped: {raised} was raised; the next stop() or healthy() raises it again");
                let kwargs = PyDict::new(py);
                if let Some(e) = e {
                    kwargs.set_item(intern!(py, "exc_info"), (e.get_type(py), e.value(py), e.traceback(py)))?;
                }
                py.import(intern!(py, "logging"))?
                    .call_method1(intern!(py, "getLogger"), ("kubevents",))?
                    .call_method(intern!(py, "error"), (msg,), Some(&kwargs))?;
                Ok(())
            };
            // A broken logging set-up must not keep the loop from ending.
            let _ = log();
        })
    }
}

fn ns_to_seconds(ns: i64) -> f64 {
    ns as f64 / NANOS_PER_SECOND as f64
}

fn condition_from_py(f: Py<PyAny>) -> Condition<PyStatus> {
    Arc::new(move |s: &PyStatus| {
        lifecycle::attach(|py| {
            lifecycle::call(f.bind(py), [s.object(py).as_any()])
                .and_then(|r| r.is_truthy())
                .map_err(|e| runtime_err(py, e))
        })
    })
}

type Generic = GenericPleg<PyRuntime>;

/// GenericPLEG: relists `runtime` and turns the differences into pod lifecycle events on `watch()`.
#[pyclass(module = "kubevents.pleg", name = "GenericPLEG", frozen, weakref)]
pub struct PyGenericPLEG {
    inner: Arc<Generic>,
    cache: Py<PyPodCache>,
    /// The fork generation it was made in.
    generation: u64,
}

impl PyGenericPLEG {
    fn check(&self) -> PyResult<()> {
        lifecycle::check_not_forked(self.generation, "GenericPLEG")
    }

    /// The `KeyboardInterrupt` or `SystemExit` that stopped the loop, raised once.
    fn raise_abort(&self, py: Python<'_>) -> PyResult<()> {
        match self.inner.take_abort() {
            Some(e) => Err(raise_kept(py, &e)),
            None => Ok(()),
        }
    }
}

#[pymethods]
impl PyGenericPLEG {
    #[new]
    #[pyo3(signature = (runtime, *, cache, clock=None, relist_period=None, relist_threshold=None, channel_capacity=1000, inspect_concurrency=1, inspect_timeout=None, pod_sync_on_reinspect=false, on_demand_relist=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runtime: Py<PyAny>,
        cache: Py<PyPodCache>,
        clock: Option<&Bound<'_, PyAny>>,
        relist_period: Option<&Bound<'_, PyAny>>,
        relist_threshold: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = int_opt::channel_capacity)] channel_capacity: i64,
        #[pyo3(from_py_with = int_opt::inspect_concurrency)] inspect_concurrency: i64,
        inspect_timeout: Option<&Bound<'_, PyAny>>,
        pod_sync_on_reinspect: bool,
        on_demand_relist: bool,
    ) -> PyResult<Self> {
        for m in ["get_pods", "get_pod_status"] {
            if !runtime.bind(py).hasattr(m)? {
                return Err(PyTypeError::new_err(format!(
                    "runtime: expected an object with get_pods() and get_pod_status(pod), {} has no {m}",
                    type_name(runtime.bind(py))
                )));
            }
        }
        cache.get().check()?;
        if on_demand_relist && !runtime.bind(py).hasattr("get_pod")? {
            return Err(PyTypeError::new_err(format!(
                "runtime: on_demand_relist needs get_pod(uid), {} has none",
                type_name(runtime.bind(py))
            )));
        }
        if channel_capacity < 1 {
            return Err(PyValueError::new_err(format!("channel_capacity must be >= 1, got {channel_capacity}")));
        }
        if inspect_concurrency < 1 {
            return Err(PyValueError::new_err(format!("inspect_concurrency must be >= 1, got {inspect_concurrency}")));
        }
        let mut options = PlegOptions::default();
        if let Some(p) = relist_period.filter(|p| !p.is_none()) {
            options.duration.period = seconds_arg(p, "relist_period", true)?;
        }
        if let Some(t) = relist_threshold.filter(|t| !t.is_none()) {
            options.duration.threshold = seconds_arg(t, "relist_threshold", false)?;
        }
        options.inspect_concurrency = inspect_concurrency as usize;
        options.pod_sync_on_reinspect = pod_sync_on_reinspect;
        options.on_demand_relist = on_demand_relist;
        options.inspect_timeout = match inspect_timeout.filter(|t| !t.is_none()) {
            Some(t) => Some(Duration::from_nanos(seconds_arg(t, "inspect_timeout", true)? as u64)),
            None => None,
        };
        let clock = clock_arg(clock)?;
        let cache_arc = cache.get().inner.clone();
        let channel = Arc::new(EventChannel::new(channel_capacity as usize));
        let inner = GenericPleg::new(
            PyRuntime { obj: runtime, previous: Default::default() },
            cache_arc,
            clock,
            channel,
            options,
        )?;
        Ok(PyGenericPLEG { inner: Arc::new(inner), cache, generation: lifecycle::generation() })
    }

    /// One relist. Raises what the runtime's `get_pods()` raised (nothing changed then), or, after the relist
    /// completed, the first malformed status or failing watch condition. A `KeyboardInterrupt` or
    /// `SystemExit` from the runtime or a condition stops the relist where it is and is raised; so is Ctrl-C
    /// while it waits for the loop's relist or for inspection threads.
    fn relist(&self, py: Python<'_>) -> PyResult<()> {
        self.check()?;
        let pleg = self.inner.clone();
        lifecycle::detach(py, || pleg.relist())?;
        Ok(())
    }

    /// The event channel (the same object every time).
    fn watch(&self) -> PyResult<PyEventChannel> {
        self.check()?;
        Ok(PyEventChannel { inner: self.inner.channel().clone(), generation: self.generation })
    }

    /// Relists now and then `relist_period` after each relist ends, on the clock, in a background thread;
    /// with `on_demand_relist`, serves relist requests in between. `RuntimeError` while a loop told to stop
    /// has not ended yet (see `stop`).
    fn start(slf: &Bound<'_, Self>) -> PyResult<()> {
        let this = slf.get();
        this.check()?;
        if !this.inner.start()? {
            return Err(PyRuntimeError::new_err(
                "start(): the relist loop told to stop has not ended yet (a runtime call has not returned); \
                 stop() waits for it",
            ));
        }
        lifecycle::track(slf.as_any())?;
        Ok(())
    }

    /// Stops the relist loop, waiting for a relist in progress: up to `timeout` seconds (None: until it
    /// ends), then `TimeoutError`, and the loop ends by itself once the runtime call it is in returns. Ctrl-C
    /// interrupts the wait. Raises, once, the `KeyboardInterrupt` or `SystemExit` that stopped the loop.
    #[pyo3(signature = (timeout=None))]
    fn stop(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.check()?;
        let timeout = timeout_arg(timeout)?;
        let pleg = &self.inner;
        pleg.not_reentered("stop()")?;
        pleg.signal_stop();
        let ended = lifecycle::wait_until(py, timeout, |slice| pleg.wait_stopped(Some(slice)))?;
        self.raise_abort(py)?;
        if !ended {
            return Err(PyTimeoutError::new_err(
                "stop() timed out: the relist loop ends when the runtime call in progress returns",
            ));
        }
        Ok(())
    }

    /// The loop runs (started, and neither stopped nor ended by a `KeyboardInterrupt` or `SystemExit`).
    #[getter]
    fn running(&self) -> PyResult<bool> {
        self.check()?;
        Ok(self.inner.running())
    }

    /// When the loop's next relist is due on the clock; None while it relists or is stopped. On a fake
    /// clock, wait for this to be set before stepping the clock past it.
    #[getter]
    fn next_relist_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDateTime>>> {
        self.check()?;
        self.inner.next_relist_at().map(|t| to_datetime(py, t)).transpose()
    }

    /// `(True, None)`, or `(False, message)` with the kubelet's message. Raises, once, the
    /// `KeyboardInterrupt` or `SystemExit` that stopped the loop.
    fn healthy(&self, py: Python<'_>) -> PyResult<(bool, Option<String>)> {
        self.check()?;
        self.raise_abort(py)?;
        let pleg = &self.inner;
        Ok(lifecycle::detach(py, || pleg.healthy()))
    }

    /// `SetPodWatchCondition`: `condition(status)` runs after each successful inspection of the pod; when
    /// it returns true it is removed and one `ConditionMet` event is sent (per pod and relist).
    fn set_pod_watch_condition(&self, py: Python<'_>, uid: &str, key: &str, condition: Py<PyAny>) -> PyResult<()> {
        self.check()?;
        if !condition.bind(py).is_callable() {
            return Err(PyTypeError::new_err("condition must be callable"));
        }
        let cond = condition_from_py(condition);
        let pleg = self.inner.clone();
        lifecycle::detach(py, || pleg.set_pod_watch_condition(uid, key, cond));
        Ok(())
    }

    /// The pod's watch conditions as `{key: version}`, None when the pod has no entry.
    fn watch_conditions(&self, uid: &str) -> PyResult<Option<std::collections::BTreeMap<String, u32>>> {
        self.check()?;
        Ok(self.inner.watch_conditions(uid).map(|v| v.into_iter().collect()))
    }

    /// Pods whose inspection failed and will be inspected again at the next relist.
    fn pods_to_reinspect(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.check()?;
        let pleg = self.inner.clone();
        Ok(lifecycle::detach(py, || pleg.pods_to_reinspect())?)
    }

    /// Queues a pod for inspection at the next relist even if it did not change (Go's tests write
    /// `podsToReinspect`; with `pod_sync_on_reinspect` this is Era C's `RequestReinspect`).
    fn request_reinspect(&self, py: Python<'_>, uid: &str) -> PyResult<()> {
        self.check()?;
        let pleg = self.inner.clone();
        Ok(lifecycle::detach(py, || pleg.request_reinspect(uid))?)
    }

    /// `RequestRelist` (Era C, `on_demand_relist`): queues an on-demand relist of the pod for the loop, stamped
    /// with the clock's time. Returns False when nothing was queued: the option is off (nothing happens, as
    /// with the gate off) or the queue holds 200 requests already (dropped, counted in `stats()`).
    fn request_relist(&self, py: Python<'_>, uid: &str) -> PyResult<bool> {
        self.check()?;
        let pleg = self.inner.clone();
        Ok(lifecycle::detach(py, || pleg.request_relist(uid))?)
    }

    /// One pass of the relist loop (`workerLoopIteration`) on this thread, without its wait: the global
    /// relist if due (`"relist"`), else one queued relist request (`"relist_pod"`, or `"skipped"` when a
    /// global relist started after it was made); None when nothing was due. Raises what the relist raised
    /// (`get_pod()`'s error included) and, as `relist()` does, a `KeyboardInterrupt` or `SystemExit`. For
    /// driving the loop step by step on a fake clock while it is not started; a stopped PLEG's first pass
    /// relists, as `start()` does.
    fn loop_iteration(&self, py: Python<'_>) -> PyResult<Option<&'static str>> {
        self.check()?;
        if self.inner.running() {
            return Err(PyRuntimeError::new_err("loop_iteration() while the loop started by start() runs"));
        }
        let pleg = self.inner.clone();
        Ok(match lifecycle::detach(py, || pleg.loop_iteration())? {
            LoopStep::Relisted => Some("relist"),
            LoopStep::PodRelisted => Some("relist_pod"),
            LoopStep::Skipped => Some("skipped"),
            LoopStep::Idle => None,
        })
    }

    /// `Update`: a new period and threshold (seconds), used from the next wait of the loop.
    fn update(&self, relist_period: &Bound<'_, PyAny>, relist_threshold: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check()?;
        let period = seconds_arg(relist_period, "relist_period", true)?;
        let threshold = seconds_arg(relist_threshold, "relist_threshold", false)?;
        self.inner.update(RelistDuration { period, threshold });
        Ok(())
    }

    #[getter]
    fn relist_period(&self) -> PyResult<f64> {
        self.check()?;
        Ok(ns_to_seconds(self.inner.duration().period))
    }

    #[getter]
    fn relist_threshold(&self) -> PyResult<f64> {
        self.check()?;
        Ok(ns_to_seconds(self.inner.duration().threshold))
    }

    /// When the last successful relist started, None before the first.
    #[getter]
    fn relist_time<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDateTime>>> {
        self.check()?;
        self.inner.relist_time().map(|t| to_datetime(py, t)).transpose()
    }

    #[getter]
    fn cache(&self, py: Python<'_>) -> PyResult<Py<PyPodCache>> {
        self.check()?;
        Ok(self.cache.clone_ref(py))
    }

    /// The last error of a relist run by the background loop, as text.
    #[getter]
    fn last_error(&self) -> PyResult<Option<String>> {
        self.check()?;
        Ok(self.inner.last_error())
    }

    /// Counters: relists, failures, durations on the clock (seconds), events sent and dropped, inspections,
    /// inspection errors and timeouts, reinspections, on-demand pod relists and their failures, relist
    /// requests queued, skipped and dropped, running pods and containers by state.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.check()?;
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("relists", s.relists)?;
        d.set_item("relist_failures", s.relist_failures)?;
        d.set_item("relist_duration_total", s.relist_duration_total_ns as f64 / 1e9)?;
        d.set_item("relist_duration_last", s.relist_duration_last_ns as f64 / 1e9)?;
        d.set_item("events_sent", s.events_sent)?;
        d.set_item("events_dropped", s.events_dropped)?;
        d.set_item("inspections", s.inspections)?;
        d.set_item("inspection_errors", s.inspection_errors)?;
        d.set_item("inspection_timeouts", s.inspection_timeouts)?;
        d.set_item("reinspections", s.reinspections)?;
        d.set_item("pod_relists", s.pod_relists)?;
        d.set_item("pod_relist_failures", s.pod_relist_failures)?;
        d.set_item("relist_requests_queued", s.relist_requests_queued)?;
        d.set_item("relist_requests_skipped", s.relist_requests_skipped)?;
        d.set_item("relist_requests_dropped", s.relist_requests_dropped)?;
        d.set_item("running_pods", s.running_pods)?;
        let rc = PyDict::new(py);
        for (i, name) in ["created", "running", "exited", "unknown"].iter().enumerate() {
            rc.set_item(name, s.running_containers[i])?;
        }
        d.set_item("running_containers", rc)?;
        Ok(d)
    }

    /// For the exit hook: stops the loop and waits up to `timeout` seconds for it to end. A PLEG holds
    /// nothing to deliver.
    fn _exit_flush(&self, py: Python<'_>, timeout: f64) -> (&'static str, u64) {
        if !lifecycle::is_forked(self.generation) {
            let pleg = &self.inner;
            pleg.signal_stop();
            let wait = Duration::try_from_secs_f64(timeout).unwrap_or_default();
            lifecycle::detach(py, || pleg.wait_stopped(Some(wait)));
        }
        ("GenericPLEG", 0)
    }

    fn __repr__(&self) -> String {
        if lifecycle::is_forked(self.generation) {
            return forked_repr("GenericPLEG");
        }
        let d = self.inner.duration();
        format!(
            "GenericPLEG(relist_period={}s, relist_threshold={}s)",
            ns_to_seconds(d.period),
            ns_to_seconds(d.threshold)
        )
    }
}

impl Drop for PyGenericPLEG {
    fn drop(&mut self) {
        if lifecycle::is_forked(self.generation) {
            // Its threads and the locks they held stayed in the parent: the child leaves it be.
            std::mem::forget(self.inner.clone());
        } else {
            // No wait here: the loop may be waiting for the GIL this thread holds.
            self.inner.signal_stop();
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// EventedPLEG

fn cri_event_from_py(v: &Bound<'_, PyAny>, path: &str) -> PyResult<CriEvent<PyStatus>> {
    let d = v
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err(format!("{path}: expected a dict, got {}", type_name(v))))?;
    let need = |k: &str| dict_get(d, k)?.ok_or_else(|| PyValueError::new_err(format!("{path}: missing {k:?}")));
    let container_id = string(&need("container_id")?, &|| format!("{path}.container_id"))?;
    let pod_uid = dict_get(d, "pod_uid")?.map(|u| string(&u, &|| format!("{path}.pod_uid"))).transpose()?;
    let t = need("type")?;
    let type_text =
        if let Ok(n) = t.extract::<i64>() { n.to_string() } else { string(&t, &|| format!("{path}.type"))? };
    let kind = CriEventType::parse(&type_text).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{path}.type: unknown container event type {type_text:?} (expected CREATED, STARTED, STOPPED or DELETED)"
        ))
    })?;
    let created = need("created_at")?;
    let created_at = created.extract::<i64>().map(Time).map_err(|_| {
        PyTypeError::new_err(format!("{path}.created_at: expected int nanoseconds, got {}", type_name(&created)))
    })?;
    let status = PyStatus::from_py(&need("pod_status")?, &format!("{path}.pod_status"))?;
    Ok(CriEvent { container_id, pod_uid, kind, created_at, status })
}

/// A Python object whose `get_container_events()` returns an iterable of CRI event dicts.
struct PySource(Py<PyAny>);

impl ContainerEventSource<PyStatus> for PySource {
    fn stream(&self, sink: &mut dyn FnMut(CriEvent<PyStatus>) -> bool) -> Result<(), Error> {
        lifecycle::attach(|py| {
            let mut stream = || -> PyResult<()> {
                let events = lifecycle::call(&self.0.bind(py).getattr(intern!(py, "get_container_events"))?, [])?;
                // Each item may wait on the runtime's stream: fetched through the exit fence, as the calls are.
                let next = events.try_iter()?.getattr(intern!(py, "__next__"))?;
                for i in 0.. {
                    let item = match lifecycle::call(&next, []) {
                        Ok(item) => item,
                        Err(e) if e.is_instance_of::<pyo3::exceptions::PyStopIteration>(py) => break,
                        Err(e) => return Err(e),
                    };
                    if !sink(cri_event_from_py(&item, &format!("event[{i}]"))?) {
                        break;
                    }
                }
                Ok(())
            };
            stream().map_err(|e| runtime_err(py, e))
        })
    }
}

/// EventedPLEG: CRI container events into the shared cache and event channel of a GenericPLEG.
#[pyclass(module = "kubevents.pleg", name = "EventedPLEG", frozen, weakref)]
pub struct PyEventedPLEG {
    inner: Arc<EventedPleg<PyRuntime>>,
    generic: Py<PyGenericPLEG>,
    source: Option<Arc<dyn ContainerEventSource<PyStatus>>>,
    /// The fork generation it was made in.
    generation: u64,
}

impl PyEventedPLEG {
    fn check(&self) -> PyResult<()> {
        lifecycle::check_not_forked(self.generation, "EventedPLEG")
    }

    /// The `KeyboardInterrupt` or `SystemExit` that stopped the event stream, raised once.
    fn raise_abort(&self, py: Python<'_>) -> PyResult<()> {
        match self.inner.take_abort() {
            Some(e) => Err(raise_kept(py, &e)),
            None => Ok(()),
        }
    }
}

#[pymethods]
impl PyEventedPLEG {
    #[new]
    #[pyo3(signature = (generic, *, runtime_service=None, max_stream_retries=5, relist_period=None, relist_threshold=None, fallback_relist_period=None, fallback_relist_threshold=None, cache_update_period=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        generic: Py<PyGenericPLEG>,
        runtime_service: Option<Py<PyAny>>,
        #[pyo3(from_py_with = int_opt::max_stream_retries)] max_stream_retries: i64,
        relist_period: Option<&Bound<'_, PyAny>>,
        relist_threshold: Option<&Bound<'_, PyAny>>,
        fallback_relist_period: Option<&Bound<'_, PyAny>>,
        fallback_relist_threshold: Option<&Bound<'_, PyAny>>,
        cache_update_period: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        generic.get().check()?;
        if max_stream_retries < 0 {
            return Err(PyValueError::new_err(format!("max_stream_retries must be >= 0, got {max_stream_retries}")));
        }
        if max_stream_retries > i64::from(u32::MAX) {
            return Err(PyValueError::new_err(format!(
                "max_stream_retries must be <= {}, got {max_stream_retries}",
                u32::MAX
            )));
        }
        if let Some(s) = &runtime_service {
            if !s.bind(py).hasattr("get_container_events")? {
                return Err(PyTypeError::new_err("runtime_service: expected an object with get_container_events()"));
            }
        }
        let mut options = EventedOptions { max_stream_retries: max_stream_retries as u32, ..EventedOptions::default() };
        let set = |v: Option<&Bound<'_, PyAny>>, what: &str, positive: bool, slot: &mut i64| -> PyResult<()> {
            if let Some(v) = v.filter(|v| !v.is_none()) {
                *slot = seconds_arg(v, what, positive)?;
            }
            Ok(())
        };
        set(relist_period, "relist_period", true, &mut options.relist.period)?;
        set(relist_threshold, "relist_threshold", false, &mut options.relist.threshold)?;
        set(fallback_relist_period, "fallback_relist_period", true, &mut options.fallback.period)?;
        set(fallback_relist_threshold, "fallback_relist_threshold", false, &mut options.fallback.threshold)?;
        set(cache_update_period, "cache_update_period", true, &mut options.cache_update_period)?;
        let g = generic.get().inner.clone();
        let inner = EventedPleg::new(g, options)?;
        let source = runtime_service.map(|s| Arc::new(PySource(s)) as Arc<dyn ContainerEventSource<PyStatus>>);
        Ok(PyEventedPLEG { inner: Arc::new(inner), generic, source, generation: lifecycle::generation() })
    }

    /// Marks evented in use (the generic PLEG then stores the runtime's status timestamps), starts the
    /// 2-second global cache tick and, with a runtime service, the event stream.
    fn start(slf: &Bound<'_, Self>) -> PyResult<()> {
        let this = slf.get();
        this.check()?;
        this.inner.start(this.source.clone())?;
        lifecycle::track(slf.as_any())?;
        Ok(())
    }

    /// No longer in use; the loops end (without waiting: a stream blocked in the runtime service ends at its
    /// next event). Raises, once, the `KeyboardInterrupt` or `SystemExit` that stopped the event stream.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        self.check()?;
        self.inner.stop();
        self.raise_abort(py)
    }

    #[getter]
    fn in_use(&self) -> PyResult<bool> {
        self.check()?;
        Ok(self.inner.in_use())
    }

    /// Processes CRI event dicts (`container_id`, `pod_uid`, `type`, `created_at` in ns, `pod_status`);
    /// returns how many lifecycle events were sent. All events are checked before any is processed.
    fn process_events(&self, py: Python<'_>, events: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.check()?;
        let evs = events
            .try_iter()
            .map_err(|_| {
                PyTypeError::new_err(format!("events: expected an iterable of dicts, got {}", type_name(events)))
            })?
            .enumerate()
            .map(|(i, e)| cri_event_from_py(&e?, &format!("events[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        let inner = self.inner.clone();
        Ok(lifecycle::detach(py, || evs.into_iter().map(|e| inner.process_event(e)).sum()))
    }

    /// `(True, None)` unless the event channel is full. Raises, once, the `KeyboardInterrupt` or
    /// `SystemExit` that stopped the event stream.
    fn healthy(&self, py: Python<'_>) -> PyResult<(bool, Option<String>)> {
        self.check()?;
        self.raise_abort(py)?;
        Ok(self.inner.healthy())
    }

    /// The shared event channel.
    fn watch(&self) -> PyResult<PyEventChannel> {
        self.generic.get().watch()
    }

    /// A relist of the generic PLEG.
    fn relist(&self, py: Python<'_>) -> PyResult<()> {
        self.generic.get().relist(py)
    }

    /// Forwarded to the generic PLEG.
    fn set_pod_watch_condition(&self, py: Python<'_>, uid: &str, key: &str, condition: Py<PyAny>) -> PyResult<()> {
        self.generic.get().set_pod_watch_condition(py, uid, key, condition)
    }

    #[getter]
    fn generic(&self, py: Python<'_>) -> PyResult<Py<PyGenericPLEG>> {
        self.check()?;
        Ok(self.generic.clone_ref(py))
    }

    /// The last stream error, as text.
    #[getter]
    fn last_error(&self) -> PyResult<Option<String>> {
        self.check()?;
        Ok(self.inner.last_error())
    }

    /// Counters: events received, ignored (no sandbox metadata), rejected (older than the cache), sent;
    /// stream failures; whether it fell back to generic relisting; running pods (`kubelet_running_pods`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.check()?;
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("events_received", s.events_received)?;
        d.set_item("events_ignored", s.events_ignored)?;
        d.set_item("events_rejected", s.events_rejected)?;
        d.set_item("events_sent", s.events_sent)?;
        d.set_item("stream_failures", s.stream_failures)?;
        d.set_item("fell_back", s.fell_back)?;
        d.set_item("running_pods", s.running_pods)?;
        Ok(d)
    }

    /// For the exit hook: stops it and waits up to `timeout` seconds for its threads to end (the event
    /// stream's at its next event). It holds nothing to deliver.
    fn _exit_flush(&self, py: Python<'_>, timeout: f64) -> (&'static str, u64) {
        if !lifecycle::is_forked(self.generation) {
            let evented = &self.inner;
            evented.stop();
            let wait = Duration::try_from_secs_f64(timeout).unwrap_or_default();
            lifecycle::detach(py, || evented.wait_stopped(wait));
        }
        ("EventedPLEG", 0)
    }

    fn __repr__(&self) -> String {
        if lifecycle::is_forked(self.generation) {
            return forked_repr("EventedPLEG");
        }
        format!("EventedPLEG(in_use={})", self.inner.in_use())
    }
}

impl Drop for PyEventedPLEG {
    fn drop(&mut self) {
        if lifecycle::is_forked(self.generation) {
            // Its threads and the locks they held stayed in the parent: the child leaves it be.
            std::mem::forget(self.inner.clone());
        } else {
            self.inner.stop();
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPod>()?;
    m.add_class::<PyPodList>()?;
    m.add_class::<PyPodLifecycleEvent>()?;
    m.add_class::<PyPodCache>()?;
    m.add_class::<PyEventChannel>()?;
    m.add_class::<PyGenericPLEG>()?;
    m.add_class::<PyEventedPLEG>()?;
    m.add_function(wrap_pyfunction!(diff, m)?)?;
    Ok(())
}
