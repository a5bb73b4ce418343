use std::sync::{mpsc, Mutex};

use super::*;
use std::time::{Duration, Instant};

use crate::broadcaster::{Options, Reporter, DEFAULT_CATCH_UP_WAIT};
use crate::clock::FakeClock;
use crate::correlator::{CorrelatorOptions, KeyFuncs};
use crate::error::Error;
use crate::event::Event;
use crate::pipeline::{DROP_CHECK_EVERY, DROP_WARNING_INTERVAL};
use crate::sink::{EventSink, RetryPolicy, WriteError};
use crate::sync::lock;
use crate::watch::FullChannel;

const START: Time = Time(1_704_067_200_000_000_000);

#[derive(Default)]
struct Warnings(Mutex<Vec<String>>);

impl Reporter for Warnings {
    fn warn(&self, message: &str) {
        lock(&self.0).push(message.to_owned());
    }
    fn error(&self, message: &str) {
        lock(&self.0).push(message.to_owned());
    }
}

impl Warnings {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.0))
    }
}

fn hub(queue_length: usize) -> (Arc<RecorderHub>, Arc<FakeClock>, Arc<Warnings>) {
    let clock = Arc::new(FakeClock::new(START));
    let options = Options {
        pipeline: crate::pipeline::PipelineOptions {
            name: "Broadcaster-test".into(),
            queue_length,
            full_channel: FullChannel::Drop,
            clock: clock.clone(),
            catch_up_wait: DEFAULT_CATCH_UP_WAIT,
            log_interval: crate::health::DEFAULT_LOG_INTERVAL_NANOS,
        },
        retry: RetryPolicy { max_tries: 12, sleep_nanos: 0 },
        correlator: CorrelatorOptions::default(),
    };
    let warnings = Arc::new(Warnings::default());
    let broadcaster = EventBroadcaster::new(options, warnings.clone()).unwrap();
    (Arc::new(RecorderHub::new(broadcaster)), clock, warnings)
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference { kind: "Pod".into(), namespace: "ns".into(), name: name.into(), ..Default::default() }
}

fn record(r: &Recorder, name: &str) -> bool {
    r.record(pod(name), None, EventType::Normal, "Started".into(), "m".into(), None).unwrap()
}

#[test]
fn records_at_the_clock_time_with_the_source() {
    let (hub, clock, _) = hub(100);
    let seen = Arc::new(Mutex::new(Vec::<Event>::new()));
    let s = seen.clone();
    hub.broadcaster()
        .start_event_watcher("test", move |events| lock(&s).extend(events.iter().map(|e| (**e).clone())))
        .unwrap();
    let r = hub.new_recorder(EventSource { component: "kubelet".into(), host: "node-1".into() });
    assert_eq!(r.source().component, "kubelet");
    clock.step(1_000_000_000);
    assert!(r.record(pod("a"), None, EventType::Warning, "Failed".into(), "boom".into(), None).unwrap());
    let past = Time(START.0 - 5);
    let annotations = BTreeMap::from([("k".to_owned(), "v".to_owned())]);
    assert!(r.record(pod("b"), Some(annotations), EventType::Normal, "Old".into(), "m".into(), Some(past)).unwrap());
    assert!(hub.broadcaster().shutdown(Some(Duration::from_secs(10))));
    let seen = lock(&seen);
    assert_eq!(seen.len(), 2);
    let (a, b) = (&seen[0], &seen[1]);
    assert_eq!((a.type_.as_str(), a.reason.as_str(), a.message.as_str()), ("Warning", "Failed", "boom"));
    assert_eq!((a.first_timestamp, a.last_timestamp), (Some(clock.get()), Some(clock.get())));
    assert_eq!((a.source.component.as_str(), a.source.host.as_str()), ("kubelet", "node-1"));
    assert_eq!(a.reporting_controller, "kubelet");
    assert_eq!((b.type_.as_str(), b.first_timestamp), ("Normal", Some(past)));
    assert_eq!(b.metadata.annotations["k"], "v");
}

#[test]
fn counts_and_warns_about_events_after_shutdown() {
    let (hub, _, warnings) = hub(100);
    let r = hub.new_recorder(EventSource::default());
    assert!(record(&r, "a"));
    assert!(hub.broadcaster().shutdown(Some(Duration::from_secs(10))));
    assert!(!record(&r, "b"));
    assert!(!record(&r, "c"));
    let s = hub.broadcaster().stats();
    assert_eq!((s.pipeline.received, s.pipeline.dropped_after_shutdown, s.pipeline.dropped_incoming), (3, 2, 0));
    // The first drop is warned about, the second falls within the interval.
    assert_eq!(
        warnings.take(),
        ["kubevents: Broadcaster-test is dropping events: the broadcaster is shut down (0 dropped at the incoming queue, 0 at full watcher queues, \
          1 after shutdown so far)"]
    );
}

#[test]
fn drop_warnings_are_rate_limited() {
    let (hub, _, warnings) = hub(100);
    let r = hub.new_recorder(EventSource::default());
    hub.broadcaster().begin_shutdown();
    for _ in 0..10 {
        record(&r, "a");
    }
    assert_eq!(warnings.take().len(), 1);
    // Once the interval has passed, the next drop is warned about again, with the count so far.
    let long_ago = Instant::now().checked_sub(DROP_WARNING_INTERVAL + Duration::from_secs(1));
    *lock(&hub.broadcaster().pipeline().last_drop_warning) = long_ago;
    record(&r, "a");
    record(&r, "a");
    let w = warnings.take();
    assert_eq!(w.len(), 1);
    assert!(w[0].ends_with("11 after shutdown so far)"), "{w:?}");
}

/// Waits (bounded) for `done`.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn back_pressure_and_watcher_drop_warnings() {
    let (hub, _, warnings) = hub(4);
    let r = hub.new_recorder(EventSource::default());
    assert!(record(&r, "a"));
    assert!(hub.broadcaster().wait_idle(Some(Duration::from_secs(10))));
    // Nobody behind: no reason to wait.
    assert!(!r.should_catch_up());

    // A watcher stuck in its first batch until `release`; the queue behind it fills up and drops.
    let (entered, stuck_in) = mpsc::channel::<()>();
    let (release, stuck) = mpsc::channel::<()>();
    let (entered, stuck) = (Mutex::new(entered), Mutex::new(stuck));
    let watcher = hub
        .broadcaster()
        .start_event_watcher("stuck", move |_| {
            let _ = lock(&entered).send(());
            let _ = lock(&stuck).recv();
        })
        .unwrap();
    assert!(record(&r, "b"));
    stuck_in.recv_timeout(Duration::from_secs(10)).unwrap();
    // On a busy machine the incoming queue may drop some too (and warn first).
    let fill_until_dropped = |before: u64| {
        eventually(|| {
            record(&r, "c");
            watcher.dropped() > before
        })
    };
    assert!(fill_until_dropped(0));
    warnings.take();
    *lock(&hub.broadcaster().pipeline().last_drop_warning) = None;
    // The first pressured call looks for drops at the watchers' queues.
    assert!(r.should_catch_up());
    let w = warnings.take();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("kubevents: Broadcaster-test is dropping events: a watcher's queue is full"), "{w:?}");
    // A watcher stuck in a batch is slow: never waited for.
    std::thread::sleep(Duration::from_millis(100));
    assert!(!r.catch_up());

    // More drops, and the warning interval over: the calls in between do not look, the next check does.
    let before = watcher.dropped();
    assert!(fill_until_dropped(before));
    warnings.take();
    *lock(&hub.broadcaster().pipeline().last_drop_warning) = None;
    for _ in 1..DROP_CHECK_EVERY {
        assert!(r.should_catch_up());
    }
    assert!(warnings.take().is_empty());
    assert!(r.should_catch_up());
    assert_eq!(warnings.take().len(), 1);

    // Caught up: the next event finds no watcher behind.
    drop(release);
    assert!(hub.broadcaster().wait_idle(Some(Duration::from_secs(10))));
    assert!(record(&r, "e"));
    assert!(!r.should_catch_up());
}

struct Refusing;

impl EventSink for Refusing {
    fn create(&self, _: &Event) -> std::result::Result<Event, WriteError> {
        Err(WriteError::give_up("forbidden"))
    }
    fn patch(&self, _: &Event, _: &[u8]) -> std::result::Result<Event, WriteError> {
        Err(WriteError::give_up("forbidden"))
    }
}

#[test]
fn reports_what_a_shutdown_left_undelivered() {
    let (hub, _, warnings) = hub(100);
    hub.broadcaster().start_recording_to_sink(Arc::new(Refusing), 1, KeyFuncs::default()).unwrap();
    let r = hub.new_recorder(EventSource::default());
    assert!(record(&r, "a"));
    assert!(hub.broadcaster().shutdown(Some(Duration::from_secs(10))));
    warnings.take();
    hub.end_shutdown(true).unwrap();
    assert_eq!(
        warnings.take(),
        ["kubevents: Broadcaster-test shut down: 1 event received; sink Broadcaster-test/sink-1 (sink): 1 failed \
          write, 1 event given up (1 not retryable), last error: forbidden"]
    );
}

#[test]
fn a_shutdown_that_timed_out_says_what_is_pending() {
    let (hub, _, warnings) = hub(100);
    warnings.take();
    let e = hub.end_shutdown(false).unwrap_err();
    assert!(matches!(&e, Error::Timeout(_)));
    assert_eq!(e.to_string(), "shutdown timed out with 0 events still pending; they go on in the background");
    assert!(warnings.take().is_empty());
}
