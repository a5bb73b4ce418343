//! The cache keys of client-go's correlator (`getEventKey`, `getSpamKey`, `EventAggregatorByReasonFunc`).
//!
//! Fields are concatenated with no separator, exactly as client-go joins them with `""`: different splits
//! of the same characters collide there, and must collide here too.

use crate::error::Result;
use crate::event::Event;

/// The aggregation key function: (aggregate key, local key).
pub type AggregateKeyFn = dyn Fn(&Event) -> Result<(String, String)> + Send + Sync;
/// The message of an aggregate event.
pub type MessageFn = dyn Fn(&Event) -> Result<String> + Send + Sync;
/// The spam filter's bucket key.
pub type SpamKeyFn = dyn Fn(&Event) -> Result<String> + Send + Sync;

/// Prefix of `EventAggregatorByReasonMessageFunc`.
pub const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";

fn push(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
}

/// `getEventKey`: the key under which identical events are counted.
pub fn event_key_into(e: &Event, out: &mut Vec<u8>) {
    let o = &e.involved_object;
    out.clear();
    for part in [
        &e.source.component,
        &e.source.host,
        &o.kind,
        &o.namespace,
        &o.name,
        &o.field_path,
        &o.uid,
        &o.api_version,
        &e.type_,
        &e.reason,
        &e.message,
    ] {
        push(out, part);
    }
}

/// Keys are concatenations of `str`s, so they are UTF-8.
fn into_string(key: Vec<u8>) -> String {
    String::from_utf8(key).expect("concatenated strs")
}

pub fn event_key(e: &Event) -> String {
    let mut s = Vec::new();
    event_key_into(e, &mut s);
    into_string(s)
}

/// `getSpamKey`: one token bucket per source, object and type.
pub fn spam_key_into(e: &Event, out: &mut Vec<u8>) {
    let o = &e.involved_object;
    out.clear();
    for part in [&e.source.component, &e.source.host, &o.kind, &o.namespace, &o.name, &o.uid, &o.api_version, &e.type_]
    {
        push(out, part);
    }
}

pub fn spam_key(e: &Event) -> String {
    let mut s = Vec::new();
    spam_key_into(e, &mut s);
    into_string(s)
}

/// The aggregate key of `EventAggregatorByReasonFunc` (its local key is the message).
pub fn aggregate_key_into(e: &Event, out: &mut Vec<u8>) {
    let o = &e.involved_object;
    out.clear();
    for part in [
        &e.source.component,
        &e.source.host,
        &o.kind,
        &o.namespace,
        &o.name,
        &o.uid,
        &o.api_version,
        &e.type_,
        &e.reason,
        &e.reporting_controller,
        &e.reporting_instance,
    ] {
        push(out, part);
    }
}

/// The aggregate key (as `aggregate_key_into`) and the event key (as `event_key_into`) of `e` at once; returns
/// the length of the aggregate key's prefix that is the spam key (`getSpamKey` is the aggregate key without
/// its last three fields). The event key reuses the aggregate key's bytes for the fields they share.
pub fn default_keys_into(e: &Event, aggregate: &mut Vec<u8>, event: &mut Vec<u8>) -> usize {
    let o = &e.involved_object;
    aggregate.clear();
    for part in [&e.source.component, &e.source.host, &o.kind, &o.namespace, &o.name] {
        push(aggregate, part);
    }
    let object_end = aggregate.len();
    for part in [&o.uid, &o.api_version, &e.type_] {
        push(aggregate, part);
    }
    let spam_end = aggregate.len();
    for part in [&e.reason, &e.reporting_controller, &e.reporting_instance] {
        push(aggregate, part);
    }
    event.clear();
    event.extend_from_slice(&aggregate[..object_end]);
    push(event, &o.field_path);
    event.extend_from_slice(&aggregate[object_end..spam_end]);
    push(event, &e.reason);
    push(event, &e.message);
    spam_end
}

/// `EventAggregatorByReasonFunc`.
pub fn aggregate_by_reason(e: &Event) -> (String, String) {
    let mut s = Vec::new();
    aggregate_key_into(e, &mut s);
    (into_string(s), e.message.clone())
}

/// `EventAggregatorByReasonMessageFunc`.
pub fn aggregate_message(e: &Event) -> String {
    let mut s = String::with_capacity(AGGREGATE_MESSAGE_PREFIX.len() + e.message.len());
    s.push_str(AGGREGATE_MESSAGE_PREFIX);
    s.push_str(&e.message);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventSource, ObjectReference};

    fn ev(reason: &str, message: &str) -> Event {
        Event {
            involved_object: ObjectReference {
                kind: "Pod".into(),
                namespace: "other".into(),
                name: "pod1".into(),
                uid: "C934D34AFB20242".into(),
                api_version: "version".into(),
                field_path: "spec.containers{mycontainer}".into(),
                ..Default::default()
            },
            source: EventSource { component: "kubelet".into(), host: "kublet.node1".into() },
            type_: "Normal".into(),
            reason: reason.into(),
            message: message.into(),
            ..Default::default()
        }
    }

    // client-go's TestEventAggregatorByReasonFunc.
    #[test]
    fn aggregate_keys_group_by_reason() {
        let (a1, l1) = aggregate_by_reason(&ev("end-of-world", "it was fun"));
        let (a2, l2) = aggregate_by_reason(&ev("end-of-world", "it was awful"));
        let (a3, _) = aggregate_by_reason(&ev("nevermind", "it was a bug"));
        assert_eq!(a1, a2);
        assert_ne!(l1, l2);
        assert_ne!(a1, a3);
    }

    // client-go's TestEventAggregatorByReasonMessageFunc.
    #[test]
    fn aggregate_message_has_prefix() {
        assert!(aggregate_message(&ev("r", "m")).starts_with("(combined from similar events): "));
    }

    #[test]
    fn keys_have_exact_field_order_and_no_separator() {
        let e = ev("R", "M");
        assert_eq!(
            event_key(&e),
            "kubeletkublet.node1Podotherpod1spec.containers{mycontainer}C934D34AFB20242versionNormalRM"
        );
        assert_eq!(spam_key(&e), "kubeletkublet.node1Podotherpod1C934D34AFB20242versionNormal");
        let (a, _) = aggregate_by_reason(&e);
        assert_eq!(a, "kubeletkublet.node1Podotherpod1C934D34AFB20242versionNormalR");
        let mut r = e.clone();
        (r.reporting_controller, r.reporting_instance) = ("C".into(), "I".into());
        let (mut a2, mut k) = (Vec::new(), Vec::new());
        let spam_end = default_keys_into(&r, &mut a2, &mut k);
        assert_eq!(a2, format!("{a}CI").as_bytes());
        assert_eq!((k.as_slice(), &a2[..spam_end]), (event_key(&e).as_bytes(), spam_key(&e).as_bytes()));
        // "ab"+"" and "a"+"b" collide, as with strings.Join(..., "").
        let mut x = e.clone();
        x.source = EventSource { component: "ab".into(), host: String::new() };
        let mut y = e;
        y.source = EventSource { component: "a".into(), host: "b".into() };
        assert_eq!(spam_key(&x), spam_key(&y));
    }
}
