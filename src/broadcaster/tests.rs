use std::sync::atomic::AtomicU32;

use super::*;
use crate::clock::FakeClock;
use crate::sink::{WriteError, Written, DEFAULT_MAX_TRIES, DEFAULT_SLEEP_NANOS};

const START: Time = Time(1_704_067_200_000_000_000);

#[derive(Default)]
struct Quiet;

impl Reporter for Quiet {
    fn warn(&self, _: &str) {}
    fn error(&self, _: &str) {}
}

/// Remembers every write; fails creates while `failures` is positive (with `error`).
#[derive(Default)]
struct Recording {
    writes: Mutex<Vec<(Written, Event)>>,
    failures: AtomicU32,
    error: Option<WriteError>,
    /// Fail the first `fail_each` creates of every involved object.
    fail_each: u32,
    tries: Mutex<std::collections::HashMap<String, u32>>,
}

impl EventSink for Recording {
    fn create(&self, e: &Event) -> std::result::Result<Event, WriteError> {
        if self.failures.load(Ordering::SeqCst) > 0 {
            self.failures.fetch_sub(1, Ordering::SeqCst);
            return Err(self.error.clone().unwrap_or_else(|| WriteError::retry("connection refused")));
        }
        let mut tries = lock(&self.tries);
        let n = tries.entry(e.involved_object.name.clone()).or_default();
        *n += 1;
        if *n <= self.fail_each {
            return Err(WriteError::retry("fake error"));
        }
        lock(&self.writes).push((Written::Created, e.clone()));
        Ok(e.clone())
    }
    fn patch(&self, e: &Event, _: &[u8]) -> std::result::Result<Event, WriteError> {
        lock(&self.writes).push((Written::Patched, e.clone()));
        Ok(e.clone())
    }
}

fn options(clock: Arc<FakeClock>) -> Options {
    Options {
        pipeline: PipelineOptions {
            name: "Broadcaster-test".into(),
            queue_length: 1000,
            full_channel: FullChannel::Drop,
            clock,
            catch_up_wait: crate::broadcaster::DEFAULT_CATCH_UP_WAIT,
            log_interval: crate::health::DEFAULT_LOG_INTERVAL_NANOS,
        },
        retry: RetryPolicy { max_tries: 12, sleep_nanos: 0 },
        correlator: CorrelatorOptions::default(),
    }
}

fn reference(uid: &str, field_path: &str) -> ObjectReference {
    ObjectReference {
        kind: "Pod".into(),
        namespace: "baz".into(),
        name: "foo".into(),
        uid: uid.into(),
        api_version: "v1".into(),
        field_path: field_path.into(),
        ..Default::default()
    }
}

fn occurrence(r: ObjectReference, reason: &str, time: Time) -> Occurrence {
    Occurrence {
        reference: r,
        annotations: None,
        type_: EventType::Normal,
        reason: reason.into(),
        message: "some verbose message: 1".into(),
        time,
        source: Arc::new(EventSource { component: "eventTest".into(), host: String::new() }),
    }
}

/// The 7 calls of client-go's TestEventf and the (write, count) each must produce.
fn event_table(b: &EventBroadcaster, clock: &FakeClock, sink: &Recording) {
    let r1 = reference("bar", "spec.containers[2]");
    let r2 = reference("differentUid", "spec.containers[3]");
    let table = [
        (r1.clone(), "Started", Written::Created, 1),
        (reference("bar", ""), "Killed", Written::Created, 1),
        (r1.clone(), "Started", Written::Patched, 2),
        (r2.clone(), "Started", Written::Created, 1),
        (r1, "Started", Written::Patched, 3),
        (r2.clone(), "Stopped", Written::Created, 1),
        (r2, "Stopped", Written::Patched, 2),
    ];
    for (r, reason, written, count) in table {
        clock.step(1_000_000_000);
        let before = lock(&sink.writes).len();
        assert_eq!(b.record(occurrence(r.clone(), reason, clock.get())), Ok(true));
        assert!(b.wait_idle(Some(Duration::from_secs(10))));
        let writes = lock(&sink.writes);
        assert_eq!(writes.len(), before + 1);
        let (w, e) = &writes[before];
        assert_eq!((*w, e.count, e.reason.as_str()), (written, count, reason));
        assert_eq!(e.involved_object, r);
        assert!(e.metadata.name.starts_with("foo."));
        assert_eq!(e.metadata.namespace, "baz");
        assert_eq!(e.last_timestamp, Some(clock.get()));
        assert_eq!(e.first_timestamp != e.last_timestamp, count > 1);
    }
}

#[test]
fn eventf_table_and_a_fresh_cache_per_sink() {
    let clock = Arc::new(FakeClock::new(START));
    let b = EventBroadcaster::new(options(clock.clone()), Arc::new(Quiet)).unwrap();
    let sink = Arc::new(Recording::default());
    let w = b.start_recording_to_sink(sink.clone(), 1, KeyFuncs::default()).unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    b.start_event_watcher("log", move |evs| lock(&l).extend(evs.iter().map(|e| log_line(e)))).unwrap();
    event_table(&b, &clock, &sink);
    assert_eq!(
        lock(&lines)[0],
        r#"Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[2]"}): type: 'Normal' reason: 'Started' some verbose message: 1"#
    );
    // TestMultiSinkCache: a second sink starts from an empty cache and sees the same pattern.
    w.stop();
    let sink2 = Arc::new(Recording::default());
    b.start_recording_to_sink(sink2.clone(), 1, KeyFuncs::default()).unwrap();
    event_table(&b, &clock, &sink2);
    assert_eq!(lock(&sink.writes).len(), 7);
    assert!(b.shutdown(Some(Duration::from_secs(10))));
    let s = b.stats();
    assert_eq!((s.pipeline.received, s.writes.created, s.writes.patched, s.deduplicated, s.pending), (14, 8, 6, 6, 0));
}

#[test]
fn lots_of_events_with_failures_are_all_delivered() {
    // TestLotsOfEvents: every create fails a few times first; with sleep 0 all 1000 arrive.
    let clock = Arc::new(FakeClock::new(START));
    let b = EventBroadcaster::new(options(clock.clone()), Arc::new(Quiet)).unwrap();
    let sink = Arc::new(Recording { fail_each: 4, ..Default::default() });
    b.start_recording_to_sink(sink.clone(), 1, KeyFuncs::default()).unwrap();
    let logged = Arc::new(AtomicU64::new(0));
    let l = logged.clone();
    b.start_event_watcher("log", move |evs| {
        l.fetch_add(evs.len() as u64, Ordering::Relaxed);
    })
    .unwrap();
    for i in 0..1000 {
        let mut r = reference("bar", "");
        r.name = format!("foo-{i}");
        assert_eq!(b.record(occurrence(r, &format!("Reason-{i}"), clock.get())), Ok(true));
    }
    assert!(b.wait_idle(Some(Duration::from_secs(30))));
    assert!(b.shutdown(Some(Duration::from_secs(30))));
    assert_eq!(lock(&sink.writes).len(), 1000);
    assert_eq!(logged.load(Ordering::Relaxed), 1000);
    let s = b.stats();
    assert_eq!(
        (s.writes.created, s.writes.retries, s.writes.abandoned, s.pipeline.dropped_incoming),
        (1000, 4000, 0, 0)
    );
}

#[test]
fn retries_sleep_on_the_fake_clock_and_abandon_after_max_tries() {
    let clock = Arc::new(FakeClock::new(START));
    let mut o = options(clock.clone());
    o.retry = RetryPolicy { max_tries: 3, sleep_nanos: 10_000_000_000 };
    let b = EventBroadcaster::new(o, Arc::new(Quiet)).unwrap();
    let sink = Arc::new(Recording { failures: AtomicU32::new(4), ..Default::default() });
    b.start_recording_to_sink(sink.clone(), 1, KeyFuncs::default()).unwrap();
    let mut r = reference("bar", "");
    b.record(occurrence(r.clone(), "A", clock.get())).unwrap();
    r.name = "other".into();
    b.record(occurrence(r, "B", clock.get())).unwrap();
    // Nothing moves until the clock does: the first event waits out its first sleep.
    assert!(b.wait_idle(Some(Duration::from_secs(10))));
    assert_eq!(sink.failures.load(Ordering::SeqCst), 3);
    for _ in 0..4 {
        clock.step(10_000_000_000);
        assert!(b.wait_idle(Some(Duration::from_secs(10))));
    }
    // A: 3 failed tries, abandoned; B: one more failure, then created. Every failed try is a failed create.
    let s = b.stats();
    assert_eq!((s.writes.abandoned, s.writes.created, s.writes.retries), (1, 1, 3));
    assert_eq!((s.writes.create_errors, s.writes.patched, s.writes.patch_errors), (4, 0, 0));
    assert_eq!(lock(&sink.writes)[0].1.reason, "B");
    assert!(b.shutdown(None));
}

#[test]
fn shutdown_gives_a_failing_event_one_try_and_returns() {
    let clock = Arc::new(FakeClock::new(START));
    let b = EventBroadcaster::new(options(clock.clone()), Arc::new(Quiet)).unwrap();
    let mut o = options(clock.clone());
    o.retry.sleep_nanos = 3_600_000_000_000;
    let b2 = EventBroadcaster::new(o, Arc::new(Quiet)).unwrap();
    drop(b);
    let sink = Arc::new(Recording { failures: AtomicU32::new(1_000_000), ..Default::default() });
    b2.start_recording_to_sink(sink.clone(), 1, KeyFuncs::default()).unwrap();
    for i in 0..5 {
        b2.record(occurrence(reference(&format!("u{i}"), ""), "A", clock.get())).unwrap();
    }
    assert!(b2.wait_idle(Some(Duration::from_secs(10))));
    assert!(b2.shutdown(Some(Duration::from_secs(10))));
    let s = b2.stats();
    // The first event: one try, a sleep cut short by shutdown, one last try. The others: one try each.
    assert_eq!((s.writes.abandoned, s.writes.created, s.pending), (5, 0, 0));
    assert_eq!(sink.failures.load(Ordering::SeqCst), 1_000_000 - 6);
    assert_eq!(b2.record(occurrence(reference("x", ""), "A", clock.get())), Err(Stopped));
}

/// A broadcaster with no spam filtering to speak of, recording to `sink` with `workers` delivery workers.
fn with_workers(sink: Arc<dyn EventSink>, workers: usize, queue_length: usize) -> (Arc<FakeClock>, EventBroadcaster) {
    let clock = Arc::new(FakeClock::new(START));
    let mut o = options(clock.clone());
    o.correlator.burst = 1_000_000;
    o.pipeline.queue_length = queue_length;
    let b = EventBroadcaster::new(o, Arc::new(Quiet)).unwrap();
    b.start_recording_to_sink(sink, workers, KeyFuncs::default()).unwrap();
    (clock, b)
}

fn pod(i: usize) -> ObjectReference {
    ObjectReference { name: format!("pod-{i}"), ..reference("bar", "") }
}

#[test]
fn workers_keep_the_writes_of_one_event_in_order() {
    let sink = Arc::new(Recording::default());
    let (clock, b) = with_workers(sink.clone(), 4, 100_000);
    for _ in 0..50 {
        for i in 0..20 {
            clock.step(1_000_000);
            assert_eq!(b.record(occurrence(pod(i), "R", clock.get())), Ok(true));
        }
    }
    assert!(b.shutdown(Some(Duration::from_secs(30))));
    let writes = lock(&sink.writes);
    assert_eq!(writes.len(), 1000);
    for i in 0..20 {
        let name = format!("pod-{i}");
        let counts: Vec<i32> =
            writes.iter().filter(|(_, e)| e.involved_object.name == name).map(|(_, e)| e.count).collect();
        assert_eq!(counts, (1..=50).collect::<Vec<_>>());
    }
    let s = b.stats();
    assert_eq!((s.writes.created, s.writes.patched), (20, 980));
}

/// Holds every write until opened; counts the writes of each thread.
#[derive(Default)]
struct Gated {
    open: Mutex<bool>,
    opened: std::sync::Condvar,
    by_thread: Mutex<std::collections::BTreeMap<String, usize>>,
}

impl EventSink for Gated {
    fn create(&self, e: &Event) -> std::result::Result<Event, WriteError> {
        let mut open = lock(&self.open);
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        drop(open);
        let name = std::thread::current().name().unwrap_or("?").to_string();
        *lock(&self.by_thread).entry(name).or_default() += 1;
        Ok(e.clone())
    }
    fn patch(&self, e: &Event, _: &[u8]) -> std::result::Result<Event, WriteError> {
        self.create(e)
    }
}

#[test]
fn workers_share_the_writes_evenly() {
    let sink = Arc::new(Gated::default());
    let (clock, b) = with_workers(sink.clone(), 8, 10_000);
    for i in 0..800 {
        assert_eq!(b.record(occurrence(pod(i), "R", clock.get())), Ok(true));
    }
    // Every write handed to a worker (queued or in its hands) before any is done: the shares come from
    // the assignment alone.
    let assigned = || b.shared.pipeline.queues_load();
    while assigned() < 800 {
        std::thread::yield_now();
    }
    *lock(&sink.open) = true;
    sink.opened.notify_all();
    assert!(b.shutdown(Some(Duration::from_secs(30))));
    let shares: Vec<usize> = lock(&sink.by_thread).values().copied().collect();
    assert_eq!(shares, vec![100; 8]);
}

#[test]
fn log_line_quotes_like_go() {
    let e = Event {
        involved_object: reference("bar", "a\"b\\c\n"),
        type_: "Warning".into(),
        reason: "R".into(),
        message: "m".into(),
        ..Default::default()
    };
    assert_eq!(
        log_line(&e),
        r#"Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", APIVersion:"v1", ResourceVersion:"", FieldPath:"a\"b\\c\n"}): type: 'Warning' reason: 'R' m"#
    );
}

#[test]
fn structured_line_is_klogs() {
    let mut e = Event {
        involved_object: reference("bar", "spec.containers[2]"),
        type_: "Normal".into(),
        reason: "Started".into(),
        message: "some verbose message: 1".into(),
        ..Default::default()
    };
    assert_eq!(
        structured_line(&e),
        r#"Event occurred object="baz/foo" fieldPath="spec.containers[2]" kind="Pod" apiVersion="v1" type="Normal" reason="Started" message="some verbose message: 1""#
    );
    e.involved_object.namespace.clear();
    assert!(structured_line(&e).starts_with(r#"Event occurred object="foo" "#));
}

#[test]
fn stats_serialize_as_python_lists_them() {
    let s = BroadcasterStats {
        pipeline: PipelineStats {
            received: 5,
            dropped_after_shutdown: 1,
            dropped_watchers: vec![("sink-2".into(), 3), ("logging-10".into(), 0)],
            ..Default::default()
        },
        pending: 2,
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_string(&s).unwrap(),
        concat!(
            r#"{"received":5,"dropped_incoming":0,"dropped_after_shutdown":1,"#,
            r#""dropped_watchers":{"sink-2":3,"logging-10":0},"aggregated":0,"deduplicated":0,"skipped":0,"#,
            r#""created":0,"patched":0,"create_errors":0,"patch_errors":0,"retries":0,"abandoned":0,"#,
            r#""handler_errors":0,"recorder_waits":0,"pending":2,"sinks":{}}"#
        )
    );
}

#[test]
fn options_are_checked_with_their_names() {
    assert_eq!(delivery_workers_option(1).unwrap(), 1);
    assert_eq!(delivery_workers_option(MAX_WORKERS as i64).unwrap(), MAX_WORKERS);
    assert_eq!(delivery_workers_option(1025).unwrap_err().to_string(), "workers must be <= 1024, got 1025");
    assert_eq!(delivery_workers_option(0).unwrap_err().to_string(), "workers must be >= 1, got 0");
    assert!(matches!(full_channel_option(DEFAULT_FULL_CHANNEL), Ok(FullChannel::Drop)));
    assert!(matches!(full_channel_option("wait"), Ok(FullChannel::Wait)));
    assert!(matches!(full_channel_option("drop"), Ok(FullChannel::Drop)));
    assert_eq!(
        full_channel_option("block").err().unwrap().to_string(),
        r#"full_channel must be "drop" or "wait", got "block""#
    );
}

#[derive(Default)]
struct Errors(Mutex<Vec<String>>);

impl Reporter for Errors {
    fn warn(&self, _: &str) {}
    fn error(&self, message: &str) {
        lock(&self.0).push(message.to_owned());
    }
}

#[test]
fn handler_failures_are_counted_and_reported() {
    let errors = Arc::new(Errors::default());
    let b = EventBroadcaster::new(options(Arc::new(FakeClock::new(START))), errors.clone()).unwrap();
    b.handler_failed("logger", "ValueError('x')", false, Some("Traceback ..."));
    b.handler_failed("logger", "ValueError('x')", false, None);
    b.handler_failed("event watcher callback", "KeyboardInterrupt()", true, None);
    assert_eq!(b.stats().handler_errors, 3);
    assert_eq!(
        *lock(&errors.0),
        [
            "logger raised ValueError('x')\nTraceback ...",
            "logger raised ValueError('x')",
            "event watcher callback raised KeyboardInterrupt(); the next shutdown() or wait_idle() raises it again",
        ]
    );
}

#[test]
fn exit_flush_shuts_down_and_answers_what_is_pending() {
    let b = EventBroadcaster::new(options(Arc::new(FakeClock::new(START))), Arc::new(Quiet)).unwrap();
    assert_eq!(b.exit_flush(Duration::from_secs(10)), (0, 0));
    assert!(b.wait_shut_down(Some(Duration::ZERO)));
}

// Ports of client-go's tests of `recordToSink` (tools/record/event_test.go), run through the writer that
// `start_recording_to_sink` starts: alone, and as delivery workers.

/// How long a test waits for the broadcaster's threads before it fails (real time; the writes run on the fake
/// clock).
const WAIT: Duration = Duration::from_secs(30);

/// client-go's `testEventSink` for the write tests: a create fails with `create_error` while fewer creates than
/// `fail_while_below` have been tried, this one included (Go's `attempts < timesToSendError`); a patch fails
/// with `patch_error` if there is one. A create answers with resourceVersion "updated-resource-version". Every
/// call is kept, with the event it was given.
#[derive(Default)]
struct Scripted {
    create_error: Option<WriteError>,
    fail_while_below: u32,
    patch_error: Option<WriteError>,
    calls: Mutex<Vec<(Written, Event)>>,
}

impl Scripted {
    fn calls(&self, verb: Written) -> Vec<Event> {
        lock(&self.calls).iter().filter(|(v, _)| *v == verb).map(|(_, e)| e.clone()).collect()
    }
}

impl EventSink for Scripted {
    fn create(&self, e: &Event) -> std::result::Result<Event, WriteError> {
        let mut calls = lock(&self.calls);
        calls.push((Written::Created, e.clone()));
        let attempts = calls.iter().filter(|(v, _)| *v == Written::Created).count() as u32;
        match &self.create_error {
            Some(err) if attempts < self.fail_while_below => Err(err.clone()),
            _ => {
                let mut answer = e.clone();
                answer.metadata.resource_version = "updated-resource-version".into();
                Ok(answer)
            }
        }
    }
    fn patch(&self, e: &Event, _: &[u8]) -> std::result::Result<Event, WriteError> {
        lock(&self.calls).push((Written::Patched, e.clone()));
        self.patch_error.clone().map_or_else(|| Ok(e.clone()), Err)
    }
}

/// A broadcaster on a fake clock with client-go's retry policy (12 tries, 10 s apart), writing to `sink` with
/// `workers` delivery workers.
fn recording_to(sink: Arc<dyn EventSink>, workers: usize) -> (Arc<FakeClock>, EventBroadcaster) {
    let clock = Arc::new(FakeClock::new(START));
    let mut o = options(clock.clone());
    o.retry = RetryPolicy::default();
    let b = EventBroadcaster::new(o, Arc::new(Quiet)).unwrap();
    b.start_recording_to_sink(sink, workers, KeyFuncs::default()).unwrap();
    (clock, b)
}

/// Lets the writers run until all they have left is to sleep, then `sleeps` times steps the clock by a retry's
/// sleep (the first one, randomised, is shorter) and lets them run again.
fn retry_on_the_clock(b: &EventBroadcaster, clock: &FakeClock, sleeps: u32) {
    assert!(b.wait_idle(Some(WAIT)));
    for _ in 0..sleeps {
        clock.step(DEFAULT_SLEEP_NANOS);
        assert!(b.wait_idle(Some(WAIT)));
    }
}

// client-go's TestWriteEventError. client-go gives up on every `StatusError` (its REST client retried 429
// and 5xx already); the sinks here retry 429 and 5xx themselves (`verdict_for_status`).
#[test]
fn write_event_error() {
    let cases = [
        ("giveUp1: the request cannot be made", WriteError::give_up("request construction"), 1000, 1),
        ("giveUp2: the server rejected it", WriteError::status(409, "already exists"), 1000, 1),
        ("giveUp2: a bad request", WriteError::status(400, "bad request"), 1000, 1),
        ("retry1: an unexpected object", WriteError::retry("unexpected object"), 1000, 12),
        ("retry2: a weird error", WriteError::retry("a weird error"), 1000, 12),
        ("retry: the server is unavailable", WriteError::status(503, "unavailable"), 1000, 12),
        ("retry: too many requests", WriteError::status(429, "slow down"), 1000, 12),
        ("succeedEventually", WriteError::retry("a weird error"), 2, 2),
    ];
    for workers in [1, 3] {
        for (name, error, times_to_send_error, attempts_wanted) in cases.clone() {
            let sink = Arc::new(Scripted {
                create_error: Some(error),
                fail_while_below: times_to_send_error,
                ..Default::default()
            });
            let (clock, b) = recording_to(sink.clone(), workers);
            b.record(occurrence(reference("bar", ""), "Started", clock.get())).unwrap();
            retry_on_the_clock(&b, &clock, DEFAULT_MAX_TRIES + 2);
            let what = format!("{name}, {workers} workers");
            assert_eq!(sink.calls(Written::Created).len() as u32, attempts_wanted, "{what}");
            // Go's sink answers the `times_to_send_error`-th create.
            let written = attempts_wanted >= times_to_send_error;
            let (tries, created) = (u64::from(attempts_wanted), u64::from(written));
            let s = b.stats();
            assert_eq!((s.writes.created, s.writes.create_errors), (created, tries - created), "{what}");
            // A retry after every try but the last: the one that succeeded, or the one it gave up after.
            assert_eq!((s.writes.retries, s.writes.abandoned), (tries - 1, 1 - created), "{what}");
            assert_eq!((s.writes.patched, s.writes.patch_errors, s.pending), (0, 0, 0), "{what}");
            assert!(b.shutdown(Some(WAIT)));
        }
    }
}

/// Records one event twice, a second apart, through `workers` delivery workers to a sink whose patches fail with
/// `patch_error`; returns the sink and the broadcaster once idle.
fn a_repeat_to(patch_error: WriteError, workers: usize) -> (Arc<Scripted>, EventBroadcaster) {
    let sink = Arc::new(Scripted { patch_error: Some(patch_error), ..Default::default() });
    let (clock, b) = recording_to(sink.clone(), workers);
    for _ in 0..2 {
        clock.step(1_000_000_000);
        b.record(occurrence(reference("bar", ""), "Started", clock.get())).unwrap();
        assert!(b.wait_idle(Some(WAIT)));
    }
    (sink, b)
}

// client-go's TestUpdateExpiredEvent: the patch of a repeat finds no event (404), and the event is created
// again with its resourceVersion cleared.
#[test]
fn update_expired_event() {
    for workers in [1, 3] {
        let (sink, b) = a_repeat_to(WriteError::status(404, "not found"), workers);
        // The repeat is patched with the resourceVersion of the server's answer, then created without it.
        let [patch] = &sink.calls(Written::Patched)[..] else { panic!("one patch, {workers} workers") };
        assert_eq!((patch.count, patch.metadata.resource_version.as_str()), (2, "updated-resource-version"));
        let created = sink.calls(Written::Created);
        assert_eq!(created.len(), 2, "{workers} workers");
        assert_eq!((created[1].count, created[1].metadata.resource_version.as_str()), (2, ""));
        assert_eq!(created[1].metadata.name, patch.metadata.name);
        let s = b.stats();
        assert_eq!((s.writes.created, s.writes.patched, s.writes.patch_errors, s.writes.create_errors), (2, 0, 1, 0));
        assert_eq!((s.writes.retries, s.writes.abandoned, s.deduplicated), (0, 0, 1));
        assert!(b.shutdown(Some(WAIT)));
    }
}

#[test]
fn a_patch_error_other_than_404_is_not_a_create() {
    for workers in [1, 3] {
        let (sink, b) = a_repeat_to(WriteError::status(422, "invalid"), workers);
        assert_eq!((sink.calls(Written::Created).len(), sink.calls(Written::Patched).len()), (1, 1));
        let s = b.stats();
        assert_eq!((s.writes.created, s.writes.patch_errors, s.writes.retries, s.writes.abandoned), (1, 1, 0, 1));
        assert!(b.shutdown(Some(WAIT)));
    }
}

/// Holds the create of reason "Blocker" until opened; fails every create of reason "Target" (with client-go's
/// `UnexpectedObjectError`, which is retried), counting them.
#[derive(Default)]
struct BlockThenFail {
    open: Mutex<bool>,
    opened: std::sync::Condvar,
    target_creates: AtomicU32,
}

impl EventSink for BlockThenFail {
    fn create(&self, e: &Event) -> std::result::Result<Event, WriteError> {
        if e.reason == "Target" {
            self.target_creates.fetch_add(1, Ordering::SeqCst);
            return Err(WriteError::retry("unexpected object"));
        }
        let mut open = lock(&self.open);
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        Ok(e.clone())
    }
    fn patch(&self, e: &Event, _: &[u8]) -> std::result::Result<Event, WriteError> {
        Ok(e.clone())
    }
}

// client-go's TestCancelEvent: an event whose first try comes after shutdown gets that one try, then is
// abandoned without a sleep.
#[test]
fn cancel_event() {
    for workers in [1, 3] {
        let sink = Arc::new(BlockThenFail::default());
        let (clock, b) = recording_to(sink.clone(), workers);
        // Two events of one object at one instant share their name, so the target's write waits behind the
        // blocker's with one writer and with several.
        let at = clock.get();
        b.record(occurrence(reference("bar", ""), "Blocker", at)).unwrap();
        b.record(occurrence(reference("bar", ""), "Target", at)).unwrap();
        b.begin_shutdown();
        *lock(&sink.open) = true;
        sink.opened.notify_all();
        assert!(b.wait_shut_down(Some(WAIT)));
        assert_eq!(sink.target_creates.load(Ordering::SeqCst), 1, "{workers} workers");
        let s = b.stats();
        assert_eq!(
            (s.writes.created, s.writes.create_errors, s.writes.retries, s.writes.abandoned, s.pending),
            (1, 1, 0, 1, 0)
        );
    }
}
