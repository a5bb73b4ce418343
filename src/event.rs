//! The core/v1 `Event` and its parts, with the Kubernetes JSON names.
//!
//! Serialization follows Go's `encoding/json` on the k8s.io/api structs: `omitempty` strings are left out
//! when empty, struct-valued fields (`metadata`, `source`, the timestamps) are always written, zero timestamps
//! are `null`, and `reportingComponent`/`reportingInstance` have no `omitempty`. On input every field but
//! `involvedObject` may be missing or `null`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Error, Result};
use crate::time::{self, Time};

mod make;

pub use make::{make_event, make_event_around, make_event_into, EventInput, UuidSource, NAMESPACE_DEFAULT};

/// The two event types the API server accepts (`util.ValidateEventType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "Normal" => Ok(EventType::Normal),
            "Warning" => Ok(EventType::Warning),
            other => Err(Error::value("type", format!("must be \"Normal\" or \"Warning\", got {other:?}"))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

fn null_as_default<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `v1.ObjectReference`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

fn assign(dst: &mut String, src: &str) {
    dst.clear();
    dst.push_str(src);
}

impl ObjectReference {
    /// klog's `KRef`: "namespace/name", or just the name without a namespace.
    pub fn kref(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }

    /// Copies `src` into `self`, reusing the string buffers (derived `clone_from` reallocates).
    pub fn assign_from(&mut self, src: &ObjectReference) {
        assign(&mut self.kind, &src.kind);
        assign(&mut self.namespace, &src.namespace);
        assign(&mut self.name, &src.name);
        assign(&mut self.uid, &src.uid);
        assign(&mut self.api_version, &src.api_version);
        assign(&mut self.resource_version, &src.resource_version);
        assign(&mut self.field_path, &src.field_path);
    }
}

/// What client-go's `UpdateState` keeps of a sink's answer, as text: `metadata`'s name and resourceVersion
/// (None without `metadata`), `count` and `firstTimestamp` (empty when absent).
pub struct AnswerState<'a> {
    pub meta: Option<(&'a str, &'a str)>,
    pub count: i32,
    pub first_timestamp: &'a str,
}

impl Event {
    /// Takes `answer`'s state into the event, its strings into the event's own buffers; on an error the event
    /// stays as it was. A first timestamp written back as it was sent (the common answer) is not parsed again.
    pub fn take_state(&mut self, answer: &AnswerState<'_>) -> Result<()> {
        let first = answer.first_timestamp;
        let as_sent =
            self.first_timestamp.filter(|t| t.rfc3339_bytes() == first.as_bytes()).and_then(Time::whole_seconds);
        self.first_timestamp = match as_sent {
            _ if first.is_empty() => None,
            Some(t) => Some(t),
            None => Some(Time::parse_rfc3339(first).map_err(|e| Error::value("event.firstTimestamp", e.to_string()))?),
        };
        if let Some((name, resource_version)) = answer.meta {
            assign(&mut self.metadata.name, name);
            assign(&mut self.metadata.resource_version, resource_version);
        }
        self.count = answer.count;
        Ok(())
    }
}

impl EventSource {
    /// Copies `src` into `self`, reusing the string buffers.
    pub fn assign_from(&mut self, src: &EventSource) {
        assign(&mut self.component, &src.component);
        assign(&mut self.host, &src.host);
    }
}

/// The part of `metav1.ObjectMeta` that events use. Other metadata a server returns is ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `v1.EventSource`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EventSource {
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub component: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub host: String,
}

/// `v1.EventSeries`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventSeries {
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "is_zero")]
    pub count: i32,
    #[serde(default, with = "time::rfc3339_micro")]
    pub last_observed_time: Option<Time>,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// `v1.Event` (core/v1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    pub involved_object: ObjectReference,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub source: EventSource,
    #[serde(default, with = "time::rfc3339")]
    pub first_timestamp: Option<Time>,
    #[serde(default, with = "time::rfc3339")]
    pub last_timestamp: Option<Time>,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "is_zero")]
    pub count: i32,
    #[serde(rename = "type", default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(default, with = "time::rfc3339_micro")]
    pub event_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<EventSeries>,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related: Option<ObjectReference>,
    /// Go's `ReportingController`, which core/v1 spells `reportingComponent` on the wire.
    #[serde(rename = "reportingComponent", default, deserialize_with = "null_as_default")]
    pub reporting_controller: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub reporting_instance: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_state_keeps_what_update_state_keeps() {
        let mut e = sample();
        let sent = e.first_timestamp;
        let answer = AnswerState { meta: Some(("n.1", "42")), count: 3, first_timestamp: "2024-01-01T00:00:01Z" };
        e.take_state(&answer).unwrap();
        assert_eq!((e.metadata.name.as_str(), e.metadata.resource_version.as_str(), e.count), ("n.1", "42", 3));
        assert_eq!(e.first_timestamp, sent);
        let other = AnswerState { meta: None, count: 4, first_timestamp: "2024-01-02T00:00:00Z" };
        e.take_state(&other).unwrap();
        assert_eq!(e.first_timestamp, Some(Time(1_704_153_600_000_000_000)));
        assert_eq!((e.metadata.name.as_str(), e.count), ("n.1", 4), "no metadata: the name stays");
        let bad = AnswerState { meta: Some(("x", "")), count: 9, first_timestamp: "yesterday" };
        assert!(e.take_state(&bad).unwrap_err().to_string().starts_with("event.firstTimestamp: "));
        assert_eq!((e.metadata.name.as_str(), e.count), ("n.1", 4), "an error changes nothing");
        e.take_state(&AnswerState { meta: None, count: 0, first_timestamp: "" }).unwrap();
        assert_eq!(e.first_timestamp, None);
    }

    fn sample() -> Event {
        Event {
            metadata: ObjectMeta { name: "foo.17a610173cffca00".into(), namespace: "baz".into(), ..Default::default() },
            involved_object: ObjectReference {
                kind: "Pod".into(),
                namespace: "baz".into(),
                name: "foo".into(),
                uid: "bar".into(),
                api_version: "v1".into(),
                field_path: "spec.containers[2]".into(),
                ..Default::default()
            },
            reason: "Started".into(),
            message: "héllo ✓".into(),
            source: EventSource { component: "eventTest".into(), host: String::new() },
            first_timestamp: Some(Time(1_704_067_201_000_000_000)),
            last_timestamp: Some(Time(1_704_067_201_000_000_000)),
            count: 1,
            type_: "Normal".into(),
            reporting_controller: "eventTest".into(),
            ..Default::default()
        }
    }

    #[test]
    fn serializes_like_go() {
        let json = serde_json::to_string(&sample()).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"metadata":{"name":"foo.17a610173cffca00","namespace":"baz"},"#,
                r#""involvedObject":{"kind":"Pod","namespace":"baz","name":"foo","uid":"bar","apiVersion":"v1","fieldPath":"spec.containers[2]"},"#,
                r#""reason":"Started","message":"héllo ✓","source":{"component":"eventTest"},"#,
                r#""firstTimestamp":"2024-01-01T00:00:01Z","lastTimestamp":"2024-01-01T00:00:01Z","count":1,"type":"Normal","#,
                r#""eventTime":null,"reportingComponent":"eventTest","reportingInstance":""}"#
            )
        );
    }

    #[test]
    fn round_trips() {
        let mut ev = sample();
        ev.series = Some(EventSeries { count: 2, last_observed_time: Some(Time(1_704_067_201_123_456_000)) });
        ev.event_time = Some(Time(1_704_067_201_000_001_000));
        ev.metadata.annotations.insert("a".into(), "b".into());
        let back: Event = serde_json::from_str(&serde_json::to_string(&ev).unwrap()).unwrap();
        assert_eq!(back, ev);
    }

    #[test]
    fn accepts_nulls_and_requires_involved_object() {
        let ev: Event =
            serde_json::from_str(r#"{"involvedObject":{"name":"x","fieldPath":null},"count":null,"source":null}"#)
                .unwrap();
        assert_eq!(ev.involved_object.name, "x");
        assert_eq!(ev.count, 0);
        let err = serde_json::from_str::<Event>(r#"{"reason":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("involvedObject"), "{err}");
    }

    #[test]
    fn event_types() {
        assert_eq!(EventType::parse("Normal").unwrap(), EventType::Normal);
        assert_eq!(EventType::parse("Warning").unwrap().as_str(), "Warning");
        let e = EventType::parse("normal").unwrap_err().to_string();
        assert!(e.contains("Normal") && e.contains("\"normal\""), "{e}");
    }
}
