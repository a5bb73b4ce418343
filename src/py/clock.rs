//! Clocks from Python: the native `RealClock`, `FakeClock` and `IntervalClock`, and any object with a
//! `now()` method returning a datetime or epoch seconds.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDateAccess, PyInt, PyTimeAccess};
use pyo3::types::{PyDateTime, PyDelta, PyDeltaAccess, PyTzInfo, PyTzInfoAccess};

use super::convert::expected;
use super::errors::external;
use crate::clock::{Clock, FakeClock, IntervalClock, RealClock};
use crate::error::Error;
use crate::time::{check_duration, nanos_from_secs_f64, Time, NANOS_PER_SECOND};

/// Converts a datetime (naive ones are taken as UTC) or epoch seconds (int or float) to an instant.
pub fn to_time(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Time> {
    if let Ok(dt) = v.cast::<PyDateTime>() {
        // Naive datetimes have no offset to ask for.
        let off = if dt.get_tzinfo().is_some() { Some(dt.call_method0("utcoffset")?) } else { None };
        let offset_ns = match off.filter(|o| !o.is_none()) {
            Some(o) => delta_nanos(o.cast::<PyDelta>()?),
            None => 0,
        };
        let t = Time::from_civil(
            i64::from(dt.get_year()),
            u32::from(dt.get_month()),
            u32::from(dt.get_day()),
            u32::from(dt.get_hour()),
            u32::from(dt.get_minute()),
            u32::from(dt.get_second()),
            dt.get_microsecond() * 1000,
        )
        .and_then(|t| t.0.checked_sub(offset_ns).map(Time));
        return t.ok_or_else(|| PyValueError::new_err(format!("{what}: {dt} is outside years 1678..2261")));
    }
    if v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(expected(what, "a datetime or epoch seconds", v));
    }
    if let Ok(secs) = v.extract::<i64>() {
        return Ok(Time::from_unix_secs(secs, what)?);
    }
    if let Ok(secs) = v.extract::<f64>() {
        return Ok(Time::from_unix_secs_f64(secs, what)?);
    }
    if v.is_instance_of::<PyInt>() {
        return Err(PyValueError::new_err(format!(
            "{what}: an int beyond a float's range is outside years 1678..2261"
        )));
    }
    Err(expected(what, "a datetime or epoch seconds", v))
}

fn delta_nanos(d: &Bound<'_, PyDelta>) -> i64 {
    (i64::from(d.get_days()) * 86_400 + i64::from(d.get_seconds())) * NANOS_PER_SECOND
        + i64::from(d.get_microseconds()) * 1000
}

/// A duration in seconds (int, float) or a timedelta, as nanoseconds. A bool is no duration.
pub fn to_duration(v: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    if let Ok(d) = v.cast::<PyDelta>() {
        return Ok(delta_nanos(d));
    }
    if v.is_instance_of::<PyBool>() {
        return Err(expected(what, "seconds or a timedelta", v));
    }
    if let Ok(secs) = v.extract::<f64>() {
        return nanos_from_secs_f64(secs)
            .ok_or_else(|| PyValueError::new_err(format!("{what}: {secs} s is not a finite duration")));
    }
    if v.is_instance_of::<PyInt>() {
        return Err(PyValueError::new_err(format!("{what}: an int beyond a float's range is not a finite duration")));
    }
    Err(expected(what, "seconds or a timedelta", v))
}

/// An aware UTC datetime (microsecond precision, as Python's datetime has).
pub fn to_datetime<'py>(py: Python<'py>, t: Time) -> PyResult<Bound<'py, PyDateTime>> {
    let (y, mo, d, h, mi, s, ns) = t.to_civil();
    let utc = PyTzInfo::utc(py)?;
    PyDateTime::new(py, y as i32, mo as u8, d as u8, h as u8, mi as u8, s as u8, ns / 1000, Some(&utc))
}

/// A clock that is a Python object: `now()` is called with the GIL taken (from the broadcasters' threads too).
struct PyObjectClock(Py<PyAny>);

impl Clock for PyObjectClock {
    fn now(&self) -> Result<Time, Error> {
        super::lifecycle::attach(|py| {
            let v = super::lifecycle::call(&self.0.bind(py).getattr(pyo3::intern!(py, "now"))?, [])?;
            to_time(&v, "clock.now()")
        })
        .map_err(external)
    }
}

/// The system clock.
#[pyclass(module = "kubevents", name = "RealClock", frozen)]
pub struct PyRealClock;

#[pymethods]
impl PyRealClock {
    #[new]
    fn new() -> Self {
        PyRealClock
    }

    /// The current time, an aware UTC datetime.
    fn now<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDateTime>> {
        to_datetime(py, RealClock.now()?)
    }

    fn __repr__(&self) -> &'static str {
        "RealClock()"
    }
}

/// A clock that moves only when told to; nanosecond resolution inside.
#[pyclass(module = "kubevents", name = "FakeClock", frozen)]
pub struct PyFakeClock {
    pub inner: Arc<FakeClock>,
}

#[pymethods]
impl PyFakeClock {
    #[new]
    #[pyo3(signature = (start=None))]
    fn new(start: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let t = match start {
            Some(s) => to_time(s, "start")?,
            None => RealClock.now()?,
        };
        Ok(PyFakeClock { inner: Arc::new(FakeClock::new(t)) })
    }

    /// The clock's time, an aware UTC datetime.
    fn now<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDateTime>> {
        to_datetime(py, self.inner.get())
    }

    /// The clock's time in nanoseconds since the Unix epoch.
    fn now_ns(&self) -> i64 {
        self.inner.get().0
    }

    /// Moves the clock forward (or back, if negative) by seconds or a timedelta; returns the new time.
    fn step<'py>(&self, py: Python<'py>, seconds: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDateTime>> {
        let d = to_duration(seconds, "seconds")?;
        to_datetime(py, self.inner.step(d))
    }

    /// Sets the clock to a datetime or epoch seconds.
    fn set(&self, t: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.set(to_time(t, "t")?);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("FakeClock({:?})", self.inner.get().to_rfc3339_micro())
    }
}

/// A clock that advances by `interval` before every read (client-go's `SimpleIntervalClock`).
#[pyclass(module = "kubevents", name = "IntervalClock", frozen)]
pub struct PyIntervalClock {
    pub inner: Arc<IntervalClock>,
}

#[pymethods]
impl PyIntervalClock {
    #[new]
    fn new(start: &Bound<'_, PyAny>, interval: &Bound<'_, PyAny>) -> PyResult<Self> {
        let start = to_time(start, "start")?;
        let interval = to_duration(interval, "interval")?;
        Ok(PyIntervalClock { inner: Arc::new(IntervalClock::new(start, interval)) })
    }

    /// Advances by the interval and returns the new time.
    fn now<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDateTime>> {
        to_datetime(py, self.inner.now()?)
    }

    /// The last time handed out, without advancing.
    fn peek<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDateTime>> {
        to_datetime(py, self.inner.peek())
    }

    fn __repr__(&self) -> String {
        format!("IntervalClock({:?}, {} ns)", self.inner.peek().to_rfc3339_micro(), self.inner.interval_nanos())
    }
}

/// A duration argument in seconds or a timedelta, as nanoseconds: at least 0, or more than 0 when
/// `min_exclusive`; else a ValueError naming `what`.
pub fn seconds_arg(v: &Bound<'_, PyAny>, what: &str, min_exclusive: bool) -> PyResult<i64> {
    Ok(check_duration(to_duration(v, what)?, what, min_exclusive)?)
}

/// An optional duration argument (seconds or a timedelta) written into `slot`, in nanoseconds, when given;
/// the core checks it.
pub fn duration_into(v: Option<&Bound<'_, PyAny>>, what: &str, slot: &mut i64) -> PyResult<()> {
    if let Some(v) = v {
        *slot = to_duration(v, what)?;
    }
    Ok(())
}

/// A `timeout` argument in seconds or a timedelta; None waits without limit. Negative is a ValueError.
pub fn timeout_arg(t: Option<&Bound<'_, PyAny>>) -> PyResult<Option<std::time::Duration>> {
    let Some(t) = t.filter(|t| !t.is_none()) else { return Ok(None) };
    Ok(Some(std::time::Duration::from_nanos(seconds_arg(t, "timeout", false)? as u64)))
}

/// Any accepted clock argument as a core clock: native clocks directly, other objects through `now()`.
pub fn clock_arg(clock: Option<&Bound<'_, PyAny>>) -> PyResult<Arc<dyn Clock>> {
    let Some(c) = clock.filter(|c| !c.is_none()) else {
        return Ok(Arc::new(RealClock));
    };
    if let Ok(f) = c.cast::<PyFakeClock>() {
        return Ok(f.get().inner.clone());
    }
    if let Ok(i) = c.cast::<PyIntervalClock>() {
        return Ok(i.get().inner.clone());
    }
    if c.cast::<PyRealClock>().is_ok() {
        return Ok(Arc::new(RealClock));
    }
    if !c.hasattr("now")? {
        return Err(expected("clock", "an object with a now() method", c));
    }
    Ok(Arc::new(PyObjectClock(c.clone().unbind())))
}
