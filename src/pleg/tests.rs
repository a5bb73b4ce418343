//! GenericPLEG and EventedPLEG against a scripted runtime (ports of parts of generic_test.go and
//! evented_test.go; the Python suite ports them all).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::evented::{CriEvent, CriEventType, EventedOptions, EventedPleg};
use super::generic::{is_abort, Abort, GenericPleg, Inspection, LoopStep, PlegOptions, Runtime, RELIST_QUEUE_CAPACITY};
use super::pod::{BasicStatus, Container, ContainerState, Pod, PodLifecycleEvent, PodLifecycleEventType, StatusFields};
use super::records::PodRecords;
use super::{EventChannel, Lookup, PodCache};
use crate::clock::FakeClock;
use crate::error::Error;
use crate::time::Time;

use ContainerState::*;
use PodLifecycleEventType::*;

#[derive(Default)]
struct Fake {
    pods: Mutex<Vec<Pod>>,
    fail_list: AtomicBool,
    /// Pod ids whose inspection fails.
    failing: Mutex<Vec<String>>,
    /// Pod ids whose inspection hangs until released.
    hang: Mutex<Vec<String>>,
    release: AtomicBool,
    ips: Mutex<Vec<String>>,
    /// Pod ids whose inspection aborts (a `KeyboardInterrupt` in Python).
    aborting: Mutex<Vec<String>>,
    /// `check_interrupt` aborts (Ctrl-C on the caller's thread).
    interrupt: AtomicBool,
    /// What `loop_aborted` was told.
    aborted_loops: Mutex<Vec<String>>,
    /// What each `get_pods` returned.
    listed: Mutex<Vec<Vec<Arc<Pod>>>>,
}

impl Runtime for Arc<Fake> {
    type Status = BasicStatus;
    type Error = String;
    fn get_pods(&self, known: &PodRecords) -> Result<Vec<Arc<Pod>>, Error> {
        if self.fail_list.load(Ordering::Relaxed) {
            return Err(Error::Clock("runtime down".into()));
        }
        // Shares what is known, as the binding does.
        let share =
            |p: &Pod| known.latest(&p.id).filter(|k| ***k == *p).cloned().unwrap_or_else(|| Arc::new(p.clone()));
        let pods: Vec<_> = self.pods.lock().unwrap().iter().map(share).collect();
        self.listed.lock().unwrap().push(pods.clone());
        Ok(pods)
    }
    fn get_pod_status(&self, pod: &Pod) -> Result<Inspection<BasicStatus, String>, Abort> {
        while self.hang.lock().unwrap().contains(&pod.id) && !self.release.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.aborting.lock().unwrap().contains(&pod.id) {
            return Err(Abort(Error::Option(format!("interrupted at {}", pod.id))));
        }
        let fields = StatusFields { ips: self.ips.lock().unwrap().clone(), ..Default::default() };
        let status = BasicStatus { id: pod.id.clone(), fields };
        let err = self.failing.lock().unwrap().contains(&pod.id).then(|| "inspection error".to_owned());
        Ok(Inspection { status: Some(status), err, invalid: None })
    }
    fn timeout_error(&self, message: String) -> String {
        message
    }
    fn check_interrupt(&self) -> Result<(), Abort> {
        if self.interrupt.load(Ordering::Relaxed) {
            return Err(Abort(Error::Option("interrupted".into())));
        }
        Ok(())
    }
    fn loop_aborted(&self, what: &str, err: &Error) {
        self.aborted_loops.lock().unwrap().push(format!("{what}: {err}"));
    }
}

fn pod(id: &str, cs: &[(&str, ContainerState)]) -> Pod {
    Pod { id: id.into(), containers: cs.iter().map(|(i, s)| Container::new(*i, *s)).collect(), ..Pod::default() }
}

fn ev(pid: &str, kind: PodLifecycleEventType, cid: &str) -> PodLifecycleEvent {
    PodLifecycleEvent::new(pid, kind, Some(cid))
}

type Pleg = GenericPleg<Arc<Fake>>;

fn new_pleg(options: PlegOptions, evented: bool) -> (Arc<Fake>, Arc<FakeClock>, Arc<Pleg>) {
    let fake = Arc::new(Fake::default());
    let clock = Arc::new(FakeClock::new(Time(0)));
    let pleg = GenericPleg::new(
        fake.clone(),
        Arc::new(PodCache::new(evented)),
        clock.clone(),
        Arc::new(EventChannel::new(100)),
        options,
    )
    .unwrap();
    (fake, clock, Arc::new(pleg))
}

#[test]
fn relisting() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() =
        vec![pod("1234", &[("c1", Exited), ("c2", Running), ("c3", Unknown)]), pod("4567", &[("c1", Exited)])];
    pleg.relist().unwrap();
    assert_eq!(
        pleg.channel().drain(),
        [ev("1234", ContainerDied, "c1"), ev("1234", ContainerStarted, "c2"), ev("4567", ContainerDied, "c1")]
    );
    pleg.relist().unwrap();
    assert!(pleg.channel().drain().is_empty());
    *fake.pods.lock().unwrap() = vec![pod("1234", &[("c2", Exited), ("c3", Running)]), pod("4567", &[("c4", Running)])];
    pleg.relist().unwrap();
    assert_eq!(
        pleg.channel().drain(),
        [
            ev("1234", ContainerRemoved, "c1"),
            ev("1234", ContainerDied, "c2"),
            ev("1234", ContainerStarted, "c3"),
            ev("4567", ContainerRemoved, "c1"),
            ev("4567", ContainerStarted, "c4"),
        ]
    );
}

#[test]
fn failed_listing_changes_nothing() {
    let (fake, clock, pleg) = new_pleg(PlegOptions::default(), false);
    fake.fail_list.store(true, Ordering::Relaxed);
    clock.step(10);
    assert!(pleg.relist().is_err());
    assert_eq!(pleg.relist_time(), None);
    assert_eq!(pleg.cache().timestamp(), None);
    assert_eq!(pleg.healthy(), (false, Some("pleg has yet to be successful".into())));
    fake.fail_list.store(false, Ordering::Relaxed);
    pleg.relist().unwrap();
    assert_eq!(pleg.cache().timestamp(), Some(Time(10)));
    clock.step(180_000_000_000);
    assert!(pleg.healthy().0);
    clock.step(1);
    assert_eq!(pleg.healthy(), (false, Some("pleg was last seen active 3m0.000000001s ago; threshold is 3m0s".into())));
}

#[test]
fn relists_fill_the_kubelets_histograms_on_the_clock() {
    let (fake, clock, pleg) = new_pleg(PlegOptions::default(), false);
    fake.fail_list.store(true, Ordering::Relaxed);
    assert!(pleg.relist().is_err());
    // A failed relist is timed too, but starts no interval: the next one has no successful relist before it.
    fake.fail_list.store(false, Ordering::Relaxed);
    clock.step(S);
    pleg.relist().unwrap();
    for step in [2 * S, 30 * S] {
        clock.step(step);
        pleg.relist().unwrap();
    }
    let s = pleg.stats();
    assert_eq!((s.relist_duration_seconds.count, s.relist_duration_seconds.cumulative[0]), (4, 4));
    let interval = s.relist_interval_seconds;
    // 2 s falls in the 2.5 bucket, 30 s in none but +Inf.
    assert_eq!(interval.cumulative, vec![0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1]);
    assert_eq!((interval.count, interval.sum_nanos), (2, 32 * S as u64));
    assert_eq!(s.last_seen_ns, Some(33 * S));
}

#[test]
fn failed_inspection_is_stored_and_retried() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    fake.failing.lock().unwrap().push("a".into());
    pleg.relist().unwrap();
    assert!(pleg.channel().drain().is_empty());
    assert_eq!(pleg.cache().get("a").err(), Some(&"inspection error".to_owned()));
    assert_eq!(pleg.pods_to_reinspect().unwrap(), ["a"]);
    fake.failing.lock().unwrap().clear();
    pleg.relist().unwrap();
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerStarted, "c")]);
    assert!(pleg.pods_to_reinspect().unwrap().is_empty());
    assert_eq!(pleg.stats().reinspections, 1);
}

#[test]
fn ips_survive_a_teardown() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.ips.lock().unwrap() = vec!["10.0.0.1".into()];
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    pleg.relist().unwrap();
    fake.ips.lock().unwrap().clear();
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Exited)])];
    pleg.relist().unwrap();
    assert_eq!(pleg.cache().get("a").status().unwrap().fields.ips, ["10.0.0.1"]);
}

#[test]
fn watch_condition_emits_one_condition_met() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    pleg.relist().unwrap();
    pleg.channel().drain();
    pleg.set_pod_watch_condition("a", "x", Arc::new(|_| Ok(true)));
    pleg.set_pod_watch_condition("a", "y", Arc::new(|_| Ok(true)));
    pleg.set_pod_watch_condition("a", "z", Arc::new(|_| Ok(false)));
    pleg.relist().unwrap();
    assert_eq!(pleg.channel().drain(), [PodLifecycleEvent::new("a", ConditionMet, None)]);
    assert_eq!(pleg.watch_conditions("a"), Some(vec![("z".to_owned(), 0)]));
}

#[test]
fn a_hung_inspection_does_not_stall_the_relist() {
    let options = PlegOptions {
        inspect_concurrency: 2,
        inspect_timeout: Some(Duration::from_millis(500)),
        ..PlegOptions::default()
    };
    let (fake, _, pleg) = new_pleg(options, false);
    *fake.pods.lock().unwrap() =
        vec![pod("a", &[("c", Running)]), pod("b", &[("c", Running)]), pod("c", &[("c", Running)])];
    fake.hang.lock().unwrap().push("a".into());
    pleg.relist().unwrap();
    assert_eq!(pleg.channel().drain(), [ev("b", ContainerStarted, "c"), ev("c", ContainerStarted, "c")]);
    assert_eq!(pleg.cache().get("a").err(), Some(&"inspection of pod a (/) did not return within 500ms".to_owned()));
    assert_eq!(pleg.stats().inspection_timeouts, 1);
    // Still hung: not inspected again on top of the running call.
    pleg.relist().unwrap();
    assert!(pleg.channel().drain().is_empty());
    fake.release.store(true, Ordering::Relaxed);
    while pleg.cache().get("a").err().is_some() {
        pleg.relist().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerStarted, "c")]);
}

#[test]
fn an_abort_stops_the_relist_at_its_pod_and_is_returned() {
    let (fake, clock, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() =
        vec![pod("a", &[("c", Running)]), pod("b", &[("c", Running)]), pod("c", &[("c", Running)])];
    pleg.request_reinspect("c").unwrap();
    fake.aborting.lock().unwrap().push("b".into());
    clock.step(5);
    let e = pleg.relist().unwrap_err();
    assert!(is_abort(&e) && e.to_string() == "interrupted at b", "{e}");
    // "a" is committed; "b" (not stored as an inspection error) and "c" are not, and the cache is not fresh.
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerStarted, "c")]);
    assert!(matches!(pleg.cache().get("b"), Lookup::Missing));
    assert_eq!(pleg.cache().timestamp(), None);
    assert_eq!(pleg.pods_to_reinspect().unwrap(), ["c"]);
    fake.aborting.lock().unwrap().clear();
    pleg.relist().unwrap();
    assert_eq!(pleg.channel().drain(), [ev("b", ContainerStarted, "c"), ev("c", ContainerStarted, "c")]);
    assert_eq!(pleg.cache().timestamp(), Some(Time(5)));
}

#[test]
fn an_abort_in_a_parallel_relist_stops_it_too() {
    let options = PlegOptions { inspect_concurrency: 3, ..PlegOptions::default() };
    let (fake, _, pleg) = new_pleg(options, false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)]), pod("b", &[("c", Running)])];
    fake.aborting.lock().unwrap().push("a".into());
    assert!(is_abort(&pleg.relist().unwrap_err()));
    assert!(pleg.channel().drain().is_empty());
    fake.aborting.lock().unwrap().clear();
    pleg.relist().unwrap();
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerStarted, "c"), ev("b", ContainerStarted, "c")]);
}

#[test]
fn an_abort_raised_by_a_call_waits_for_the_calls_in_progress() {
    let options = PlegOptions { inspect_concurrency: 2, ..PlegOptions::default() };
    let (fake, _, pleg) = new_pleg(options, false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)]), pod("b", &[("c", Running)])];
    // Pods are inspected in UID order: b's call aborts while a's is in progress.
    fake.hang.lock().unwrap().push("a".into());
    fake.aborting.lock().unwrap().push("b".into());
    let f = fake.clone();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        f.release.store(true, Ordering::Relaxed);
    });
    assert!(is_abort(&pleg.relist().unwrap_err()));
    // Had the relist returned before a's call, the next one would take that call for a hung one.
    assert!(fake.release.load(Ordering::Relaxed));
    releaser.join().unwrap();
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerStarted, "c")]);
    fake.aborting.lock().unwrap().clear();
    pleg.relist().unwrap();
    assert_eq!(pleg.channel().drain(), [ev("b", ContainerStarted, "c")]);
}

#[test]
fn ctrl_c_ends_a_parallel_relist_without_waiting_for_its_calls() {
    let options = PlegOptions { inspect_concurrency: 2, ..PlegOptions::default() };
    let (fake, _, pleg) = new_pleg(options, false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    fake.hang.lock().unwrap().push("a".into());
    let (p, f) = (pleg.clone(), fake.clone());
    let relist = std::thread::spawn(move || p.relist());
    wait_until("the relist to call the runtime", || pleg.stats().inspections == 1);
    fake.interrupt.store(true, Ordering::Relaxed);
    assert!(is_abort(&relist.join().unwrap().unwrap_err()));
    assert!(!f.release.load(Ordering::Relaxed), "the hung call is still running");
    fake.interrupt.store(false, Ordering::Relaxed);
    fake.release.store(true, Ordering::Relaxed);
}

#[test]
fn an_abort_ends_the_loop_and_is_kept_once() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    fake.aborting.lock().unwrap().push("a".into());
    pleg.start().unwrap();
    wait_until("the loop to end", || pleg.wait_stopped(Some(Duration::ZERO)));
    assert!(!pleg.running());
    assert_eq!(*fake.aborted_loops.lock().unwrap(), ["GenericPLEG relist loop: interrupted at a"]);
    assert_eq!(pleg.last_error().as_deref(), Some("interrupted at a"));
    assert!(pleg.take_abort().is_some_and(|e| is_abort(&e)));
    assert!(pleg.take_abort().is_none());
    pleg.stop();
}

#[test]
fn a_wait_for_the_relist_lock_gives_up_when_interrupted() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    fake.hang.lock().unwrap().push("a".into());
    let p = pleg.clone();
    let hung = std::thread::spawn(move || p.relist());
    wait_until("the relist to call the runtime", || pleg.stats().inspections == 1);
    fake.interrupt.store(true, Ordering::Relaxed);
    assert!(is_abort(&pleg.relist().unwrap_err()));
    assert!(is_abort(&pleg.pods_to_reinspect().unwrap_err()));
    fake.interrupt.store(false, Ordering::Relaxed);
    fake.release.store(true, Ordering::Relaxed);
    hung.join().unwrap().unwrap();
    assert_eq!(pleg.pods_to_reinspect().unwrap(), Vec::<String>::new());
}

#[test]
fn a_stop_can_be_waited_for_a_while() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    fake.hang.lock().unwrap().push("a".into());
    pleg.start().unwrap();
    wait_until("the relist to call the runtime", || pleg.stats().inspections == 1);
    pleg.signal_stop();
    assert!(!pleg.wait_stopped(Some(Duration::from_millis(10))));
    assert!(!pleg.running());
    assert!(!pleg.start().unwrap(), "not started while the stopped loop has not ended");
    fake.release.store(true, Ordering::Relaxed);
    assert!(pleg.wait_stopped(None));
    assert!(pleg.start().unwrap() && pleg.running());
    let refused = pleg.step().unwrap_err().to_string();
    assert_eq!(refused, "loop_iteration() while the loop started by start() runs");
    pleg.stop();
    assert!(!pleg.running() && pleg.wait_stopped(Some(Duration::ZERO)));
    assert!(pleg.step().is_ok());
}

#[test]
fn loop_follows_the_fake_clock() {
    let (fake, clock, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() = vec![];
    pleg.start().unwrap();
    let wait_for = |n: u64| {
        for _ in 0..5000 {
            if pleg.stats().relists >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("no relist {n}");
    };
    wait_for(1);
    for _ in 0..5000 {
        if pleg.next_relist_at().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(pleg.next_relist_at(), Some(Time(1_000_000_000)));
    assert_eq!(pleg.stats().relists, 1);
    clock.step(1_000_000_000);
    wait_for(2);
    pleg.stop();
    assert!(!pleg.running());
}

const S: i64 = 1_000_000_000;

fn era_c() -> PlegOptions {
    PlegOptions { pod_sync_on_reinspect: true, on_demand_relist: true, ..PlegOptions::default() }
}

/// Waits (real time, generously) for the loop thread to get somewhere.
fn wait_until(what: &str, mut pred: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if pred() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn on_demand_relist_needs_era_c() {
    let fake = Arc::new(Fake::default());
    let options = PlegOptions { on_demand_relist: true, ..PlegOptions::default() };
    let clock = Arc::new(FakeClock::new(Time(0)));
    let made = GenericPleg::new(fake, Arc::new(PodCache::new(false)), clock, Arc::new(EventChannel::new(1)), options);
    assert!(made.is_err());
}

#[test]
fn request_relist_is_a_no_op_without_the_option() {
    let options = PlegOptions { pod_sync_on_reinspect: true, ..PlegOptions::default() };
    let (_, _, pleg) = new_pleg(options, false);
    assert!(!pleg.request_relist("a").unwrap());
    assert_eq!(pleg.stats().relist_requests_queued, 0);
    assert_eq!(pleg.stats().relist_requests_dropped, 0);
}

#[test]
fn relist_queue_holds_200_and_counts_the_drops() {
    let (_, _, pleg) = new_pleg(era_c(), false);
    for i in 0..RELIST_QUEUE_CAPACITY {
        assert!(pleg.request_relist(&format!("p{i}")).unwrap());
    }
    assert!(!pleg.request_relist("one-too-many").unwrap());
    assert!(!pleg.request_relist("and-another").unwrap());
    assert_eq!(pleg.stats().relist_requests_queued, 200);
    assert_eq!(pleg.stats().relist_requests_dropped, 2);
    // Served first in, first out once the global relist is done.
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Relisted);
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Skipped);
    assert_eq!(pleg.stats().relist_requests_queued, 199);
}

#[test]
fn pod_relist_reconciles_one_pod_and_leaves_the_global_state_alone() {
    let (fake, clock, pleg) = new_pleg(era_c(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Relisted);
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerStarted, "c")]);
    let gauges = pleg.stats().running_containers;
    // "b" appears and "a" exits; only "b" is asked for.
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Exited)]), pod("b", &[("c", Running), ("d", Running)])];
    clock.step(S / 2);
    assert!(pleg.request_relist("b").unwrap());
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::PodRelisted);
    assert_eq!(pleg.channel().drain(), [ev("b", ContainerStarted, "c"), ev("b", ContainerStarted, "d")]);
    assert_eq!(pleg.cache().get("b").status().unwrap().id, "b");
    assert_eq!(pleg.cache().observed_time("b"), Some(Time(S / 2)));
    assert_eq!(pleg.relist_time(), Some(Time(0)));
    assert_eq!(pleg.cache().timestamp(), Some(Time(0)));
    assert_eq!(pleg.stats().running_containers, gauges);
    assert_eq!((pleg.stats().relists, pleg.stats().pod_relists), (1, 1));
    // The next global relist sees only what the pod relist did not commit.
    clock.step(S / 2);
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Relisted);
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerDied, "c")]);
}

#[test]
fn unchanged_pod_is_only_marked_observed() {
    let (fake, clock, pleg) = new_pleg(era_c(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    pleg.loop_iteration().unwrap();
    pleg.channel().drain();
    let before = pleg.stats().inspections;
    clock.step(1);
    let waiter = pleg.cache().subscribe_slot("a", Time(1));
    pleg.request_relist("a").unwrap();
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::PodRelisted);
    assert_eq!(pleg.stats().inspections, before, "nothing changed: no inspection");
    assert!(pleg.channel().drain().is_empty());
    let got = waiter.wait(Duration::ZERO).expect("released by the observed time");
    assert!(matches!(got, super::Lookup::Found(e) if e.modified == Time(0)));
}

#[test]
fn stale_request_is_skipped() {
    let (fake, clock, pleg) = new_pleg(era_c(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    clock.step(5);
    pleg.request_relist("a").unwrap();
    // Made at the global relist's start: that relist served it (Go's `After` is strict).
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Relisted);
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Skipped);
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Idle);
    let s = pleg.stats();
    assert_eq!((s.pod_relists, s.relist_requests_skipped), (0, 1));
}

#[test]
fn get_pod_error_is_left_to_the_next_relist() {
    let (fake, clock, pleg) = new_pleg(era_c(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    pleg.loop_iteration().unwrap();
    pleg.channel().drain();
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Exited)])];
    fake.fail_list.store(true, Ordering::Relaxed);
    clock.step(1);
    let waiter = pleg.cache().subscribe_slot("a", Time(1));
    pleg.request_relist("a").unwrap();
    assert!(pleg.loop_iteration().is_err());
    assert!(pleg.channel().drain().is_empty());
    assert!(waiter.wait(Duration::ZERO).is_none(), "not observed");
    assert_eq!(pleg.cache().observed_time("a"), None);
    assert_eq!(pleg.stats().pod_relist_failures, 1);
    fake.fail_list.store(false, Ordering::Relaxed);
    clock.step(S);
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Relisted);
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerDied, "c")]);
}

#[test]
fn due_global_relist_goes_before_a_queued_request() {
    let (fake, clock, pleg) = new_pleg(era_c(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Relisted);
    clock.step(S / 2);
    pleg.request_relist("a").unwrap();
    clock.step(S / 2);
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Relisted);
    assert_eq!(pleg.relist_time(), Some(Time(S)));
    assert_eq!(pleg.loop_iteration().unwrap(), LoopStep::Skipped);
    assert_eq!(pleg.stats().pod_relists, 0);
}

#[test]
fn loop_serves_requests_between_relists() {
    let (fake, clock, pleg) = new_pleg(era_c(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)])];
    pleg.start().unwrap();
    wait_until("the loop to wait", || pleg.next_relist_at().is_some());
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerStarted, "c")]);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Exited)])];
    clock.step(1);
    pleg.request_relist("a").unwrap();
    // Served without the clock reaching the next relist.
    wait_until("the pod relist", || pleg.stats().pod_relists == 1);
    wait_until("the loop to wait again", || pleg.next_relist_at().is_some());
    assert_eq!(pleg.channel().drain(), [ev("a", ContainerDied, "c")]);
    assert_eq!(pleg.stats().relists, 1);
    pleg.stop();
    assert!(!pleg.running());
}

fn cri(kind: CriEventType, cid: &str, at: i64, sandbox: &str) -> CriEvent<BasicStatus> {
    let fields = StatusFields { sandboxes: vec![sandbox.into()], sandbox_ready: true, ..Default::default() };
    let status = BasicStatus { id: "p".into(), fields };
    CriEvent { container_id: cid.into(), pod_uid: Some("p".into()), kind, created_at: Time(at), status }
}

#[test]
fn evented_mapping_and_stale_events() {
    let (_, _, generic) = new_pleg(PlegOptions::default(), true);
    let evented = EventedPleg::new(generic.clone(), EventedOptions::default()).unwrap();
    assert_eq!(generic.duration().period, 300_000_000_000);
    assert_eq!(evented.process_event(cri(CriEventType::Created, "c", 1, "s")), 0);
    assert_eq!(evented.process_event(cri(CriEventType::Started, "c", 2, "s")), 1);
    assert_eq!(evented.process_event(cri(CriEventType::Stopped, "c", 1, "s")), 0);
    assert_eq!(evented.process_event(cri(CriEventType::Stopped, "c", 3, "s")), 1);
    assert_eq!(evented.process_event(cri(CriEventType::Deleted, "c", 0, "s")), 2);
    assert!(generic.cache().get("p").status().is_some());
    assert_eq!(evented.process_event(cri(CriEventType::Deleted, "s", 0, "s")), 2);
    assert!(generic.cache().get("p").status().is_none());
    let mut no_uid = cri(CriEventType::Started, "c", 9, "s");
    no_uid.pod_uid = None;
    assert_eq!(evented.process_event(no_uid), 0);
    assert_eq!(
        generic.channel().drain(),
        [
            ev("p", ContainerStarted, "c"),
            ev("p", ContainerDied, "c"),
            ev("p", ContainerDied, "c"),
            ev("p", ContainerRemoved, "c"),
            ev("p", ContainerDied, "s"),
            ev("p", ContainerRemoved, "s"),
        ]
    );
    let s = evented.stats();
    assert_eq!((s.events_received, s.events_ignored, s.events_rejected, s.events_sent), (7, 1, 1, 6));
    // Every event with a pod UID is timed, even those the cache turned down; created after the clock's now
    // (these are), it counts as no time at all.
    let latency = s.connection_latency_seconds;
    assert_eq!((latency.count, latency.cumulative[0], latency.sum_nanos), (6, 6, 0));
}

#[test]
fn evented_running_pod_count() {
    let (_, _, generic) = new_pleg(PlegOptions::default(), true);
    let evented = EventedPleg::new(generic, EventedOptions::default()).unwrap();
    let status = |pid: &str, running: bool| BasicStatus {
        id: pid.into(),
        fields: StatusFields { sandboxes: vec![pid.into()], sandbox_running: running, ..Default::default() },
    };
    let event = |pid: &str, at: i64, running: bool| CriEvent {
        container_id: pid.into(),
        pod_uid: Some(pid.into()),
        kind: CriEventType::Started,
        created_at: Time(at),
        status: status(pid, running),
    };
    for i in 0..5 {
        evented.process_event(event(&format!("test-pod-{i}"), 1, true));
    }
    assert_eq!(evented.stats().running_pods, 5);
    for i in 0..2 {
        evented.process_event(event(&format!("test-pod-{i}"), 2, false));
    }
    assert_eq!(evented.stats().running_pods, 3);
}

#[test]
fn evented_needs_an_evented_cache() {
    let (_, _, generic) = new_pleg(PlegOptions::default(), false);
    assert!(EventedPleg::new(generic, EventedOptions::default()).is_err());
}

#[test]
fn a_relist_offers_the_latest_listing_of_each_pod() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running)]), pod("b", &[("c", Running)])];
    pleg.relist().unwrap();
    fake.pods.lock().unwrap()[1] = pod("b", &[("c", Exited)]);
    pleg.relist().unwrap();
    pleg.relist().unwrap();
    let listed = fake.listed.lock().unwrap();
    // An unchanged pod is shared from the listing before; a changed one is new, then shared once committed.
    assert!(Arc::ptr_eq(&listed[1][0], &listed[0][0]) && Arc::ptr_eq(&listed[2][0], &listed[0][0]));
    assert!(!Arc::ptr_eq(&listed[1][1], &listed[0][1]));
    assert!(Arc::ptr_eq(&listed[2][1], &listed[1][1]));
}

#[test]
fn stats_serialize_as_python_gets_them() {
    let (fake, _, pleg) = new_pleg(PlegOptions::default(), false);
    *fake.pods.lock().unwrap() = vec![pod("a", &[("c", Running), ("d", Exited)])];
    pleg.relist().unwrap();
    let json = serde_json::to_string(&pleg.stats()).unwrap();
    assert_eq!(
        json,
        concat!(
            r#"{"relists":1,"relist_failures":0,"relist_duration_total":0.0,"relist_duration_last":0.0,"#,
            r#""events_sent":2,"events_dropped":0,"inspections":1,"inspection_errors":0,"inspection_timeouts":0,"#,
            r#""reinspections":0,"pod_relists":0,"pod_relist_failures":0,"relist_requests_queued":0,"#,
            r#""relist_requests_skipped":0,"relist_requests_dropped":0,"running_pods":0,"#,
            r#""running_containers":{"created":0,"running":1,"exited":1,"unknown":0},"#,
            r#""relist_duration_seconds":{"buckets":[[0.005,1],[0.01,1],[0.025,1],[0.05,1],[0.1,1],[0.25,1],"#,
            r#"[0.5,1],[1.0,1],[2.5,1],[5.0,1],[10.0,1]],"count":1,"sum":0.0},"#,
            r#""relist_interval_seconds":{"buckets":[[0.005,0],[0.01,0],[0.025,0],[0.05,0],[0.1,0],[0.25,0],"#,
            r#"[0.5,0],[1.0,0],[2.5,0],[5.0,0],[10.0,0]],"count":0,"sum":0.0},"last_seen":0.0}"#
        )
    );
}

#[test]
fn event_types_parse_or_say_what_is_expected() {
    assert_eq!(PodLifecycleEventType::parse("PodSync").unwrap(), PodSync);
    assert_eq!(
        ContainerState::parse("paused").unwrap_err().to_string(),
        "unrecognized container state \"paused\" (expected created, running, exited or unknown)"
    );
    assert_eq!(
        PodLifecycleEventType::parse("Nope").unwrap_err().to_string(),
        "type: unknown event type \"Nope\" (expected ContainerStarted, ContainerDied, ContainerRemoved, \
         ContainerChanged, PodSync or ConditionMet)"
    );
    assert_eq!(CriEventType::parse("CONTAINER_STOPPED_EVENT").unwrap(), CriEventType::Stopped);
    assert_eq!(CriEventType::parse("1").unwrap(), CriEventType::Started);
    assert_eq!(
        CriEventType::parse("PAUSED").unwrap_err().to_string(),
        "type: unknown container event type \"PAUSED\" (expected CREATED, STARTED, STOPPED or DELETED)"
    );
}

#[test]
fn a_pod_serializes_as_the_runtime_pod_dict() {
    let mut p = pod("u", &[("c", Running), ("d", Unknown)]);
    p.name = "web".into();
    p.sandboxes = vec![Container::new("s", Exited)];
    assert_eq!(
        serde_json::to_string(&p).unwrap(),
        r#"{"id":"u","name":"web","namespace":"","containers":[{"id":"c","state":"running"},{"id":"d","state":"unknown"}],"sandboxes":[{"id":"s","state":"exited"}]}"#
    );
}

#[test]
fn loop_steps_are_named() {
    let names = [LoopStep::Relisted, LoopStep::PodRelisted, LoopStep::Skipped, LoopStep::Idle].map(LoopStep::name);
    assert_eq!(names, [Some("relist"), Some("relist_pod"), Some("skipped"), None]);
}

#[test]
fn sandbox_states_and_relist_seconds() {
    assert_eq!(StatusFields::sandbox_state_ready("SANDBOX_READY"), Ok(true));
    assert_eq!(StatusFields::sandbox_state_ready("SANDBOX_NOTREADY"), Ok(false));
    let err = StatusFields::sandbox_state_ready("ready").unwrap_err();
    assert_eq!(err, "expected SANDBOX_READY or SANDBOX_NOTREADY, got \"ready\"");
    let d = super::RelistDuration { period: 1_500_000_000, threshold: 180_000_000_000 };
    assert_eq!(d.seconds(), (1.5, 180.0));
}
