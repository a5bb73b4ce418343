//! The engine thread on a fake clock: occurrences against the rounds, the linger, the shutdown flush, retries.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::*;
use crate::clock::FakeClock;
use crate::event::ObjectReference;
use crate::series::EngineOptions;
use crate::sink::WriteError;
use crate::time::NANOS_PER_SECOND;

const S: i64 = NANOS_PER_SECOND;
const T0: Time = Time(1_704_067_200 * NANOS_PER_SECOND);
const LONG: Duration = Duration::from_secs(10);

/// What the sink saw: each call as (verb, reason, series count), each report, and when the first call came.
#[derive(Default)]
struct Log {
    calls: Vec<(&'static str, String, i32)>,
    reports: Vec<String>,
    first_call: Option<Instant>,
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
        log.first_call.get_or_insert_with(Instant::now);
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

    fn report(&mut self, message: &str) {
        lock(&self.log).reports.push(message.to_owned());
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

fn started(clock: &Arc<FakeClock>, sink: &Sink) -> EventsBroadcaster {
    let options = EngineOptions { seed: Some(1), ..EngineOptions::default() };
    let b = EventsBroadcaster::new(SeriesEngine::new(clock.clone(), options).unwrap());
    b.start(sink.clone(), Counting::default()).unwrap();
    idle(&b);
    b
}

fn idle(b: &EventsBroadcaster) {
    let kick = b.kick().unwrap();
    assert!(b.wait_idle(kick, LONG));
}

fn record(b: &EventsBroadcaster, reason: &str) {
    let pod = ObjectReference { kind: "Pod".into(), namespace: "ns".into(), name: "p".into(), ..Default::default() };
    let input = EventV1Input {
        regarding: &pod,
        related: None,
        annotations: None,
        type_: "Normal",
        reason,
        action: "a",
        note: "n",
        reporting_controller: "c",
        reporting_instance: "i",
    };
    b.record(&input, |_| ()).unwrap();
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
    b.begin_stop();
    assert!(b.wait_finished(LONG));
}

#[test]
fn a_lone_event_waits_out_the_linger() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    let recorded = Instant::now();
    record(&b, "a");
    while lock(&sink.log).first_call.is_none() {
        std::thread::sleep(Duration::from_micros(50));
    }
    let waited = lock(&sink.log).first_call.unwrap() - recorded;
    assert!(waited >= LINGER, "{waited:?}");
    b.begin_stop();
    assert!(b.wait_finished(LONG));
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
    b.begin_stop();
    assert!(b.wait_finished(LONG));
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
    assert_eq!((st.engine.pending_retries, st.engine.cache_len, st.engine.abandoned), (0, 0, 0));
    assert_eq!(b.undelivered(), 0);
    record(&b, "late");
    let st = b.stats();
    assert_eq!((st.received, st.dropped, st.dropped_after_shutdown), (6, 1, 1));
    // Six sink calls: four creates (the first failed) and two patches.
    let e = st.engine;
    assert_eq!((e.sink_creates, e.sink_create_errors, e.sink_patches, e.sink_patch_errors), (3, 1, 2, 0));
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
    for (i, (error, retried)) in cases.into_iter().enumerate() {
        lock(&sink.fail).push(error.clone());
        record(&b, &format!("r{i}"));
        idle(&b);
        assert_eq!(b.stats().engine.pending_retries, u64::from(retried), "{error}");
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
    let reports = lock(&sink.log).reports.clone();
    assert_eq!(
        reports,
        [
            "Unable to write event (may retry after sleeping): create: HTTP 429: slow down",
            "Unable to write event (may retry after sleeping): create: HTTP 500: internal",
            "Unable to write event (may retry after sleeping): create: connection refused",
            "Server rejected event (will not retry!): create: HTTP 404: namespace not found",
            "Server rejected event (will not retry!): create: HTTP 422: invalid",
            "The sink failed (will not retry!): create: a bug",
        ]
    );
    b.begin_stop();
    assert!(b.wait_finished(LONG));
}

#[test]
fn a_conflict_is_retried_for_a_series_only() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    record(&b, "a");
    idle(&b);
    // The series' patch finds nothing, its create a conflict: retried, quietly.
    lock(&sink.fail).extend([WriteError::status(404, "gone"), WriteError::status(409, "exists")]);
    record(&b, "a");
    idle(&b);
    assert_eq!(sink.calls(), [call("create", "a", 1), call("patch", "a", 2), call("create", "a", 2)]);
    let st = b.stats();
    assert_eq!((st.engine.pending_retries, st.engine.write_errors), (1, 1));
    assert!(lock(&sink.log).reports.is_empty());
    b.begin_stop();
    assert!(b.wait_finished(LONG));
}

#[test]
fn writes_are_attached_a_chunk_at_a_time() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let options = EngineOptions { seed: Some(1), ..EngineOptions::default() };
    let b = EventsBroadcaster::new(SeriesEngine::new(clock.clone(), options).unwrap());
    let host = Counting::default();
    b.start(sink.clone(), host.clone()).unwrap();
    idle(&b);
    // Queued in one go, as one batch of distinct events.
    let before = *lock(&host.0);
    {
        let mut st = b.shared.state();
        for i in 0..ATTACHED_CHUNK + 1 {
            let reason = format!("r{i}");
            let pod = ObjectReference { name: "p".into(), ..Default::default() };
            let input = EventV1Input {
                regarding: &pod,
                related: None,
                annotations: None,
                type_: "Normal",
                reason: &reason,
                action: "a",
                note: "n",
                reporting_controller: "c",
                reporting_instance: "i",
            };
            st.queue.push_back(make_event_v1(&input, T0, &mut UuidSource::Random).0);
        }
        b.shared.wake.notify_all();
    }
    idle(&b);
    assert_eq!(sink.calls().len(), ATTACHED_CHUNK + 1);
    assert_eq!(*lock(&host.0) - before, 2);
    b.begin_stop();
    assert!(b.wait_finished(LONG));
}

#[test]
fn stats_serialize_flat_in_their_order() {
    let stats = EventsBroadcasterStats { queued: 3, last_error: Some("x".into()), ..Default::default() };
    assert_eq!(
        serde_json::to_string(&stats).unwrap(),
        concat!(
            r#"{"observed":0,"created":0,"series_started":0,"counted":0,"refresh_writes":0,"finish_writes":0,"#,
            r#""forgotten":0,"evicted":0,"evicted_writes":0,"shutdown_writes":0,"writes_ok":0,"write_errors":0,"#,
            r#""sink_creates":0,"sink_create_errors":0,"sink_patches":0,"sink_patch_errors":0,"#,
            r#""retries":0,"abandoned":0,"finish_rounds":0,"refresh_rounds":0,"pending_retries":0,"cache_len":0,"#,
            r#""received":0,"queued":3,"dropped":0,"dropped_after_shutdown":0,"truncated_notes":0,"last_error":"x"}"#
        )
    );
}

#[test]
fn start_refuses_twice_and_after_stop() {
    let clock = Arc::new(FakeClock::new(T0));
    let b = EventsBroadcaster::new(SeriesEngine::new(clock.clone(), EngineOptions::default()).unwrap());
    assert_eq!(b.kick(), None, "no thread: idle already");
    b.start(Sink::default(), Counting::default()).unwrap();
    assert!(matches!(b.start(Sink::default(), Counting::default()), Err(StartError::Started)));
    b.begin_stop();
    assert!(matches!(b.can_start(), Err(StartError::ShutDown)));
    assert!(b.wait_finished(LONG));
    assert!(b.check_failed().is_ok());
    assert!(b.refuse_on_worker("shutdown").is_ok(), "not the engine thread");
    let refused = Error::from(b.start(Sink::default(), Counting::default()).unwrap_err());
    assert!(matches!(&refused, Error::State(m) if m == "the broadcaster is shut down"), "{refused}");
}

/// Panics in its first call, from the engine thread; first checks that a wait from there is refused.
struct Reentrant(Arc<OnceLock<Arc<EventsBroadcaster>>>);

impl SinkV1 for Reentrant {
    fn create(&mut self, _: &EventV1, _: bool) -> Result<Option<EventV1>, WriteError> {
        let refused = self.0.get().unwrap().refuse_on_worker("wait_idle").unwrap_err();
        panic!("{refused}");
    }
    fn patch(&mut self, _: &EventV1, _: &[u8], _: bool) -> Result<Option<EventV1>, WriteError> {
        unreachable!()
    }
    fn report(&mut self, _: &str) {}
}

#[test]
fn a_wait_from_the_engine_thread_is_refused_and_a_panic_fails_it() {
    let clock = Arc::new(FakeClock::new(T0));
    let b = Arc::new(EventsBroadcaster::new(SeriesEngine::new(clock, EngineOptions::default()).unwrap()));
    let cell = Arc::new(OnceLock::new());
    let _ = cell.set(b.clone());
    b.start(Reentrant(cell.clone()), Counting::default()).unwrap();
    record(&b, "a");
    assert!(b.wait_finished(LONG));
    assert_eq!(b.check_failed().unwrap_err().to_string(), "the engine thread failed");
}

#[test]
fn exit_flush_writes_what_is_queued_and_ends_the_thread() {
    let clock = Arc::new(FakeClock::new(T0));
    let sink = Sink::default();
    let b = started(&clock, &sink);
    record(&b, "a");
    assert_eq!(b.exit_flush(LONG), 0);
    assert!(b.wait_finished(Duration::ZERO));
    assert_eq!(lock(&sink.log).calls.first().map(|c| c.0), Some("create"));
}
