//! The events.k8s.io/v1 `Event`, with the Kubernetes JSON names.
//!
//! Serialization follows Go's `encoding/json` on `k8s.io/api/events/v1.Event`: `metadata`, `eventTime` and
//! `regarding` are always written (a zero `eventTime` as `null`), the other strings, `series` and `related`
//! are left out when empty. The `deprecated*` fields (written by the API server when it converts a core/v1
//! event) are read and written back, and left out when empty.

use serde::{Deserialize, Deserializer, Serialize};

use crate::event::{EventSeries, EventSource, ObjectMeta, ObjectReference};
use crate::time::{self, Time};

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

fn source_is_empty(s: &EventSource) -> bool {
    s.component.is_empty() && s.host.is_empty()
}

/// `events.k8s.io/v1.Event`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventV1 {
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// `metav1.MicroTime`: RFC 3339 with microseconds.
    #[serde(default, with = "time::rfc3339_micro")]
    pub event_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<EventSeries>,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub reporting_controller: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub reporting_instance: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub action: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub regarding: ObjectReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related: Option<ObjectReference>,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub note: String,
    #[serde(rename = "type", default, deserialize_with = "null_as_default", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "source_is_empty")]
    pub deprecated_source: EventSource,
    #[serde(default, with = "time::rfc3339", skip_serializing_if = "Option::is_none")]
    pub deprecated_first_timestamp: Option<Time>,
    #[serde(default, with = "time::rfc3339", skip_serializing_if = "Option::is_none")]
    pub deprecated_last_timestamp: Option<Time>,
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "is_zero")]
    pub deprecated_count: i32,
}

impl EventV1 {
    /// The event as JSON bytes (serializing these plain structs cannot fail).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> EventV1 {
        EventV1 {
            metadata: ObjectMeta { name: "foo.17a610173cffca00".into(), namespace: "baz".into(), ..Default::default() },
            event_time: Some(Time(1_704_067_201_123_456_789)),
            reporting_controller: "c1".into(),
            reporting_instance: "i1".into(),
            action: "starting".into(),
            reason: "Started".into(),
            regarding: ObjectReference {
                kind: "Pod".into(),
                namespace: "baz".into(),
                name: "foo".into(),
                uid: "bar".into(),
                api_version: "v1".into(),
                ..Default::default()
            },
            note: "héllo".into(),
            type_: "Normal".into(),
            ..Default::default()
        }
    }

    #[test]
    fn serializes_like_go() {
        assert_eq!(
            sample().to_json(),
            concat!(
                r#"{"metadata":{"name":"foo.17a610173cffca00","namespace":"baz"},"eventTime":"2024-01-01T00:00:01.123456Z","#,
                r#""reportingController":"c1","reportingInstance":"i1","action":"starting","reason":"Started","#,
                r#""regarding":{"kind":"Pod","namespace":"baz","name":"foo","uid":"bar","apiVersion":"v1"},"#,
                r#""note":"héllo","type":"Normal"}"#
            )
        );
    }

    #[test]
    fn round_trips_and_accepts_server_fields() {
        let mut ev = sample();
        ev.event_time = Some(Time(1_704_067_201_123_456_000));
        ev.series = Some(EventSeries { count: 3, last_observed_time: Some(Time(1_704_067_202_000_001_000)) });
        ev.related = Some(ObjectReference { kind: "Node".into(), name: "n1".into(), ..Default::default() });
        ev.deprecated_source = EventSource { component: "kubelet".into(), host: String::new() };
        ev.deprecated_count = 2;
        ev.deprecated_first_timestamp = Some(Time(1_704_067_201_000_000_000));
        let back: EventV1 = serde_json::from_str(&ev.to_json()).unwrap();
        assert_eq!(back, ev);
        let minimal: EventV1 = serde_json::from_str(r#"{"regarding":null,"eventTime":null,"note":null}"#).unwrap();
        assert_eq!(minimal, EventV1::default());
    }
}
