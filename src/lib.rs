//! kubevents: the Kubernetes event machinery of client-go (`tools/record`, `tools/events`) and the kubelet
//! (PLEG), as a Rust core with a Python front.
//!
//! The core is plain Rust; `py` (behind the `python` feature) converts between Python and these types.

// client-go tools/record: the correlator, the broadcaster and its sinks
pub mod broadcaster;
pub mod correlator;
pub mod recorder;
pub mod reference;
pub mod sink;
pub mod watch;
// what both event APIs share: the pipeline of watchers, and a sink's health
pub mod health;
pub mod pipeline;
// client-go tools/events: events.k8s.io/v1 series
pub mod series;
// the kubelet's pod lifecycle event generator and pod status cache
pub mod pleg;
// replay of traces on virtual time
pub mod sim;

pub mod clock;
pub mod error;
pub mod event;
pub mod gate;
pub mod lru;
pub mod metrics;
pub mod names;
pub mod sync;
pub mod threads;
pub mod time;

#[cfg(feature = "python")]
mod py;
