//! Ports of client-go's `tools/events` tests, and the series over time.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;

use super::*;
use crate::clock::{Clock, FakeClock};
use crate::event::UuidSource;
use crate::event::{EventSeries, ObjectReference};
use crate::sink::{SinkCalls, WriteError, Written, DEFAULT_MAX_TRIES};
use crate::time::{Time, NANOS_PER_SECOND};

const S: i64 = NANOS_PER_SECOND;
const MIN: i64 = 60 * S;

/// A sink over an in-memory store of events by (namespace, name), as client-go's fake clientset: create
/// fails with AlreadyExists on a taken name, patch with NotFound on a missing one. Every call is logged.
#[derive(Default)]
struct Store {
    events: BTreeMap<(String, String), EventV1>,
    calls: Vec<(&'static str, String, String)>,
    /// Errors the next calls return, in order.
    fail: Vec<WriteError>,
}

impl Store {
    fn key(e: &EventV1) -> (String, String) {
        (e.metadata.namespace.clone(), e.metadata.name.clone())
    }

    fn injected(&mut self) -> Result<(), WriteError> {
        if self.fail.is_empty() {
            Ok(())
        } else {
            Err(self.fail.remove(0))
        }
    }
}

impl SinkV1 for Store {
    fn create(&mut self, event: &EventV1, _: bool) -> Result<Option<EventV1>, WriteError> {
        self.calls.push(("create", event.metadata.name.clone(), event.to_json()));
        self.injected()?;
        if self.events.contains_key(&Self::key(event)) {
            return Err(WriteError::status(409, "already exists"));
        }
        self.events.insert(Self::key(event), event.clone());
        Ok(Some(event.clone()))
    }

    fn patch(&mut self, event: &EventV1, patch: &[u8], _: bool) -> Result<Option<EventV1>, WriteError> {
        let body = String::from_utf8(patch.to_vec()).unwrap();
        self.calls.push(("patch", event.metadata.name.clone(), body));
        self.injected()?;
        let stored = self.events.get_mut(&Self::key(event)).ok_or_else(|| WriteError::status(404, "not found"))?;
        #[derive(serde::Deserialize)]
        struct Patch {
            series: EventSeries,
        }
        let p: Patch = serde_json::from_slice(patch).map_err(|e| WriteError::status(422, e.to_string()))?;
        stored.series = Some(p.series);
        Ok(Some(stored.clone()))
    }
}

fn pod() -> ObjectReference {
    ObjectReference {
        kind: "Pod".into(),
        namespace: "baz".into(),
        name: "foo".into(),
        uid: "bar".into(),
        api_version: "v1".into(),
        field_path: ".spec.containers[1]".into(),
        ..Default::default()
    }
}

fn event_at(now: Time, action: &str) -> EventV1 {
    let regarding = pod();
    let related = ObjectReference { field_path: ".spec.containers[0]".into(), ..pod() };
    let call = EventV1Call {
        regarding,
        related: Some(related),
        annotations: None,
        type_: "Normal".into(),
        reason: "test".into(),
        action: action.into(),
        note: "some verbose message: 1".into(),
    };
    make_event_v1(call, "eventTest", "eventTest-host", now, &mut UuidSource::Random).0
}

const T0: Time = Time(1_704_067_200 * NANOS_PER_SECOND);

fn plain() -> EventV1 {
    EventV1 {
        metadata: crate::event::ObjectMeta { name: "test".into(), namespace: "default".into(), ..Default::default() },
        event_time: Some(T0),
        reason: "test".into(),
        type_: "Normal".into(),
        ..Default::default()
    }
}

fn with_series(mut e: EventV1) -> EventV1 {
    e.series = Some(EventSeries { count: 2, last_observed_time: Some(T0.add_nanos(S)) });
    e
}

// TestRecordEventToSink
#[test]
fn record_event_to_sink() {
    let cases: [(&str, Vec<EventV1>, EventV1); 4] = [
        ("create a single event", vec![plain()], plain()),
        ("create an event series", vec![plain(), with_series(plain())], with_series(plain())),
        (
            "a series before its first event: patch 404, create; the plain create then conflicts",
            vec![with_series(plain()), plain()],
            with_series(plain()),
        ),
        ("a series alone", vec![with_series(plain())], with_series(plain())),
    ];
    let calls = SinkCalls::default();
    for (name, events, expected) in cases {
        let mut store = Store::default();
        for e in &events {
            record_event(&mut store, e, true, &calls);
        }
        assert_eq!(store.events.len(), 1, "{name}");
        assert_eq!(store.events.values().next(), Some(&expected), "{name}");
    }
    // Retry rules: AlreadyExists is retried for a series only; server answers and bad requests never.
    let mut store = Store::default();
    record_event(&mut store, &plain(), true, &SinkCalls::default());
    let r = record_event(&mut store, &plain(), true, &SinkCalls::default());
    assert_eq!((r.error.as_ref().and_then(|e| e.status), r.retry()), (Some(409), false));
    let mut store = Store {
        fail: vec![WriteError::status(404, "not found"), WriteError::status(409, "already exists")],
        ..Default::default()
    };
    let calls = SinkCalls::default();
    let r = record_event(&mut store, &with_series(plain()), true, &calls);
    assert!(r.retry());
    assert_eq!(store.calls.iter().map(|c| c.0).collect::<Vec<_>>(), ["patch", "create"]);
    // Both calls are counted, each failed.
    let counts =
        [(Written::Created, true), (Written::Created, false), (Written::Patched, true), (Written::Patched, false)];
    assert_eq!(counts.map(|(v, ok)| calls.get(v, ok)), [0, 1, 0, 1]);
    for (err, retry) in [
        (WriteError::status(422, "invalid"), false),
        (WriteError::give_up("bad"), false),
        (WriteError::retry("refused"), true),
    ] {
        let mut store = Store { fail: vec![err], ..Default::default() };
        assert_eq!(record_event(&mut store, &plain(), true, &SinkCalls::default()).retry(), retry);
    }
}

#[test]
fn series_patch_is_exactly_the_series() {
    let e = with_series(plain());
    assert_eq!(
        String::from_utf8(series_patch(&e)).unwrap(),
        r#"{"series":{"count":2,"lastObservedTime":"2024-01-01T00:00:01.000000Z"}}"#
    );
}

fn engine(clock: &Arc<FakeClock>, cache_size: usize) -> SeriesEngine {
    let options =
        EngineOptions { cache_size: NonZeroUsize::new(cache_size).unwrap(), seed: Some(1), ..EngineOptions::default() };
    SeriesEngine::new(clock.clone() as Arc<dyn Clock>, options).unwrap()
}

// TestEventSeriesf
#[test]
fn event_seriesf() {
    let clock = Arc::new(FakeClock::new(T0));
    let mut eng = engine(&clock, 16);
    let mut store = Store::default();
    eng.observe(event_at(clock.get(), "started"), &mut store).unwrap();
    clock.step(S);
    eng.observe(event_at(clock.get(), "started"), &mut store).unwrap();
    eng.observe(event_at(clock.get(), "stopped"), &mut store).unwrap();
    let verbs: Vec<_> = store.calls.iter().map(|c| (c.0, c.1.starts_with("foo."))).collect();
    assert_eq!(verbs, [("create", true), ("patch", true), ("create", true)]);
    assert_eq!(store.calls[0].1, store.calls[1].1, "the series patches the first event");
    assert!(store.calls[2].2.contains(r#""action":"stopped""#) && !store.calls[2].2.contains("series"));
    let first = store.events.get(&("baz".into(), store.calls[0].1.clone())).unwrap();
    assert_eq!(first.series.as_ref().map(|s| s.count), Some(2));
}

// TestFinishSeries
#[test]
fn finish_series() {
    let now = T0;
    let mut cache = SeriesCache::new(NonZeroUsize::new(16).unwrap());
    let mut store = Store::default();
    let cached = event_at(now.add_nanos(-9 * MIN), "started");
    cache.observe(cached.clone(), now.add_nanos(-9 * MIN));
    let (w, _) = cache.observe(cached.clone(), now.add_nanos(-9 * MIN));
    let series_event = w.unwrap().event;
    store.events.insert(Store::key(&cached), cached.clone());
    let mut singleton = event_at(now, "started");
    singleton.reporting_controller = "nonFinished-controller".into();
    cache.observe(singleton, now);
    cache.finish_round(now, |w| {
        let r = record_event(&mut store, &w.event, true, &SinkCalls::default());
        {
            let retry = r.retry();
            (r.answer, retry)
        }
    });
    assert_eq!(store.calls.len(), 1);
    assert_eq!(store.calls[0].0, "patch");
    let observed = series_event.series.as_ref().unwrap().last_observed_time.unwrap().to_rfc3339_micro();
    assert!(store.calls[0].2.contains(&observed));
    assert_eq!(cache.len(), 1);
    // The singleton is forgotten once it is older than six minutes; nothing is written for it.
    cache.finish_round(now.add_nanos(6 * MIN + 1), |_| panic!("no write for a singleton"));
    assert!(cache.is_empty());
    assert_eq!(cache.stats().forgotten, 1);
}

// The cache and its writes share one event until either changes it: each write must carry the event as it
// was when it was decided, whatever is observed before it is made.
#[test]
fn a_write_keeps_the_event_as_it_was_decided() {
    let mut cache = SeriesCache::new(NonZeroUsize::new(16).unwrap());
    let e = Arc::new(event_at(T0, "started"));
    let (first, _) = cache.observe(Arc::clone(&e), T0);
    let first = first.unwrap();
    assert!(Arc::ptr_eq(&first.event, &e), "the first write is the recorded event itself, not a copy");
    let (second, _) = cache.observe(event_at(T0, "started"), T0.add_nanos(S));
    let (third, _) = cache.observe(event_at(T0, "started"), T0.add_nanos(2 * S));
    assert!(third.is_none());
    assert_eq!(first.event.series, None);
    assert_eq!(*first.event, *e);
    let second = second.unwrap();
    assert_eq!(second.event.series, Some(EventSeries { count: 2, last_observed_time: Some(T0.add_nanos(S)) }));
    let drained = cache.drain();
    assert_eq!(drained.len(), 1);
    assert_eq!(drained[0].event.series, Some(EventSeries { count: 3, last_observed_time: Some(T0.add_nanos(2 * S)) }));
    assert_eq!(drained[0].event.metadata.name, e.metadata.name, "a series keeps its first event");
}

// TestRefreshExistingEventSeries
#[test]
fn refresh_existing_event_series() {
    for fail in [None, Some(WriteError::give_up("bad"))] {
        let mut cache = SeriesCache::new(NonZeroUsize::new(16).unwrap());
        let e = event_at(T0, "started");
        cache.observe(e.clone(), T0);
        cache.observe(e, T0.add_nanos(S));
        let mut store = Store { fail: fail.into_iter().collect(), ..Default::default() };
        let mut writes = 0;
        cache.refresh_round(|w| {
            writes += 1;
            assert_eq!(w.cause, WriteCause::Refresh);
            let r = record_event(&mut store, &w.event, true, &SinkCalls::default());
            {
                let retry = r.retry();
                (r.answer, retry)
            }
        });
        assert_eq!(writes, 1);
        assert_eq!(store.calls.iter().filter(|c| c.0 == "patch").count(), 1);
        assert_eq!(cache.len(), 1);
    }
}

/// Runs the engine over `minutes` of fake time in one-second steps, with an occurrence at every second for
/// which `occurs` says so, and returns the sink's calls with the minute:second they happened at.
fn drive(
    eng: &mut SeriesEngine,
    clock: &FakeClock,
    store: &mut Store,
    seconds: i64,
    occurs: impl Fn(i64) -> bool,
) -> Vec<(String, &'static str, String)> {
    let mut out = Vec::new();
    for s in 0..=seconds {
        clock.set(T0.add_nanos(s * S));
        let before = store.calls.len();
        if eng.next_due() <= clock.get() {
            eng.run_due(store).unwrap();
        }
        if occurs(s) {
            eng.observe(event_at(clock.get(), "started"), store).unwrap();
        }
        for c in &store.calls[before..] {
            out.push((format!("{}:{:02}", s / 60, s % 60), c.0, c.2.clone()));
        }
    }
    out
}

fn micro(offset: i64) -> String {
    T0.add_nanos(offset).to_rfc3339_micro()
}

#[test]
fn a_series_over_forty_minutes() {
    let clock = Arc::new(FakeClock::new(T0));
    let mut eng = engine(&clock, 16);
    let mut store = Store::default();
    // Occurrences at 0 s, 1 s, then every 10 s up to 29 min; again at 37 and 38 min.
    let occurs = |s: i64| s == 0 || s == 1 || (s % 10 == 0 && s <= 29 * 60) || s == 37 * 60 || s == 38 * 60;
    let writes = drive(&mut eng, &clock, &mut store, 40 * 60, occurs);
    let summary: Vec<(&str, &str, String)> = writes
        .iter()
        .map(|(at, verb, body)| {
            let shown =
                if *verb == "patch" { body.clone() } else { body[..body.find(",\"eventTime\"").unwrap()].to_owned() };
            (at.as_str(), *verb, shown)
        })
        .collect();
    let series =
        |count: i32, at: i64| format!(r#"{{"series":{{"count":{count},"lastObservedTime":"{}"}}}}"#, micro(at));
    let created = |at: i64| format!(r#"{{"metadata":{{"name":"foo.{:x}","namespace":"baz"}}"#, T0.add_nanos(at).0);
    assert_eq!(
        summary,
        [
            ("0:00", "create", created(0)),
            ("0:01", "patch", series(2, S)),
            // The refresh at 30 min writes the count so far (2 + one every 10 s from 10 s to 29 min).
            ("30:00", "patch", series(176, 29 * MIN)),
            // The finish round at 36 min finds it quiet for over six minutes: its last write.
            ("36:00", "patch", series(176, 29 * MIN)),
            // Forgotten, so the next occurrence starts a new event.
            ("37:00", "create", created(37 * MIN)),
            ("38:00", "patch", series(2, 38 * MIN)),
        ]
    );
    let st = eng.stats();
    assert_eq!((st.finish_rounds, st.refresh_rounds), (7, 2));
    assert_eq!((st.cache.created, st.cache.series_started, st.cache.counted), (2, 2, 174));
}

#[test]
fn retries_are_scheduled_on_the_clock_with_jitter() {
    let clock = Arc::new(FakeClock::new(T0));
    let mut eng = engine(&clock, 16);
    eng.run_due(&mut Store::default()).unwrap();
    let transient = || WriteError::retry("connection refused");
    let mut store = Store { fail: vec![transient(), transient()], ..Default::default() };
    eng.observe(event_at(T0, "started"), &mut store).unwrap();
    let first_retry = eng.next_due();
    assert!(first_retry >= T0.add_nanos(10 * S) && first_retry <= T0.add_nanos(12_500_000_000), "{first_retry:?}");
    clock.set(first_retry.add_nanos(-1));
    eng.run_due(&mut store).unwrap();
    assert_eq!(store.calls.len(), 1, "nothing before the sleep is over");
    clock.set(first_retry);
    eng.run_due(&mut store).unwrap();
    let second = eng.next_due();
    assert!(second >= first_retry.add_nanos(10 * S) && second <= first_retry.add_nanos(12_500_000_000));
    clock.set(second);
    eng.run_due(&mut store).unwrap();
    assert_eq!(store.calls.len(), 3);
    assert_eq!(store.events.len(), 1);
    let st = eng.stats();
    assert_eq!((st.writes.retries, st.write_errors, st.writes_ok, st.pending_retries), (2, 2, 1, 0));

    // Twelve failures in all, then the event is given up.
    let mut eng = engine(&clock, 16);
    let mut store = Store { fail: (0..20).map(|_| transient()).collect(), ..Default::default() };
    eng.observe(event_at(clock.get(), "started"), &mut store).unwrap();
    while eng.stats().pending_retries > 0 {
        clock.set(eng.next_due().max(clock.get()));
        eng.run_due(&mut store).unwrap();
    }
    assert_eq!(store.calls.iter().filter(|c| c.0 == "create").count(), DEFAULT_MAX_TRIES as usize);
    assert_eq!(eng.stats().writes.abandoned, 1);
}

#[test]
fn shutdown_writes_every_unwritten_series() {
    let clock = Arc::new(FakeClock::new(T0));
    let mut eng = engine(&clock, 16);
    let mut store = Store::default();
    eng.run_due(&mut store).unwrap();
    let reasons = ["a", "b", "c"];
    // "a" occurs 5 times, "b" twice (its count 2 is already written), "c" once.
    for (reason, times) in reasons.iter().zip([5, 2, 1]) {
        for _ in 0..times {
            clock.step(S);
            let mut e = event_at(clock.get(), "started");
            e.reason = (*reason).into();
            eng.observe(e, &mut store).unwrap();
        }
    }
    let before = store.calls.len();
    assert_eq!(eng.shutdown(&mut store), 1);
    assert_eq!(store.calls[before..].len(), 1);
    assert_eq!(store.calls[before].2, format!(r#"{{"series":{{"count":5,"lastObservedTime":"{}"}}}}"#, micro(5 * S)));
    assert_eq!(eng.stats().cache_len, 0);
}

#[test]
fn evicting_a_live_series_writes_it() {
    let clock = Arc::new(FakeClock::new(T0));
    let mut eng = engine(&clock, 2);
    let mut store = Store::default();
    let occurrence = |reason: &str, at: Time| {
        let mut e = event_at(at, "started");
        e.reason = reason.into();
        e
    };
    for _ in 0..3 {
        clock.step(S);
        eng.observe(occurrence("a", clock.get()), &mut store).unwrap();
    }
    clock.step(S);
    eng.observe(occurrence("b", clock.get()), &mut store).unwrap();
    let before = store.calls.len();
    clock.step(S);
    eng.observe(occurrence("c", clock.get()), &mut store).unwrap();
    let after: Vec<_> = store.calls[before..].iter().map(|c| (c.0, c.2.clone())).collect();
    assert_eq!(after.len(), 2);
    assert_eq!(after[0], ("patch", format!(r#"{{"series":{{"count":3,"lastObservedTime":"{}"}}}}"#, micro(3 * S))));
    assert_eq!(after[1].0, "create");
    let st = eng.stats();
    assert_eq!((st.cache.evicted, st.cache.evicted_writes, st.cache_len), (1, 1, 2));
    // A singleton or an already written series goes without a write.
    clock.step(S);
    eng.observe(occurrence("d", clock.get()), &mut store).unwrap();
    assert_eq!(store.calls.last().unwrap().0, "create");
    assert_eq!(eng.stats().cache.evicted_writes, 1);
}

#[test]
fn a_huge_bound_reserves_nothing_up_front() {
    // A cache that reserved its bound would ask for a table of usize::MAX entries here.
    let mut cache = SeriesCache::new(NonZeroUsize::MAX);
    cache.observe(event_at(T0, "started"), T0);
    cache.observe(event_at(T0, "stopped"), T0);
    assert_eq!((cache.len(), cache.stats().evicted), (2, 0));
}

/// Every key hashes alike, so every key shares one bucket.
#[derive(Clone, Default)]
struct Colliding;

impl std::hash::BuildHasher for Colliding {
    type Hasher = Zero;
    fn build_hasher(&self) -> Zero {
        Zero
    }
}

struct Zero;

impl std::hash::Hasher for Zero {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, _: &[u8]) {}
}

#[test]
fn keys_with_one_hash_are_kept_apart() {
    let mut cache = SeriesCache::with_hasher(NonZeroUsize::new(4).unwrap(), Colliding);
    let occurrence = |reason: &str, at: i64| {
        let mut e = event_at(T0.add_nanos(at * S), "started");
        e.reason = reason.into();
        e
    };
    let kinds = |w: &Option<Write>| w.as_ref().map(|w| w.cause);
    assert_eq!(kinds(&cache.observe(occurrence("a", 0), T0).0), Some(WriteCause::First));
    assert_eq!(kinds(&cache.observe(occurrence("b", 1), T0).0), Some(WriteCause::First));
    assert_eq!(kinds(&cache.observe(occurrence("a", 2), T0.add_nanos(2 * S)).0), Some(WriteCause::SeriesStart));
    assert_eq!(kinds(&cache.observe(occurrence("a", 3), T0.add_nanos(3 * S)).0), None);
    assert_eq!(kinds(&cache.observe(occurrence("b", 4), T0.add_nanos(4 * S)).0), Some(WriteCause::SeriesStart));
    assert_eq!(cache.len(), 2);
    let mut written = Vec::new();
    cache.refresh_round(|w| {
        written.push((w.event.reason.clone(), w.event.series.as_ref().unwrap().count));
        (None, false)
    });
    written.sort();
    assert_eq!(written, [("a".to_owned(), 3), ("b".to_owned(), 2)]);
    cache.observe(occurrence("c", 5), T0.add_nanos(5 * S));
    cache.finish_round(T0.add_nanos(5 * S + FINISH_TIME), |w| {
        assert_ne!(w.event.reason, "c");
        (None, false)
    });
    assert_eq!(cache.len(), 1, "the series are finished, the newer singleton stays");
    // c's second occurrence is written at once (count 2), its third only at the drain.
    cache.observe(occurrence("c", 6), T0.add_nanos(6 * S));
    cache.observe(occurrence("c", 7), T0.add_nanos(7 * S));
    assert_eq!(cache.drain().len(), 1);
    assert!(cache.is_empty());
}

// Ports of client-go's write tests through the engine, as the broadcaster's thread drives it: `decide` and
// `write` for each occurrence, `run_due_at` for the rounds and retries on the fake clock, `shutdown`.

/// `decide`, then the first attempt at each write it asks for.
fn record(eng: &mut SeriesEngine, store: &mut Store, event: EventV1) {
    let mut writes = Vec::new();
    eng.decide(event, &mut writes).unwrap();
    for e in writes {
        eng.write(e, store).unwrap();
    }
}

/// An engine at T0 whose first rounds, due at once, have run (on an empty cache), and its sink.
fn after_the_first_rounds() -> (Arc<FakeClock>, SeriesEngine, Store) {
    let clock = Arc::new(FakeClock::new(T0));
    let mut eng = engine(&clock, 16);
    let mut store = Store::default();
    eng.run_due_at(T0, &mut store).unwrap();
    (clock, eng, store)
}

fn series_body(count: i32, at: i64) -> String {
    format!(r#"{{"series":{{"count":{count},"lastObservedTime":"{}"}}}}"#, micro(at))
}

// TestRecordEventToSink: what the server holds after each sequence of first attempts.
#[test]
fn record_event_to_sink_through_the_engine() {
    // (case, events written in order, the one stored, writes that succeeded and that failed)
    let cases: [(&str, Vec<EventV1>, EventV1, u64, u64); 4] = [
        ("record one Event", vec![plain()], plain(), 1, 0),
        ("one Event followed by an isomorphic one", vec![plain(), with_series(plain())], with_series(plain()), 2, 0),
        // The plain create conflicts with the series' and is not retried: only a series' create is.
        ("an isomorphic Event before the original", vec![with_series(plain()), plain()], with_series(plain()), 1, 1),
        ("an isomorphic Event alone", vec![with_series(plain())], with_series(plain()), 1, 0),
    ];
    for (name, events, expected, ok, failed) in cases {
        let clock = Arc::new(FakeClock::new(T0));
        let mut eng = engine(&clock, 16);
        let mut store = Store::default();
        for e in events {
            eng.write(e, &mut store).unwrap();
        }
        assert_eq!(store.events.values().collect::<Vec<_>>(), [&expected], "{name}");
        let st = eng.stats();
        assert_eq!(
            (st.writes_ok, st.write_errors, st.writes.retries, st.pending_retries),
            (ok, failed, 0, 0),
            "{name}"
        );
    }
}

#[test]
fn a_series_whose_create_conflicts_is_retried_on_the_clock() {
    let (_, mut eng, mut store) = after_the_first_rounds();
    // The patch finds nothing, and the create meets the first event's, which raced it.
    store.fail = vec![WriteError::status(404, "not found"), WriteError::status(409, "already exists")];
    eng.write(with_series(plain()), &mut store).unwrap();
    let st = eng.stats();
    assert_eq!((st.write_errors, st.writes.retries, st.pending_retries), (1, 1, 1));
    let due = eng.next_due();
    assert!(due >= T0.add_nanos(10 * S) && due <= T0.add_nanos(12_500_000_000), "{due:?}");
    eng.run_due_at(due.add_nanos(-1), &mut store).unwrap();
    assert_eq!(store.calls.len(), 2, "nothing before the sleep is over");
    eng.run_due_at(due, &mut store).unwrap();
    let verbs: Vec<_> = store.calls.iter().map(|c| c.0).collect();
    assert_eq!(verbs, ["patch", "create", "patch", "create"]);
    assert_eq!(store.events.values().collect::<Vec<_>>(), [&with_series(plain())]);
    let st = eng.stats();
    assert_eq!((st.writes_ok, st.pending_retries, st.writes.abandoned), (1, 0, 0));
    assert_eq!((st.writes.patch_errors, st.writes.create_errors, st.writes.created), (2, 1, 1));
}

// TestFinishSeries, in the engine's finish round: a series last seen more than six minutes ago gets its last
// write, a patch with its last observed time, and leaves the cache; a newer singleton stays, unwritten.
#[test]
fn finish_series_in_the_engines_round() {
    let (clock, mut eng, mut store) = after_the_first_rounds();
    for i in 0..10 {
        clock.set(T0.add_nanos(i * S));
        record(&mut eng, &mut store, event_at(clock.get(), "started"));
    }
    clock.set(T0.add_nanos(9 * MIN));
    let mut singleton = event_at(clock.get(), "started");
    singleton.reporting_controller = "nonFinished-controller".into();
    record(&mut eng, &mut store, singleton);
    let before = store.calls.len();
    assert_eq!(store.calls.iter().map(|c| c.0).collect::<Vec<_>>(), ["create", "patch", "create"]);
    eng.run_due_at(clock.get(), &mut store).unwrap();
    let finish: Vec<_> = store.calls[before..].iter().map(|c| (c.0, c.2.clone())).collect();
    assert_eq!(finish, [("patch", series_body(10, 9 * S))]);
    let st = eng.stats();
    assert_eq!((st.cache_len, st.finish_rounds, st.cache.finish_writes, st.refresh_rounds), (1, 2, 1, 1));
    assert_eq!((st.writes_ok, st.write_errors, st.pending_retries), (4, 0, 0));
}

// TestRefreshExistingEventSeries, in the engine's refresh round: a live series gets one patch and stays
// cached, whether the patch succeeds or fails (a round makes one attempt, and schedules no retry).
#[test]
fn refresh_existing_event_series_in_the_engines_round() {
    for fail in [None, Some(WriteError::give_up("request construction"))] {
        let clock = Arc::new(FakeClock::new(T0));
        let mut eng = engine(&clock, 16);
        let mut store = Store::default();
        // An occurrence every minute for half an hour, the rounds run as they come due.
        for m in 0..30 {
            clock.set(T0.add_nanos(m * MIN));
            eng.run_due_at(clock.get(), &mut store).unwrap();
            record(&mut eng, &mut store, event_at(clock.get(), "started"));
        }
        let before = store.calls.len();
        store.fail = fail.iter().cloned().collect();
        clock.set(T0.add_nanos(30 * MIN));
        eng.run_due_at(clock.get(), &mut store).unwrap();
        let refresh: Vec<_> = store.calls[before..].iter().map(|c| (c.0, c.2.clone())).collect();
        assert_eq!(refresh, [("patch", series_body(30, 29 * MIN))], "{fail:?}");
        let st = eng.stats();
        assert_eq!((st.cache_len, st.refresh_rounds, st.cache.refresh_writes), (1, 2, 1), "{fail:?}");
        let failed = u64::from(fail.is_some());
        assert_eq!((st.write_errors, st.writes.retries, st.pending_retries), (failed, 0, 0), "{fail:?}");
    }
}

// Once shut down, an event waiting for its retry gets one last attempt at once, and is abandoned if that
// fails too.
#[test]
fn shutdown_gives_a_pending_retry_one_last_attempt() {
    for (failures, stored, abandoned) in [(1, 1, 0), (2, 0, 1)] {
        let (clock, mut eng, mut store) = after_the_first_rounds();
        store.fail = (0..failures).map(|_| WriteError::retry("connection refused")).collect();
        eng.write(plain(), &mut store).unwrap();
        assert_eq!(eng.stats().pending_retries, 1);
        assert_eq!(eng.shutdown(&mut store), 0);
        assert_eq!(clock.get(), T0, "no sleep");
        assert_eq!(store.calls.len(), 2);
        assert_eq!(store.events.len(), stored);
        let st = eng.stats();
        assert_eq!((st.writes.abandoned, st.pending_retries, st.writes.retries), (abandoned, 0, 1));
    }
}
