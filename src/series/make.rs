//! The event an events.k8s.io/v1 recorder builds for one call (`tools/events` `recorderImpl.makeEvent`),
//! and the note limit kubevents applies on top.

use std::collections::BTreeMap;

use super::event::EventV1;
use crate::event::{ObjectMeta, ObjectReference};
use crate::event::{UuidSource, NAMESPACE_DEFAULT};
use crate::names::generate_event_name;
use crate::time::Time;

/// The API server's limit on `note`, in bytes (`NoteLengthLimit`).
pub const NOTE_LENGTH_LIMIT: usize = 1024;

/// What kube-scheduler appends to a note it cut.
const TRUNCATION_SUFFIX: &str = " ...";

/// One recorder call's arguments, checked: what `makeEvent` needs besides the reporting controller and
/// instance and the clock reading. Owned, so that the event takes its strings over rather than copying them.
#[derive(Clone, Debug, Default)]
pub struct EventV1Call {
    pub regarding: ObjectReference,
    pub related: Option<ObjectReference>,
    pub annotations: Option<BTreeMap<String, String>>,
    pub type_: String,
    pub reason: String,
    pub action: String,
    pub note: String,
}

/// Cuts a note longer than the server's limit to at most `NOTE_LENGTH_LIMIT` bytes: the longest prefix that
/// ends on a UTF-8 boundary and leaves room for `" ..."`, then the suffix. `None` when it fits.
///
/// client-go sends long notes as they are and the server rejects the event; kube-scheduler cuts its own
/// messages this way (but by bytes, which can split a character).
pub fn truncate_note(note: &str) -> Option<String> {
    if note.len() <= NOTE_LENGTH_LIMIT {
        return None;
    }
    let mut end = NOTE_LENGTH_LIMIT - TRUNCATION_SUFFIX.len();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + TRUNCATION_SUFFIX.len());
    out.push_str(&note[..end]);
    out.push_str(TRUNCATION_SUFFIX);
    Some(out)
}

/// Builds the event of `call` as client-go does at instant `now`: name `GenerateEventName(regarding.name,
/// now)`, namespace that of `regarding` or `default`, `eventTime` = `now`, no series. Unlike client-go (which
/// takes `eventTime` from the wall clock and the name from its clock) both come from the one reading. The
/// second value tells whether the note was cut to the server's limit.
pub fn make_event_v1(
    call: EventV1Call,
    reporting_controller: &str,
    reporting_instance: &str,
    now: Time,
    uuids: &mut UuidSource,
) -> (EventV1, bool) {
    let r = call.regarding;
    let (note, truncated) = match truncate_note(&call.note) {
        Some(cut) => (cut, true),
        None => (call.note, false),
    };
    let event = EventV1 {
        metadata: ObjectMeta {
            name: generate_event_name(&r.name, now.unix_nanos(), || uuids.next_uuid()),
            namespace: if r.namespace.is_empty() { NAMESPACE_DEFAULT.to_owned() } else { r.namespace.clone() },
            annotations: call.annotations.unwrap_or_default(),
            ..Default::default()
        },
        event_time: Some(now),
        reporting_controller: reporting_controller.to_owned(),
        reporting_instance: reporting_instance.to_owned(),
        action: call.action,
        reason: call.reason,
        regarding: r,
        related: call.related,
        note,
        type_: call.type_,
        ..Default::default()
    };
    (event, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::is_dns1123_subdomain;

    fn pod() -> ObjectReference {
        ObjectReference {
            kind: "Pod".into(),
            namespace: "ns1".into(),
            name: "pod1".into(),
            uid: "12345".into(),
            api_version: "v1".into(),
            ..Default::default()
        }
    }

    fn call(regarding: &ObjectReference, note: &str) -> EventV1Call {
        EventV1Call {
            regarding: regarding.clone(),
            type_: "Normal".into(),
            reason: "Started".into(),
            action: "starting".into(),
            note: note.into(),
            ..Default::default()
        }
    }

    fn make(call: EventV1Call, now: Time, uuids: &mut UuidSource) -> (EventV1, bool) {
        make_event_v1(call, "c1", "i1", now, uuids)
    }

    // tools/events TestEventf, at FakeClock 2023-01-01T12:00:00Z.
    #[test]
    fn builds_the_event_client_go_builds() {
        let now = Time::from_civil(2023, 1, 1, 12, 0, 0, 0).unwrap();
        let regarding = pod();
        let (ev, cut) = make(call(&regarding, "Pod started"), now, &mut UuidSource::Random);
        assert!(!cut);
        assert_eq!(ev.metadata.name, "pod1.17362d8e1c698000");
        assert_eq!(ev.metadata.namespace, "ns1");
        assert_eq!(ev.regarding, regarding);
        assert_eq!((ev.type_.as_str(), ev.reason.as_str(), ev.action.as_str()), ("Normal", "Started", "starting"));
        assert_eq!((ev.reporting_controller.as_str(), ev.reporting_instance.as_str()), ("c1", "i1"));
        assert_eq!((ev.event_time, ev.series.as_ref(), ev.note.as_str()), (Some(now), None, "Pod started"));

        let node = ObjectReference {
            kind: "Node".into(),
            name: "node1".into(),
            uid: "67890".into(),
            api_version: "v1".into(),
            ..Default::default()
        };
        let note = "Pod failed to schedule on node1: not enough resources";
        let with_related =
            EventV1Call { related: Some(node.clone()), type_: "Warning".into(), ..call(&regarding, note) };
        let (ev, _) = make(with_related, now, &mut UuidSource::Random);
        assert_eq!(ev.related.as_ref(), Some(&node));
        assert_eq!(ev.note, note);

        // A cluster-scoped object: namespace "default"; a name that is not a DNS subdomain: a UUID.
        let ip = ObjectReference {
            kind: "IPAddress".into(),
            name: "2001:db8::123".into(),
            api_version: "networking.k8s.io/v1".into(),
            ..Default::default()
        };
        let (ev, _) = make(call(&ip, "n"), now, &mut UuidSource::seeded(1));
        assert_eq!(ev.metadata.namespace, "default");
        assert!(uuid::Uuid::parse_str(&ev.metadata.name).is_ok(), "{}", ev.metadata.name);
        let long = ObjectReference { name: "x".repeat(253 * 4), ..pod() };
        let (ev, _) = make(call(&long, "n"), now, &mut UuidSource::seeded(1));
        assert!(is_dns1123_subdomain(&ev.metadata.name));
        assert_eq!(ev.metadata.namespace, "ns1");
    }

    #[test]
    fn notes_are_cut_at_a_character_boundary() {
        assert_eq!(truncate_note(&"a".repeat(1024)), None);
        let cut = truncate_note(&"a".repeat(1025)).unwrap();
        assert_eq!(cut.len(), 1024);
        assert!(cut.ends_with("a ..."));
        // "é" is two bytes, "✓" three, "🚀" four: every offset of the limit lands somewhere inside one.
        for (ch, width) in [("é", 2), ("✓", 3), ("🚀", 4)] {
            for pad in 0..width {
                let note = format!("{}{}", "a".repeat(pad), ch.repeat(2000));
                let cut = truncate_note(&note).unwrap();
                assert!(cut.len() <= NOTE_LENGTH_LIMIT && cut.len() > NOTE_LENGTH_LIMIT - 4 - width, "{}", cut.len());
                let body = cut.strip_suffix(" ...").unwrap();
                assert!(note.starts_with(body));
                assert_eq!(body.trim_start_matches('a').len() % width, 0);
            }
        }
        let regarding = pod();
        let long = "✓".repeat(400);
        let (ev, cut) = make(call(&regarding, &long), Time(1), &mut UuidSource::Random);
        assert!(cut);
        assert_eq!(ev.note, format!("{} ...", "✓".repeat(340)));
    }
}
