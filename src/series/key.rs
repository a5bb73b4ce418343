//! The isomorphic key: which events.k8s.io/v1 events are occurrences of one series (`tools/events` `getKey`).

use super::event::EventV1;
use crate::event::ObjectReference;

/// Type, action, reason, reporting controller and instance, the whole `regarding` reference (so a new
/// `resourceVersion` starts a new series) and `related` (empty when absent). The note is not part of it:
/// a series keeps its first note.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    pub type_: String,
    pub action: String,
    pub reason: String,
    pub reporting_controller: String,
    pub reporting_instance: String,
    pub regarding: ObjectReference,
    pub related: ObjectReference,
}

impl SeriesKey {
    pub fn of(e: &EventV1) -> Self {
        SeriesKey {
            type_: e.type_.clone(),
            action: e.action.clone(),
            reason: e.reason.clone(),
            reporting_controller: e.reporting_controller.clone(),
            reporting_instance: e.reporting_instance.clone(),
            regarding: e.regarding.clone(),
            related: e.related.clone().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let key = SeriesKey::of(&base);
        assert_eq!(SeriesKey::of(&EventV1 { note: "two".into(), ..base.clone() }), key);
        let mut rv = base.clone();
        rv.regarding.resource_version = "7".into();
        let mut related = base.clone();
        related.related = Some(ObjectReference { name: "n".into(), ..Default::default() });
        let empty_related = EventV1 { related: Some(ObjectReference::default()), ..base.clone() };
        assert_eq!(SeriesKey::of(&empty_related), key, "a nil related is the zero reference");
        for other in [
            EventV1 { type_: "Warning".into(), ..base.clone() },
            EventV1 { action: "b".into(), ..base.clone() },
            EventV1 { reason: "s".into(), ..base.clone() },
            EventV1 { reporting_controller: "d".into(), ..base.clone() },
            EventV1 { reporting_instance: "j".into(), ..base.clone() },
            rv,
            related,
        ] {
            assert_ne!(SeriesKey::of(&other), key, "{other:?}");
        }
    }
}
