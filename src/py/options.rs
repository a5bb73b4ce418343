//! The core's option defaults and bounds as constants of `kubevents._native`, for the Python code to read
//! instead of copying them, and the core's checks of the options that only the Python code takes.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::clock::to_duration;
use super::errors::int_arg;
use crate::time::{check_duration, NANOS_PER_SECOND};

fn seconds(nanos: i64) -> f64 {
    nanos as f64 / NANOS_PER_SECOND as f64
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use crate::broadcaster as b;
    use crate::correlator as c;
    use crate::pleg::{evented as e, generic as g};
    use crate::sink as s;
    // The correlator's (`Correlator`, `Broadcaster`, `simulate`, a sweep's grid).
    m.add("DEFAULT_LRU_CACHE_SIZE", c::DEFAULT_LRU_CACHE_SIZE)?;
    m.add("DEFAULT_BURST", c::DEFAULT_BURST)?;
    m.add("DEFAULT_QPS", f64::from(c::DEFAULT_QPS))?;
    m.add("DEFAULT_MAX_EVENTS", c::DEFAULT_MAX_EVENTS)?;
    m.add("DEFAULT_MAX_INTERVAL", c::DEFAULT_MAX_INTERVAL_SECONDS)?;
    m.add("GRID_OPTIONS", PyTuple::new(m.py(), c::OPTION_NAMES)?)?;
    // The broadcaster's and its sinks'.
    m.add("DEFAULT_MAX_TRIES", s::DEFAULT_MAX_TRIES)?;
    m.add("DEFAULT_SLEEP_DURATION", seconds(s::DEFAULT_SLEEP_NANOS))?;
    m.add("DEFAULT_QUEUE_LENGTH", b::DEFAULT_QUEUE_LENGTH)?;
    m.add("DEFAULT_FULL_CHANNEL", b::DEFAULT_FULL_CHANNEL)?;
    m.add("DEFAULT_CATCH_UP_WAIT", b::DEFAULT_CATCH_UP_WAIT.as_secs_f64())?;
    m.add("DEFAULT_WORKERS", b::DEFAULT_WORKERS)?;
    m.add("MAX_WORKERS", b::MAX_WORKERS)?;
    m.add("DEFAULT_REQUEST_TIMEOUT", seconds(s::DEFAULT_REQUEST_TIMEOUT_NANOS))?;
    m.add("MAX_REQUEST_TIMEOUT", seconds(s::MAX_REQUEST_TIMEOUT_NANOS))?;
    // The lab's.
    m.add("DEFAULT_WINDOW", seconds(crate::sim::metrics::DEFAULT_WINDOW_NS))?;
    // The kubelet's, for the PLEG.
    m.add("RELIST_PERIOD", seconds(g::RELIST_PERIOD))?;
    m.add("RELIST_THRESHOLD", seconds(g::RELIST_THRESHOLD))?;
    m.add("CHANNEL_CAPACITY", g::CHANNEL_CAPACITY)?;
    m.add("INSPECT_CONCURRENCY", g::INSPECT_CONCURRENCY)?;
    m.add("EVENTED_RELIST_PERIOD", seconds(e::EVENTED_RELIST_PERIOD))?;
    m.add("EVENTED_RELIST_THRESHOLD", seconds(e::EVENTED_RELIST_THRESHOLD))?;
    m.add("EVENTED_MAX_STREAM_RETRIES", e::MAX_STREAM_RETRIES)?;
    m.add("EVENTED_CACHE_UPDATE_PERIOD", seconds(e::CACHE_UPDATE_PERIOD))?;
    m.add_function(wrap_pyfunction!(_request_timeout, m)?)?;
    m.add_function(wrap_pyfunction!(_count_option, m)?)?;
    m.add_function(wrap_pyfunction!(_seconds_option, m)?)?;
    Ok(())
}

/// The client sinks' `request_timeout` (seconds or a timedelta), checked, in seconds.
#[pyfunction]
fn _request_timeout(value: &Bound<'_, PyAny>) -> PyResult<f64> {
    Ok(seconds(crate::sink::request_timeout_option(to_duration(value, "request_timeout")?)?))
}

/// An option `name` that counts something (at least 1), checked.
#[pyfunction]
fn _count_option(value: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    Ok(crate::error::count_option(name, int_arg(value, name)?)?.get())
}

/// A duration option `name` (seconds or a timedelta) in seconds, checked: at least 0, or more when `positive`.
#[pyfunction]
#[pyo3(signature = (value, name, *, positive))]
fn _seconds_option(value: &Bound<'_, PyAny>, name: &str, positive: bool) -> PyResult<f64> {
    Ok(seconds(check_duration(to_duration(value, name)?, name, positive)?))
}
