//! Events and trace records between Python dicts (Kubernetes JSON shape) and the core types.
//!
//! Events are converted by hand, key by key with interned names: they cross on every correlate call and
//! every sink answer, where a generic serde walk (pythonize) costs several times more (BENCHMARKS.md). The
//! shape is the one `event.rs` serializes (omitempty strings left out, zero timestamps as None, reporting
//! fields always set).
//! Errors name the field: `TypeError` for a wrong type, `ValueError` for a missing field or a bad value.

use crate::sync::lock;
use std::collections::BTreeMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMapping, PyString};

use super::clock::to_time;
use crate::event::{Event, EventSeries, EventSource, ObjectMeta, ObjectReference};
use crate::series::EventV1;
use crate::sim::Record;
use crate::time::Time;

/// The name of a value's type, for error messages.
pub(super) fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// `TypeError: {path}: expected {what}, got {type of v}`.
pub(super) fn expected(path: impl std::fmt::Display, what: &str, v: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!("{path}: expected {what}, got {}", type_name(v)))
}

/// A dict view of a mapping (a copy for mappings that are not dicts); None for anything else.
pub(super) fn mapping_as_dict<'py>(v: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyDict>>> {
    if let Ok(d) = v.cast::<PyDict>() {
        return Ok(Some(d.clone()));
    }
    if v.cast::<PyMapping>().is_ok() {
        return PyDict::from_sequence(&v.call_method0("items")?).map(Some);
    }
    Ok(None)
}

fn as_dict<'py>(v: &Bound<'py, PyAny>, path: &str) -> PyResult<Bound<'py, PyDict>> {
    mapping_as_dict(v)?.ok_or_else(|| expected(path, "a dict", v))
}

/// The value at `key`, treating a missing key and None alike.
pub(super) fn get<'py>(d: &Bound<'py, PyDict>, key: impl IntoPyObject<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key)?.filter(|v| !v.is_none()))
}

fn read_str(d: &Bound<'_, PyDict>, key: &Bound<'_, PyString>, path: &str, out: &mut String) -> PyResult<()> {
    out.clear();
    if let Some(v) = get(d, key)? {
        let s = v.cast::<PyString>().map_err(|_| expected(format_args!("{path}.{key}"), "str", &v))?;
        out.push_str(s.to_str()?);
    }
    Ok(())
}

fn read_i32(d: &Bound<'_, PyDict>, key: &Bound<'_, PyString>, path: &str) -> PyResult<i32> {
    let Some(v) = get(d, key)? else { return Ok(0) };
    if v.is_instance_of::<pyo3::types::PyBool>() || !v.is_instance_of::<pyo3::types::PyInt>() {
        return Err(expected(format_args!("{path}.{key}"), "int", &v));
    }
    v.extract::<i32>().map_err(|_| PyValueError::new_err(format!("{path}.{key}: {v} is outside the int32 range")))
}

fn read_time(d: &Bound<'_, PyDict>, key: &Bound<'_, PyString>, path: &str) -> PyResult<Option<Time>> {
    let Some(v) = get(d, key)? else { return Ok(None) };
    if let Ok(s) = v.cast::<PyString>() {
        let s = s.to_str()?;
        if s.is_empty() {
            return Ok(None);
        }
        return Time::parse_rfc3339(s).map(Some).map_err(|e| PyValueError::new_err(format!("{path}.{key}: {e}")));
    }
    if v.is_instance_of::<pyo3::types::PyDateTime>() {
        return to_time(&v, &format!("{path}.{key}")).map(Some);
    }
    Err(expected(format_args!("{path}.{key}"), "an RFC 3339 string or a datetime", &v))
}

fn read_map(d: &Bound<'_, PyDict>, key: &Bound<'_, PyString>, path: &str) -> PyResult<BTreeMap<String, String>> {
    let Some(v) = get(d, key)? else { return Ok(BTreeMap::new()) };
    let m = as_dict(&v, &format!("{path}.{key}"))?;
    let mut out = BTreeMap::new();
    for (k, val) in m.iter() {
        let (Ok(k), Ok(val)) = (k.cast::<PyString>(), val.cast::<PyString>()) else {
            return Err(PyTypeError::new_err(format!("{path}.{key}: expected a dict of str to str")));
        };
        out.insert(k.to_str()?.to_owned(), val.to_str()?.to_owned());
    }
    Ok(out)
}

fn read_reference(v: &Bound<'_, PyAny>, path: &str, r: &mut ObjectReference) -> PyResult<()> {
    let py = v.py();
    let d = as_dict(v, path)?;
    read_str(&d, intern!(py, "kind"), path, &mut r.kind)?;
    read_str(&d, intern!(py, "namespace"), path, &mut r.namespace)?;
    read_str(&d, intern!(py, "name"), path, &mut r.name)?;
    read_str(&d, intern!(py, "uid"), path, &mut r.uid)?;
    read_str(&d, intern!(py, "apiVersion"), path, &mut r.api_version)?;
    read_str(&d, intern!(py, "resourceVersion"), path, &mut r.resource_version)?;
    read_str(&d, intern!(py, "fieldPath"), path, &mut r.field_path)
}

/// An ObjectReference dict (`kind`, `namespace`, `name`, `uid`, `apiVersion`, `resourceVersion`, `fieldPath`).
pub fn reference_from_py(v: &Bound<'_, PyAny>, path: &str) -> PyResult<ObjectReference> {
    let mut r = ObjectReference::default();
    read_reference(v, path, &mut r)?;
    Ok(r)
}

/// An EventSource dict (`component`, `host`).
pub fn source_from_py(v: &Bound<'_, PyAny>, path: &str) -> PyResult<EventSource> {
    let py = v.py();
    let d = as_dict(v, path)?;
    let mut s = EventSource::default();
    read_str(&d, intern!(py, "component"), path, &mut s.component)?;
    read_str(&d, intern!(py, "host"), path, &mut s.host)?;
    Ok(s)
}

/// A core/v1 Event dict. Keys it does not know (a server's uid, managedFields ...) are ignored.
pub fn event_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Event> {
    let py = obj.py();
    let p = "event";
    let d = as_dict(obj, p)?;
    let mut e = Event::default();
    read_str(&d, intern!(py, "apiVersion"), p, &mut e.api_version)?;
    read_str(&d, intern!(py, "kind"), p, &mut e.kind)?;
    if let Some(m) = get(&d, intern!(py, "metadata"))? {
        let path = "event.metadata";
        let m = as_dict(&m, path)?;
        let meta: &mut ObjectMeta = &mut e.metadata;
        read_str(&m, intern!(py, "name"), path, &mut meta.name)?;
        read_str(&m, intern!(py, "namespace"), path, &mut meta.namespace)?;
        read_str(&m, intern!(py, "resourceVersion"), path, &mut meta.resource_version)?;
        meta.annotations = read_map(&m, intern!(py, "annotations"), path)?;
    }
    match get(&d, intern!(py, "involvedObject"))? {
        Some(v) => read_reference(&v, "event.involvedObject", &mut e.involved_object)?,
        None => return Err(PyValueError::new_err("event: missing field `involvedObject`")),
    }
    read_str(&d, intern!(py, "reason"), p, &mut e.reason)?;
    read_str(&d, intern!(py, "message"), p, &mut e.message)?;
    if let Some(v) = get(&d, intern!(py, "source"))? {
        e.source = source_from_py(&v, "event.source")?;
    }
    e.first_timestamp = read_time(&d, intern!(py, "firstTimestamp"), p)?;
    e.last_timestamp = read_time(&d, intern!(py, "lastTimestamp"), p)?;
    e.count = read_i32(&d, intern!(py, "count"), p)?;
    read_str(&d, intern!(py, "type"), p, &mut e.type_)?;
    e.event_time = read_time(&d, intern!(py, "eventTime"), p)?;
    if let Some(v) = get(&d, intern!(py, "series"))? {
        let path = "event.series";
        let s = as_dict(&v, path)?;
        e.series = Some(EventSeries {
            count: read_i32(&s, intern!(py, "count"), path)?,
            last_observed_time: read_time(&s, intern!(py, "lastObservedTime"), path)?,
        });
    }
    read_str(&d, intern!(py, "action"), p, &mut e.action)?;
    if let Some(v) = get(&d, intern!(py, "related"))? {
        e.related = Some(reference_from_py(&v, "event.related")?);
    }
    read_str(&d, intern!(py, "reportingComponent"), p, &mut e.reporting_controller)?;
    read_str(&d, intern!(py, "reportingInstance"), p, &mut e.reporting_instance)?;
    Ok(e)
}

/// A Python str of `s`. ASCII text (nearly every string of an event) is copied straight into a new compact
/// str, as jiter does: `PyUnicode_FromStringAndSize` would first decode it as UTF-8, byte by byte.
fn py_str<'py>(py: Python<'py>, s: &str) -> PyResult<Bound<'py, PyString>> {
    if s.is_ascii() {
        ascii_str(py, s.as_bytes())
    } else {
        Ok(PyString::new(py, s))
    }
}

/// A Python str of ASCII `bytes` (checked by the caller).
fn ascii_str<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    debug_assert!(bytes.is_ascii());
    let len = isize::try_from(bytes.len()).map_err(|_| PyValueError::new_err("string too long for Python"))?;
    // SAFETY: PyUnicode_New(len, 127) returns a new compact ASCII str with room for `len` bytes (or NULL with
    // an exception set); the bytes copied in are ASCII, as its kind requires.
    unsafe {
        let ptr = ffi::PyUnicode_New(len, 127);
        if ptr.is_null() {
            return Err(PyErr::fetch(py));
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), ffi::PyUnicode_1BYTE_DATA(ptr), bytes.len());
        Ok(Bound::from_owned_ptr(py, ptr).cast_into_unchecked())
    }
}

/// `metav1.Time` as JSON writes it, `2006-01-02T15:04:05Z`.
fn py_time<'py>(py: Python<'py>, t: Time) -> PyResult<Bound<'py, PyString>> {
    ascii_str(py, &t.rfc3339_bytes())
}

/// `metav1.MicroTime` as JSON writes it, `2006-01-02T15:04:05.000000Z`; Go's zero time (`None`) as null.
fn py_micro_time(py: Python<'_>, t: Option<Time>) -> PyResult<Bound<'_, PyAny>> {
    match t {
        Some(t) => ascii_str(py, &t.rfc3339_micro_bytes()).map(Bound::into_any),
        None => Ok(py.None().into_bound(py)),
    }
}

/// Sets `key` unless `v` is empty (Go's `omitempty`).
pub(super) fn set_str(d: &Bound<'_, PyDict>, key: &Bound<'_, PyString>, v: &str) -> PyResult<()> {
    match omit_empty(d.py(), v)? {
        Some(s) => d.set_item(key, s),
        None => Ok(()),
    }
}

/// The str of `v`, None when empty (Go's `omitempty`).
fn omit_empty<'py>(py: Python<'py>, v: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    if v.is_empty() {
        Ok(None)
    } else {
        py_str(py, v).map(|s| Some(s.into_any()))
    }
}

/// A dict key and its value; None leaves the key out.
type Field<'a, 'py> = (&'a Bound<'py, PyString>, Option<Bound<'py, PyAny>>);

/// Empty dicts with given keys (values None), one per key set, to copy. A copy takes the key table in one
/// allocation and setting an existing key is a lookup, where a dict built key by key resized twice on the way
/// to an event's dozen keys. Few key sets occur (an event's optional fields are mostly all set or all empty),
/// so they are searched in a short list; past `MAX_SHAPES` dicts are built key by key.
static SHAPES: std::sync::Mutex<Vec<(Shape, u32, Py<PyDict>)>> = std::sync::Mutex::new(Vec::new());
const MAX_SHAPES: usize = 64;

/// Which list of fields a template is for (the same mask means other keys in another list).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Event,
    EventV1,
    Reference,
}

/// The dict of the `fields` that have a value, in their order. The lock is never held across a call into
/// Python, which may run arbitrary code (a finalizer) that converts an event too.
fn dict_of<'py>(py: Python<'py>, shape: Shape, fields: &[Field<'_, 'py>]) -> PyResult<Bound<'py, PyDict>> {
    let mask = fields.iter().enumerate().fold(0u32, |m, (i, (_, v))| m | (u32::from(v.is_some()) << i));
    let shapes = || lock(&SHAPES);
    let known = shapes().iter().find(|(s, m, _)| *s == shape && *m == mask).map(|(_, _, t)| t.clone_ref(py));
    let d = match known {
        Some(template) => template.bind(py).copy()?,
        None => {
            let template = PyDict::new(py);
            for (k, _) in fields.iter().filter(|(_, v)| v.is_some()) {
                template.set_item(*k, py.None())?;
            }
            let mut all = shapes();
            if all.len() < MAX_SHAPES && !all.iter().any(|(s, m, _)| *s == shape && *m == mask) {
                all.push((shape, mask, template.clone().unbind()));
                drop(all);
                template.copy()?
            } else {
                template
            }
        }
    };
    for (k, v) in fields {
        if let Some(v) = v.as_ref().filter(|v| !v.is_none()) {
            d.set_item(*k, v)?;
        }
    }
    Ok(d)
}

pub fn reference_to_py<'py>(py: Python<'py>, r: &ObjectReference) -> PyResult<Bound<'py, PyDict>> {
    let fields = [
        (intern!(py, "kind"), omit_empty(py, &r.kind)?),
        (intern!(py, "namespace"), omit_empty(py, &r.namespace)?),
        (intern!(py, "name"), omit_empty(py, &r.name)?),
        (intern!(py, "uid"), omit_empty(py, &r.uid)?),
        (intern!(py, "apiVersion"), omit_empty(py, &r.api_version)?),
        (intern!(py, "resourceVersion"), omit_empty(py, &r.resource_version)?),
        (intern!(py, "fieldPath"), omit_empty(py, &r.field_path)?),
    ];
    dict_of(py, Shape::Reference, &fields)
}

/// `metadata`: name, namespace, resourceVersion (omitempty) and annotations (when any).
pub(super) fn meta_to_py<'py>(py: Python<'py>, m: &ObjectMeta) -> PyResult<Bound<'py, PyDict>> {
    let meta = PyDict::new(py);
    set_str(&meta, intern!(py, "name"), &m.name)?;
    set_str(&meta, intern!(py, "namespace"), &m.namespace)?;
    set_str(&meta, intern!(py, "resourceVersion"), &m.resource_version)?;
    if !m.annotations.is_empty() {
        meta.set_item(intern!(py, "annotations"), &m.annotations)?;
    }
    Ok(meta)
}

fn source_to_py<'py>(py: Python<'py>, s: &EventSource) -> PyResult<Bound<'py, PyDict>> {
    let source = PyDict::new(py);
    set_str(&source, intern!(py, "component"), &s.component)?;
    set_str(&source, intern!(py, "host"), &s.host)?;
    Ok(source)
}

fn series_to_py<'py>(py: Python<'py>, s: &EventSeries) -> PyResult<Bound<'py, PyDict>> {
    let sd = PyDict::new(py);
    if s.count != 0 {
        sd.set_item(intern!(py, "count"), s.count)?;
    }
    sd.set_item(intern!(py, "lastObservedTime"), py_micro_time(py, s.last_observed_time)?)?;
    Ok(sd)
}

/// A core/v1 Event as the dict `json.loads` would give for Go's JSON of it.
pub fn event_to_py<'py>(py: Python<'py>, e: &Event) -> PyResult<Bound<'py, PyDict>> {
    let first = e.first_timestamp.map(|t| py_time(py, t)).transpose()?;
    // A first occurrence has both timestamps equal: one string serves both.
    let last = match &first {
        Some(f) if e.last_timestamp == e.first_timestamp => Some(f.clone()),
        _ => e.last_timestamp.map(|t| py_time(py, t)).transpose()?,
    };
    // Written even when unset (null), as Go writes struct-valued fields.
    let always = |v: Option<Bound<'py, PyString>>| Some(v.map_or_else(|| py.None().into_bound(py), Bound::into_any));
    let fields = [
        (intern!(py, "apiVersion"), omit_empty(py, &e.api_version)?),
        (intern!(py, "kind"), omit_empty(py, &e.kind)?),
        (intern!(py, "metadata"), Some(meta_to_py(py, &e.metadata)?.into_any())),
        (intern!(py, "involvedObject"), Some(reference_to_py(py, &e.involved_object)?.into_any())),
        (intern!(py, "reason"), omit_empty(py, &e.reason)?),
        (intern!(py, "message"), omit_empty(py, &e.message)?),
        (intern!(py, "source"), Some(source_to_py(py, &e.source)?.into_any())),
        (intern!(py, "firstTimestamp"), always(first)),
        (intern!(py, "lastTimestamp"), always(last)),
        (intern!(py, "count"), (e.count != 0).then(|| e.count.into_pyobject(py)).transpose()?.map(Bound::into_any)),
        (intern!(py, "type"), omit_empty(py, &e.type_)?),
        (intern!(py, "eventTime"), Some(py_micro_time(py, e.event_time)?)),
        (intern!(py, "series"), e.series.as_ref().map(|s| series_to_py(py, s)).transpose()?.map(Bound::into_any)),
        (intern!(py, "action"), omit_empty(py, &e.action)?),
        (intern!(py, "related"), e.related.as_ref().map(|r| reference_to_py(py, r)).transpose()?.map(Bound::into_any)),
        (intern!(py, "reportingComponent"), Some(py_str(py, &e.reporting_controller)?.into_any())),
        (intern!(py, "reportingInstance"), Some(py_str(py, &e.reporting_instance)?.into_any())),
    ];
    dict_of(py, Shape::Event, &fields)
}

/// An events.k8s.io/v1 Event as a dict of its JSON shape, key for key as `EventV1` serializes (by hand:
/// every write crosses here, and `pythonize` costs it nearly twice as much, see BENCHMARKS.md).
pub fn event_v1_to_py<'py>(py: Python<'py>, e: &EventV1) -> PyResult<Bound<'py, PyDict>> {
    let to_py = |t: Time| py_time(py, t).map(Bound::into_any);
    let source = &e.deprecated_source;
    let fields = [
        (intern!(py, "apiVersion"), omit_empty(py, &e.api_version)?),
        (intern!(py, "kind"), omit_empty(py, &e.kind)?),
        (intern!(py, "metadata"), Some(meta_to_py(py, &e.metadata)?.into_any())),
        // Written even when unset (null), as Go writes struct-valued fields.
        (intern!(py, "eventTime"), Some(py_micro_time(py, e.event_time)?)),
        (intern!(py, "series"), e.series.as_ref().map(|s| series_to_py(py, s)).transpose()?.map(Bound::into_any)),
        (intern!(py, "reportingController"), omit_empty(py, &e.reporting_controller)?),
        (intern!(py, "reportingInstance"), omit_empty(py, &e.reporting_instance)?),
        (intern!(py, "action"), omit_empty(py, &e.action)?),
        (intern!(py, "reason"), omit_empty(py, &e.reason)?),
        (intern!(py, "regarding"), Some(reference_to_py(py, &e.regarding)?.into_any())),
        (intern!(py, "related"), e.related.as_ref().map(|r| reference_to_py(py, r)).transpose()?.map(Bound::into_any)),
        (intern!(py, "note"), omit_empty(py, &e.note)?),
        (intern!(py, "type"), omit_empty(py, &e.type_)?),
        (
            intern!(py, "deprecatedSource"),
            (!source.component.is_empty() || !source.host.is_empty())
                .then(|| source_to_py(py, source))
                .transpose()?
                .map(Bound::into_any),
        ),
        (intern!(py, "deprecatedFirstTimestamp"), e.deprecated_first_timestamp.map(to_py).transpose()?),
        (intern!(py, "deprecatedLastTimestamp"), e.deprecated_last_timestamp.map(to_py).transpose()?),
        (
            intern!(py, "deprecatedCount"),
            (e.deprecated_count != 0).then(|| e.deprecated_count.into_pyobject(py)).transpose()?.map(Bound::into_any),
        ),
    ];
    dict_of(py, Shape::EventV1, &fields)
}

const RECORD_KEYS: [&str; 8] =
    ["t_ns", "source_component", "source_host", "involved", "type", "reason", "message", "annotations"];
const INVOLVED_KEYS: [&str; 7] = ["kind", "namespace", "name", "uid", "api_version", "resource_version", "field_path"];

/// Rejects keys outside `known`, so a misspelt field is an error rather than a silently empty one.
fn check_keys(d: &Bound<'_, PyDict>, known: &[&str], path: &str) -> PyResult<()> {
    for k in d.keys() {
        let name = k.cast::<PyString>().map_err(|_| PyTypeError::new_err(format!("{path}: keys must be str")))?;
        let name = name.to_str()?;
        if !known.contains(&name) {
            return Err(PyValueError::new_err(format!(
                "{path}: unknown field `{name}`, expected one of {}",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// A trace record dict (the JSON Lines format of `kubevents.traces`).
pub fn record_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Record<'static>> {
    let py = obj.py();
    let p = "record";
    let d = as_dict(obj, p)?;
    check_keys(&d, &RECORD_KEYS, p)?;
    let t_ns = match get(&d, intern!(py, "t_ns"))? {
        None => return Err(PyValueError::new_err("record: missing field `t_ns`")),
        Some(v) if v.is_instance_of::<pyo3::types::PyBool>() || !v.is_instance_of::<pyo3::types::PyInt>() => {
            return Err(expected("record.t_ns", "int nanoseconds since the Unix epoch", &v))
        }
        Some(v) => v
            .extract::<i64>()
            .map_err(|_| PyValueError::new_err(format!("record.t_ns: {v} is outside the int64 range")))?,
    };
    let Some(involved) = get(&d, intern!(py, "involved"))? else {
        return Err(PyValueError::new_err("record: missing field `involved`"));
    };
    let ip = "record.involved";
    let i = as_dict(&involved, ip)?;
    check_keys(&i, &INVOLVED_KEYS, ip)?;
    let string = |d: &Bound<'_, PyDict>, key: &str, path: &str| -> PyResult<std::borrow::Cow<'static, str>> {
        let mut out = String::new();
        read_str(d, &PyString::intern(py, key), path, &mut out)?;
        Ok(out.into())
    };
    Ok(Record {
        t_ns,
        source_component: string(&d, "source_component", p)?,
        source_host: string(&d, "source_host", p)?,
        involved: crate::sim::InvolvedRecord {
            kind: string(&i, "kind", ip)?,
            namespace: string(&i, "namespace", ip)?,
            name: string(&i, "name", ip)?,
            uid: string(&i, "uid", ip)?,
            api_version: string(&i, "api_version", ip)?,
            resource_version: string(&i, "resource_version", ip)?,
            field_path: string(&i, "field_path", ip)?,
        },
        type_: string(&d, "type", p)?,
        reason: string(&d, "reason", p)?,
        message: string(&d, "message", p)?,
        annotations: read_map(&d, intern!(py, "annotations"), p)?,
    })
}
