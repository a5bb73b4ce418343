//! The pyo3 binding layer: conversions between Python and the core, and nothing else.

mod clock;
mod convert;
mod correlator;
mod errors;
mod sim;
// Tuning lab: replay metrics and parameter sweeps.
mod lab;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<clock::PyRealClock>()?;
    m.add_class::<clock::PyFakeClock>()?;
    m.add_class::<clock::PyIntervalClock>()?;
    m.add_class::<correlator::PyCorrelator>()?;
    m.add_class::<correlator::PyCorrelateResult>()?;
    m.add_class::<sim::PySimulation>()?;
    m.add_class::<sim::PyDecisions>()?;
    m.add_function(wrap_pyfunction!(correlator::make_event, m)?)?;
    m.add_function(wrap_pyfunction!(sim::simulate, m)?)?;
    m.add("DEFAULT_QPS", f64::from(crate::correlator::DEFAULT_QPS))?;
    // Tuning lab.
    m.add_function(wrap_pyfunction!(lab::replay_grid, m)?)?;
    Ok(())
}
