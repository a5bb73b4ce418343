//! The kubelet's pod status cache (`kubecontainer.Cache`): the latest status (and inspection error) per pod,
//! a global timestamp saying how fresh the whole cache is, per-pod observed times (Era C's
//! `SetObservedTime`), and `GetNewerThan` waiters. The comparisons are Go's (see docs/pleg.md).

use crate::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::time::Time;

/// One cache entry (`data`): the status and error as stored, and when it was modified.
#[derive(Debug)]
pub struct Entry<S, E> {
    pub status: Option<S>,
    pub err: Option<E>,
    pub modified: Time,
}

/// A read: a stored entry, or `Missing` (Go's default `&PodStatus{ID: id}` with no error).
#[derive(Debug)]
pub enum Lookup<S, E> {
    Missing,
    Found(Arc<Entry<S, E>>),
}

impl<S, E> Clone for Lookup<S, E> {
    fn clone(&self) -> Self {
        match self {
            Lookup::Missing => Lookup::Missing,
            Lookup::Found(e) => Lookup::Found(e.clone()),
        }
    }
}

impl<S, E> Lookup<S, E> {
    pub fn status(&self) -> Option<&S> {
        match self {
            Lookup::Found(e) => e.status.as_ref(),
            Lookup::Missing => None,
        }
    }

    pub fn err(&self) -> Option<&E> {
        match self {
            Lookup::Found(e) => e.err.as_ref(),
            Lookup::Missing => None,
        }
    }
}

/// A one-shot slot a blocking `get_newer_than` waits on.
pub struct Slot<S, E> {
    value: Mutex<Option<Lookup<S, E>>>,
    cv: Condvar,
}

impl<S, E> Slot<S, E> {
    fn new() -> Self {
        Slot { value: Mutex::new(None), cv: Condvar::new() }
    }

    fn fill(&self, v: Lookup<S, E>) {
        *lock(&self.value) = Some(v);
        self.cv.notify_all();
    }

    /// Waits up to `timeout` for the value.
    pub fn wait(&self, timeout: Duration) -> Option<Lookup<S, E>> {
        let deadline = Instant::now() + timeout;
        let mut v = lock(&self.value);
        loop {
            if let Some(x) = v.take() {
                return Some(x);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            v = self.cv.wait_timeout(v, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

type Callback<S, E> = Box<dyn FnOnce(Lookup<S, E>) + Send>;

/// Who waits for a pod's status to become fresh enough.
pub enum Waiter<S, E> {
    Slot(Arc<Slot<S, E>>),
    Callback(Callback<S, E>),
}

impl<S, E> Waiter<S, E> {
    fn deliver(self, v: Lookup<S, E>) {
        match self {
            Waiter::Slot(s) => s.fill(v),
            Waiter::Callback(cb) => cb(v),
        }
    }
}

struct Sub<S, E> {
    time: Time,
    waiter: Waiter<S, E>,
}

struct Inner<S, E> {
    pods: HashMap<String, Arc<Entry<S, E>>>,
    timestamp: Option<Time>,
    /// Per pod, the latest `set_observed_time`.
    observed: HashMap<String, Time>,
    subscribers: HashMap<String, Vec<Sub<S, E>>>,
}

type Deliveries<S, E> = Vec<(Waiter<S, E>, Lookup<S, E>)>;

pub struct PodCache<S, E> {
    inner: Mutex<Inner<S, E>>,
    evented: bool,
}

impl<S, E> PodCache<S, E> {
    /// `evented`: the EventedPLEG rule, under which `set` rejects data older than the entry it would replace.
    pub fn new(evented: bool) -> Self {
        PodCache {
            inner: Mutex::new(Inner {
                pods: HashMap::new(),
                timestamp: None,
                observed: HashMap::new(),
                subscribers: HashMap::new(),
            }),
            evented,
        }
    }

    pub fn evented(&self) -> bool {
        self.evented
    }

    fn lock(&self) -> MutexGuard<'_, Inner<S, E>> {
        lock(&self.inner)
    }

    pub fn get(&self, id: &str) -> Lookup<S, E> {
        get(&self.lock(), id)
    }

    /// Stores status and error with `timestamp` as the modification time; false when the evented rule
    /// rejects it (the entry is strictly newer). Wakes the pod's satisfied waiters.
    pub fn set(&self, id: &str, status: Option<S>, err: Option<E>, timestamp: Time) -> bool {
        let deliveries = {
            let mut inner = self.lock();
            if self.evented && inner.pods.get(id).is_some_and(|d| d.modified > timestamp) {
                return false;
            }
            inner.pods.insert(id.to_owned(), Arc::new(Entry { status, err, modified: timestamp }));
            let mut out = Vec::new();
            notify(&mut inner, id, timestamp, &mut out);
            out
        };
        deliver(deliveries);
        true
    }

    /// Removes the entry and its observed time (so deleted pods leave nothing behind); waiters are not woken
    /// (as in Go).
    pub fn delete(&self, id: &str) {
        let mut inner = self.lock();
        inner.pods.remove(id);
        inner.observed.remove(id);
    }

    /// `SetObservedTime`: the pod was seen unchanged (or stored) at `timestamp`. Its waiters are answered as
    /// `update_time` answers everyone's: those asking for at most `timestamp` get the stored data now, and a
    /// later `get_newer_than` returns at once for times strictly before it. The status stays as it is. The
    /// time only moves forward: an older observation says nothing new.
    pub fn set_observed_time(&self, id: &str, timestamp: Time) {
        let deliveries = {
            let mut inner = self.lock();
            let t = inner.observed.entry(id.to_owned()).or_insert(timestamp);
            *t = (*t).max(timestamp);
            let mut out = Vec::new();
            notify(&mut inner, id, timestamp, &mut out);
            out
        };
        deliver(deliveries);
    }

    /// The pod's latest observed time (`set_observed_time`), if any.
    pub fn observed_time(&self, id: &str) -> Option<Time> {
        self.lock().observed.get(id).copied()
    }

    /// Sets the global timestamp (not monotonic: an older time overwrites) and wakes satisfied waiters.
    pub fn update_time(&self, timestamp: Time) {
        let deliveries = {
            let mut inner = self.lock();
            inner.timestamp = Some(timestamp);
            let ids: Vec<String> = inner.subscribers.keys().cloned().collect();
            let mut out = Vec::new();
            for id in ids {
                notify(&mut inner, &id, timestamp, &mut out);
            }
            out
        };
        deliver(deliveries);
    }

    pub fn timestamp(&self) -> Option<Time> {
        self.lock().timestamp
    }

    /// `getIfNewerThan`: the data if strictly newer than `min` (or the global timestamp is), else None.
    pub fn get_if_newer_than(&self, id: &str, min: Time) -> Option<Lookup<S, E>> {
        get_if_newer_than(&self.lock(), id, min)
    }

    /// `subscribe`: delivers to `waiter` now if the data is ready, otherwise on a later `set`/`update_time`.
    pub fn subscribe(&self, id: &str, min: Time, waiter: Waiter<S, E>) {
        let ready = {
            let mut inner = self.lock();
            match get_if_newer_than(&inner, id, min) {
                Some(d) => Some((waiter, d)),
                None => {
                    inner.subscribers.entry(id.to_owned()).or_default().push(Sub { time: min, waiter });
                    None
                }
            }
        };
        if let Some((w, d)) = ready {
            w.deliver(d);
        }
    }

    /// Subscribes a slot to wait on (see `Slot::wait`); give it back with `unsubscribe` if you stop waiting.
    pub fn subscribe_slot(&self, id: &str, min: Time) -> Arc<Slot<S, E>> {
        let slot = Arc::new(Slot::new());
        self.subscribe(id, min, Waiter::Slot(slot.clone()));
        slot
    }

    /// Drops a slot's subscription (after a timeout), so abandoned waits do not pile up.
    pub fn unsubscribe(&self, id: &str, slot: &Arc<Slot<S, E>>) {
        let mut inner = self.lock();
        if let Some(list) = inner.subscribers.get_mut(id) {
            list.retain(|s| !matches!(&s.waiter, Waiter::Slot(x) if Arc::ptr_eq(x, slot)));
            if list.is_empty() {
                inner.subscribers.remove(id);
            }
        }
    }

    /// `GetNewerThan` with an optional timeout: None when it ran out.
    pub fn get_newer_than(&self, id: &str, min: Time, timeout: Option<Duration>) -> Option<Lookup<S, E>>
    where
        S: Send + Sync,
        E: Send + Sync,
    {
        let waited = self.get_newer_than_with(id, min, |ready| {
            match timeout {
                Some(t) => {
                    ready(t);
                }
                None => while !ready(Duration::from_secs(3600)) {},
            }
            Ok::<_, std::convert::Infallible>(())
        });
        match waited {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// `GetNewerThan`, the waiting left to `wait`: it calls `ready(slice)` (a wait of at most `slice`, true
    /// once the data came) until it is true or it gives up (its error is returned). A waiter given up on is
    /// removed; None when no data came.
    pub fn get_newer_than_with<X>(
        &self,
        id: &str,
        min: Time,
        wait: impl FnOnce(&mut (dyn FnMut(Duration) -> bool + Send)) -> Result<(), X>,
    ) -> Result<Option<Lookup<S, E>>, X>
    where
        S: Send + Sync,
        E: Send + Sync,
    {
        let slot = self.subscribe_slot(id, min);
        let mut got = None;
        let waited = wait(&mut |slice| {
            got = slot.wait(slice);
            got.is_some()
        });
        if got.is_some() {
            return Ok(got);
        }
        self.unsubscribe(id, &slot);
        waited?;
        // A delivery may have raced the end of the wait.
        Ok(slot.wait(Duration::ZERO))
    }

    /// Number of waiters, for tests and stats.
    pub fn waiters(&self) -> usize {
        self.lock().subscribers.values().map(Vec::len).sum()
    }

    pub fn len(&self) -> usize {
        self.lock().pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn get<S, E>(inner: &Inner<S, E>, id: &str) -> Lookup<S, E> {
    inner.pods.get(id).map_or(Lookup::Missing, |d| Lookup::Found(d.clone()))
}

fn get_if_newer_than<S, E>(inner: &Inner<S, E>, id: &str, min: Time) -> Option<Lookup<S, E>> {
    // The global timestamp, or this pod's observed time, vouches for what is stored (or for its absence).
    let vouched = inner.timestamp.is_some_and(|t| t > min) || inner.observed.get(id).is_some_and(|t| *t > min);
    match inner.pods.get(id) {
        None if vouched => Some(Lookup::Missing),
        Some(d) if d.modified > min || vouched => Some(Lookup::Found(d.clone())),
        _ => None,
    }
}

/// `notify`: waiters whose time is not after `timestamp` get the current data (in FIFO order).
fn notify<S, E>(inner: &mut Inner<S, E>, id: &str, timestamp: Time, out: &mut Deliveries<S, E>) {
    let Some(list) = inner.subscribers.remove(id) else { return };
    let mut keep = Vec::new();
    for sub in list {
        if timestamp < sub.time {
            keep.push(sub);
        } else {
            out.push((sub.waiter, get(inner, id)));
        }
    }
    if !keep.is_empty() {
        inner.subscribers.insert(id.to_owned(), keep);
    }
}

/// Outside the lock: a callback may take the GIL or read the cache.
fn deliver<S, E>(d: Deliveries<S, E>) {
    for (w, v) in d {
        w.deliver(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type C = PodCache<&'static str, &'static str>;
    const S: i64 = 1_000_000_000;

    #[test]
    fn not_initialized_blocks() {
        let c = C::new(false);
        assert!(c.get_if_newer_than("1234", Time(0)).is_none());
    }

    #[test]
    fn get_if_newer_than_when_pod_exists() {
        let t = Time(100 * S);
        for (cache_time, modified, want) in [
            (t.0 + S, t.0, true),
            (t.0 + S, t.0 - 10 * S, true),
            (t.0 - S, t.0 + 3 * S, true),
            (t.0 - S, t.0 - S, false),
        ] {
            let c = C::new(false);
            c.update_time(Time(cache_time));
            c.set("p", Some("s"), None, Time(modified));
            assert_eq!(c.get_if_newer_than("p", t).is_some(), want, "{cache_time} {modified}");
        }
    }

    #[test]
    fn missing_pod_follows_the_global_timestamp() {
        let c = C::new(false);
        c.update_time(Time(10 * S));
        assert!(matches!(c.get_if_newer_than("1234", Time(9 * S)), Some(Lookup::Missing)));
        assert!(c.get_if_newer_than("1234", Time(11 * S)).is_none());
    }

    #[test]
    fn set_get_delete() {
        let c = C::new(false);
        assert!(c.set("p", Some("s"), Some("unable to get status"), Time(0)));
        assert_eq!(c.get("p").status(), Some(&"s"));
        assert_eq!(c.get("p").err(), Some(&"unable to get status"));
        c.delete("p");
        assert!(matches!(c.get("p"), Lookup::Missing));
    }

    #[test]
    fn evented_rule_rejects_only_strictly_older() {
        let c = C::new(true);
        assert!(c.set("p", Some("a"), None, Time(10)));
        assert!(!c.set("p", Some("b"), None, Time(9)));
        assert!(c.set("p", Some("c"), None, Time(10)));
        assert_eq!(c.get("p").status(), Some(&"c"));
        let plain = C::new(false);
        plain.set("p", Some("a"), None, Time(10));
        assert!(plain.set("p", Some("b"), None, Time(9)));
    }

    #[test]
    fn notification_fires_at_equal_time() {
        let c = Arc::new(C::new(false));
        c.update_time(Time(10 * S));
        let slot = c.subscribe_slot("p", Time(11 * S));
        assert!(slot.wait(Duration::ZERO).is_none());
        c.set("p", Some("s"), None, Time(11 * S));
        assert_eq!(slot.wait(Duration::ZERO).unwrap().status(), Some(&"s"));
        let slot2 = c.subscribe_slot("p2", Time(11 * S));
        assert!(slot2.wait(Duration::ZERO).is_none());
        c.update_time(Time(12 * S));
        assert!(matches!(slot2.wait(Duration::ZERO), Some(Lookup::Missing)));
        assert_eq!(c.waiters(), 0);
    }

    #[test]
    fn delete_does_not_notify_and_timeouts_unsubscribe() {
        let c = C::new(false);
        let slot = c.subscribe_slot("p", Time(5));
        c.delete("p");
        assert!(slot.wait(Duration::ZERO).is_none());
        assert!(c.get_newer_than("q", Time(5), Some(Duration::from_millis(1))).is_none());
        assert_eq!(c.waiters(), 1);
    }

    #[test]
    fn observed_time_answers_that_pods_waiters_only() {
        let c = C::new(false);
        c.set("p", Some("s"), None, Time(10));
        let at_observed = c.subscribe_slot("p", Time(20));
        let later = c.subscribe_slot("p", Time(21));
        let other = c.subscribe_slot("q", Time(20));
        c.set_observed_time("p", Time(20));
        // Notified at an equal time, with the stored status unchanged.
        let got = at_observed.wait(Duration::ZERO).unwrap();
        assert_eq!(got.status(), Some(&"s"));
        assert!(matches!(&got, Lookup::Found(e) if e.modified == Time(10)));
        assert!(later.wait(Duration::ZERO).is_none());
        assert!(other.wait(Duration::ZERO).is_none());
        assert_eq!(c.waiters(), 2);
        // An immediate answer needs a strictly newer observation, as for the global timestamp.
        assert!(c.get_if_newer_than("p", Time(19)).is_some());
        assert!(c.get_if_newer_than("p", Time(20)).is_none());
        assert!(c.get_if_newer_than("q", Time(19)).is_none());
        // An older observation does not move it back; a missing pod is vouched for too.
        c.set_observed_time("p", Time(5));
        assert_eq!(c.observed_time("p"), Some(Time(20)));
        c.set_observed_time("m", Time(30));
        assert!(matches!(c.get_if_newer_than("m", Time(29)), Some(Lookup::Missing)));
        c.delete("m");
        assert_eq!(c.observed_time("m"), None);
    }

    #[test]
    fn a_wait_given_up_leaves_no_waiter_and_returns_its_error() {
        let c: PodCache<u32, ()> = PodCache::new(false);
        let mut slices = 0;
        let got = c.get_newer_than_with("p", Time(5), |ready| {
            while !ready(Duration::from_millis(1)) {
                slices += 1;
                if slices == 3 {
                    return Err("interrupted");
                }
            }
            Ok(())
        });
        assert_eq!(got.err(), Some("interrupted"));
        assert_eq!(c.waiters(), 0);
        // Data newer than asked: answered in the first slice.
        c.set("p", Some(7), None, Time(6));
        let got = c.get_newer_than_with("p", Time(5), |ready| {
            assert!(ready(Duration::ZERO));
            Ok::<_, ()>(())
        });
        assert_eq!(got.unwrap().and_then(|l| l.status().copied()), Some(7));
    }
}
