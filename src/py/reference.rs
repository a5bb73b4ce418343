//! `GetReference` for Python objects: manifests and ObjectReference dicts, any mapping (kopf bodies), the
//! official client's models (`V1Pod` ...), and classes registered with `register_kind`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyType};

use super::convert::{mapping_as_dict, type_name};
use super::errors::external;
use crate::event::ObjectReference;
use crate::reference::{complete, register_kind as core_register_kind};

/// Classes registered with `register_kind(..., cls=...)`: type -> (kind, apiVersion).
fn registered_types(py: Python<'_>) -> &Bound<'_, PyDict> {
    static TYPES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    TYPES.get_or_init(py, || PyDict::new(py).unbind()).bind(py)
}

/// A string field: missing and None are empty; anything else but str is a TypeError.
fn string(v: Option<Bound<'_, PyAny>>, what: &str, out: &mut String) -> PyResult<()> {
    out.clear();
    if let Some(v) = v.filter(|v| !v.is_none()) {
        let s = v
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err(format!("obj: {what} must be a str, got {}", type_name(&v))))?;
        out.push_str(s.to_str()?);
    }
    Ok(())
}

/// The fields a reference is made of, from a manifest, its metadata or an ObjectReference dict.
#[derive(Default)]
struct Fields<'py> {
    kind: Option<Bound<'py, PyAny>>,
    api_version: Option<Bound<'py, PyAny>>,
    metadata: Option<Bound<'py, PyAny>>,
    name: Option<Bound<'py, PyAny>>,
    namespace: Option<Bound<'py, PyAny>>,
    uid: Option<Bound<'py, PyAny>>,
    resource_version: Option<Bound<'py, PyAny>>,
    field_path: Option<Bound<'py, PyAny>>,
}

/// The fields of `d`, in one pass over its few items: cheaper than a lookup per field, most of which miss.
/// Keys that are not str are not fields.
fn fields<'py>(d: &Bound<'py, PyDict>) -> Fields<'py> {
    let mut f = Fields::default();
    for (k, v) in d {
        let Ok(k) = k.cast::<PyString>() else { continue };
        let Ok(k) = k.to_str() else { continue };
        let slot = match k {
            "kind" => &mut f.kind,
            "apiVersion" => &mut f.api_version,
            "metadata" => &mut f.metadata,
            "name" => &mut f.name,
            "namespace" => &mut f.namespace,
            "uid" => &mut f.uid,
            "resourceVersion" => &mut f.resource_version,
            "fieldPath" => &mut f.field_path,
            _ => continue,
        };
        *slot = Some(v);
    }
    f
}

fn attr<'py>(o: &Bound<'py, PyAny>, name: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyAny>>> {
    match o.getattr(name) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(o.py()) => Ok(None),
        Err(e) => Err(e),
    }
}

fn from_dict(py: Python<'_>, d: &Bound<'_, PyDict>, r: &mut ObjectReference) -> PyResult<()> {
    let f = fields(d);
    string(f.kind, "kind", &mut r.kind)?;
    string(f.api_version, "apiVersion", &mut r.api_version)?;
    match f.metadata {
        Some(meta) if !meta.is_none() => metadata(py, &meta, r),
        _ => {
            // An ObjectReference.
            string(f.name, "name", &mut r.name)?;
            string(f.namespace, "namespace", &mut r.namespace)?;
            string(f.uid, "uid", &mut r.uid)?;
            string(f.resource_version, "resourceVersion", &mut r.resource_version)?;
            string(f.field_path, "fieldPath", &mut r.field_path)
        }
    }
}

/// `metadata` as a mapping (manifests, kopf bodies) or as an object (the official client's `V1ObjectMeta`).
fn metadata(py: Python<'_>, meta: &Bound<'_, PyAny>, r: &mut ObjectReference) -> PyResult<()> {
    let Some(m) = mapping_as_dict(meta)? else {
        return metadata_object(py, meta, r);
    };
    let f = fields(&m);
    string(f.name, "metadata.name", &mut r.name)?;
    string(f.namespace, "metadata.namespace", &mut r.namespace)?;
    string(f.uid, "metadata.uid", &mut r.uid)?;
    string(f.resource_version, "metadata.resourceVersion", &mut r.resource_version)
}

fn metadata_object(py: Python<'_>, meta: &Bound<'_, PyAny>, r: &mut ObjectReference) -> PyResult<()> {
    string(attr(meta, intern!(py, "name"))?, "metadata.name", &mut r.name)?;
    string(attr(meta, intern!(py, "namespace"))?, "metadata.namespace", &mut r.namespace)?;
    string(attr(meta, intern!(py, "uid"))?, "metadata.uid", &mut r.uid)?;
    string(attr(meta, intern!(py, "resource_version"))?, "metadata.resource_version", &mut r.resource_version)
}

fn from_object(py: Python<'_>, o: &Bound<'_, PyAny>, r: &mut ObjectReference) -> PyResult<bool> {
    string(attr(o, intern!(py, "kind"))?, "kind", &mut r.kind)?;
    string(attr(o, intern!(py, "api_version"))?, "api_version", &mut r.api_version)?;
    if let Some(meta) = attr(o, intern!(py, "metadata"))?.filter(|m| !m.is_none()) {
        metadata(py, &meta, r)?;
        return Ok(true);
    }
    // The official client's V1ObjectReference.
    if let (Some(name), Some(field_path)) = (attr(o, intern!(py, "name"))?, attr(o, intern!(py, "field_path"))?) {
        string(Some(name), "name", &mut r.name)?;
        string(attr(o, intern!(py, "namespace"))?, "namespace", &mut r.namespace)?;
        string(attr(o, intern!(py, "uid"))?, "uid", &mut r.uid)?;
        string(attr(o, intern!(py, "resource_version"))?, "resource_version", &mut r.resource_version)?;
        string(Some(field_path), "field_path", &mut r.field_path)?;
        return Ok(true);
    }
    Ok(false)
}

/// The reference of `obj`, with `field_path` when given (client-go's `GetReference`/`GetPartialReference`).
/// Kind and apiVersion missing on the object come from `register_kind` and the built-in kinds.
pub fn reference_of(obj: &Bound<'_, PyAny>, field_path: Option<&str>) -> PyResult<ObjectReference> {
    let py = obj.py();
    let mut r = ObjectReference::default();
    if let Ok(d) = obj.cast::<PyDict>() {
        from_dict(py, d, &mut r)?;
    } else if let Some(d) = mapping_as_dict(obj)? {
        from_dict(py, &d, &mut r)?;
    } else if !from_object(py, obj, &mut r)? {
        return Err(PyValueError::new_err(format!(
            "obj: cannot make an object reference of a {}: expected a manifest or ObjectReference dict, a mapping \
             with metadata, or an object with a metadata attribute",
            type_name(obj)
        )));
    }
    let registered = || match registered_types(py).get_item(obj.get_type()) {
        Ok(found) => found.map(|f| f.extract::<(String, String)>()).transpose().map_err(external),
        Err(e) => Err(external(e)),
    };
    complete(&mut r, field_path, || type_name(obj), registered)?;
    Ok(r)
}

/// Makes a custom kind known, as adding it to client-go's scheme does: objects of `kind` without an
/// `apiVersion` get `api_version`, and objects of class `cls` (when given) get both.
#[pyfunction]
#[pyo3(signature = (kind, api_version, *, cls=None))]
pub fn register_kind(py: Python<'_>, kind: &str, api_version: &str, cls: Option<&Bound<'_, PyType>>) -> PyResult<()> {
    core_register_kind(kind, api_version)?;
    if let Some(cls) = cls {
        registered_types(py).set_item(cls, (kind, api_version))?;
    }
    Ok(())
}

/// The object reference kubevents would put in an event for `obj` (a dict of the ObjectReference shape).
#[pyfunction]
#[pyo3(signature = (obj, *, field_path=None))]
pub fn object_reference<'py>(obj: &Bound<'py, PyAny>, field_path: Option<&str>) -> PyResult<Bound<'py, PyDict>> {
    let r = reference_of(obj, field_path)?;
    super::convert::reference_to_py(obj.py(), &r)
}
