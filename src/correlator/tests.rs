//! Ports of client-go's `events_cache_test.go` (TestEventCorrelator, TestEventSpamFilter) and checks of
//! the count/patch and aggregation rules.

use std::sync::Arc;

use super::*;
use crate::clock::{FakeClock, IntervalClock};
use crate::event::{EventSource, ObjectReference};
use crate::time::Time;

const S: i64 = 1_000_000_000;
const START: Time = Time(1_700_000_000 * S);

fn object_ref(kind: &str, name: &str, namespace: &str) -> ObjectReference {
    ObjectReference {
        kind: kind.into(),
        name: name.into(),
        namespace: namespace.into(),
        uid: "C934D34AFB20242".into(),
        api_version: "version".into(),
        field_path: "spec.containers{mycontainer}".into(),
        ..Default::default()
    }
}

fn make_event(reason: &str, message: &str, involved: ObjectReference) -> Event {
    Event {
        reason: reason.into(),
        message: message.into(),
        involved_object: involved,
        source: EventSource { component: "kubelet".into(), host: "kublet.node1".into() },
        count: 1,
        type_: "Normal".into(),
        ..Default::default()
    }
}

fn with_count(mut e: Event, count: i32) -> Event {
    e.count = count;
    e
}

fn unique_events(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            make_event(
                &format!("reason-{i}"),
                &format!("message-{i}"),
                object_ref("Pod", &format!("pod-{i}"), &format!("ns-{i}")),
            )
        })
        .collect()
}

fn similar_events(n: usize, e: &Event, prefix: &str) -> Vec<Event> {
    (0..n).map(|i| with_count_msg(e.clone(), format!("{prefix}-{i}-{}", e.message))).collect()
}

fn with_count_msg(mut e: Event, message: String) -> Event {
    e.message = message;
    e
}

/// client-go's `validateEvent`.
fn validate_event(scenario: &str, actual: &Event, expected: &Event) {
    let first = actual.first_timestamp.expect("firstTimestamp set");
    let last = actual.last_timestamp.expect("lastTimestamp set");
    if first == last {
        assert!(expected.count <= 1, "{scenario}: first == last but compression expected");
    } else {
        assert!(expected.count != 1, "{scenario}: first != last for a single occurrence");
    }
    assert!(actual.metadata.name.starts_with(&expected.metadata.name), "{scenario}: name {}", actual.metadata.name);
    let mut a = actual.clone();
    a.first_timestamp = expected.first_timestamp;
    a.last_timestamp = expected.last_timestamp;
    a.reporting_controller = expected.reporting_controller.clone();
    a.metadata.name = expected.metadata.name.clone();
    assert_eq!(&a, expected, "{scenario}");
}

fn correlator(clock: Arc<dyn Clock>, options: CorrelatorOptions, funcs: KeyFuncs) -> EventCorrelator {
    EventCorrelator::new(options, clock, funcs).unwrap()
}

#[test]
fn event_correlator_scenarios() {
    let first = make_event("first", "i am first", object_ref("Pod", "my-pod", "my-ns"));
    let duplicate = make_event("duplicate", "me again", object_ref("Pod", "my-pod", "my-ns"));
    let unique = make_event("unique", "snowflake", object_ref("Pod", "my-pod", "my-ns"));
    let mut similar = make_event("similar", "similar message", object_ref("Pod", "my-pod", "my-ns"));
    similar.involved_object.field_path = "spec.containers{container1}".into();
    let aggregate = make_event("similar", &keys::aggregate_message(&similar), similar.involved_object.clone());
    let mut other_container = similar.clone();
    other_container.involved_object.field_path = "spec.containers{container2}".into();

    struct Case {
        name: &'static str,
        previous: Vec<Event>,
        new: Event,
        expected: Option<Event>,
        interval: i64,
    }
    let cases = vec![
        Case {
            name: "create-a-single-event",
            previous: vec![],
            new: first.clone(),
            expected: Some(with_count(first, 1)),
            interval: 5,
        },
        Case {
            name: "the-same-event-should-just-count",
            previous: vec![duplicate.clone()],
            new: duplicate.clone(),
            expected: Some(with_count(duplicate.clone(), 2)),
            interval: 5,
        },
        Case {
            name: "the-same-event-should-just-count-even-if-more-than-aggregate",
            previous: vec![duplicate.clone(); 10],
            new: duplicate.clone(),
            expected: Some(with_count(duplicate.clone(), 11)),
            interval: 30,
        },
        Case {
            name: "the-same-event-is-spam-if-happens-too-frequently",
            previous: vec![duplicate.clone(); 26],
            new: duplicate.clone(),
            expected: None,
            interval: 1,
        },
        Case {
            name: "create-many-unique-events",
            previous: unique_events(30),
            new: unique.clone(),
            expected: Some(with_count(unique, 1)),
            interval: 5,
        },
        Case {
            name: "similar-events-should-aggregate-event",
            previous: similar_events(9, &similar, &similar.message),
            new: similar.clone(),
            expected: Some(with_count(aggregate.clone(), 1)),
            interval: 5,
        },
        Case {
            name: "similar-events-many-times-should-count-the-aggregate",
            previous: similar_events(10, &similar, &similar.message),
            new: similar.clone(),
            expected: Some(with_count(aggregate, 2)),
            interval: 5,
        },
        Case {
            name: "events-from-different-containers-do-not-aggregate",
            previous: vec![other_container],
            new: similar.clone(),
            expected: Some(with_count(similar.clone(), 1)),
            interval: 5,
        },
        Case {
            name: "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate",
            previous: similar_events(9, &similar, &similar.message),
            new: similar.clone(),
            expected: Some(with_count(similar, 1)),
            interval: 600,
        },
    ];

    for case in cases {
        let clock = Arc::new(IntervalClock::new(START, case.interval * S));
        let mut c = correlator(clock.clone(), CorrelatorOptions::default(), KeyFuncs::default());
        for mut e in case.previous {
            let now = clock.now().unwrap();
            e.first_timestamp = Some(now);
            e.last_timestamp = Some(now);
            let r = c.correlate(e).unwrap();
            if !r.skip {
                c.update_state(r.event.as_ref().unwrap());
            }
        }
        let mut e = case.new;
        let now = clock.now().unwrap();
        e.first_timestamp = Some(now);
        e.last_timestamp = Some(now);
        let r = c.correlate(e).unwrap();
        match case.expected {
            None => assert!(r.skip, "{}: expected a skip", case.name),
            Some(expected) => {
                assert!(!r.skip, "{}: unexpected skip", case.name);
                validate_event(case.name, r.event.as_ref().unwrap(), &expected);
            }
        }
    }
}

#[test]
fn event_spam_filter() {
    let object_and_reason: fn(&Event) -> crate::error::Result<String> = |e| {
        let o = &e.involved_object;
        Ok([&e.source.component, &e.source.host, &o.kind, &o.namespace, &o.name, &o.uid, &o.api_version, &e.reason]
            .into_iter()
            .map(String::as_str)
            .collect())
    };
    let original = make_event("original", "i am first", object_ref("Pod", "my-pod", "my-ns"));
    let different_reason = make_event("duplicate", "me again", object_ref("Pod", "my-pod", "my-ns"));
    let spam = make_event("original", "me again", object_ref("Pod", "my-pod", "my-ns"));
    let cases: Vec<(&str, Event, bool, bool)> = vec![
        ("default key: same object is spam", different_reason.clone(), true, false),
        ("reason key: different reason is not spam", different_reason.clone(), false, true),
        ("reason key: same reason, other message is spam", spam, true, true),
    ];
    for (name, new, expect_skip, custom) in cases {
        let clock = Arc::new(IntervalClock::new(START, S));
        let funcs =
            KeyFuncs { spam: custom.then(|| Box::new(object_and_reason) as Box<SpamKeyFn>), ..Default::default() };
        let mut c = correlator(clock, CorrelatorOptions { burst: 1, ..Default::default() }, funcs);
        let r = c.correlate(original.clone()).unwrap();
        if !r.skip {
            c.update_state(r.event.as_ref().unwrap());
        }
        let r = c.correlate(new.clone()).unwrap();
        assert_eq!(r.skip, expect_skip, "{name}");
        if !expect_skip {
            let got = r.event.unwrap();
            assert_eq!(got.count, 1, "{name}");
            assert_eq!((got.reason.as_str(), got.message.as_str()), ("duplicate", "me again"), "{name}");
        }
    }
}

fn pod_event(t: Time, message: &str) -> Event {
    let mut e = make_event("BackOff", message, object_ref("Pod", "p", "ns"));
    e.metadata.name = format!("p.{:x}", t.0);
    e.metadata.namespace = "ns".into();
    e.first_timestamp = Some(t);
    e.last_timestamp = Some(t);
    e
}

#[test]
fn repeats_take_the_first_name_and_patch_count_time_and_message() {
    let clock = Arc::new(FakeClock::new(START));
    let mut c = correlator(clock.clone(), CorrelatorOptions::default(), KeyFuncs::default());
    let r1 = c.correlate(pod_event(START, "m")).unwrap();
    assert_eq!(r1.patch, None);
    let mut answer = r1.event.clone().unwrap();
    answer.metadata.resource_version = "100".into();
    c.update_state(&answer);

    let t2 = Time(START.0 + S);
    clock.set(t2);
    let r2 = c.correlate(pod_event(t2, "m")).unwrap();
    let ev = r2.event.unwrap();
    assert_eq!(ev.metadata.name, r1.event.unwrap().metadata.name);
    assert_eq!(ev.metadata.resource_version, "100");
    assert_eq!((ev.count, ev.first_timestamp, ev.last_timestamp), (2, Some(START), Some(t2)));
    assert_eq!(
        String::from_utf8(r2.patch.unwrap()).unwrap(),
        r#"{"count":2,"lastTimestamp":"2023-11-14T22:13:21Z","message":"m"}"#
    );
}

#[test]
fn a_zero_count_event_never_counts_as_a_repeat() {
    let clock = Arc::new(FakeClock::new(START));
    let mut c = correlator(clock, CorrelatorOptions::default(), KeyFuncs::default());
    for _ in 0..3 {
        let mut e = pod_event(START, "m");
        e.count = 0;
        let r = c.correlate(e).unwrap();
        assert_eq!((r.event.unwrap().count, r.patch), (0, None));
    }
}

#[test]
fn a_skipped_first_occurrence_still_counts() {
    let clock = Arc::new(FakeClock::new(START));
    let mut c = correlator(clock.clone(), CorrelatorOptions { burst: 1, ..Default::default() }, KeyFuncs::default());
    assert!(!c.correlate(pod_event(START, "other")).unwrap().skip);
    assert!(c.correlate(pod_event(START, "m")).unwrap().skip);
    // The cache counted the skipped one: the next accepted occurrence (a refill later) is count 2.
    clock.step(301 * S);
    let r = c.correlate(pod_event(clock.get(), "m")).unwrap();
    assert_eq!(r.event.unwrap().count, 2);
}

#[test]
fn aggregation_drops_the_oldest_message_and_keeps_counting_the_aggregate() {
    let clock = Arc::new(FakeClock::new(START));
    let options = CorrelatorOptions { burst: 1000, max_events: 3, ..Default::default() };
    let mut c = correlator(clock.clone(), options, KeyFuncs::default());
    let step = |c: &mut EventCorrelator, msg: &str| {
        let t = clock.step(S);
        let r = c.correlate(pod_event(t, msg)).unwrap();
        if let Some(e) = &r.event {
            c.update_state(e);
        }
        r
    };
    assert!(!step(&mut c, "a").aggregated);
    assert!(!step(&mut c, "b").aggregated);
    let r = step(&mut c, "c");
    assert!(r.aggregated);
    let agg = r.event.unwrap();
    assert_eq!((agg.message.as_str(), agg.count), ("(combined from similar events): c", 1));
    assert!(agg.metadata.annotations.is_empty() && agg.reporting_controller.is_empty());
    // "a" (the oldest) was dropped from the set {a, b, c}; "b" and "c" are kept, so "b" counts on its own.
    let r = step(&mut c, "b");
    assert!(!r.aggregated);
    assert_eq!(r.event.unwrap().count, 2);
    // "a" is new again: the set is full once more and the aggregate is patched to count 2.
    let r = step(&mut c, "a");
    assert!(r.aggregated);
    let ev = r.event.unwrap();
    assert_eq!((ev.count, ev.metadata.name.as_str()), (2, agg.metadata.name.as_str()));
    assert!(String::from_utf8(r.patch.unwrap())
        .unwrap()
        .ends_with(r#""message":"(combined from similar events): a"}"#));
}

#[test]
fn the_aggregation_window_is_a_strict_gap() {
    let clock = Arc::new(FakeClock::new(START));
    let options = CorrelatorOptions { burst: 1000, max_events: 2, max_interval_seconds: 10, ..Default::default() };
    let mut c = correlator(clock.clone(), options, KeyFuncs::default());
    c.correlate(pod_event(START, "a")).unwrap();
    // Exactly max_interval later: still within the window.
    clock.step(10 * S);
    assert!(c.correlate(pod_event(clock.get(), "b")).unwrap().aggregated);
    // One nanosecond past the window: the group starts over.
    clock.step(10 * S + 1);
    assert!(!c.correlate(pod_event(clock.get(), "c")).unwrap().aggregated);
}

#[test]
fn lru_eviction_forgets_the_least_recently_used_key() {
    let clock = Arc::new(FakeClock::new(START));
    let options = CorrelatorOptions { lru_cache_size: 2, burst: 1000, ..Default::default() };
    let mut c = correlator(clock, options, KeyFuncs::default());
    let ev = |name: &str| {
        let mut e = pod_event(START, "m");
        e.involved_object.name = name.into();
        e
    };
    for name in ["a", "b"] {
        let r = c.correlate(ev(name)).unwrap();
        c.update_state(r.event.as_ref().unwrap());
    }
    // Touch "a" so that "b" is the least recently used, then add "c": "b" goes.
    assert_eq!(c.correlate(ev("a")).unwrap().event.unwrap().count, 2);
    c.correlate(ev("c")).unwrap();
    assert_eq!(c.correlate(ev("a")).unwrap().event.unwrap().count, 3);
    assert_eq!(c.correlate(ev("b")).unwrap().event.unwrap().count, 1);
}

#[test]
fn options_are_populated_and_checked() {
    let o = CorrelatorOptions { lru_cache_size: 0, burst: 0, qps: 0.0, max_events: 0, max_interval_seconds: 0 };
    assert_eq!(o.populated().unwrap(), CorrelatorOptions::default());
    assert!(CorrelatorOptions { burst: -1, ..Default::default() }.populated().is_err());
    assert!(CorrelatorOptions { qps: f32::NAN, ..Default::default() }.populated().is_err());
    assert!(CorrelatorOptions { max_interval_seconds: -1, ..Default::default() }.populated().is_err());
    assert!(CorrelatorOptions { lru_cache_size: MAX_LRU_CACHE_SIZE + 1, ..Default::default() }.populated().is_err());
}

#[test]
fn key_functions_errors_propagate() {
    let clock = Arc::new(FakeClock::new(START));
    let funcs = KeyFuncs {
        aggregate: Some(Box::new(|_| Err(crate::error::Error::value("key_func", "boom")))),
        ..Default::default()
    };
    let mut c = correlator(clock, CorrelatorOptions::default(), funcs);
    assert_eq!(c.correlate(pod_event(START, "m")).unwrap_err().to_string(), "key_func: boom");
}

#[test]
fn options_from_outside_rust_are_checked() {
    assert_eq!(CorrelatorOptions::from_args(0, 0, 0.0, 0, 0).unwrap(), CorrelatorOptions::default());
    let err = |r: Result<CorrelatorOptions>| r.unwrap_err().to_string();
    assert_eq!(err(CorrelatorOptions::from_args(-1, 0, 0.0, 0, 0)), "lru_cache_size must be >= 0, got -1");
    assert_eq!(err(CorrelatorOptions::from_args(0, 0, 0.0, -2, 0)), "max_events must be >= 0, got -2");
    assert!(
        err(CorrelatorOptions::from_args(0, 0, 1e39, 0, 0)).starts_with("qps must be a finite number >= 0, got 1000")
    );
    assert_eq!(err(CorrelatorOptions::from_args(0, -1, 0.0, 0, 0)), "burst must be >= 0, got -1");
    assert_eq!(CorrelatorOptions::from_args(7, 3, 0.5, 2, 9).unwrap().qps, 0.5);
}

#[test]
fn update_last_state_is_update_state_of_the_event_last_correlated() {
    let clock = Arc::new(FakeClock::new(START));
    let options = CorrelatorOptions { lru_cache_size: 4, burst: 3, max_events: 3, ..Default::default() };
    let (mut a, mut b) = (
        correlator(clock.clone(), options, KeyFuncs::default()),
        correlator(clock.clone(), options, KeyFuncs::default()),
    );
    let mut rv = 0;
    for i in 0..400u32 {
        let t = clock.step(S);
        let mut e = pod_event(t, &format!("m{}", i % 5));
        e.involved_object.name = format!("p{}", i % 7);
        let (ra, rb) = (a.correlate(e.clone()).unwrap(), b.correlate(e).unwrap());
        assert_eq!(ra, rb, "event {i}");
        let Some(mut written) = ra.event else { continue };
        rv += 1;
        written.metadata.resource_version = rv.to_string();
        a.update_state(&written);
        b.update_last_state(&written);
        if i % 11 == 0 {
            // An update of another event in between: the next one goes the long way.
            let mut other = written.clone();
            other.message = "other".into();
            a.update_state(&other);
            b.update_state(&other);
            b.update_last_state(&written);
            a.update_state(&written);
        }
    }
}
