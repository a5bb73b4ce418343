//! The event a client-go recorder builds for one call (`recorderImpl.makeEvent`).

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use super::{Event, EventSource, ObjectReference};
use crate::names::{event_name_is_subdomain, push_go_hex};
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

/// Everything `makeEvent` needs besides the clock reading, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct EventInput<'a> {
    pub reference: &'a ObjectReference,
    pub annotations: Option<&'a BTreeMap<String, String>>,
    pub type_: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    pub source: &'a EventSource,
}

fn set(dst: &mut String, src: &str) {
    dst.clear();
    dst.push_str(src);
}

/// Builds the event as client-go's recorder does at instant `now`: name `GenerateEventName(ref.name, now)`,
/// namespace defaulted to `default` (the involved object keeps its own), count 1, first = last = now, and the
/// reporting fields copied from the source.
pub fn make_event(input: &EventInput<'_>, now: Time, uuids: &mut UuidSource) -> Event {
    let mut event = Event::default();
    make_event_into(&mut event, input, now, uuids);
    event
}

/// `make_event` into an existing event, reusing its allocations.
pub fn make_event_into(event: &mut Event, input: &EventInput<'_>, now: Time, uuids: &mut UuidSource) {
    event.involved_object.assign_from(input.reference);
    event.source.assign_from(input.source);
    make_event_around(event, input.annotations, input.type_, input.reason, input.message, now, uuids);
}

/// `make_event_into` for an event whose involved object and source already are the reference and the
/// source (a replay writes them there directly, saving a copy).
pub fn make_event_around(
    event: &mut Event,
    annotations: Option<&BTreeMap<String, String>>,
    type_: &str,
    reason: &str,
    message: &str,
    now: Time,
    uuids: &mut UuidSource,
) {
    let r = &event.involved_object;
    let name = &mut event.metadata.name;
    if event_name_is_subdomain(&r.name, now.unix_nanos()) {
        name.clear();
        // The name, a dot and up to 16 hex digits, in one allocation.
        name.reserve(r.name.len() + 17);
        name.push_str(&r.name);
        name.push('.');
        push_go_hex(name, now.unix_nanos());
    } else {
        *name = uuids.next_uuid();
    }
    set(&mut event.metadata.namespace, if r.namespace.is_empty() { NAMESPACE_DEFAULT } else { &r.namespace });
    event.metadata.resource_version.clear();
    // Clearing an empty map is not free, and most events have none.
    if !event.metadata.annotations.is_empty() {
        event.metadata.annotations.clear();
    }
    if let Some(a) = annotations {
        event.metadata.annotations.extend(a.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    event.api_version.clear();
    event.kind.clear();
    set(&mut event.reason, reason);
    set(&mut event.message, message);
    event.first_timestamp = Some(now);
    event.last_timestamp = Some(now);
    event.count = 1;
    set(&mut event.type_, type_);
    event.event_time = None;
    event.series = None;
    event.action.clear();
    event.related = None;
    set(&mut event.reporting_controller, &event.source.component);
    set(&mut event.reporting_instance, &event.source.host);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_event_client_go_builds() {
        let reference =
            ObjectReference { kind: "Pod".into(), name: "foo".into(), uid: "bar".into(), ..Default::default() };
        let source = EventSource { component: "kubelet".into(), host: "node-1".into() };
        let input = EventInput {
            reference: &reference,
            type_: "Normal",
            reason: "Started",
            message: "m",
            source: &source,
            annotations: None,
        };
        let now = Time(1_704_067_201_000_000_000);
        let ev = make_event(&input, now, &mut UuidSource::Random);
        assert_eq!(ev.metadata.name, "foo.17a610173cffca00");
        assert_eq!(ev.metadata.namespace, "default");
        assert_eq!(ev.involved_object.namespace, "");
        assert_eq!((ev.count, ev.first_timestamp, ev.last_timestamp), (1, Some(now), Some(now)));
        assert_eq!((ev.reporting_controller.as_str(), ev.reporting_instance.as_str()), ("kubelet", "node-1"));

        // Reusing an event leaves nothing of the previous one behind.
        let mut reused = Event { series: Some(Default::default()), action: "x".into(), count: 7, ..ev.clone() };
        reused.metadata.resource_version = "9".into();
        make_event_into(&mut reused, &input, now, &mut UuidSource::Random);
        assert_eq!(reused, ev);
        // A name that is not a DNS subdomain falls back to a UUID.
        let bad = ObjectReference { name: "Bad_Name".into(), ..reference.clone() };
        let ev = make_event(&EventInput { reference: &bad, ..input }, now, &mut UuidSource::seeded(1));
        assert!(uuid::Uuid::parse_str(&ev.metadata.name).is_ok());
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
