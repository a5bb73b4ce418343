//! The isomorphic key: which events.k8s.io/v1 events are occurrences of one series (`tools/events` `getKey`).
//!
//! Type, action, reason, reporting controller and instance, the whole `regarding` reference (so a new
//! `resourceVersion` starts a new series) and `related` (the zero reference when absent). The note is not
//! part of it: a series keeps its first note.

use super::event::EventV1;
use crate::event::ObjectReference;

fn push_field(out: &mut Vec<u8>, s: &str) {
    // Length-prefixed, so that no two field lists give the same bytes.
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn push_reference(out: &mut Vec<u8>, r: &ObjectReference) {
    for s in [&r.kind, &r.namespace, &r.name, &r.uid, &r.api_version, &r.resource_version, &r.field_path] {
        push_field(out, s);
    }
}

/// Writes the key of `e` into `out` (cleared first) as bytes: equal bytes, equal keys.
pub fn write_key(e: &EventV1, out: &mut Vec<u8>) {
    out.clear();
    for s in [&e.type_, &e.action, &e.reason, &e.reporting_controller, &e.reporting_instance] {
        push_field(out, s);
    }
    push_reference(out, &e.regarding);
    push_reference(out, e.related.as_ref().unwrap_or(&ObjectReference::default()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(e: &EventV1) -> Vec<u8> {
        let mut out = vec![1, 2, 3];
        write_key(e, &mut out);
        out
    }

    #[test]
    fn note_is_ignored_and_everything_else_counts() {
        let base = EventV1 {
            type_: "Normal".into(),
            action: "a".into(),
            reason: "r".into(),
            reporting_controller: "c".into(),
            reporting_instance: "i".into(),
            regarding: ObjectReference { kind: "Pod".into(), name: "p".into(), ..Default::default() },
            note: "one".into(),
            ..Default::default()
        };
        let k = key(&base);
        assert_eq!(key(&EventV1 { note: "two".into(), ..base.clone() }), k);
        let empty_related = EventV1 { related: Some(ObjectReference::default()), ..base.clone() };
        assert_eq!(key(&empty_related), k, "a nil related is the zero reference");
        let mut rv = base.clone();
        rv.regarding.resource_version = "7".into();
        let mut related = base.clone();
        related.related = Some(ObjectReference { name: "n".into(), ..Default::default() });
        // Moving text from one field to the next changes the key.
        let shifted = EventV1 { action: "ar".into(), reason: String::new(), ..base.clone() };
        for other in [
            EventV1 { type_: "Warning".into(), ..base.clone() },
            EventV1 { action: "b".into(), ..base.clone() },
            EventV1 { reason: "s".into(), ..base.clone() },
            EventV1 { reporting_controller: "d".into(), ..base.clone() },
            EventV1 { reporting_instance: "j".into(), ..base.clone() },
            rv,
            related,
            shifted,
        ] {
            assert_ne!(key(&other), k, "{other:?}");
        }
    }
}
