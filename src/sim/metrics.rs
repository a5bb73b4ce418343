//! Metrics of a replay: the load on the API server and the information that reached it.
//!
//! Definitions (an "occurrence" is one trace record; its object is the involved object's kind, namespace and
//! name):
//! * A message is *kept* when at least one occurrence of its (object, reason, message) was written with that
//!   message as the event's own. An aggregated write carries "(combined from similar events): <message>",
//!   which the group's next patch replaces, so it keeps the (object, reason) but not the message.
//! * A reason is *kept* when at least one occurrence of its (object, reason) was written, aggregated or not.
//! * Delay: a skipped occurrence is still counted by the correlator, so the next write of the same event (same
//!   name) reports it through `count`. Its delay is the time from the occurrence to that write; a written
//!   occurrence has delay 0 (the replay's sink answers at once). Occurrences whose event is never written again
//!   are `unreported`.
//! * Peak writes: the most writes within any window of `window_ns` (both ends included), overall and per object.
//! * Write rates: the writes in each window of `window_ns` from the epoch on (`[k w, (k + 1) w)`), over the
//!   windows from the first occurrence's to the last one's, empty ones included; the 50th, 90th and 99th
//!   percentiles (nearest rank) of those counts, per second. Overall only.
//!
//! Memory grows with the distinct values, not with the occurrences: an exact count of the distinct (object,
//! reason, message) needs each of them kept, the peak per object each object's window, and the delays each
//! event with skipped occurrences. Each distinct value is kept once, its uses as ids in small tables; the
//! per-object metrics, when kept, add a summary per object (figures in BENCHMARKS.md).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use serde::{Deserialize, Serialize};

use super::counts::{Action, ObjectKey, Totals};

/// Separates the parts of a byte key; 0xFF never occurs in UTF-8.
const SEP: u8 = 0xFF;

/// The default window of the peak write rates: one minute.
pub const DEFAULT_WINDOW_NS: i64 = 60_000_000_000;

/// The metrics of a replay, overall or of one object: its counts (kept by the replay) and what `Metrics`
/// adds to them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub totals: Totals,
    pub messages: u64,
    pub messages_kept: u64,
    pub reasons: u64,
    pub reasons_kept: u64,
    /// Skipped occurrences reported by a later write.
    pub delayed: u64,
    pub unreported: u64,
    pub delay_sum_ns: i128,
    pub max_delay_ns: i64,
    pub peak_writes: u64,
    /// Overall: the largest per-object peak. Of one object: its own peak.
    pub peak_object_writes: u64,
    pub max_count: i32,
    /// Overall: the 50th, 90th and 99th percentiles of the writes per window (`Rates`).
    pub window_writes: [u64; 3],
}

impl Summary {
    /// Adds the counts of another replay's metrics (of other sources: their distinct values are their own)
    /// and keeps the larger maxima; the peaks and rates are left alone, as they do not add up.
    pub fn add(&mut self, o: &Summary) {
        self.totals.add(&o.totals);
        self.messages += o.messages;
        self.messages_kept += o.messages_kept;
        self.reasons += o.reasons;
        self.reasons_kept += o.reasons_kept;
        self.delayed += o.delayed;
        self.unreported += o.unreported;
        self.delay_sum_ns += o.delay_sum_ns;
        self.max_delay_ns = self.max_delay_ns.max(o.max_delay_ns);
        self.max_count = self.max_count.max(o.max_count);
    }

    pub fn writes(&self) -> u64 {
        self.totals.writes()
    }

    /// The share of writes saved against one write per occurrence.
    pub fn write_reduction(&self) -> f64 {
        if self.totals.events == 0 {
            0.0
        } else {
            1.0 - self.writes() as f64 / self.totals.events as f64
        }
    }

    pub fn message_share(&self) -> f64 {
        share(self.messages_kept, self.messages)
    }

    pub fn reason_share(&self) -> f64 {
        share(self.reasons_kept, self.reasons)
    }

    /// Mean delay in seconds over the reported occurrences (written ones count as 0).
    pub fn mean_delay_s(&self) -> f64 {
        let reported = self.totals.events - self.unreported;
        if reported == 0 {
            0.0
        } else {
            self.delay_sum_ns as f64 / 1e9 / reported as f64
        }
    }

    /// The summary as `Simulation.metrics` and the sweep rows show it, with rates over windows of
    /// `window_ns`; `overall` adds the busiest object's peak.
    pub fn row(&self, window_ns: i64, overall: bool) -> SummaryRow {
        let window_s = window_ns as f64 / 1e9;
        SummaryRow {
            events: self.totals.events,
            writes: self.writes(),
            creates: self.totals.creates,
            patches: self.totals.patches,
            write_reduction: self.write_reduction(),
            spam_skipped: self.totals.skips,
            aggregated: self.totals.aggregated,
            messages: self.messages,
            messages_kept: self.messages_kept,
            message_share: self.message_share(),
            reasons: self.reasons,
            reasons_kept: self.reasons_kept,
            reason_share: self.reason_share(),
            delayed: self.delayed,
            unreported: self.unreported,
            mean_delay_s: self.mean_delay_s(),
            max_delay_s: self.max_delay_ns as f64 / 1e9,
            peak_writes: self.peak_writes,
            peak_write_rate: self.peak_writes as f64 / window_s,
            p50_write_rate: overall.then(|| self.window_writes[0] as f64 / window_s),
            p90_write_rate: overall.then(|| self.window_writes[1] as f64 / window_s),
            p99_write_rate: overall.then(|| self.window_writes[2] as f64 / window_s),
            peak_object_writes: overall.then_some(self.peak_object_writes),
            peak_object_write_rate: overall.then(|| self.peak_object_writes as f64 / window_s),
            max_count: self.max_count,
        }
    }
}

/// A `Summary` as Python sees it (`kubevents.lab.METRICS`, in that order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    pub events: u64,
    pub writes: u64,
    pub creates: u64,
    pub patches: u64,
    pub write_reduction: f64,
    pub spam_skipped: u64,
    pub aggregated: u64,
    pub messages: u64,
    pub messages_kept: u64,
    pub message_share: f64,
    pub reasons: u64,
    pub reasons_kept: u64,
    pub reason_share: f64,
    pub delayed: u64,
    pub unreported: u64,
    pub mean_delay_s: f64,
    pub max_delay_s: f64,
    pub peak_writes: u64,
    pub peak_write_rate: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_write_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p90_write_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_write_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_object_writes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_object_write_rate: Option<f64>,
    pub max_count: i32,
}

/// One object's metrics, led by its kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ObjectSummaryRow {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    #[serde(flatten)]
    pub summary: SummaryRow,
}

fn share(kept: u64, all: u64) -> f64 {
    if all == 0 {
        1.0
    } else {
        kept as f64 / all as f64
    }
}

/// Writes in a sliding window and the most seen at once.
#[derive(Default)]
struct Window {
    times: VecDeque<i64>,
    peak: u64,
}

impl Window {
    fn push(&mut self, t: i64, width: i64) {
        while self.times.front().is_some_and(|&f| t - f > width) {
            self.times.pop_front();
        }
        if self.times.capacity() == 0 {
            // Most objects' windows never hold more than one write: room for one, not the default four.
            self.times.reserve_exact(1);
        }
        self.times.push_back(t);
        self.peak = self.peak.max(self.times.len() as u64);
    }
}

/// The writes in each window of a fixed grid (`[k w, (k + 1) w)`), and the first and last time seen: what the
/// percentiles of the write rate need, and all that the replays of several sources add up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Window index -> writes, for the windows with writes.
    windows: BTreeMap<i64, u64>,
    /// The window being counted (writes mostly come in time order): index and writes so far.
    current: Option<(i64, u64)>,
    /// The first and last time seen, written or not.
    span: Option<(i64, i64)>,
}

impl Rates {
    fn seen(&mut self, t: i64) {
        self.span = Some(self.span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
    }

    fn write(&mut self, t: i64, width: i64) {
        let k = t.div_euclid(width);
        match &mut self.current {
            Some((i, n)) if *i == k => *n += 1,
            current => {
                if let Some((i, n)) = current.replace((k, 1)) {
                    *self.windows.entry(i).or_default() += n;
                }
            }
        }
    }

    /// Adds another's windows and span to these.
    pub fn add(&mut self, other: &Rates) {
        let windows = other.windows.iter().map(|(&k, &n)| (k, n));
        for (k, n) in windows.chain(other.current) {
            *self.windows.entry(k).or_default() += n;
        }
        if let Some((a, b)) = other.span {
            self.seen(a);
            self.seen(b);
        }
    }

    /// The 50th, 90th and 99th percentiles (nearest rank) of the writes per window, empty windows included,
    /// over the windows from the first time seen to the last.
    pub fn percentiles(&self, width: i64) -> [u64; 3] {
        let Some((first, last)) = self.span else { return [0; 3] };
        let mut counts: BTreeMap<i64, u64> = self.windows.clone();
        if let Some((k, n)) = self.current {
            *counts.entry(k).or_default() += n;
        }
        let (lo, hi) = (first.div_euclid(width), last.div_euclid(width));
        let mut busy: Vec<u64> = counts.range(lo..=hi).map(|(_, &n)| n).filter(|&n| n > 0).collect();
        busy.sort_unstable();
        // Windows without writes hold the lowest ranks.
        let all = (i128::from(hi) - i128::from(lo) + 1).max(busy.len() as i128);
        let empty = all - busy.len() as i128;
        [50i128, 90, 99].map(|p| {
            let rank = ((p * all + 99) / 100).max(1);
            if rank <= empty {
                0
            } else {
                busy[(rank - empty - 1) as usize]
            }
        })
    }
}

/// Each write's time and object id, in replay order: what the peaks of several sources' replays merged need.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteLog {
    pub times: Vec<i64>,
    pub objects: Vec<u32>,
}

/// What the overall metrics need of each object.
#[derive(Default)]
struct PerObject {
    window: Window,
    /// Events of this object with skipped occurrences waiting for a write; while 0, a write needs no lookup.
    pending_events: u32,
}

/// Skipped occurrences of one event still waiting for a write.
struct UnreportedRun {
    n: u64,
    sum_t: i128,
    min_t: i64,
}

/// Small ids for byte strings, so that the keys of the distinct-value tables are integers. The strings are
/// kept end to end in one buffer and the table holds ids alone (4 bytes an entry, no allocation per string).
#[derive(Default)]
struct Interner {
    hasher: RandomState,
    table: HashTable<u32>,
    bytes: Vec<u8>,
    /// Where the bytes of each id end.
    ends: Vec<usize>,
}

impl Interner {
    fn id(&mut self, s: &[u8]) -> u32 {
        let Interner { hasher, table, bytes, ends } = self;
        let hash = hasher.hash_one(s);
        if let Some(&id) = table.find(hash, |&id| string(bytes, ends, id) == s) {
            return id;
        }
        let id = ends.len() as u32;
        bytes.extend_from_slice(s);
        ends.push(bytes.len());
        table.insert_unique(hash, id, |&id| hasher.hash_one(string(bytes, ends, id)));
        id
    }

    fn get(&self, id: u32) -> &[u8] {
        string(&self.bytes, &self.ends, id)
    }
}

/// An object's kind, namespace and name from its bytes (each part followed by `SEP`).
fn object_key(bytes: &[u8]) -> ObjectKey {
    let mut parts = bytes.split(|&b| b == SEP);
    let mut part = || String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    (part(), part(), part())
}

fn string<'a>(bytes: &'a [u8], ends: &[usize], id: u32) -> &'a [u8] {
    let i = id as usize;
    &bytes[if i == 0 { 0 } else { ends[i - 1] }..ends[i]]
}

/// A key of ids, 4-aligned so that an entry of the messages table takes 16 bytes. Hashed as one integer (an
/// array would hash its length and each id).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Ids<const N: usize>([u32; N]);

impl<const N: usize> Hash for Ids<N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let packed = self.0.iter().fold(0u128, |v, &id| v << 32 | u128::from(id));
        if N <= 2 {
            state.write_u64(packed as u64);
        } else {
            state.write_u128(packed);
        }
    }
}

/// Collects the metrics of a replay, one occurrence at a time; the replay's counts come from the replay.
pub struct Metrics {
    window_ns: i64,
    /// Each object's kind, namespace and name, each followed by `SEP`.
    object_ids: Interner,
    /// By object id.
    objects: Vec<PerObject>,
    /// Each object's own metrics, by object id, when they are kept.
    object_summaries: Option<Vec<Summary>>,
    reason_ids: Interner,
    message_ids: Interner,
    /// (object, reason, message) -> kept, and (object, reason) -> kept, by ids.
    messages: HashMap<Ids<3>, bool, RandomState>,
    reasons: HashMap<Ids<2>, bool, RandomState>,
    /// By object id and event name (names are unique only within a namespace).
    pending: HashMap<Box<[u8]>, (u32, UnreportedRun), RandomState>,
    overall: Summary,
    window: Window,
    rates: Rates,
    /// Kept for replays that are merged with others (one per source).
    log: Option<WriteLog>,
    key: Vec<u8>,
}

/// One replayed occurrence as the metrics see it.
pub struct Observation<'a> {
    pub t_ns: i64,
    pub object: (&'a str, &'a str, &'a str),
    pub reason: &'a str,
    pub message: &'a str,
    pub action: Action,
    pub aggregated: bool,
    /// The name of the event that counts the occurrence (written or not).
    pub event_name: &'a str,
    /// The event's count (meaningful for writes).
    pub count: i32,
}

impl Metrics {
    /// `window_ns` is the width of the sliding window of the peak write rates (> 0); with `per_object`, the
    /// metrics of each object are kept too (`objects()`).
    pub fn new(window_ns: i64, per_object: bool) -> Self {
        Metrics {
            window_ns: window_ns.max(1),
            object_ids: Interner::default(),
            objects: Vec::new(),
            object_summaries: per_object.then(Vec::new),
            reason_ids: Interner::default(),
            message_ids: Interner::default(),
            messages: HashMap::default(),
            reasons: HashMap::default(),
            pending: HashMap::default(),
            overall: Summary::default(),
            window: Window::default(),
            rates: Rates::default(),
            log: None,
            key: Vec::with_capacity(256),
        }
    }

    /// Also keeps each write's time and object (`WriteLog`), 12 bytes a write, so that the peaks of this
    /// replay merged with others' can be found (`Metrics::into_part`).
    pub fn with_write_log(mut self) -> Self {
        self.log = Some(WriteLog::default());
        self
    }

    pub fn window_ns(&self) -> i64 {
        self.window_ns
    }

    fn object_id(&mut self, (kind, namespace, name): (&str, &str, &str)) -> u32 {
        let key = &mut self.key;
        key.clear();
        for part in [kind, namespace, name] {
            key.extend_from_slice(part.as_bytes());
            key.push(SEP);
        }
        let id = self.object_ids.id(key);
        if id as usize == self.objects.len() {
            self.objects.push(PerObject::default());
            if let Some(summaries) = self.object_summaries.as_mut() {
                summaries.push(Summary::default());
            }
        }
        id
    }

    pub fn observe(&mut self, o: &Observation<'_>) {
        let id = self.object_id(o.object);
        let written = o.action != Action::Skip;

        let reason = self.reason_ids.id(o.reason.as_bytes());
        let message = self.message_ids.id(o.message.as_bytes());
        let (new_reason, reason_newly_kept) = mark(&mut self.reasons, Ids([id, reason]), written);
        let (new_message, message_newly_kept) =
            mark(&mut self.messages, Ids([id, reason, message]), written && !o.aggregated);

        let object = &mut self.objects[id as usize];
        let mut delayed = None;
        if !written || object.pending_events > 0 {
            let key = &mut self.key;
            key.clear();
            key.extend_from_slice(&id.to_le_bytes());
            key.extend_from_slice(o.event_name.as_bytes());
            if written {
                delayed = self.pending.remove(key.as_slice()).map(|(_, p)| p);
                object.pending_events -= u32::from(delayed.is_some());
            } else {
                let (_, p) = match self.pending.get_mut(key.as_slice()) {
                    Some(p) => p,
                    None => {
                        object.pending_events += 1;
                        self.pending
                            .entry(key.as_slice().into())
                            .or_insert((id, UnreportedRun { n: 0, sum_t: 0, min_t: o.t_ns }))
                    }
                };
                p.n += 1;
                p.sum_t += i128::from(o.t_ns);
                p.min_t = p.min_t.min(o.t_ns);
            }
        }

        let object_summary = self.object_summaries.as_mut().map(|v| &mut v[id as usize]);
        for s in std::iter::once(&mut self.overall).chain(object_summary) {
            s.reasons += u64::from(new_reason);
            s.reasons_kept += u64::from(reason_newly_kept);
            s.messages += u64::from(new_message);
            s.messages_kept += u64::from(message_newly_kept);
            if written {
                s.max_count = s.max_count.max(o.count);
            }
            if let Some(p) = &delayed {
                s.delayed += p.n;
                s.delay_sum_ns += i128::from(p.n as i64) * i128::from(o.t_ns) - p.sum_t;
                s.max_delay_ns = s.max_delay_ns.max(o.t_ns - p.min_t);
            }
        }
        self.rates.seen(o.t_ns);
        if written {
            self.window.push(o.t_ns, self.window_ns);
            object.window.push(o.t_ns, self.window_ns);
            self.rates.write(o.t_ns, self.window_ns);
            if let Some(log) = self.log.as_mut() {
                log.times.push(o.t_ns);
                log.objects.push(id);
            }
        }
    }

    /// The metrics over the whole replay so far, whose counts are `totals`.
    pub fn summary(&self, totals: Totals) -> Summary {
        let mut s = self.overall;
        s.totals = totals;
        s.unreported = self.pending.values().map(|(_, p)| p.n).sum();
        s.peak_writes = self.window.peak;
        s.peak_object_writes = self.objects.iter().map(|o| o.window.peak).max().unwrap_or(0);
        s.window_writes = self.rates.percentiles(self.window_ns);
        s
    }

    /// Each object's kind, namespace and name, by id.
    fn object_key(&self, id: usize) -> ObjectKey {
        object_key(self.object_ids.get(id as u32))
    }

    /// The metrics of each object, in the order the objects first appeared, with their counts from `totals`;
    /// None unless made `per_object`.
    pub fn objects(&self, totals: impl Fn(&ObjectKey) -> Totals) -> Option<Vec<(ObjectKey, Summary)>> {
        let summaries = self.object_summaries.as_ref()?;
        let keys = (0..self.objects.len()).map(|id| self.object_key(id));
        let mut unreported = vec![0u64; self.objects.len()];
        for (object, p) in self.pending.values() {
            unreported[*object as usize] += p.n;
        }
        let objects = keys.zip(summaries).zip(&self.objects).zip(unreported);
        Some(
            objects
                .map(|(((key, s), o), n)| {
                    let mut s = *s;
                    s.totals = totals(&key);
                    s.unreported = n;
                    s.peak_writes = o.window.peak;
                    s.peak_object_writes = o.window.peak;
                    (key, s)
                })
                .collect(),
        )
    }
}

/// One replay's metrics as a merge with other replays (of other sources) needs them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsPart {
    /// The replay's own metrics, counts included.
    pub summary: Summary,
    /// The objects by id (in the order they first appeared): each one's kind, namespace and name, each
    /// followed by `SEP`, end to end, and where each one ends.
    pub object_bytes: Vec<u8>,
    pub object_ends: Vec<usize>,
    /// Each object's own metrics, by id, counts included; when kept.
    pub object_summaries: Option<Vec<Summary>>,
    pub log: WriteLog,
    pub rates: Rates,
}

impl Metrics {
    /// The metrics for a merge with other replays' (`merge`); `totals` are the replay's counts, overall and
    /// per object. Needs `with_write_log`, else the merged peaks miss this replay's writes.
    pub fn into_part(mut self, totals: Totals, object_totals: impl Fn(&ObjectKey) -> Totals) -> MetricsPart {
        let summary = self.summary(totals);
        let object_summaries = self.objects(object_totals).map(|v| v.into_iter().map(|(_, s)| s).collect());
        if let Some((k, n)) = self.rates.current.take() {
            *self.rates.windows.entry(k).or_default() += n;
        }
        MetricsPart {
            summary,
            object_bytes: std::mem::take(&mut self.object_ids.bytes),
            object_ends: std::mem::take(&mut self.object_ids.ends),
            object_summaries,
            log: self.log.take().unwrap_or_default(),
            rates: self.rates,
        }
    }
}

/// The metrics of several replays taken together, as one API server sees the writes of its clients: counts
/// added, maxima kept, the peaks found again over all the writes in time order, the rates over all windows.
/// Each object's metrics too when every part kept them, in the order the objects first appear.
pub fn merge(parts: &[&MetricsPart], window_ns: i64) -> (Summary, Option<Vec<(ObjectKey, Summary)>>) {
    let window_ns = window_ns.max(1);
    let mut overall = Summary::default();
    let mut rates = Rates::default();
    let mut ids: HashMap<&[u8], u32, RandomState> = HashMap::default();
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut local_to_global: Vec<Vec<u32>> = Vec::with_capacity(parts.len());
    for part in parts {
        overall.add(&part.summary);
        rates.add(&part.rates);
        let names = (0..part.object_ends.len()).map(|i| string(&part.object_bytes, &part.object_ends, i as u32));
        local_to_global.push(
            names
                .map(|k| {
                    *ids.entry(k).or_insert_with(|| {
                        keys.push(k);
                        keys.len() as u32 - 1
                    })
                })
                .collect(),
        );
    }
    drop(ids);
    let mut summaries =
        parts.iter().all(|p| p.object_summaries.is_some()).then(|| vec![Summary::default(); keys.len()]);
    if let Some(summaries) = summaries.as_mut() {
        for (part, ids) in parts.iter().zip(&local_to_global) {
            for (s, &id) in part.object_summaries.iter().flatten().zip(ids) {
                summaries[id as usize].add(s);
            }
        }
    }
    // The writes of all parts in time order (ties in part order): a k-way merge of the logs.
    let mut window = Window::default();
    let mut windows: Vec<Window> = (0..keys.len()).map(|_| Window::default()).collect();
    let mut heads: std::collections::BinaryHeap<std::cmp::Reverse<(i64, usize, usize)>> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.log.times.is_empty())
        .map(|(i, p)| std::cmp::Reverse((p.log.times[0], i, 0)))
        .collect();
    while let Some(std::cmp::Reverse((t, i, at))) = heads.pop() {
        let log = &parts[i].log;
        window.push(t, window_ns);
        windows[local_to_global[i][log.objects[at] as usize] as usize].push(t, window_ns);
        if let Some(&next) = log.times.get(at + 1) {
            heads.push(std::cmp::Reverse((next, i, at + 1)));
        }
    }
    overall.peak_writes = window.peak;
    overall.peak_object_writes = windows.iter().map(|w| w.peak).max().unwrap_or(0);
    overall.window_writes = rates.percentiles(window_ns);
    let objects = summaries.map(|summaries| {
        keys.iter()
            .zip(summaries)
            .zip(&windows)
            .map(|((k, mut s), w)| {
                s.peak_writes = w.peak;
                s.peak_object_writes = w.peak;
                (object_key(k), s)
            })
            .collect()
    });
    (overall, objects)
}

/// Notes a key as seen, and as kept when `kept`; returns (first seen, first kept).
fn mark<K: std::hash::Hash + Eq>(map: &mut HashMap<K, bool, RandomState>, key: K, kept: bool) -> (bool, bool) {
    match map.entry(key) {
        Entry::Occupied(mut e) => {
            let k = e.get_mut();
            let newly = kept && !*k;
            *k |= kept;
            (false, newly)
        }
        Entry::Vacant(e) => {
            e.insert(kept);
            (true, kept)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    /// Metrics with the counts a replay keeps beside them, overall and per object.
    struct Replay {
        metrics: Metrics,
        totals: Totals,
        objects: HashMap<ObjectKey, Totals>,
    }

    impl Replay {
        fn new(window_ns: i64, per_object: bool) -> Self {
            Replay { metrics: Metrics::new(window_ns, per_object), totals: Totals::default(), objects: HashMap::new() }
        }

        fn observe(&mut self, o: &Observation<'_>) {
            self.metrics.observe(o);
            self.totals.count(o.action, o.aggregated);
            let (kind, namespace, name) = o.object;
            let key = (kind.to_owned(), namespace.to_owned(), name.to_owned());
            self.objects.entry(key).or_default().count(o.action, o.aggregated);
        }

        fn summary(&self) -> Summary {
            self.metrics.summary(self.totals)
        }

        fn objects(&self) -> Option<Vec<(ObjectKey, Summary)>> {
            self.metrics.objects(|k| self.objects[k])
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn occ<'a>(
        t: i64,
        name: &'a str,
        reason: &'a str,
        message: &'a str,
        action: Action,
        aggregated: bool,
        event: &'a str,
        count: i32,
    ) -> Observation<'a> {
        Observation {
            t_ns: t * S,
            object: ("Pod", "default", name),
            reason,
            message,
            action,
            aggregated,
            event_name: event,
            count,
        }
    }

    #[test]
    fn counts_kept_information_delays_and_peaks() {
        let mut m = Replay::new(10 * S, true);
        m.observe(&occ(0, "a", "BackOff", "m1", Action::Create, false, "e1", 1));
        m.observe(&occ(1, "a", "BackOff", "m1", Action::Skip, false, "e1", 2));
        m.observe(&occ(3, "a", "BackOff", "m1", Action::Skip, false, "e1", 3));
        m.observe(&occ(5, "a", "BackOff", "m2", Action::Create, true, "agg", 1));
        m.observe(&occ(7, "a", "BackOff", "m1", Action::Patch, false, "e1", 4));
        m.observe(&occ(20, "b", "Failed", "x", Action::Skip, false, "e2", 1));
        m.observe(&occ(30, "a", "Started", "s", Action::Create, false, "e3", 1));

        let s = m.summary();
        let t = s.totals;
        assert_eq!((t.events, t.creates, t.patches, t.skips, t.aggregated), (7, 3, 1, 3, 1));
        // Messages: (a,BackOff,m1) kept, (a,BackOff,m2) only aggregated, (b,Failed,x) skipped, (a,Started,s) kept.
        assert_eq!((s.messages, s.messages_kept), (4, 2));
        // Reasons: (a,BackOff) and (a,Started) written, (b,Failed) not.
        assert_eq!((s.reasons, s.reasons_kept), (3, 2));
        // The two skips of e1 (at 1 s and 3 s) are reported by the patch at 7 s: 6 s + 4 s.
        assert_eq!((s.delayed, s.unreported, s.delay_sum_ns, s.max_delay_ns), (2, 1, 10 * i128::from(S), 6 * S));
        assert!((s.mean_delay_s() - 10.0 / 6.0).abs() < 1e-12);
        // Writes at 0, 5, 7 fall in one 10 s window; 30 is alone.
        assert_eq!((s.peak_writes, s.peak_object_writes, s.max_count), (3, 3, 4));
        assert!((s.write_reduction() - 3.0 / 7.0).abs() < 1e-12);

        let objects = m.objects().unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0].0, ("Pod".to_owned(), "default".to_owned(), "a".to_owned()));
        let (key, b) = &objects[1];
        assert_eq!(key.2, "b");
        assert_eq!(
            (b.totals.events, b.totals.skips, b.unreported, b.reasons_kept, b.peak_writes, b.max_count),
            (1, 1, 1, 0, 0, 0)
        );
        assert_eq!(b.reason_share(), 0.0);
        let a = objects[0].1;
        assert_eq!(
            (a.totals.events, a.delayed, a.unreported, a.messages, a.messages_kept, a.peak_writes),
            (6, 2, 0, 3, 2, 3)
        );
    }

    #[test]
    fn overall_metrics_are_the_same_with_or_without_per_object_ones() {
        let occurrences = [
            occ(0, "a", "BackOff", "m1", Action::Create, false, "e1", 1),
            occ(1, "ü/ß", "BackOff", "m1", Action::Skip, false, "e2", 1),
            occ(2, "a", "BackOff", "m2", Action::Patch, true, "e1", 2),
            occ(9, "ü/ß", "BackOff", "m1", Action::Create, false, "e2", 2),
        ];
        let (mut with, mut without) = (Replay::new(S, true), Replay::new(S, false));
        for o in &occurrences {
            with.observe(o);
            without.observe(o);
        }
        assert_eq!(with.summary(), without.summary());
        assert!(without.objects().is_none());
        let keys: Vec<_> = with.objects().unwrap().into_iter().map(|(k, s)| (k.2, s.totals.events)).collect();
        assert_eq!(keys, [("a".to_owned(), 2), ("ü/ß".to_owned(), 2)]);
    }

    #[test]
    fn event_names_are_told_apart_by_object() {
        // Event names are unique only within a namespace: a write of b's "x.1" must not report a's "x.1".
        let mut m = Replay::new(S, false);
        m.observe(&occ(0, "a", "R", "m", Action::Skip, false, "x.1", 1));
        m.observe(&occ(1, "b", "R", "m", Action::Patch, false, "x.1", 2));
        let s = m.summary();
        assert_eq!((s.delayed, s.unreported), (0, 1));
        m.observe(&occ(3, "a", "R", "m", Action::Patch, false, "x.1", 2));
        assert_eq!((m.summary().delayed, m.summary().unreported, m.summary().max_delay_ns), (1, 0, 3 * S));
    }

    #[test]
    fn what_each_distinct_value_costs_stays_small() {
        // What each distinct value costs depends on these sizes.
        assert_eq!(std::mem::size_of::<(Ids<3>, bool)>(), 16);
        assert_eq!(std::mem::size_of::<(Ids<2>, bool)>(), 12);
        assert!(std::mem::size_of::<PerObject>() <= 48);
        let mut names = Interner::default();
        let ids: Vec<_> = ["pod-1", "pod-22", "", "pod-1"].iter().map(|s| names.id(s.as_bytes())).collect();
        assert_eq!(ids, [0, 1, 2, 0]);
        assert_eq!((names.get(1), names.get(2), names.bytes.len()), (&b"pod-22"[..], &b""[..], 11));
    }

    #[test]
    fn rows_are_in_the_order_python_shows_them() {
        let mut m = Replay::new(10 * S, true);
        m.observe(&occ(0, "a", "R", "m", Action::Create, false, "e", 1));
        m.observe(&occ(1, "a", "R", "m", Action::Skip, false, "e", 2));
        let overall = serde_json::to_value(m.summary().row(10 * S, true)).unwrap();
        let (key, s) = m.objects().unwrap().remove(0);
        let object = ObjectSummaryRow { kind: key.0, namespace: key.1, name: key.2, summary: s.row(10 * S, false) };
        let json = serde_json::to_string(&object).unwrap();
        assert!(json.starts_with(r#"{"kind":"Pod","namespace":"default","name":"a","events":2,"writes":1,"#), "{json}");
        assert!(json.ends_with(r#""peak_writes":1,"peak_write_rate":0.1,"max_count":1}"#), "{json}");
        assert_eq!((overall["spam_skipped"].as_u64(), overall["unreported"].as_u64()), (Some(1), Some(1)));
        assert_eq!(
            (overall["write_reduction"].as_f64(), overall["peak_object_write_rate"].as_f64()),
            (Some(0.5), Some(0.1))
        );
    }

    #[test]
    fn rates_are_percentiles_of_the_writes_per_window_empty_ones_included() {
        let mut r = Rates::default();
        // Windows of 10: [0, 10) holds 3 writes, [20, 30) 1, [40, 50) 6; [10, 20) and [30, 40) none, and the
        // last occurrence (t = 95) makes [50, 100) count as empty windows too.
        for t in [0, 1, 9, 25, 40, 41, 42, 43, 44, 49] {
            r.seen(t);
            r.write(t, 10);
        }
        r.seen(95);
        // Ten windows: 0, 0, 0, 0, 0, 0, 0, 1, 3, 6 sorted; ranks 5, 9 and 10.
        assert_eq!(r.percentiles(10), [0, 3, 6]);
        let mut two = Rates::default();
        two.add(&r);
        two.add(&r);
        assert_eq!(two.percentiles(10), [0, 6, 12]);
        assert_eq!(Rates::default().percentiles(10), [0, 0, 0]);
        let mut one = Rates::default();
        one.seen(-5);
        one.write(-5, 10);
        assert_eq!(one.percentiles(10), [1, 1, 1]);
    }

    #[test]
    fn the_window_includes_both_ends() {
        let mut w = Window::default();
        for t in [0, 10, 20, 21] {
            w.push(t, 10);
        }
        assert_eq!(w.peak, 2);
        w.push(20, 10);
        assert_eq!(w.peak, 3);
    }
}
