//! The pyo3 binding layer: conversions between Python and the core, and nothing else.

mod clock;
mod convert;
mod correlator;
mod errors;
mod options;
mod sim;
// -- recording pipeline --
mod broadcaster;
mod gil;
mod lifecycle;
mod pipeline;
mod reference;
mod sink;
mod testing;
// events.k8s.io/v1 recording
mod series;
// --- PLEG ---
mod pleg;
// Tuning lab: replay metrics and parameter sweeps.
mod arrow;
mod lab;

use pyo3::prelude::*;

// Rust allocations of the extension only (Python keeps its own). Events are allocated on the recording
// thread and freed on a sink's: glibc malloc then takes its slow paths on both sides; mimalloc frees across
// threads cheaply (BENCHMARKS.md, "Why the code is as it is").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The package's version is Cargo.toml's: maturin writes it into the wheel's metadata as well.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<clock::PyRealClock>()?;
    m.add_class::<clock::PyFakeClock>()?;
    m.add_class::<clock::PyIntervalClock>()?;
    m.add_class::<correlator::PyCorrelator>()?;
    m.add_class::<correlator::PyCorrelateResult>()?;
    m.add_class::<sim::PySimulation>()?;
    m.add_class::<sim::PyDecisions>()?;
    m.add_function(wrap_pyfunction!(correlator::make_event, m)?)?;
    m.add_function(wrap_pyfunction!(sim::simulate, m)?)?;
    options::register(m)?;
    m.add_function(wrap_pyfunction!(sim::_replay_sources, m)?)?;
    m.add_function(wrap_pyfunction!(sim::_merge_sources, m)?)?;
    m.add_function(wrap_pyfunction!(sim::_split_sources, m)?)?;
    // -- recording pipeline --
    m.add_class::<broadcaster::PyBroadcaster>()?;
    m.add_class::<broadcaster::PyRecorder>()?;
    m.add_class::<pipeline::PyWatcher>()?;
    m.add_function(wrap_pyfunction!(reference::register_kind, m)?)?;
    m.add_function(wrap_pyfunction!(reference::object_reference, m)?)?;
    m.add_class::<testing::PyRecorderCheck>()?;
    // -- end recording pipeline --
    // events.k8s.io/v1 recording
    m.add_class::<series::PyEventsBroadcaster>()?;
    m.add_class::<series::PyEventsRecorder>()?;
    m.add_class::<series::PyEventsRecorderCheck>()?;
    m.add_function(wrap_pyfunction!(series::truncate_note, m)?)?;
    m.add_function(wrap_pyfunction!(series::series_patch, m)?)?;
    m.add("DEFAULT_EVENTS_V1_CACHE_SIZE", crate::series::DEFAULT_CACHE_SIZE)?;
    // --- PLEG ---
    pleg::register(m)?;
    // Tuning lab.
    m.add_function(wrap_pyfunction!(lab::replay_grid, m)?)?;
    m.add_function(wrap_pyfunction!(lab::_check_grid, m)?)?;
    m.add_class::<arrow::PyArrowTable>()?;
    m.add("TRACE_COLUMNS", crate::sim::table::columns())?;
    m.add_function(wrap_pyfunction!(arrow::_records_table, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::_check_table, m)?)?;
    // Exit and fork (kubevents._lifecycle).
    m.add_function(wrap_pyfunction!(lifecycle::_close_gate, m)?)?;
    m.add_function(wrap_pyfunction!(lifecycle::_after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(lifecycle::_interruptible_waits, m)?)?;
    // Metrics (kubevents.metrics).
    m.add_function(wrap_pyfunction!(_live_components, m)?)?;
    Ok(())
}

/// The live broadcasters and PLEGs, each as `{"kind", "name", "stats"}`, for `kubevents.metrics`.
#[pyfunction]
fn _live_components(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let live = lifecycle::detach(py, crate::metrics::live);
    Ok(pythonize::pythonize(py, &live)?)
}
