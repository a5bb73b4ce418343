//! kubevents: the Kubernetes event machinery of client-go (`tools/record`, `tools/events`) and the kubelet
//! (PLEG), as a Rust core with a Python front.
//!
//! The core is plain Rust; `py` (behind the `python` feature) converts between Python and these types.

pub mod clock;
pub mod correlator;
pub mod error;
pub mod event;
pub mod names;
pub mod recorder;
pub mod sim;
pub mod time;

#[cfg(feature = "python")]
mod py;

// --- PLEG (the kubelet's pod lifecycle event generator and pod status cache) ---
pub mod pleg;
