//! The event a client-go recorder builds for one call (`recorderImpl.makeEvent` + `generateEvent`).

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::event::{Event, EventSource, ObjectMeta, ObjectReference};
use crate::names::generate_event_name;
use crate::time::Time;

/// `metav1.NamespaceDefault`, used when the referenced object has no namespace.
pub const NAMESPACE_DEFAULT: &str = "default";

/// Where the UUIDv4 fallback names come from: the OS (as client-go), or a seeded generator so that a
/// replay names events the same way every time.
#[derive(Debug)]
pub enum UuidSource {
    Random,
    Seeded(Box<SmallRng>),
}

impl UuidSource {
    pub fn seeded(seed: u64) -> Self {
        UuidSource::Seeded(Box::new(SmallRng::seed_from_u64(seed)))
    }

    pub fn next_uuid(&mut self) -> String {
        match self {
            UuidSource::Random => uuid::Uuid::new_v4().to_string(),
            UuidSource::Seeded(rng) => {
                let mut bytes = [0u8; 16];
                rng.fill_bytes(&mut bytes);
                uuid::Builder::from_random_bytes(bytes).into_uuid().to_string()
            }
        }
    }
}

/// Everything `makeEvent` needs besides the clock reading.
#[derive(Clone, Debug, Default)]
pub struct EventSpec {
    pub reference: ObjectReference,
    pub annotations: BTreeMap<String, String>,
    pub type_: String,
    pub reason: String,
    pub message: String,
}

/// Builds the event as client-go's recorder does at instant `now`: name `GenerateEventName(ref.name, now)`,
/// namespace defaulted to `default` (the involved object keeps its own), count 1, first = last = now, and the
/// reporting fields copied from the source.
pub fn make_event(spec: EventSpec, source: &EventSource, now: Time, uuids: &mut UuidSource) -> Event {
    let name = generate_event_name(&spec.reference.name, now.unix_nanos(), || uuids.next_uuid());
    let namespace = if spec.reference.namespace.is_empty() {
        NAMESPACE_DEFAULT.to_owned()
    } else {
        spec.reference.namespace.clone()
    };
    Event {
        metadata: ObjectMeta { name, namespace, resource_version: String::new(), annotations: spec.annotations },
        involved_object: spec.reference,
        reason: spec.reason,
        message: spec.message,
        source: source.clone(),
        first_timestamp: Some(now),
        last_timestamp: Some(now),
        count: 1,
        type_: spec.type_,
        reporting_controller: source.component.clone(),
        reporting_instance: source.host.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_event_client_go_builds() {
        let spec = EventSpec {
            reference: ObjectReference { kind: "Pod".into(), name: "foo".into(), uid: "bar".into(), ..Default::default() },
            type_: "Normal".into(),
            reason: "Started".into(),
            message: "m".into(),
            ..Default::default()
        };
        let source = EventSource { component: "kubelet".into(), host: "node-1".into() };
        let now = Time(1_704_067_201_000_000_000);
        let ev = make_event(spec, &source, now, &mut UuidSource::Random);
        assert_eq!(ev.metadata.name, "foo.17a610173cffca00");
        assert_eq!(ev.metadata.namespace, "default");
        assert_eq!(ev.involved_object.namespace, "");
        assert_eq!((ev.count, ev.first_timestamp, ev.last_timestamp), (1, Some(now), Some(now)));
        assert_eq!((ev.reporting_controller.as_str(), ev.reporting_instance.as_str()), ("kubelet", "node-1"));
    }

    #[test]
    fn seeded_uuids_repeat() {
        let (mut a, mut b) = (UuidSource::seeded(7), UuidSource::seeded(7));
        let first = a.next_uuid();
        assert_eq!(first, b.next_uuid());
        assert_ne!(first, a.next_uuid());
        assert_eq!(uuid::Uuid::parse_str(&first).unwrap().get_version_num(), 4);
    }
}
