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
// events.k8s.io/v1 series recording
pub mod series;
pub mod time;

#[cfg(feature = "python")]
mod py;

// -- recording pipeline (Broadcaster, Recorder, sinks) --
pub mod broadcaster;
pub mod pipeline;
pub mod reference;
pub mod sink;
// --- PLEG (the kubelet's pod lifecycle event generator and pod status cache) ---
pub mod pleg;
