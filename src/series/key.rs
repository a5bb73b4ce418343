//! The isomorphic key: which events.k8s.io/v1 events are occurrences of one series (`tools/events` `getKey`).

use std::hash::{Hash, Hasher};

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
    /// Whether `e` has this key, without building its key.
    pub fn matches(&self, e: &EventV1) -> bool {
        self.type_ == e.type_
            && self.action == e.action
            && self.reason == e.reason
            && self.reporting_controller == e.reporting_controller
            && self.reporting_instance == e.reporting_instance
            && self.regarding == e.regarding
            && match &e.related {
                Some(r) => &self.related == r,
                None => self.related == ObjectReference::default(),
            }
    }

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

/// The key of an event, borrowed, for hashing: hashes as the `SeriesKey` of the event would.
pub struct KeyView<'a>(pub &'a EventV1);

impl Hash for KeyView<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let e = self.0;
        e.type_.hash(state);
        e.action.hash(state);
        e.reason.hash(state);
        e.reporting_controller.hash(state);
        e.reporting_instance.hash(state);
        e.regarding.hash(state);
        match &e.related {
            Some(r) => r.hash(state),
            None => ObjectReference::default().hash(state),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

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
        let hash = |e: &EventV1| foldhash::fast::FixedState::with_seed(7).hash_one(KeyView(e));
        let same = EventV1 { note: "two".into(), ..base.clone() };
        assert_eq!(SeriesKey::of(&same), key);
        assert!(key.matches(&same) && hash(&same) == hash(&base));
        let mut rv = base.clone();
        rv.regarding.resource_version = "7".into();
        let mut related = base.clone();
        related.related = Some(ObjectReference { name: "n".into(), ..Default::default() });
        let empty_related = EventV1 { related: Some(ObjectReference::default()), ..base.clone() };
        assert_eq!(SeriesKey::of(&empty_related), key, "a nil related is the zero reference");
        assert!(key.matches(&empty_related) && hash(&empty_related) == hash(&base));
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
            assert!(!key.matches(&other), "{other:?}");
        }
    }
}
