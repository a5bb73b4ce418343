//! GenericPLEG (`pkg/kubelet/pleg/generic.go`, the v1.32–v1.35 version with watch conditions): relist the
//! runtime, diff every pod against its last committed listing, inspect the pods that changed into the
//! cache, and send the events without ever blocking. Era C's reinspection and on-demand per-pod relist, and
//! parallel inspections with a timeout, are options (`PlegOptions`); see docs/pleg.md.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

use super::cache::{Lookup, PodCache};
use super::channel::{BoundedQueue, EventChannel};
use super::diff::diff_into;
use super::go_duration;
use super::pod::{ContainerState, Pod, PodLifecycleEvent, PodLifecycleEventType, StatusView};
use super::records::{PodRecord, PodRecords};
use crate::clock::{Clock, StopSignal};
use crate::error::{count_option, Error};
use crate::metrics::{Histogram, HistogramSnapshot};
use crate::sync::lock;
use crate::time::{check_duration, Time, NANOS_PER_SECOND};

/// The kubelet's defaults (`genericPlegRelistPeriod`, `genericPlegRelistThreshold`, `plegChannelCapacity`).
pub const RELIST_PERIOD: i64 = NANOS_PER_SECOND;
pub const RELIST_THRESHOLD: i64 = 180 * NANOS_PER_SECOND;
pub const CHANNEL_CAPACITY: usize = 1000;
/// Inspections of one relist at once: the kubelet's serial loop.
pub const INSPECT_CONCURRENCY: usize = 1;
/// The capacity of Era C's `relistRequests` channel.
pub const RELIST_QUEUE_CAPACITY: usize = 200;

/// `RelistDuration`, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelistDuration {
    pub period: i64,
    pub threshold: i64,
}

impl RelistDuration {
    /// The period and threshold in seconds.
    pub fn seconds(self) -> (f64, f64) {
        let s = |ns: i64| ns as f64 / NANOS_PER_SECOND as f64;
        (s(self.period), s(self.threshold))
    }

    /// Checks a period (> 0) and a threshold (>= 0); errors name them `<name>_period` and `<name>_threshold`.
    pub fn checked(self, name: &str) -> Result<Self, Error> {
        check_duration(self.period, &format!("{name}_period"), true)?;
        check_duration(self.threshold, &format!("{name}_threshold"), false)?;
        Ok(self)
    }
}

/// What one `GetPodStatus` gave: the status and the runtime's error (both stored in the cache, as in Go), and
/// `invalid` when the answer could not be read at all (reported to the caller after the relist).
pub struct Inspection<S, E> {
    pub status: Option<S>,
    pub err: Option<E>,
    pub invalid: Option<Error>,
}

/// An error that is no failure of the runtime but a request to stop (Python's `KeyboardInterrupt` and
/// `SystemExit`): it ends the relist at once and is returned by it, never stored as a pod's inspection error;
/// it ends the relist loop, which keeps it for `take_abort`. Carried as `Error::External`.
#[derive(Debug)]
pub struct Abort(pub Error);

impl Abort {
    pub fn into_error(self) -> Error {
        Error::External(Box::new(self))
    }

    /// The external error of type `T` that `e` carries, looked for through `Abort`s.
    pub fn external<T: std::error::Error + 'static>(e: &Error) -> Option<&T> {
        let Error::External(b) = e else { return None };
        match b.downcast_ref::<Abort>() {
            Some(a) => Self::external(&a.0),
            None => b.downcast_ref::<T>(),
        }
    }
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Abort {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Whether `e` is an `Abort`.
pub fn is_abort(e: &Error) -> bool {
    matches!(e, Error::External(b) if b.is::<Abort>())
}

/// How often a relist waiting for another thread (the relist lock, parallel inspections) asks
/// `Runtime::check_interrupt` whether to give up.
pub const INTERRUPT_CHECK: Duration = Duration::from_millis(50);

/// The container runtime as the PLEG uses it.
pub trait Runtime: Send + Sync + 'static {
    type Status: StatusView;
    type Error: Clone + Send + Sync + 'static;
    /// `GetPods(ctx, all=true)`. An error means nothing changes in this relist. `known` holds the latest
    /// listing of every pod: a runtime converting its answer may return a known pod instead of an equal copy.
    fn get_pods(&self, known: &PodRecords) -> Result<Vec<Arc<Pod>>, Error>;
    /// `GetPodStatus`. A failed inspection is `Inspection::err`; an `Abort` ends the relist.
    fn get_pod_status(&self, pod: &Pod) -> Result<Inspection<Self::Status, Self::Error>, Abort>;
    /// `GetPod`, for the on-demand relist: one pod's listing, None when the runtime has nothing of the pod. An
    /// error leaves the pod to the next global relist. By default the pod is picked out of a full listing.
    fn get_pod(&self, uid: &str) -> Result<Option<Arc<Pod>>, Error> {
        Ok(self.get_pods(&PodRecords::default())?.into_iter().find(|p| p.id == uid))
    }
    /// The error stored for a pod whose inspection was given up on, saying `message`.
    fn timeout_error(&self, message: String) -> Self::Error;
    /// Asked every `INTERRUPT_CHECK` while a relist waits for another thread: an `Abort` (Ctrl-C on the
    /// caller's thread) ends the wait and the relist.
    fn check_interrupt(&self) -> Result<(), Abort> {
        Ok(())
    }
    /// Told on the loop's thread when an `Abort` ended a loop (`what` names it), before the loop returns.
    fn loop_aborted(&self, _what: &str, _err: &Error) {}
}

/// `WatchCondition`: true when met. An error counts as not met and is reported after the relist.
pub type Condition<S> = Arc<dyn Fn(&S) -> Result<bool, Error> + Send + Sync>;

struct Versioned<S> {
    cond: Condition<S>,
    version: u32,
}

/// Per pod UID, per condition key.
type Conditions<S> = HashMap<String, HashMap<String, Versioned<S>>>;

#[derive(Clone, Copy, Debug)]
pub struct PlegOptions {
    pub duration: RelistDuration,
    /// Inspections of one relist that may run at once; 1 is the kubelet's serial loop.
    pub inspect_concurrency: usize,
    /// Give up on one inspection after this long (wall-clock time, since it bounds a real runtime call).
    pub inspect_timeout: Option<Duration>,
    /// Era C (Kubernetes v1.36+, `RequestReinspect`): a reinspection that finds no container event sends
    /// `PodSync`, and a reinspection request stays queued until its pod is reconciled.
    pub pod_sync_on_reinspect: bool,
    /// Era C's on-demand per-pod relist (gate `PLEGOnDemandRelist`): `request_relist` queues a pod, and the
    /// relist loop relists it alone when no global relist is due. Needs `pod_sync_on_reinspect`.
    pub on_demand_relist: bool,
}

impl Default for PlegOptions {
    fn default() -> Self {
        PlegOptions {
            duration: RelistDuration { period: RELIST_PERIOD, threshold: RELIST_THRESHOLD },
            inspect_concurrency: INSPECT_CONCURRENCY,
            inspect_timeout: None,
            pod_sync_on_reinspect: false,
            on_demand_relist: false,
        }
    }
}

/// RelistCounters (the kubelet's PLEG metrics and a few more).
#[derive(Default)]
struct RelistCounters {
    relists: AtomicU64,
    relist_failures: AtomicU64,
    relist_duration_total: AtomicU64,
    relist_duration_last: AtomicU64,
    events_sent: AtomicU64,
    events_dropped: AtomicU64,
    inspections: AtomicU64,
    inspection_errors: AtomicU64,
    inspection_timeouts: AtomicU64,
    reinspections: AtomicU64,
    pod_relists: AtomicU64,
    pod_relist_failures: AtomicU64,
    relist_requests_skipped: AtomicU64,
    running_pods: AtomicU64,
    running_containers: [AtomicU64; 4],
    /// `kubelet_pleg_relist_duration_seconds` and `kubelet_pleg_relist_interval_seconds`.
    relist_duration: Histogram,
    relist_interval: Histogram,
}

/// A snapshot of the counters. Durations are on the PLEG's clock, in nanoseconds (serialized as seconds, as
/// `stats()` gives them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub relists: u64,
    pub relist_failures: u64,
    #[serde(rename = "relist_duration_total", serialize_with = "seconds")]
    pub relist_duration_total_ns: u64,
    #[serde(rename = "relist_duration_last", serialize_with = "seconds")]
    pub relist_duration_last_ns: u64,
    pub events_sent: u64,
    /// `pleg_discard_events`.
    pub events_dropped: u64,
    pub inspections: u64,
    pub inspection_errors: u64,
    pub inspection_timeouts: u64,
    pub reinspections: u64,
    /// On-demand single-pod relists run, and those whose `GetPod` failed.
    pub pod_relists: u64,
    pub pod_relist_failures: u64,
    /// Relist requests waiting for the loop.
    pub relist_requests_queued: u64,
    /// Relist requests not served because a global relist started after they were made.
    pub relist_requests_skipped: u64,
    /// Relist requests dropped because the queue was full (the kubelet logs these).
    pub relist_requests_dropped: u64,
    /// `kubelet_running_pods`: pods with a running sandbox in the last listing.
    pub running_pods: u64,
    /// `kubelet_running_containers` by state (created, running, exited, unknown) in the last listing.
    #[serde(serialize_with = "by_state")]
    pub running_containers: [u64; 4],
    /// The kubelet's histograms: each relist's duration, and the time from the previous successful relist's
    /// start to each relist's start.
    pub relist_duration_seconds: HistogramSnapshot,
    pub relist_interval_seconds: HistogramSnapshot,
    /// `kubelet_pleg_last_seen_seconds`: the last successful relist's start on the clock, in seconds since
    /// the epoch (None before the first).
    #[serde(rename = "last_seen", serialize_with = "seconds_opt")]
    pub last_seen_ns: Option<i64>,
}

fn seconds<S: Serializer>(ns: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(*ns as f64 / 1e9)
}

fn seconds_opt<S: Serializer>(ns: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
    match ns {
        Some(ns) => s.serialize_some(&(*ns as f64 / 1e9)),
        None => s.serialize_none(),
    }
}

fn by_state<S: Serializer>(counts: &[u64; 4], s: S) -> Result<S::Ok, S::Error> {
    let states = [ContainerState::Created, ContainerState::Running, ContainerState::Exited, ContainerState::Unknown];
    s.collect_map(states.iter().map(|st| (st.as_str(), counts[state_index(*st)])))
}

fn state_index(s: ContainerState) -> usize {
    match s {
        ContainerState::Created => 0,
        ContainerState::Running => 1,
        ContainerState::Exited => 2,
        ContainerState::Unknown => 3,
    }
}

#[derive(Default)]
struct RelistState {
    records: PodRecords,
    reinspect: BTreeSet<String>,
}

/// A pod the relist has to inspect (or delete from the cache when `pod` is None).
struct Work<S> {
    pid: String,
    pod: Option<Arc<Pod>>,
    events: Vec<PodLifecycleEvent>,
    conditions: Vec<(String, u32, Condition<S>)>,
    reinspected: bool,
}

struct Inspected<S, E> {
    inspection: Inspection<S, E>,
    /// The clock before the call; the cache timestamp unless the evented rule says otherwise.
    at: Time,
}

/// What a relist got for one pod of its work: None when it has no pod (deleted) or a worker died.
type Results<S, E> = Vec<Option<Inspected<S, E>>>;

thread_local! {
    /// The PLEGs (by runtime address) whose relist this thread is working for.
    static SERVING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks the current thread as working for a relist until dropped.
struct Serving(usize);

impl Serving {
    fn enter(key: usize) -> Serving {
        SERVING.with(|s| s.borrow_mut().push(key));
        Serving(key)
    }

    fn active(key: usize) -> bool {
        SERVING.with(|s| s.borrow().contains(&key))
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(i) = s.iter().rposition(|k| *k == self.0) {
                s.remove(i);
            }
        });
    }
}

/// A call back into the PLEG from a runtime call or watch condition of its own relist, which would wait for
/// that relist to finish.
#[derive(Debug)]
pub struct Reentered(&'static str);

impl std::fmt::Display for Reentered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} was called from a runtime call or watch condition of the same PLEG's relist, which would wait for itself", self.0)
    }
}

impl std::error::Error for Reentered {}

/// A call that would run a second relist loop beside the one `start` runs.
#[derive(Debug)]
pub struct LoopRunning(&'static str);

impl std::fmt::Display for LoopRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} while the loop started by start() runs", self.0)
    }
}

impl std::error::Error for LoopRunning {}

/// The message of a given-up inspection: after `after`, or (None) not started because the previous
/// relist's call for the pod has not returned.
fn timeout_message(pod: &Pod, after: Option<Duration>) -> String {
    let Pod { id, namespace, name, .. } = pod;
    match after {
        Some(after) => format!("inspection of pod {id} ({namespace}/{name}) did not return within {after:?}"),
        None => format!("the previous inspection of pod {id} ({namespace}/{name}) has not returned yet"),
    }
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// `relistRequest`: a pod and when its relist was asked for.
struct RelistRequest {
    uid: String,
    at: Time,
}

/// The relist lock around the relist state. A relist holds it throughout, runtime calls included, so taking
/// it can wait long: the wait gives up when `interrupted` says so, asked every `INTERRUPT_CHECK`.
#[derive(Default)]
struct RelistLock<T> {
    busy: Mutex<bool>,
    freed: Condvar,
    data: Mutex<T>,
}

struct Held<'a, T> {
    lock: &'a RelistLock<T>,
    data: MutexGuard<'a, T>,
}

impl<T> RelistLock<T> {
    fn lock(&self, mut interrupted: impl FnMut() -> Result<(), Error>) -> Result<Held<'_, T>, Error> {
        let mut busy = lock(&self.busy);
        while *busy {
            busy = self.freed.wait_timeout(busy, INTERRUPT_CHECK).unwrap_or_else(|e| e.into_inner()).0;
            if *busy {
                // Without the lock: the check may wait for the GIL.
                drop(busy);
                interrupted()?;
                busy = lock(&self.busy);
            }
        }
        *busy = true;
        drop(busy);
        Ok(Held { lock: self, data: lock(&self.data) })
    }
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        *lock(&self.lock.busy) = false;
        self.lock.freed.notify_one();
    }
}

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.data
    }
}

/// The relist loop's thread: `stop` tells it to end, `ended` is set once it has.
struct Worker {
    stop: Arc<StopSignal>,
    ended: Arc<StopSignal>,
    handle: JoinHandle<()>,
}

/// Sets its signal when dropped: at the end of a thread, panic or not.
pub(crate) struct SetOnDrop(pub(crate) Arc<StopSignal>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// What one pass of the relist loop did (`workerLoopIteration`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopStep {
    /// The global relist was due.
    Relisted,
    /// A queued request relisted its pod.
    PodRelisted,
    /// A queued request was older than the last global relist, which served it.
    Skipped,
    /// Nothing was due.
    Idle,
}

impl LoopStep {
    /// The name `loop_iteration()` gives the step; None when nothing was due.
    pub fn name(self) -> Option<&'static str> {
        match self {
            LoopStep::Relisted => Some("relist"),
            LoopStep::PodRelisted => Some("relist_pod"),
            LoopStep::Skipped => Some("skipped"),
            LoopStep::Idle => None,
        }
    }
}

pub struct GenericPleg<R: Runtime> {
    runtime: Arc<R>,
    cache: Arc<PodCache<R::Status, R::Error>>,
    clock: Arc<dyn Clock>,
    channel: Arc<EventChannel>,
    state: RelistLock<RelistState>,
    relist_time: Mutex<Option<Time>>,
    duration: Mutex<RelistDuration>,
    conditions: Mutex<Conditions<R::Status>>,
    options: PlegOptions,
    counters: RelistCounters,
    in_flight: Arc<Mutex<HashSet<String>>>,
    evented_gate: AtomicBool,
    evented_in_use: AtomicBool,
    worker: Mutex<Option<Worker>>,
    /// Kept as errors, not text: formatting one from Python takes the GIL, which the loop's thread must not.
    last_error: Mutex<Option<Arc<Error>>>,
    /// The `Abort` that ended the loop, until `take_abort`.
    aborted: Mutex<Option<Arc<Error>>>,
    next_relist: Mutex<Option<Time>>,
    /// Era C's `relistRequests`, which the relist loop waits on.
    requests: BoundedQueue<RelistRequest>,
    /// When the loop's global relist timer fires; None fires at once (Go's `NewTimer(0)` in `Start`).
    relist_due: Mutex<Option<Time>>,
}

impl<R: Runtime> GenericPleg<R> {
    pub fn new(
        runtime: R,
        cache: Arc<PodCache<R::Status, R::Error>>,
        clock: Arc<dyn Clock>,
        channel: Arc<EventChannel>,
        options: PlegOptions,
    ) -> Result<Self, Error> {
        options.duration.checked("relist")?;
        count_option("inspect_concurrency", i64::try_from(options.inspect_concurrency).unwrap_or(i64::MAX))?;
        if options.on_demand_relist && !options.pod_sync_on_reinspect {
            // The per-pod relist reconciles a pod the Era C way; no kubelet mixes it with Era B's.
            return Err(Error::Option("on_demand_relist needs pod_sync_on_reinspect (both are Era C)".into()));
        }
        Ok(GenericPleg {
            runtime: Arc::new(runtime),
            cache,
            clock,
            channel,
            state: RelistLock::default(),
            relist_time: Mutex::new(None),
            duration: Mutex::new(options.duration),
            conditions: Mutex::default(),
            options,
            counters: RelistCounters::default(),
            in_flight: Arc::default(),
            evented_gate: AtomicBool::new(false),
            evented_in_use: AtomicBool::new(false),
            worker: Mutex::new(None),
            last_error: Mutex::new(None),
            aborted: Mutex::new(None),
            next_relist: Mutex::new(None),
            requests: BoundedQueue::new(RELIST_QUEUE_CAPACITY),
            relist_due: Mutex::new(None),
        })
    }

    pub fn runtime(&self) -> &R {
        &self.runtime
    }

    pub fn cache(&self) -> &Arc<PodCache<R::Status, R::Error>> {
        &self.cache
    }

    pub fn channel(&self) -> &Arc<EventChannel> {
        &self.channel
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn options(&self) -> PlegOptions {
        self.options
    }

    pub fn duration(&self) -> RelistDuration {
        *lock(&self.duration)
    }

    /// `Update`: a new period and threshold, used from the next wait of the relist loop.
    pub fn update(&self, d: RelistDuration) {
        *lock(&self.duration) = d;
    }

    /// The last successful relist's start.
    pub fn relist_time(&self) -> Option<Time> {
        *lock(&self.relist_time)
    }

    /// The EventedPLEG feature gate: a cache write the evented rule rejects skips the pod.
    pub fn set_evented_gate(&self, on: bool) {
        self.evented_gate.store(on, Ordering::Release);
    }

    /// `isEventedPLEGInUse`: cache writes carry the runtime's status timestamp.
    pub fn set_evented_in_use(&self, on: bool) {
        self.evented_in_use.store(on, Ordering::Release);
    }

    pub fn evented_in_use(&self) -> bool {
        self.evented_in_use.load(Ordering::Acquire)
    }

    fn key(&self) -> usize {
        Arc::as_ptr(&self.runtime) as *const () as usize
    }

    /// An error when called from a runtime call or watch condition of this PLEG's relist, which `what`
    /// would wait for.
    pub fn not_reentered(&self, what: &'static str) -> Result<(), Error> {
        if Serving::active(self.key()) {
            return Err(Error::External(Box::new(Reentered(what))));
        }
        Ok(())
    }

    /// Takes the relist lock, waiting for a relist in progress unless `check_interrupt` says otherwise.
    fn lock_state(&self) -> Result<Held<'_, RelistState>, Error> {
        self.state.lock(|| self.runtime.check_interrupt().map_err(Abort::into_error))
    }

    /// Pods queued for reinspection at the next relist.
    pub fn pods_to_reinspect(&self) -> Result<Vec<String>, Error> {
        self.not_reentered("pods_to_reinspect()")?;
        Ok(self.lock_state()?.reinspect.iter().cloned().collect())
    }

    /// Queues a pod for reinspection (as the kubelet's tests poke `podsToReinspect`).
    pub fn request_reinspect(&self, uid: &str) -> Result<(), Error> {
        self.not_reentered("request_reinspect()")?;
        self.lock_state()?.reinspect.insert(uid.to_owned());
        Ok(())
    }

    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            relists: g(&c.relists),
            relist_failures: g(&c.relist_failures),
            relist_duration_total_ns: g(&c.relist_duration_total),
            relist_duration_last_ns: g(&c.relist_duration_last),
            events_sent: g(&c.events_sent),
            events_dropped: g(&c.events_dropped),
            inspections: g(&c.inspections),
            inspection_errors: g(&c.inspection_errors),
            inspection_timeouts: g(&c.inspection_timeouts),
            reinspections: g(&c.reinspections),
            pod_relists: g(&c.pod_relists),
            pod_relist_failures: g(&c.pod_relist_failures),
            relist_requests_skipped: g(&c.relist_requests_skipped),
            relist_requests_dropped: self.requests.dropped(),
            relist_requests_queued: self.requests.len() as u64,
            running_pods: g(&c.running_pods),
            running_containers: std::array::from_fn(|i| g(&c.running_containers[i])),
            relist_duration_seconds: c.relist_duration.snapshot(),
            relist_interval_seconds: c.relist_interval.snapshot(),
            last_seen_ns: self.relist_time().map(|t| t.0),
        }
    }

    /// The last error of a relist run by the loop (the kubelet logs these), formatted now: with the GIL
    /// held when it came from Python.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).as_ref().map(|e| e.to_string())
    }

    /// The `Abort` that ended the loop, once.
    pub fn take_abort(&self) -> Option<Arc<Error>> {
        lock(&self.aborted).take()
    }

    /// `Healthy`: unhealthy before the first successful relist, or when the last one started more than the
    /// threshold ago (strictly). The message is Go's.
    pub fn healthy(&self) -> (bool, Option<String>) {
        let Some(last) = self.relist_time() else {
            return (false, Some("pleg has yet to be successful".into()));
        };
        let now = match self.clock.now() {
            Ok(t) => t,
            Err(e) => return (false, Some(e.to_string())),
        };
        let elapsed = now.since(last);
        let threshold = self.duration().threshold;
        if elapsed > threshold {
            let msg = format!(
                "pleg was last seen active {} ago; threshold is {}",
                go_duration(elapsed),
                go_duration(threshold)
            );
            return (false, Some(msg));
        }
        (true, None)
    }

    /// `Relist`. Returns the listing's error (nothing changed then), or the first bad answer or failing watch
    /// condition met on the way (the relist completed regardless).
    pub fn relist(&self) -> Result<(), Error> {
        self.not_reentered("relist()")?;
        let mut st = self.lock_state()?;
        let _serving = Serving::enter(self.key());
        let timestamp = self.clock.now()?;
        if let Some(last) = self.relist_time() {
            self.counters.relist_interval.observe_nanos(timestamp.since(last));
        }
        inc(&self.counters.relists);
        let result = self.relist_locked(&mut st, timestamp);
        let took = self.clock.now().map(|n| n.since(timestamp).max(0) as u64).unwrap_or(0);
        self.counters.relist_duration_last.store(took, Ordering::Relaxed);
        self.counters.relist_duration_total.fetch_add(took, Ordering::Relaxed);
        self.counters.relist_duration.observe_nanos(took as i64);
        result
    }

    fn relist_locked(&self, st: &mut RelistState, timestamp: Time) -> Result<(), Error> {
        let pods = match self.runtime.get_pods(&st.records) {
            Ok(p) => p,
            Err(e) => {
                inc(&self.counters.relist_failures);
                return Err(e);
            }
        };
        *lock(&self.relist_time) = Some(timestamp);
        self.count_running(&pods);
        st.records.set_current(pods);
        self.cleanup_orphaned_conditions(&st.records);

        let era_c = self.options.pod_sync_on_reinspect;
        // Era B rebuilds the set every relist; Era C consumes an entry when its pod is reconciled.
        let mut reinspect = if era_c { BTreeSet::new() } else { std::mem::take(&mut st.reinspect) };
        let RelistState { records, reinspect: pending } = st;
        let mut work = Vec::new();
        {
            let conditions = lock(&self.conditions);
            let mut events = Vec::new();
            for (pid, rec) in records.iter() {
                let again = if era_c { pending.remove(pid) } else { reinspect.remove(pid) };
                work.extend(self.work_for(pid, rec, &conditions, again, &mut events));
            }
        }
        // Go walks its map in random order; pod UID order makes the event order reproducible.
        work.sort_unstable_by(|a, b| a.pid.cmp(&b.pid));

        let (mut needs_reinspection, deferred) = self.inspect_and_commit(records, work);
        // After every pod is in the cache, so waiters never see a half-done relist as fresh.
        if !deferred.as_ref().is_some_and(is_abort) {
            self.cache.update_time(timestamp);
        }
        if era_c {
            pending.append(&mut needs_reinspection);
        } else {
            *pending = needs_reinspection;
        }
        deferred.map_or(Ok(()), Err)
    }

    /// `reconcilePodRecord`'s first half: the record's events (appended to `events`, taken when it is work),
    /// its watch conditions and a pending reinspection; None when none of them asks for an inspection.
    fn work_for(
        &self,
        pid: &str,
        rec: &PodRecord,
        conditions: &Conditions<R::Status>,
        again: bool,
        events: &mut Vec<PodLifecycleEvent>,
    ) -> Option<Work<R::Status>> {
        diff_into(rec.old.as_deref(), rec.current.as_deref(), events);
        let conds: Vec<_> = if conditions.is_empty() {
            Vec::new()
        } else {
            conditions
                .get(pid)
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.version, v.cond.clone())).collect())
                .unwrap_or_default()
        };
        if events.is_empty() && conds.is_empty() && !again {
            return None;
        }
        if again {
            inc(&self.counters.reinspections);
        }
        Some(Work {
            pid: pid.to_owned(),
            pod: rec.current.clone(),
            events: std::mem::take(events),
            conditions: conds,
            reinspected: again,
        })
    }

    /// Inspects the pods of `work` and commits each in order; returns the pods to reinspect and the first
    /// bad answer or failing condition, or an `Abort`, which stops the relist at the first pod it left
    /// without a result (the records of that pod and the later ones are not committed, so the next relist
    /// finds their changes again; their reinspection requests are kept).
    fn inspect_and_commit(
        &self,
        records: &mut PodRecords,
        work: Vec<Work<R::Status>>,
    ) -> (BTreeSet<String>, Option<Error>) {
        let mut needs_reinspection = BTreeSet::new();
        let mut deferred = None;
        let parallel = self.options.inspect_concurrency > 1 || self.options.inspect_timeout.is_some();
        let (mut results, mut abort) = if parallel { self.inspect_parallel(&work) } else { (Vec::new(), None) };
        let mut work = work.into_iter().enumerate();
        let mut unreached = None;
        for (i, w) in work.by_ref() {
            let r = if parallel {
                results[i].take()
            } else {
                match w.pod.as_deref().map(|p| self.inspect(p)).transpose() {
                    Ok(r) => r,
                    Err(a) => {
                        abort = Some(a.into_error());
                        None
                    }
                }
            };
            if abort.is_some() && w.pod.is_some() && r.is_none() {
                unreached = Some(w);
                break;
            }
            if let Err(a) = self.commit(records, w, r, &mut needs_reinspection, &mut deferred) {
                abort = Some(a);
                break;
            }
        }
        if abort.is_some() {
            let rest = unreached.into_iter().chain(work.map(|(_, w)| w));
            needs_reinspection.extend(rest.filter(|w| w.reinspected).map(|w| w.pid));
            return (needs_reinspection, abort);
        }
        (needs_reinspection, deferred)
    }

    /// `RequestRelist`: queues an on-demand relist of the pod, stamped with the clock's time. Does nothing
    /// unless `on_demand_relist` is on (the gate is off); false when it did nothing or the queue was full
    /// (the request is dropped and counted).
    pub fn request_relist(&self, uid: &str) -> Result<bool, Error> {
        if !self.options.on_demand_relist {
            return Ok(false);
        }
        let at = self.clock.now()?;
        Ok(self.requests.try_send(RelistRequest { uid: uid.to_owned(), at }))
    }

    /// `relistPod`: lists one pod (`GetPod`), reconciles its record as a relist would (events, reinspection,
    /// inspection into the cache), then marks it observed in the cache as of the listing's time. Unlike a
    /// relist it leaves the relist time, the cache's global timestamp and the running gauges alone. Returns
    /// `GetPod`'s error (nothing changed then; the next relist covers the pod) or, after the reconcile, the
    /// first bad answer or failing watch condition.
    fn relist_pod(&self, uid: &str) -> Result<(), Error> {
        self.not_reentered("relist_pod()")?;
        let mut st = self.lock_state()?;
        let _serving = Serving::enter(self.key());
        // Go stamps the listing itself (`pod.Timestamp`); the clock before the call is that time here.
        let listed_at = self.clock.now()?;
        inc(&self.counters.pod_relists);
        let pod = match self.runtime.get_pod(uid) {
            // Listed without containers, as a relist would see it.
            Ok(None) => Arc::new(Pod { id: uid.to_owned(), ..Pod::default() }),
            Ok(Some(p)) if p.id == uid => p,
            Ok(Some(p)) => {
                inc(&self.counters.pod_relist_failures);
                return Err(Error::value("get_pod()", format!("asked for pod {uid:?}, got pod {:?}", p.id)));
            }
            Err(e) => {
                inc(&self.counters.pod_relist_failures);
                return Err(e);
            }
        };
        let RelistState { records, reinspect } = &mut *st;
        records.set_current_one(pod);
        let work = {
            let conditions = lock(&self.conditions);
            let rec = records.get(uid).expect("the record was just set");
            self.work_for(uid, rec, &conditions, reinspect.remove(uid), &mut Vec::new())
        };
        let (mut needs_reinspection, deferred) = self.inspect_and_commit(records, work.into_iter().collect());
        reinspect.append(&mut needs_reinspection);
        // A pod found unchanged is not written, yet its waiters must learn it is fresh.
        if !deferred.as_ref().is_some_and(is_abort) {
            self.cache.set_observed_time(uid, listed_at);
        }
        deferred.map_or(Ok(()), Err)
    }

    /// `workerLoopIteration` without the blocking wait: the global relist if its timer is due (it takes
    /// priority), else one queued relist request, skipped when a global relist started after it was made.
    /// The timer is set `relist_period` after each relist it ran ends. The loop `start` runs is this plus a
    /// wait; call it directly (loop stopped) to drive the loop step by step on a fake clock.
    /// `loop_iteration` for a caller driving the loop by hand: refused while the loop `start` ran runs.
    pub fn step(&self) -> Result<LoopStep, Error> {
        if self.running() {
            return Err(Error::External(Box::new(LoopRunning("loop_iteration()"))));
        }
        self.loop_iteration()
    }

    pub fn loop_iteration(&self) -> Result<LoopStep, Error> {
        let now = self.clock.now()?;
        let due = *lock(&self.relist_due);
        if due.is_none_or(|d| now >= d) {
            let result = self.relist();
            let end = self.clock.now()?;
            *lock(&self.relist_due) = Some(end.add_nanos(self.duration().period));
            return result.map(|()| LoopStep::Relisted);
        }
        let Some(req) = self.requests.try_recv() else { return Ok(LoopStep::Idle) };
        if self.relist_time().is_some_and(|t| req.at <= t) {
            inc(&self.counters.relist_requests_skipped);
            return Ok(LoopStep::Skipped);
        }
        self.relist_pod(&req.uid).map(|()| LoopStep::PodRelisted)
    }

    fn count_running(&self, pods: &[Arc<Pod>]) {
        let mut by_state = [0u64; 4];
        let mut running_pods = 0;
        for p in pods {
            for c in &p.containers {
                by_state[state_index(c.state)] += 1;
            }
            if p.sandboxes.iter().any(|s| s.state == ContainerState::Running) {
                running_pods += 1;
            }
        }
        self.counters.running_pods.store(running_pods, Ordering::Relaxed);
        for (i, n) in by_state.into_iter().enumerate() {
            // Go leaves a state's gauge alone when no container is in it.
            if n > 0 {
                self.counters.running_containers[i].store(n, Ordering::Relaxed);
            }
        }
    }

    fn inspect(&self, pod: &Pod) -> Result<Inspected<R::Status, R::Error>, Abort> {
        inc(&self.counters.inspections);
        let at = self.clock.now().unwrap_or_default();
        Ok(Inspected { inspection: self.runtime.get_pod_status(pod)?, at })
    }

    /// Runs the inspections of one relist on up to `inspect_concurrency` threads. A call that outlives
    /// `inspect_timeout` is left running on its thread (a runtime call cannot be cancelled), its pod gets the
    /// timeout error, and a fresh thread takes over the queue. An `Abort` stops further calls from starting;
    /// one raised by a call still waits for the calls in progress, as any relist would (so none outlives the
    /// relist unless it timed out), while one from `check_interrupt` (Ctrl-C) ends the wait at once. The
    /// results so far come with it.
    fn inspect_parallel(&self, work: &[Work<R::Status>]) -> (Results<R::Status, R::Error>, Option<Error>) {
        enum Msg<S, E> {
            Started(usize, Instant),
            Done(usize, Result<Inspected<S, E>, Abort>),
        }
        let mut results: Results<R::Status, R::Error> = work.iter().map(|_| None).collect();
        let jobs: VecDeque<(usize, Arc<Pod>)> =
            work.iter().enumerate().filter_map(|(i, w)| w.pod.clone().map(|p| (i, p))).collect();
        let total = jobs.len();
        if total == 0 {
            return (results, None);
        }
        let pods: Vec<Option<Arc<Pod>>> = work.iter().map(|w| w.pod.clone()).collect();
        let queue = Arc::new(Mutex::new(jobs));
        let (tx, rx) = mpsc::channel::<Msg<R::Status, R::Error>>();
        let key = self.key();
        let worker = |tx: mpsc::Sender<Msg<R::Status, R::Error>>| {
            let (queue, runtime, clock, in_flight) =
                (queue.clone(), self.runtime.clone(), self.clock.clone(), self.in_flight.clone());
            move || {
                let _serving = Serving::enter(key);
                loop {
                    let (i, pod, fresh) = {
                        let mut queue = lock(&queue);
                        let Some((i, pod)) = queue.pop_front() else { return };
                        // Announced under the queue lock: once an abort has cleared the queue, every call
                        // that will run is announced.
                        let fresh = lock(&in_flight).insert(pod.id.clone());
                        if fresh {
                            let _ = tx.send(Msg::Started(i, Instant::now()));
                        }
                        (i, pod, fresh)
                    };
                    let at = clock.now().unwrap_or_default();
                    let inspection = if fresh {
                        let inspection = runtime.get_pod_status(&pod);
                        lock(&in_flight).remove(&pod.id);
                        inspection
                    } else {
                        // The previous relist's call for this pod is still hung: do not pile another on it.
                        let err = runtime.timeout_error(timeout_message(&pod, None));
                        Ok(Inspection { status: None, err: Some(err), invalid: None })
                    };
                    if tx.send(Msg::Done(i, inspection.map(|inspection| Inspected { inspection, at }))).is_err() {
                        return;
                    }
                }
            }
        };
        // When the OS refuses a thread, the relisting thread inspects what is left itself (without a timeout).
        let spawn = |tx: mpsc::Sender<Msg<R::Status, R::Error>>| {
            if crate::threads::spawn("pleg-inspect", worker(tx.clone())).is_err() {
                worker(tx)();
            }
        };
        for _ in 0..self.options.inspect_concurrency.min(total) {
            spawn(tx.clone());
        }
        // Calls started and neither returned nor given up on.
        let mut running: HashMap<usize, Option<Instant>> = HashMap::new();
        let mut done = 0;
        let mut abort = None;
        loop {
            let msg = if abort.is_some() && running.is_empty() {
                // What is still queued was announced before the queue was cleared.
                match rx.try_recv() {
                    Ok(m) => Ok(m),
                    Err(_) => break,
                }
            } else if abort.is_none() && done == total {
                break;
            } else {
                let next = running.values().flatten().min().copied();
                let wait =
                    next.map_or(INTERRUPT_CHECK, |d| d.saturating_duration_since(Instant::now()).min(INTERRUPT_CHECK));
                rx.recv_timeout(wait)
            };
            match msg {
                Ok(Msg::Started(i, at)) => {
                    inc(&self.counters.inspections);
                    running.insert(i, self.options.inspect_timeout.map(|t| at + t));
                }
                Ok(Msg::Done(i, Ok(ins))) => {
                    running.remove(&i);
                    if results[i].is_none() {
                        results[i] = Some(ins);
                        done += 1;
                    }
                }
                Ok(Msg::Done(i, Err(a))) => {
                    running.remove(&i);
                    if abort.is_none() {
                        lock(&queue).clear();
                        abort = Some(a);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(a) = self.runtime.check_interrupt() {
                        abort.get_or_insert(a);
                        break;
                    }
                    let now = Instant::now();
                    let expired: Vec<usize> =
                        running.iter().filter(|(_, d)| d.is_some_and(|d| d <= now)).map(|(i, _)| *i).collect();
                    for i in expired {
                        running.remove(&i);
                        inc(&self.counters.inspection_timeouts);
                        let pod = pods[i].as_ref().expect("only pods are inspected");
                        let err = self.runtime.timeout_error(timeout_message(pod, self.options.inspect_timeout));
                        let at = self.clock.now().unwrap_or_default();
                        results[i] = Some(Inspected {
                            inspection: Inspection { status: None, err: Some(err), invalid: None },
                            at,
                        });
                        done += 1;
                        if !lock(&queue).is_empty() {
                            spawn(tx.clone());
                        }
                    }
                }
                // Every worker is gone; only reachable if one panicked.
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        if abort.is_some() {
            lock(&queue).clear();
        }
        (results, abort.map(Abort::into_error))
    }

    /// One pod's step of the relist after its inspection: cache write, watch conditions, record commit, sends.
    /// A condition's `Abort` stops it before the record commit.
    fn commit(
        &self,
        records: &mut PodRecords,
        w: Work<R::Status>,
        inspected: Option<Inspected<R::Status, R::Error>>,
        needs_reinspection: &mut BTreeSet<String>,
        deferred: &mut Option<Error>,
    ) -> Result<(), Error> {
        let (status, updated, failed) = match (w.pod.as_deref(), inspected) {
            // The pod is gone from the listing: it has no visible containers left.
            (None, _) => {
                self.cache.delete(&w.pid);
                (None, true, false)
            }
            (Some(_), None) => {
                // A worker died (a panic); treat the pod as failed so it is retried.
                needs_reinspection.insert(w.pid);
                return Ok(());
            }
            (Some(pod), Some(ins)) => {
                let Inspected { inspection: Inspection { status, err, invalid }, at } = ins;
                if let Some(e) = invalid {
                    deferred.get_or_insert(e);
                }
                let failed = err.is_some();
                let status = match status {
                    Some(s) if !failed => Some(self.preserve_ips(&pod.id, s)),
                    s => s,
                };
                let mut ts = at;
                if self.evented_gate.load(Ordering::Acquire) && self.evented_in_use() {
                    if let Some(t) = status.as_ref().and_then(StatusView::timestamp) {
                        ts = t;
                    }
                }
                let updated = self.cache.set(&pod.id, status.clone(), err, ts);
                (status, updated, failed)
            }
        };
        if failed {
            inc(&self.counters.inspection_errors);
            needs_reinspection.insert(w.pid);
            return Ok(());
        }
        if self.evented_gate.load(Ordering::Acquire) && !updated {
            return Ok(());
        }
        let mut events = w.events;
        if self.options.pod_sync_on_reinspect && w.reinspected && events.is_empty() {
            // A full reinspection always ends in a pod sync (Era C).
            events.push(PodLifecycleEvent { id: w.pid.clone(), kind: PodLifecycleEventType::PodSync, data: None });
        }
        if let Some(s) = status.as_ref() {
            let mut completed = Vec::new();
            for (key, version, cond) in &w.conditions {
                match cond(s) {
                    Ok(true) => completed.push((key.as_str(), *version)),
                    Ok(false) => {}
                    Err(e) if is_abort(&e) => return Err(e),
                    Err(e) => {
                        deferred.get_or_insert(e);
                    }
                }
            }
            if !completed.is_empty() {
                self.complete_conditions(&w.pid, &completed);
                // One event however many conditions completed: the pod sync re-reads the whole status.
                events.push(PodLifecycleEvent {
                    id: w.pid.clone(),
                    kind: PodLifecycleEventType::ConditionMet,
                    data: None,
                });
            }
        }
        records.update(&w.pid);
        for e in events {
            // Unreliable, and nothing consumes it; it only forced the inspection.
            if e.kind == PodLifecycleEventType::ContainerChanged {
                continue;
            }
            self.send(e);
        }
        Ok(())
    }

    pub(crate) fn send(&self, e: PodLifecycleEvent) -> bool {
        let ok = self.channel.try_send(e);
        inc(if ok { &self.counters.events_sent } else { &self.counters.events_dropped });
        ok
    }

    /// `getPodIPs`: a status without IPs keeps the cached ones unless a sandbox is ready again (a killed pod's
    /// status can be read after its network is gone). The evented path uses the same rule.
    pub(crate) fn preserve_ips(&self, pid: &str, status: R::Status) -> R::Status {
        if !status.ips().is_empty() || status.has_ready_sandbox() {
            return status;
        }
        match self.cache.get(pid) {
            Lookup::Found(e) if e.err.is_none() => match e.status.as_ref() {
                Some(old) if !old.ips().is_empty() => status.with_ips(old.ips().to_vec()),
                _ => status,
            },
            _ => status,
        }
    }

    /// `SetPodWatchCondition`: a new key starts at version 0; setting it again bumps the version.
    pub fn set_pod_watch_condition(&self, uid: &str, key: &str, cond: Condition<R::Status>) {
        let mut all = lock(&self.conditions);
        let pod = all.entry(uid.to_owned()).or_default();
        match pod.get_mut(key) {
            Some(v) => {
                v.version = v.version.wrapping_add(1);
                v.cond = cond;
            }
            None => {
                pod.insert(key.to_owned(), Versioned { cond, version: 0 });
            }
        }
    }

    /// The pod's watch conditions as (key, version), sorted; None when the pod has no entry at all.
    pub fn watch_conditions(&self, uid: &str) -> Option<Vec<(String, u32)>> {
        lock(&self.conditions).get(uid).map(|m| {
            let mut v: Vec<_> = m.iter().map(|(k, c)| (k.clone(), c.version)).collect();
            v.sort();
            v
        })
    }

    /// Removes completed conditions unless they were set again since they were read. The pod's (possibly
    /// empty) map stays, as in Go.
    fn complete_conditions(&self, uid: &str, completed: &[(&str, u32)]) {
        let mut all = lock(&self.conditions);
        let Some(pod) = all.get_mut(uid) else { return };
        for (key, version) in completed {
            if pod.get(*key).is_some_and(|c| c.version == *version) {
                pod.remove(*key);
            }
        }
    }

    /// Drops the conditions of pods absent from this listing.
    fn cleanup_orphaned_conditions(&self, records: &PodRecords) {
        lock(&self.conditions).retain(|uid, _| records.get_current(uid).is_some());
    }

    /// `Start`: relists now and then `relist_period` after each relist ends (`wait.Until`, sliding), on the
    /// clock; with `on_demand_relist`, serves relist requests in between (`loop_iteration`). An `Abort` ends
    /// the loop and is kept for `take_abort`. False, starting nothing, while a loop told to stop has not ended
    /// (its runtime call has not returned); true when the loop runs.
    pub fn start(self: &Arc<Self>) -> Result<bool, Error> {
        let mut worker = lock(&self.worker);
        if let Some(w) = worker.as_ref() {
            if !w.stop.is_stopped() {
                return Ok(true);
            }
            if !w.ended.is_stopped() {
                return Ok(false);
            }
            if let Some(w) = worker.take() {
                let _ = w.handle.join();
            }
        }
        *lock(&self.relist_due) = None;
        let stop = Arc::new(StopSignal::default());
        let ended = Arc::new(StopSignal::default());
        let (me, s, e) = (self.clone(), stop.clone(), ended.clone());
        let handle = crate::threads::spawn("pleg-relist", move || {
            let _ended = SetOnDrop(e);
            loop {
                if s.is_stopped() {
                    return;
                }
                match me.loop_iteration() {
                    Ok(LoopStep::Idle) => {}
                    Ok(_) => continue,
                    Err(e) if is_abort(&e) => {
                        me.runtime.loop_aborted("GenericPLEG relist loop", &e);
                        let e = Arc::new(e);
                        *lock(&me.last_error) = Some(e.clone());
                        *lock(&me.aborted) = Some(e);
                        s.stop();
                        return;
                    }
                    Err(e) => *lock(&me.last_error) = Some(Arc::new(e)),
                }
                let due = *lock(&me.relist_due);
                *lock(&me.next_relist) = due;
                // After an error too, so that a clock that cannot be read ends the loop instead of spinning it.
                let go_on = me.requests.wait_until(&s, me.clock.as_ref(), due.unwrap_or(Time(i64::MIN)));
                *lock(&me.next_relist) = None;
                if !go_on {
                    return;
                }
            }
        })?;
        *worker = Some(Worker { stop, ended, handle });
        Ok(true)
    }

    /// When the loop's next relist is due on the clock; None while it is relisting or not running. A test
    /// on a fake clock waits for this before stepping the clock.
    pub fn next_relist_at(&self) -> Option<Time> {
        *lock(&self.next_relist)
    }

    /// `Stop`: ends the loop and waits for a relist in progress to finish.
    pub fn stop(&self) {
        self.signal_stop();
        self.wait_stopped(None);
    }

    /// Tells the loop to end, without waiting for it.
    pub fn signal_stop(&self) {
        if let Some(w) = lock(&self.worker).as_ref() {
            w.stop.stop();
            self.requests.wake();
        }
    }

    /// Waits up to `timeout` (None: for good) for a loop told to stop to end; true once it has (or when
    /// there is none).
    pub fn wait_stopped(&self, timeout: Option<Duration>) -> bool {
        let Some(ended) = lock(&self.worker).as_ref().map(|w| w.ended.clone()) else { return true };
        let done = match timeout {
            Some(t) => ended.wait(t),
            None => {
                while !ended.wait(Duration::from_secs(3600)) {}
                true
            }
        };
        if done {
            let mut worker = lock(&self.worker);
            if worker.as_ref().is_some_and(|w| Arc::ptr_eq(&w.ended, &ended)) {
                if let Some(w) = worker.take() {
                    let _ = w.handle.join();
                }
            }
        }
        done
    }

    /// The loop runs and was not told to stop.
    pub fn running(&self) -> bool {
        lock(&self.worker).as_ref().is_some_and(|w| !w.stop.is_stopped())
    }
}
