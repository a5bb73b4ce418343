//! EventedPLEG (`pkg/kubelet/pleg/evented.go`, the v1.32–v1.35 version that writes the cache and emits
//! events): CRI container events go into the pod status cache and, when the cache takes them, onto the
//! shared event channel. While it is in use the generic relist slows to 300 s (threshold 10 min); after
//! `max_stream_retries` stream failures it stops and the generic PLEG goes back to 1 s / 3 min.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::generic::{is_abort, GenericPleg, RelistDuration, Runtime, SetOnDrop, RELIST_PERIOD, RELIST_THRESHOLD};
use super::pod::{PodLifecycleEvent, PodLifecycleEventType, StatusView};
use crate::clock::StopSignal;
use crate::error::Error;
use crate::metrics::{Histogram, HistogramSnapshot};
use crate::sync::lock;
use crate::time::{check_duration, Time, NANOS_PER_SECOND};

/// `eventedPlegRelistPeriod`, `eventedPlegRelistThreshold`, `eventedPlegMaxStreamRetries`,
/// `globalCacheUpdatePeriod` (2 s in this era).
pub const EVENTED_RELIST_PERIOD: i64 = 300 * NANOS_PER_SECOND;
pub const EVENTED_RELIST_THRESHOLD: i64 = 600 * NANOS_PER_SECOND;
pub const MAX_STREAM_RETRIES: u32 = 5;
pub const CACHE_UPDATE_PERIOD: i64 = 2 * NANOS_PER_SECOND;

/// `runtimeapi.ContainerEventType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CriEventType {
    Created,
    Started,
    Stopped,
    Deleted,
}

impl CriEventType {
    /// Accepts the CRI names (`CONTAINER_STARTED_EVENT`), their short forms (`STARTED`) and enum values 0–3.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let s = text.strip_prefix("CONTAINER_").unwrap_or(text);
        let s = s.strip_suffix("_EVENT").unwrap_or(s);
        Ok(match s {
            "CREATED" | "0" => CriEventType::Created,
            "STARTED" | "1" => CriEventType::Started,
            "STOPPED" | "2" => CriEventType::Stopped,
            "DELETED" | "3" => CriEventType::Deleted,
            _ => {
                let expected = "(expected CREATED, STARTED, STOPPED or DELETED)";
                return Err(Error::value("type", format!("unknown container event type {text:?} {expected}")));
            }
        })
    }
}

/// A `ContainerEventResponse`, with the pod status the runtime generates from it.
#[derive(Clone, Debug)]
pub struct CriEvent<S> {
    pub container_id: String,
    /// The sandbox metadata's pod UID; None when the runtime sent no sandbox metadata (the event is ignored).
    pub pod_uid: Option<String>,
    pub kind: CriEventType,
    pub created_at: Time,
    pub status: S,
}

#[derive(Clone, Copy, Debug)]
pub struct EventedOptions {
    pub max_stream_retries: u32,
    /// The generic PLEG's period and threshold while evented is in use.
    pub relist: RelistDuration,
    /// What the generic PLEG returns to after the stream failed for good.
    pub fallback: RelistDuration,
    pub cache_update_period: i64,
}

impl Default for EventedOptions {
    fn default() -> Self {
        EventedOptions {
            max_stream_retries: MAX_STREAM_RETRIES,
            relist: RelistDuration { period: EVENTED_RELIST_PERIOD, threshold: EVENTED_RELIST_THRESHOLD },
            fallback: RelistDuration { period: RELIST_PERIOD, threshold: RELIST_THRESHOLD },
            cache_update_period: CACHE_UPDATE_PERIOD,
        }
    }
}

/// Where CRI events come from: `stream` feeds `sink` until the stream ends or fails. `sink` returns false when
/// the evented PLEG was stopped and no more events are wanted. An `Abort` error ends the stream loop for good.
pub trait ContainerEventSource<S>: Send + Sync + 'static {
    fn stream(&self, sink: &mut dyn FnMut(CriEvent<S>) -> bool) -> Result<(), Error>;
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EventedStats {
    pub events_received: u64,
    pub events_ignored: u64,
    pub events_rejected: u64,
    pub events_sent: u64,
    pub stream_failures: u64,
    /// Streams that delivered an event (`kubelet_evented_pleg_connection_success_count`; the kubelet counts
    /// a stream when the runtime accepts it, which a source here shows by its first event).
    pub stream_connections: u64,
    pub fell_back: bool,
    /// `kubelet_running_pods` as the evented path keeps it: moved by each event's sandbox state.
    pub running_pods: i64,
    /// `kubelet_evented_pleg_connection_latency_seconds`: from each event's `created_at` to its processing, on
    /// the clock (events without a pod UID are not observed).
    pub connection_latency_seconds: HistogramSnapshot,
}

#[derive(Default)]
struct EventedCounters {
    received: AtomicU64,
    ignored: AtomicU64,
    rejected: AtomicU64,
    sent: AtomicU64,
    failures: AtomicU64,
    connections: AtomicU64,
    fell_back: AtomicU64,
    running_pods: AtomicI64,
    latency: Histogram,
}

pub struct EventedPleg<R: Runtime> {
    generic: Arc<GenericPleg<R>>,
    options: EventedOptions,
    counters: EventedCounters,
    stop: Mutex<Option<Arc<StopSignal>>>,
    /// Set by each thread started so far when it ends.
    ended: Mutex<Vec<Arc<StopSignal>>>,
    /// Errors, not text: formatting one from Python takes the GIL, which the stream's thread must not.
    last_error: Mutex<Option<Arc<Error>>>,
    /// The `Abort` that ended the stream loop, until `take_abort`.
    aborted: Mutex<Option<Arc<Error>>>,
}

impl<R: Runtime> EventedPleg<R> {
    /// Turns on the EventedPLEG gate for `generic` and slows its relist, as the kubelet does when the gate is
    /// on. The cache must apply the evented rule.
    pub fn new(generic: Arc<GenericPleg<R>>, options: EventedOptions) -> Result<Self, Error> {
        if !generic.cache().evented() {
            return Err(Error::Option(
                "EventedPLEG needs a cache with the evented rule (PodCache(evented=True)) shared with the generic PLEG"
                    .into(),
            ));
        }
        options.relist.checked("relist")?;
        options.fallback.checked("fallback_relist")?;
        check_duration(options.cache_update_period, "cache_update_period", true)?;
        generic.set_evented_gate(true);
        generic.update(options.relist);
        Ok(EventedPleg {
            generic,
            options,
            counters: EventedCounters::default(),
            stop: Mutex::new(None),
            ended: Mutex::default(),
            last_error: Mutex::new(None),
            aborted: Mutex::new(None),
        })
    }

    pub fn generic(&self) -> &Arc<GenericPleg<R>> {
        &self.generic
    }

    pub fn in_use(&self) -> bool {
        self.generic.evented_in_use()
    }

    pub fn stats(&self) -> EventedStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = &self.counters;
        EventedStats {
            events_received: g(&c.received),
            events_ignored: g(&c.ignored),
            events_rejected: g(&c.rejected),
            events_sent: g(&c.sent),
            stream_failures: g(&c.failures),
            stream_connections: g(&c.connections),
            fell_back: c.fell_back.load(Ordering::Acquire) > 0,
            running_pods: c.running_pods.load(Ordering::Relaxed),
            connection_latency_seconds: c.latency.snapshot(),
        }
    }

    /// The last stream error, formatted now (with the GIL held when it came from Python).
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).as_ref().map(|e| e.to_string())
    }

    /// The `Abort` that ended the stream loop, once.
    pub fn take_abort(&self) -> Option<Arc<Error>> {
        lock(&self.aborted).take()
    }

    /// `Healthy`: unhealthy only while the event channel is full.
    pub fn healthy(&self) -> (bool, Option<String>) {
        let ch = self.generic.channel();
        let n = ch.len();
        if n >= ch.capacity() {
            return (false, Some(format!("EventedPLEG: pleg event channel capacity is full with {n} events")));
        }
        (true, None)
    }

    /// `processCRIEvents` for one event: returns the PLEG events sent.
    pub fn process_event(&self, ev: CriEvent<R::Status>) -> usize {
        self.counters.received.fetch_add(1, Ordering::Relaxed);
        let Some(pid) = ev.pod_uid.clone() else {
            self.counters.ignored.fetch_add(1, Ordering::Relaxed);
            return 0;
        };
        // As the kubelet: every event with sandbox metadata, whatever the cache makes of it.
        if let Ok(now) = self.generic.clock().now() {
            self.counters.latency.observe_nanos(now.since(ev.created_at));
        }
        let status = self.generic.preserve_ips(&pid, ev.status);
        self.update_running_pods(&pid, &status);
        let send = if ev.kind == CriEventType::Deleted {
            // The runtime removed the container; the cache forgets the pod only when it was the sandbox.
            if status.has_sandbox(&ev.container_id) {
                self.generic.cache().delete(&pid);
            }
            true
        } else {
            self.generic.cache().set(&pid, Some(status), None, ev.created_at)
        };
        if !send {
            self.counters.rejected.fetch_add(1, Ordering::Relaxed);
            return 0;
        }
        let cid = Some(ev.container_id.as_str());
        let events: &[PodLifecycleEventType] = match ev.kind {
            // The generic PLEG ignores creation too; the cache update is all that is needed.
            CriEventType::Created => &[],
            CriEventType::Started => &[PodLifecycleEventType::ContainerStarted],
            CriEventType::Stopped => &[PodLifecycleEventType::ContainerDied],
            CriEventType::Deleted => &[PodLifecycleEventType::ContainerDied, PodLifecycleEventType::ContainerRemoved],
        };
        let mut sent = 0;
        for kind in events {
            if self.generic.send(PodLifecycleEvent::new(pid.as_str(), *kind, cid)) {
                sent += 1;
            }
        }
        self.counters.sent.fetch_add(sent as u64, Ordering::Relaxed);
        sent
    }

    /// `updateRunningPodMetric`: a pod the cache has no sandbox for counts when its sandbox runs; otherwise
    /// the count follows the change of the sandbox state.
    fn update_running_pods(&self, pid: &str, status: &R::Status) {
        let now = status.sandbox_running();
        let cached = self.generic.cache().get(pid);
        let delta = match cached.status().filter(|c| c.has_sandboxes()) {
            None => i64::from(now),
            Some(old) => i64::from(now) - i64::from(old.sandbox_running()),
        };
        self.counters.running_pods.fetch_add(delta, Ordering::Relaxed);
    }

    /// `Start`: marks evented in use and runs the global cache tick; with a source, also the stream loop.
    pub fn start(self: &Arc<Self>, source: Option<Arc<dyn ContainerEventSource<R::Status>>>) -> Result<(), Error> {
        let mut guard = lock(&self.stop);
        if guard.is_some() {
            return Ok(());
        }
        let stop = Arc::new(StopSignal::default());
        self.generic.set_evented_in_use(true);
        let undo = |e: Error| {
            stop.stop();
            self.generic.set_evented_in_use(false);
            e
        };
        let mut ended = lock(&self.ended);
        ended.retain(|e| !e.is_stopped());
        let (me, s, e) = (self.clone(), stop.clone(), Arc::new(StopSignal::default()));
        ended.push(e.clone());
        crate::threads::spawn("pleg-cache-tick", move || {
            let _ended = SetOnDrop(e);
            me.cache_tick(&s)
        })
        .map_err(undo)?;
        if let Some(src) = source {
            let (me, s, e) = (self.clone(), stop.clone(), Arc::new(StopSignal::default()));
            ended.push(e.clone());
            crate::threads::spawn("pleg-events", move || {
                let _ended = SetOnDrop(e);
                me.watch_events(src.as_ref(), &s)
            })
            .map_err(undo)?;
        }
        *guard = Some(stop);
        Ok(())
    }

    /// Waits up to `timeout` for every thread started so far to end (after `stop`); true once they have.
    pub fn wait_stopped(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let ended = lock(&self.ended).clone();
        ended.iter().all(|e| e.wait(deadline.saturating_duration_since(Instant::now())))
    }

    /// `Stop`: no longer in use; the loops end (a stream blocked in the source ends at its next event).
    pub fn stop(&self) {
        if let Some(s) = lock(&self.stop).take() {
            s.stop();
        }
        self.generic.set_evented_in_use(false);
    }

    /// `updateGlobalCache` every `cache_update_period`, so `GetNewerThan` waiters are not stranded.
    fn cache_tick(&self, stop: &StopSignal) {
        let clock = self.generic.clock().clone();
        loop {
            let Ok(now) = clock.now() else { return };
            if !stop.sleep_until(clock.as_ref(), now.add_nanos(self.options.cache_update_period)) {
                return;
            }
            if let Ok(t) = clock.now() {
                self.generic.cache().update_time(t);
            }
        }
    }

    /// `watchEventsChannel`: every stream failure forces a generic relist; after `max_stream_retries` the
    /// evented PLEG stops and the generic PLEG restarts at its normal period. A stream that ends without an
    /// error counts as a failure too (Go retries it uncounted, which spins when a runtime keeps closing it).
    fn watch_events(&self, source: &dyn ContainerEventSource<R::Status>, stop: &StopSignal) {
        let mut attempts = 0;
        loop {
            if stop.is_stopped() {
                return;
            }
            if attempts >= self.options.max_stream_retries {
                self.fall_back();
                return;
            }
            let mut connected = false;
            let result = source.stream(&mut |ev| {
                if stop.is_stopped() {
                    return false;
                }
                if !std::mem::replace(&mut connected, true) {
                    self.counters.connections.fetch_add(1, Ordering::Relaxed);
                }
                self.process_event(ev);
                true
            });
            if stop.is_stopped() {
                return;
            }
            attempts += 1;
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
            let closed = || Error::Io(std::io::Error::new(ErrorKind::UnexpectedEof, "container event stream closed"));
            if self.keep_error(result.err().unwrap_or_else(closed)) {
                return;
            }
            // Bring the cache and the running counts up to date while the stream is down.
            if let Err(e) = self.generic.relist() {
                if self.keep_error(e) {
                    return;
                }
            }
        }
    }

    /// Keeps `e` as the last error; an `Abort` also stops the evented PLEG, is kept for `take_abort` and
    /// answers true.
    fn keep_error(&self, e: Error) -> bool {
        if !is_abort(&e) {
            *lock(&self.last_error) = Some(Arc::new(e));
            return false;
        }
        self.generic.runtime().loop_aborted("EventedPLEG event stream", &e);
        let e = Arc::new(e);
        *lock(&self.last_error) = Some(e.clone());
        *lock(&self.aborted) = Some(e);
        self.stop();
        true
    }

    fn fall_back(&self) {
        self.stop();
        let was_running = self.generic.running();
        self.generic.stop();
        self.generic.update(self.options.fallback);
        if was_running {
            if let Err(e) = self.generic.start() {
                *lock(&self.last_error) = Some(Arc::new(e));
            }
        }
        // Last, so whoever sees the flag sees the generic PLEG restarted.
        self.counters.fell_back.store(1, Ordering::Release);
    }
}
