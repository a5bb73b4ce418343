//! Runtime pods as the relist sees them (`kubecontainer.Pod`), and the events a relist emits.

use std::fmt;

use serde::Serialize;

use crate::error::Error;
use crate::time::Time;

/// `kubecontainer.State`: what the runtime reports for a container or sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

impl ContainerState {
    /// Parses the runtime's state string. Go panics on an unknown state; here it is a value error.
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "created" => Ok(ContainerState::Created),
            "running" => Ok(ContainerState::Running),
            "exited" => Ok(ContainerState::Exited),
            "unknown" => Ok(ContainerState::Unknown),
            // No field: the caller knows where the state sat.
            other => Err(Error::value(
                "",
                format!("unrecognized container state {other:?} (expected created, running, exited or unknown)"),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ContainerState::Created => "created",
            ContainerState::Running => "running",
            ContainerState::Exited => "exited",
            ContainerState::Unknown => "unknown",
        }
    }
}

/// A container or sandbox in a runtime listing. Go matches on the whole `ContainerID` (type and id); the
/// type prefix is not modelled, so the id string alone identifies a container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Container {
    pub id: String,
    pub state: ContainerState,
}

impl Container {
    pub fn new(id: impl Into<String>, state: ContainerState) -> Self {
        Container { id: id.into(), state }
    }
}

/// A pod in a runtime listing. Serialized as the runtime's pod dict.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Pod {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub containers: Vec<Container>,
    pub sandboxes: Vec<Container>,
}

/// `PodLifeCycleEventType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodLifecycleEventType {
    ContainerStarted,
    ContainerDied,
    ContainerRemoved,
    ContainerChanged,
    PodSync,
    ConditionMet,
}

impl PodLifecycleEventType {
    pub fn as_str(self) -> &'static str {
        match self {
            PodLifecycleEventType::ContainerStarted => "ContainerStarted",
            PodLifecycleEventType::ContainerDied => "ContainerDied",
            PodLifecycleEventType::ContainerRemoved => "ContainerRemoved",
            PodLifecycleEventType::ContainerChanged => "ContainerChanged",
            PodLifecycleEventType::PodSync => "PodSync",
            PodLifecycleEventType::ConditionMet => "ConditionMet",
        }
    }

    pub fn parse(s: &str) -> Result<Self, Error> {
        Ok(match s {
            "ContainerStarted" => PodLifecycleEventType::ContainerStarted,
            "ContainerDied" => PodLifecycleEventType::ContainerDied,
            "ContainerRemoved" => PodLifecycleEventType::ContainerRemoved,
            "ContainerChanged" => PodLifecycleEventType::ContainerChanged,
            "PodSync" => PodLifecycleEventType::PodSync,
            "ConditionMet" => PodLifecycleEventType::ConditionMet,
            other => {
                let expected = "(expected ContainerStarted, ContainerDied, ContainerRemoved, ContainerChanged, \
                                PodSync or ConditionMet)";
                return Err(Error::value("type", format!("unknown event type {other:?} {expected}")));
            }
        })
    }
}

impl fmt::Display for PodLifecycleEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `PodLifecycleEvent`: `data` is the container id for container events, `None` for `PodSync` and
/// `ConditionMet`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodLifecycleEvent {
    pub id: String,
    pub kind: PodLifecycleEventType,
    pub data: Option<String>,
}

impl PodLifecycleEvent {
    pub fn new(id: impl Into<String>, kind: PodLifecycleEventType, data: Option<&str>) -> Self {
        PodLifecycleEvent { id: id.into(), kind, data: data.map(str::to_owned) }
    }
}

/// What the PLEG reads of a pod status (`kubecontainer.PodStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusFields {
    /// The pod IPs.
    pub ips: Vec<String>,
    /// The ids of the sandbox statuses.
    pub sandboxes: Vec<String>,
    /// Whether any sandbox status is `SANDBOX_READY`.
    pub sandbox_ready: bool,
    /// The runtime's timestamp for the status, if it gave one.
    pub timestamp: Option<Time>,
    /// `getPodSandboxState == running`: the container status whose id is the first sandbox's is running.
    pub sandbox_running: bool,
}

impl StatusFields {
    /// Whether a CRI sandbox state (`SANDBOX_READY`, `SANDBOX_NOTREADY`) is ready.
    pub fn sandbox_state_ready(state: &str) -> Result<bool, String> {
        match state {
            "SANDBOX_READY" => Ok(true),
            "SANDBOX_NOTREADY" => Ok(false),
            other => Err(format!("expected SANDBOX_READY or SANDBOX_NOTREADY, got {other:?}")),
        }
    }
}

/// A pod status as the PLEG sees it; the status itself stays opaque so callers keep their own
/// representation.
pub trait StatusView: Clone + Send + Sync + 'static {
    fn fields(&self) -> &StatusFields;
    /// The same status with other IPs.
    fn with_ips(&self, ips: Vec<String>) -> Self;

    fn ips(&self) -> &[String] {
        &self.fields().ips
    }
    fn has_ready_sandbox(&self) -> bool {
        self.fields().sandbox_ready
    }
    fn has_sandbox(&self, id: &str) -> bool {
        self.fields().sandboxes.iter().any(|s| s == id)
    }
    fn has_sandboxes(&self) -> bool {
        !self.fields().sandboxes.is_empty()
    }
    fn timestamp(&self) -> Option<Time> {
        self.fields().timestamp
    }
    fn sandbox_running(&self) -> bool {
        self.fields().sandbox_running
    }
}

/// A plain status for the Rust tests and benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BasicStatus {
    pub id: String,
    pub fields: StatusFields,
}

impl StatusView for BasicStatus {
    fn fields(&self) -> &StatusFields {
        &self.fields
    }
    fn with_ips(&self, ips: Vec<String>) -> Self {
        BasicStatus { id: self.id.clone(), fields: StatusFields { ips, ..self.fields.clone() } }
    }
}
