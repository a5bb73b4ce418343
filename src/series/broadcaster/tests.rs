//! The sink's thread on a fake clock: occurrences against the rounds, the shutdown flush, retries.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::*;
use crate::clock::FakeClock;
use crate::event::ObjectReference;
use crate::series::EngineOptions;
use crate::sink::WriteError;
use crate::time::NANOS_PER_SECOND;
use crate::watch::FullChannel;

const S: i64 = NANOS_PER_SECOND;
const T0: Time = Time(1_704_067_200 * NANOS_PER_SECOND);
const LONG: Duration = Duration::from_secs(10);

/// What the sink saw: each call as (verb, reason, series count).
#[derive(Default)]
struct Log {
    calls: Vec<(&'static str, String, i32)>,
}

/// A sink that fails its next calls with `fail`, in order, and otherwise succeeds.
#[derive(Clone, Default)]
struct Sink {
    log: Arc<Mutex<Log>>,
    fail: Arc<Mutex<Vec<WriteError>>>,
}

impl Sink {
    fn call(&mut self, verb: &'static str, event: &EventV1) -> Result<Option<EventV1>, WriteError> {
        let mut log = lock(&self.log);
        log.calls.push((verb, event.reason.clone(), event.series.as_ref().map_or(1, |s| s.count)));
        let mut fail = lock(&self.fail);
        if fail.is_empty() {
            Ok(None)
        } else {
            Err(fail.remove(0))
        }
    }

    fn calls(&self) -> Vec<(&'static str, String, i32)> {
        lock(&self.log).calls.clone()
    }
}

impl SinkV1 for Sink {
    fn create(&mut self, event: &EventV1, _: bool) -> Result<Option<EventV1>, WriteError> {
        self.call("create", event)
    }

    fn patch(&mut self, event: &EventV1, _: &[u8], _: bool) -> Result<Option<EventV1>, WriteError> {
        self.call("patch", event)
    }
}

/// Counts the host's attachments.
#[derive(Clone, Default)]
struct Counting(Arc<Mutex<u64>>);

impl Host for Counting {
    fn attached(&self, f: &mut dyn FnMut()) {
        *lock(&self.0) += 1;
        f()
    }
}

/// Keeps the lines of the broadcaster.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Reporter for Lines {
    fn warn(&self, m: &str) {
        lock(&self.0).push(m.to_owned());
    }
    fn error(&self, m: &str) {
        lock(&self.0).push(m.to_owned());
    }
}

fn broadcaster(clock: &Arc<FakeClock>) -> EventsBroadcaster {
    let pipeline = PipelineOptions {
        name: "b".into(),
        queue_length: MAX_QUEUED_EVENTS,
        full_channel: FullChannel::Drop,
        clock: clock.clone(),
        catch_up_wait: Duration::ZERO,
        log_interval: crate::health::DEFAULT_LOG_INTERVAL_NANOS,
    };
    let engine = EngineOptions { seed: Some(1), ..EngineOptions::default() };
    EventsBroadcaster::new(EventsOptions { pipeline, engine }, Arc::new(Lines::default())).unwrap()
}

fn started(clock: &Arc<FakeClock>, sink: &Sink) -> EventsBroadcaster {
    let b = broadcaster(clock);
    b.start_recording_to_sink(sink.clone(), "Sink".into(), Counting::default()).unwrap();
    idle(&b);
    b
}

fn idle(b: &EventsBroadcaster) {
    assert!(b.wait_idle(LONG));
}

fn stop(b: &EventsBroadcaster) {
    b.begin_shutdown();
    assert!(b.wait_shut_down(LONG));
}

fn recorder_call(pod: &ObjectReference, reason: &str) -> EventV1Call {
    EventV1Call {
        regarding: pod.clone(),
        type_: "Normal".into(),
        reason: reason.into(),
        action: "a".into(),
        note: "n".into(),
        ..Default::default()
    }
}

fn record(b: &EventsBroadcaster, reason: &str) {
    let pod = ObjectReference { kind: "Pod".into(), namespace: "ns".into(), name: "p".into(), ..Default::default() };
    b.record(recorder_call(&pod, reason), "c", "i", |_| ()).unwrap();
}

fn call(verb: &'static str, reason: &str, count: i32) -> (&'static str, String, i32) {
    (verb, reason.to_owned(), count)
}

#[test]
fn an_occurrence_comes_after_the_rounds_due_by_its_time() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    for _ in 0..3 {
        record(&b, "a");
        clock.step(S);
    }
    // Past the finish round at 6 min, then an occurrence at once, with no idle pass between: the round ends
    // the series (its final count written) before the occurrence, which starts a new event.
    clock.set(T0.add_nanos(7 * 60 * S));
    record(&b, "a");
    idle(&b);
    assert_eq!(
        sink.calls(),
        [call("create", "a", 1), call("patch", "a", 2), call("patch", "a", 3), call("create", "a", 1)]
    );
    let st = b.stats();
    assert_eq!((st.engine.finish_rounds, st.engine.cache.created, st.engine.cache.counted), (2, 2, 1));
    stop(&b);
}

#[test]
fn shutdown_writes_the_queue_then_the_retries_then_the_series() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    lock(&sink.fail).push(WriteError::status(503, "unavailable"));
    record(&b, "retried");
    for _ in 0..3 {
        record(&b, "series");
    }
    idle(&b);
    assert_eq!(b.stats().engine.pending_retries, 1);
    record(&b, "queued");
    stop(&b);
    assert_eq!(
        sink.calls(),
        [
            call("create", "retried", 1),
            call("create", "series", 1),
            call("patch", "series", 2),
            call("create", "queued", 1),
            call("create", "retried", 1),
            call("patch", "series", 3),
        ]
    );
    let st = b.stats();
    assert_eq!((st.engine.pending_retries, st.engine.cache_len, st.writes.abandoned, st.pending), (0, 0, 0, 0));
    record(&b, "late");
    let st = b.stats();
    assert_eq!((st.pipeline.received, st.pipeline.dropped_after_shutdown), (6, 1));
    // Six sink calls: four creates (the first failed) and two patches.
    assert_eq!((st.writes.created, st.writes.create_errors, st.writes.patched, st.writes.patch_errors), (3, 1, 2, 0));
}

#[test]
fn retries_follow_the_classification_and_the_fake_clock() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    let cases = [
        (WriteError::status(429, "slow down"), true),
        (WriteError::status(500, "internal"), true),
        (WriteError::retry("connection refused"), true),
        (WriteError::status(404, "namespace not found"), false),
        (WriteError::status(409, "already exists"), false),
        (WriteError::status(422, "invalid"), false),
        (WriteError::give_up("a bug"), false),
    ];
    let mut given_up = 0;
    for (i, (error, retried)) in cases.into_iter().enumerate() {
        lock(&sink.fail).push(error.clone());
        record(&b, &format!("r{i}"));
        idle(&b);
        assert_eq!(b.stats().engine.pending_retries, u64::from(retried), "{error}");
        given_up += u64::from(!retried);
        assert_eq!(b.stats().writes.abandoned, given_up, "every event given up is counted: {error}");
        // tools/events sleeps 10 s plus up to a quarter: nothing before, the retry by then.
        clock.step(10 * S - 1);
        idle(&b);
        assert_eq!(sink.calls().len(), 2 * i + 1, "{error}");
        clock.step(2_500_000_001);
        idle(&b);
        assert_eq!(sink.calls().len(), 2 * i + 1 + usize::from(retried), "{error}");
        if !retried {
            // Keeps the count of calls in step.
            record(&b, &format!("r{i}"));
            idle(&b);
        }
    }
    let health = &b.stats().sinks.0[0].1;
    assert_eq!(health.failed_writes, 7);
    let reasons: Vec<(&str, u64)> = health.given_up.iter().map(|(r, n)| (r.as_str(), *n)).collect();
    assert_eq!(
        reasons,
        [("not retryable", 1), ("rejected (HTTP 404)", 1), ("rejected (HTTP 409)", 1), ("rejected (HTTP 422)", 1)]
    );
    stop(&b);
}

#[test]
fn a_conflict_is_retried_for_a_series_only() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    record(&b, "a");
    idle(&b);
    // The series' patch finds nothing, its create a conflict: retried.
    lock(&sink.fail).extend([WriteError::status(404, "gone"), WriteError::status(409, "exists")]);
    record(&b, "a");
    idle(&b);
    assert_eq!(sink.calls(), [call("create", "a", 1), call("patch", "a", 2), call("create", "a", 2)]);
    let st = b.stats();
    assert_eq!((st.engine.pending_retries, st.engine.write_errors, st.writes.abandoned), (1, 1, 0));
    stop(&b);
}

#[test]
fn writes_are_attached_a_slice_at_a_time() {
    let clock = Arc::new(FakeClock::new(T0));
    let b = broadcaster(&clock);
    let mut engine = lock(&b.unstarted).take().unwrap();
    let pod = ObjectReference { name: "p".into(), ..Default::default() };
    let writes = || -> Vec<Arc<EventV1>> {
        let made = |i| make_event_v1(recorder_call(&pod, &format!("r{i}")), "c", "i", T0, &mut UuidSource::Random).0;
        (0..5).map(|i| Arc::new(made(i))).collect()
    };
    // A slice that never ends: every write in one attachment; one that ends at once: one write each.
    for (slice, attached) in [(Duration::MAX, 1), (Duration::ZERO, 5)] {
        let (mut sink, host) = (Sink::default(), Counting::default());
        b.shared.write_in_slices(&mut engine, &mut sink, &host, &mut writes(), slice);
        assert_eq!((sink.calls().len(), *lock(&host.0)), (5, attached), "{slice:?}");
    }
}

#[test]
fn stats_serialize_flat_in_their_order() {
    let stats = EventsBroadcasterStats { pending: 3, last_error: Some("x".into()), ..Default::default() };
    assert_eq!(
        serde_json::to_string(&stats).unwrap(),
        concat!(
            r#"{"received":0,"dropped_incoming":0,"dropped_after_shutdown":0,"dropped_watchers":{},"#,
            r#""created":0,"patched":0,"create_errors":0,"patch_errors":0,"retries":0,"abandoned":0,"#,
            r#""handler_errors":0,"recorder_waits":0,"pending":3,"#,
            r#""observed":0,"first_occurrences":0,"series_started":0,"counted":0,"refresh_writes":0,"#,
            r#""finish_writes":0,"forgotten":0,"evicted":0,"evicted_writes":0,"shutdown_writes":0,"writes_ok":0,"#,
            r#""write_errors":0,"finish_rounds":0,"refresh_rounds":0,"pending_retries":0,"cache_len":0,"#,
            r#""truncated_notes":0,"last_error":"x","sinks":{}}"#
        )
    );
}

#[test]
fn start_refuses_twice_and_after_shutdown() {
    let clock = Arc::new(FakeClock::new(T0));
    let b = broadcaster(&clock);
    assert!(b.wait_idle(Duration::ZERO), "nothing to do: idle already");
    b.start_recording_to_sink(Sink::default(), "Sink".into(), Counting::default()).unwrap();
    let twice = b.start_recording_to_sink(Sink::default(), "Sink".into(), Counting::default()).err().unwrap();
    assert_eq!(twice.to_string(), "the broadcaster is already recording to a sink");
    b.begin_shutdown();
    assert!(matches!(b.can_start(), Err(StartError::ShutDown)));
    assert!(b.wait_shut_down(LONG));
    assert!(b.refuse_on_worker("shutdown").is_ok(), "not the sink's thread");
}

/// Fails its calls with the error a wait from the sink's thread gets.
struct Reentrant(Arc<OnceLock<Arc<EventsBroadcaster>>>, Arc<Mutex<Vec<String>>>);

impl SinkV1 for Reentrant {
    fn create(&mut self, _: &EventV1, _: bool) -> Result<Option<EventV1>, WriteError> {
        let refused = self.0.get().unwrap().refuse_on_worker("wait_idle()").unwrap_err();
        lock(&self.1).push(refused.to_string());
        Err(WriteError::give_up(refused.to_string()))
    }
    fn patch(&mut self, _: &EventV1, _: &[u8], _: bool) -> Result<Option<EventV1>, WriteError> {
        unreachable!()
    }
}

#[test]
fn a_wait_from_the_sinks_thread_is_refused() {
    let clock = Arc::new(FakeClock::new(T0));
    let b = Arc::new(broadcaster(&clock));
    let cell = Arc::new(OnceLock::new());
    let _ = cell.set(b.clone());
    let refusals = Arc::new(Mutex::new(Vec::new()));
    b.start_recording_to_sink(Reentrant(cell.clone(), refusals.clone()), "Reentrant".into(), Counting::default())
        .unwrap();
    record(&b, "a");
    idle(&b);
    assert_eq!(*lock(&refusals), ["wait_idle() called from the sink, on the broadcaster's thread"]);
    b.begin_shutdown();
    assert!(b.wait_shut_down(LONG));
}

#[test]
fn exit_flush_writes_what_is_queued_and_ends_the_thread() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    record(&b, "a");
    assert_eq!(b.exit_flush(LONG), (0, 0));
    assert!(b.wait_shut_down(Duration::ZERO));
    assert_eq!(lock(&sink.log).calls.first().map(|c| c.0), Some("create"));
}

#[test]
fn every_watcher_gets_every_event_and_the_sink_its_own_copy() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let w = b
        .start_event_watcher("watcher", move |events| lock(&s).extend(events.iter().map(|e| e.reason.clone())))
        .unwrap();
    record(&b, "a");
    record(&b, "b");
    idle(&b);
    assert_eq!(*lock(&seen), ["a", "b"]);
    assert_eq!(sink.calls(), [call("create", "a", 1), call("create", "b", 1)]);
    assert_eq!(w.name(), "watcher-2");
    stop(&b);
}

#[test]
fn the_structured_line_is_client_gos() {
    let pod = ObjectReference {
        kind: "Pod".into(),
        namespace: "ns".into(),
        name: "p".into(),
        api_version: "v1".into(),
        ..Default::default()
    };
    let c = EventV1Call { type_: "Warning".into(), note: "say \"hi\"".into(), ..recorder_call(&pod, "BackOff") };
    let (e, _) = make_event_v1(c, "c", "i", T0, &mut UuidSource::Random);
    assert_eq!(
        structured_line(&e),
        r#"Event occurred object="ns/p" kind="Pod" apiVersion="v1" type="Warning" reason="BackOff" action="a" note="say \"hi\"""#
    );
}
