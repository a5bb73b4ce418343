//! `kubevents.pleg.Pod`, `PodList` and `PodLifecycleEvent`: runtime pods from Python data (checked, with the
//! path of a bad value in the error), pods to dicts, and `diff`.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::pleg::records::PodRecords;
use crate::pleg::{Container, ContainerState, Pod, PodLifecycleEvent, PodLifecycleEventType};
use crate::py::convert::{expected, get};

/// Where a value sits in the input, formatted only when there is an error to report.
type PathFn<'a> = &'a dyn Fn() -> String;

pub(super) fn string(v: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<String> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(s.to_str()?.to_owned()),
        Err(_) => Err(expected(path(), "a str", v)),
    }
}

fn state(v: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<ContainerState> {
    let s = v.cast::<PyString>().map_err(|_| expected(path(), "a state str", v))?;
    ContainerState::parse(s.to_str()?).map_err(|e| PyValueError::new_err(format!("{}: {e}", path())))
}

fn container(c: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<Container> {
    let (id, st) = if let Ok(t) = c.cast::<PyTuple>() {
        if t.len() != 2 {
            return Err(PyTypeError::new_err(format!("{}: expected (id, state), got a {}-tuple", path(), t.len())));
        }
        (t.get_item(0)?, t.get_item(1)?)
    } else if let Ok(d) = c.cast::<PyDict>() {
        let need = |k: &str| get(d, k)?.ok_or_else(|| PyValueError::new_err(format!("{}: missing {k:?}", path())));
        (need("id")?, need("state")?)
    } else {
        return Err(expected(path(), "a dict or an (id, state) tuple", c));
    };
    let id = string(&id, &|| format!("{}.id", path()))?;
    Ok(Container { id, state: state(&st, &|| format!("{}.state", path()))? })
}

fn containers(v: Option<Bound<'_, PyAny>>, path: PathFn<'_>) -> PyResult<Vec<Container>> {
    let Some(v) = v else { return Ok(Vec::new()) };
    if let Ok(l) = v.cast::<PyList>() {
        return l.iter().enumerate().map(|(i, c)| container(&c, &|| format!("{}[{i}]", path()))).collect();
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return t.iter().enumerate().map(|(i, c)| container(&c, &|| format!("{}[{i}]", path()))).collect();
    }
    Err(expected(path(), "a list", &v))
}

/// A pod from a dict (`id`, `name`, `namespace`, `containers`, `sandboxes`) or a tuple
/// `(id, name, namespace, containers, sandboxes)` whose containers are `(id, state)` tuples.
pub(super) fn pod_from_py(v: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<Pod> {
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
    let d = v.cast::<PyDict>().map_err(|_| expected(path(), "a pod dict or tuple", v))?;
    let id = get(d, "id")?.ok_or_else(|| PyValueError::new_err(format!("{}: missing \"id\"", path())))?;
    let opt = |k: &str| -> PyResult<String> {
        get(d, k)?.map_or(Ok(String::new()), |x| string(&x, &|| format!("{}.{k}", path())))
    };
    Ok(Pod {
        id: string(&id, &|| format!("{}.id", path()))?,
        name: opt("name")?,
        namespace: opt("namespace")?,
        containers: containers(get(d, "containers")?, &|| format!("{}.containers", path()))?,
        sandboxes: containers(get(d, "sandboxes")?, &|| format!("{}.sandboxes", path()))?,
    })
}

/// A pod shared as is when it is a `Pod` already.
pub(super) fn shared_pod(v: &Bound<'_, PyAny>, path: PathFn<'_>) -> PyResult<Arc<Pod>> {
    match v.cast::<PyPod>() {
        Ok(p) => Ok(p.get().0.clone()),
        Err(_) => pod_from_py(v, path).map(Arc::new),
    }
}

pub(super) fn same_str(v: &Bound<'_, PyAny>, s: &str) -> bool {
    v.cast::<PyString>().ok().and_then(|x| x.to_str().ok()).is_some_and(|x| x == s)
}

fn same_containers(v: &Bound<'_, PyAny>, cs: &[Container]) -> bool {
    let same = |c: &Bound<'_, PyAny>, want: &Container| -> bool {
        if let Ok(t) = c.cast::<PyTuple>() {
            t.len() == 2
                && t.get_item(0).is_ok_and(|x| same_str(&x, &want.id))
                && t.get_item(1).is_ok_and(|x| same_str(&x, want.state.as_str()))
        } else if let Ok(d) = c.cast::<PyDict>() {
            matches!(get(d, "id"), Ok(Some(x)) if same_str(&x, &want.id))
                && matches!(get(d, "state"), Ok(Some(x)) if same_str(&x, want.state.as_str()))
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

/// The known pod when `v` describes exactly it (compared without copying any string).
fn unchanged_pod(v: &Bound<'_, PyAny>, known: &PodRecords) -> Option<Arc<Pod>> {
    if known.is_empty() {
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
    let p = known.latest(id)?;
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

/// `get_pods()`'s answer. Pods equal to a `known` one are shared rather than copied.
pub(super) fn pods_from_py(v: &Bound<'_, PyAny>, known: &PodRecords) -> PyResult<Vec<Arc<Pod>>> {
    if let Ok(l) = v.cast::<PyPodList>() {
        return Ok(l.get().pods.clone());
    }
    let one = |i: usize, p: &Bound<'_, PyAny>| match unchanged_pod(p, known) {
        Some(same) => Ok(same),
        None => shared_pod(p, &|| format!("pods[{i}]")),
    };
    if let Ok(l) = v.cast::<PyList>() {
        return l.iter().enumerate().map(|(i, p)| one(i, &p)).collect();
    }
    let not_pods = || expected("get_pods()", "a list of pods or a PodList", v);
    if v.is_instance_of::<PyString>() || v.is_instance_of::<PyDict>() {
        return Err(not_pods());
    }
    let it = v.try_iter().map_err(|_| not_pods())?;
    it.enumerate().map(|(i, p)| one(i, &p?)).collect()
}

/// A pod checked and converted once (states validated); pass it where a pod dict is accepted.
#[pyclass(module = "kubevents.pleg", name = "Pod", frozen)]
pub struct PyPod(pub(super) Arc<Pod>);

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
    fn containers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::to_py(py, &self.0.containers)
    }

    /// The sandboxes as `{"id", "state"}` dicts.
    #[getter]
    fn sandboxes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::to_py(py, &self.0.sandboxes)
    }

    /// The pod as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        super::to_py(py, &*self.0)
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
    pub(super) pods: Vec<Arc<Pod>>,
}

#[pymethods]
impl PyPodList {
    /// `pods`: an iterable of pod dicts, `Pod`s, or `(id, name, namespace, containers, sandboxes)` tuples
    /// with `(id, state)` containers (the fastest form).
    #[new]
    fn new(pods: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyPodList { pods: pods_from_py(pods, &PodRecords::default())? })
    }

    fn __len__(&self) -> usize {
        self.pods.len()
    }

    /// The pods as dicts.
    fn to_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self.pods.iter().map(|p| super::to_py(py, &**p)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    fn __repr__(&self) -> String {
        format!("PodList({} pods)", self.pods.len())
    }
}

/// `PodLifecycleEvent`: `id` is the pod UID, `type` the event type, `data` the container id (None for
/// `PodSync` and `ConditionMet`).
#[pyclass(module = "kubevents.pleg", name = "PodLifecycleEvent", frozen, eq, hash)]
#[derive(PartialEq, Eq, Hash)]
pub struct PyPodLifecycleEvent(pub(super) PodLifecycleEvent);

#[pymethods]
impl PyPodLifecycleEvent {
    #[new]
    #[pyo3(signature = (id, r#type, data=None))]
    fn new(id: String, r#type: &str, data: Option<String>) -> PyResult<Self> {
        Ok(PyPodLifecycleEvent(PodLifecycleEvent { id, kind: PodLifecycleEventType::parse(r#type)?, data }))
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
        let data = self.0.data.as_ref().map_or_else(|| "None".to_owned(), |d| format!("{d:?}"));
        format!("PodLifecycleEvent(id={:?}, type={:?}, data={data})", self.0.id, self.0.kind.as_str())
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
    let old = old_pod.map(|p| pod_from_py(p, &|| "old_pod".into())).transpose()?;
    let new = new_pod.map(|p| pod_from_py(p, &|| "new_pod".into())).transpose()?;
    Ok(crate::pleg::diff(old.as_ref(), new.as_ref()).into_iter().map(PyPodLifecycleEvent).collect())
}
