//! What a metrics scrape reads: the live components (each broadcaster and PLEG registers while its owner
//! lives) with their counters, and the fixed-bucket histograms the PLEGs keep. A scrape reads the counters
//! the components keep anyway; nothing is done per event for it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::gate::Birth;
use crate::sync::lock;

/// Prometheus' `DefBuckets`, which the kubelet's PLEG histograms use.
pub const DEF_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A histogram of durations over `DEF_BUCKETS`, updated with a few relaxed atomics per observation.
#[derive(Default)]
pub struct Histogram {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    counts: [AtomicU64; DEF_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

/// A histogram's counts, serialized as `{"buckets": [[upper bound, cumulative count], ...], "count": n,
/// "sum": seconds}` (the `+Inf` bucket is `count`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Cumulative, one per bound of `DEF_BUCKETS`.
    pub cumulative: Vec<u64>,
    pub count: u64,
    pub sum_nanos: u64,
}

impl Histogram {
    /// One observation of `nanos` nanoseconds (negative ones count as zero).
    pub fn observe_nanos(&self, nanos: i64) {
        let nanos = nanos.max(0) as u64;
        let seconds = nanos as f64 / 1e9;
        let i = DEF_BUCKETS.iter().position(|&b| seconds <= b).unwrap_or(DEF_BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut total = 0;
        let mut cumulative: Vec<u64> = self
            .counts
            .iter()
            .map(|c| {
                total += c.load(Ordering::Relaxed);
                total
            })
            .collect();
        let count = cumulative.pop().unwrap_or(0);
        HistogramSnapshot { cumulative, count, sum_nanos: self.sum_nanos.load(Ordering::Relaxed) }
    }
}

struct Buckets<'a>(&'a [u64]);

impl Serialize for Buckets<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (bound, n) in DEF_BUCKETS.iter().zip(self.0) {
            seq.serialize_element(&(bound, n))?;
        }
        seq.end()
    }
}

impl Serialize for HistogramSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Histogram", 3)?;
        st.serialize_field("buckets", &Buckets(&self.cumulative))?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("sum", &(self.sum_nanos as f64 / 1e9))?;
        st.end()
    }
}

/// A live component as a scrape sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Component {
    pub kind: &'static str,
    pub name: String,
    pub stats: serde_json::Value,
}

type Snapshot = Box<dyn Fn() -> Option<serde_json::Value> + Send + Sync>;

struct Entry {
    kind: &'static str,
    name: String,
    birth: Birth,
    snapshot: Snapshot,
}

/// A component's place among the live ones, for as long as its owner keeps this.
pub struct Registration(Arc<Entry>);

impl Registration {
    pub fn name(&self) -> &str {
        &self.0.name
    }
}

struct Registry {
    entries: Vec<Weak<Entry>>,
    /// Default names handed out so far, per kind.
    made: BTreeMap<&'static str, u64>,
}

static LIVE: Mutex<Registry> = Mutex::new(Registry { entries: Vec::new(), made: BTreeMap::new() });

/// The name a component of `kind` goes by: `name`, or `<kind>-<n>` with n counting the unnamed ones of that
/// kind made so far.
pub fn component_name(kind: &'static str, name: Option<String>) -> String {
    name.unwrap_or_else(|| {
        let mut live = lock(&LIVE);
        let n = live.made.entry(kind).or_default();
        *n += 1;
        format!("{kind}-{n}")
    })
}

/// Registers a component of `kind` named `name` (default: `<kind>-<n>`, n counting the unnamed ones of that
/// kind). `stats` reads its counters; it holds the component weakly, so that it never keeps it alive, and
/// answers None once the component is gone.
pub fn register<T: Send + Sync + 'static, V: Serialize>(
    kind: &'static str,
    name: Option<String>,
    component: &Arc<T>,
    stats: impl Fn(&T) -> V + Send + Sync + 'static,
) -> Registration {
    let weak = Arc::downgrade(component);
    let snapshot: Snapshot = Box::new(move || serde_json::to_value(stats(&*weak.upgrade()?)).ok());
    let birth = Birth::now(kind);
    let name = component_name(kind, name);
    let mut live = lock(&LIVE);
    let entry = Arc::new(Entry { kind, name, birth, snapshot });
    live.entries.retain(|e| e.strong_count() > 0);
    live.entries.push(Arc::downgrade(&entry));
    Registration(entry)
}

/// The live components of this process, in the order they registered, with their counters now. Those made
/// before a `fork()` are left out in the child: their threads stayed in the parent, and the locks those held
/// may stay held.
pub fn live() -> Vec<Component> {
    let entries: Vec<Arc<Entry>> = {
        let mut live = lock(&LIVE);
        live.entries.retain(|e| e.strong_count() > 0);
        live.entries.iter().filter_map(Weak::upgrade).filter(|e| !e.birth.is_forked()).collect()
    };
    // Outside the registry's lock: reading counters takes the components' own locks.
    entries
        .iter()
        .filter_map(|e| Some(Component { kind: e.kind, name: e.name.clone(), stats: (e.snapshot)()? }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        for ms in [1, 5, 7, 300, 20_000] {
            h.observe_nanos(ms * 1_000_000);
        }
        h.observe_nanos(-3);
        let s = h.snapshot();
        assert_eq!(s.count, 6);
        assert_eq!(s.sum_nanos, 20_313_000_000);
        // <= 0.005: 0, 1 ms and 5 ms; <= 0.01 adds 7 ms; <= 0.5 adds 300 ms; 20 s is over every bound.
        assert_eq!(s.cumulative, vec![3, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5]);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["buckets"][0], serde_json::json!([0.005, 3]));
        assert_eq!(v["count"], 6);
        assert_eq!(v["sum"], 20.313);
    }

    #[test]
    fn a_component_is_live_while_its_registration_is_kept() {
        let counter = Arc::new(AtomicU64::new(7));
        let kind = "TestLive";
        let named = register(kind, Some("mine".into()), &counter, |c| c.load(Ordering::Relaxed));
        let unnamed = register(kind, None, &counter, |c| c.load(Ordering::Relaxed) + 1);
        let second = register(kind, None, &counter, |_| 0);
        assert_eq!((named.name(), unnamed.name(), second.name()), ("mine", "TestLive-1", "TestLive-2"));
        let mine = |name: &str| live().into_iter().filter(|c| c.kind == kind && c.name == name).collect::<Vec<_>>();
        assert_eq!(mine("mine")[0].stats, serde_json::json!(7));
        assert_eq!(mine("TestLive-1")[0].stats, serde_json::json!(8));
        drop(unnamed);
        assert!(mine("TestLive-1").is_empty());
        // A component gone while its registration is kept is left out too.
        drop(counter);
        assert!(mine("mine").is_empty());
        drop((named, second));
    }
}
