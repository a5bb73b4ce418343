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

/// `getEventKey`: the key under which identical events are counted.
pub fn event_key_into(e: &Event, out: &mut String) {
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
        out.push_str(part);
    }
}

pub fn event_key(e: &Event) -> String {
    let mut s = String::new();
    event_key_into(e, &mut s);
    s
}

/// `getSpamKey`: one token bucket per source, object and type.
pub fn spam_key_into(e: &Event, out: &mut String) {
    let o = &e.involved_object;
    out.clear();
    for part in [&e.source.component, &e.source.host, &o.kind, &o.namespace, &o.name, &o.uid, &o.api_version, &e.type_]
    {
        out.push_str(part);
    }
}

pub fn spam_key(e: &Event) -> String {
    let mut s = String::new();
    spam_key_into(e, &mut s);
    s
}

/// The aggregate key of `EventAggregatorByReasonFunc` (its local key is the message).
pub fn aggregate_key_into(e: &Event, out: &mut String) {
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
        out.push_str(part);
    }
}

/// `EventAggregatorByReasonFunc`.
pub fn aggregate_by_reason(e: &Event) -> (String, String) {
    let mut s = String::new();
    aggregate_key_into(e, &mut s);
    (s, e.message.clone())
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
        assert_eq!(event_key(&e), "kubeletkublet.node1Podotherpod1spec.containers{mycontainer}C934D34AFB20242versionNormalRM");
        assert_eq!(spam_key(&e), "kubeletkublet.node1Podotherpod1C934D34AFB20242versionNormal");
        let mut a = String::new();
        aggregate_key_into(&e, &mut a);
        assert_eq!(a, "kubeletkublet.node1Podotherpod1C934D34AFB20242versionNormalR");
        // "ab"+"" and "a"+"b" collide, as with strings.Join(..., "").
        let mut x = e.clone();
        x.source = EventSource { component: "ab".into(), host: String::new() };
        let mut y = e;
        y.source = EventSource { component: "a".into(), host: "b".into() };
        assert_eq!(spam_key(&x), spam_key(&y));
    }
}
