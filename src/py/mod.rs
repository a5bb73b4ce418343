//! The pyo3 binding layer: conversions between Python and the core, and nothing else.

mod clock;
mod convert;
mod correlator;
mod errors;
mod sim;
// --- PLEG ---
mod pleg;

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
    // --- PLEG ---
    pleg::register(m)?;
    Ok(())
}
