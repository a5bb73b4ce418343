//! Replays of a cluster's trace: one correlator per event source, as in a cluster, where every kubelet and
//! every controller has its own `EventCorrelator` with its own caches.
//!
//! A source is the event's `source.component` and `source.host` (for events.k8s.io/v1 records, the reporting
//! controller and instance, which `kubevents.traces` puts there). Sources share no state, so the records of
//! each source replay through their own `Simulator`, in one pass over the trace (`BySource`) or split over
//! threads (`replay_split`) or machines, with the same results. What the API server sees is the sum of the
//! sources' writes: `report` adds up their counts, finds the peaks again over all their writes in time order,
//! and breaks the load down by source and by component.

use std::hash::BuildHasher;
use std::sync::Arc;

use arrow_array::RecordBatch;
use foldhash::fast::RandomState;
use hashbrown::HashTable;
use serde::{Deserialize, Serialize};

use super::counts::{ObjectKey, Totals};
use super::metrics::{self, MetricsPart, Summary, SummaryRow};
use super::simulator::{Part, Replay, Report, Simulator, Step};
use super::sweep::SharedTrace;
use super::table::BatchBuilder;
use super::trace::Record;
use crate::correlator::{CorrelatorOptions, KeyFuncs};
use crate::error::{Error, Result};
use crate::threads;

/// An event source: component and host.
pub type SourceKey = (String, String);

/// How a replay gives correlators to the sources of a trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Correlators {
    /// One per source, as in a cluster.
    #[default]
    PerSource,
    /// One for the whole trace, as one component would have.
    Shared,
}

impl Correlators {
    pub fn as_str(self) -> &'static str {
        match self {
            Correlators::PerSource => "per-source",
            Correlators::Shared => "shared",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "per-source" => Ok(Correlators::PerSource),
            "shared" => Ok(Correlators::Shared),
            _ => Err(Error::Option(format!("correlators must be \"per-source\" or \"shared\", got {s:?}"))),
        }
    }
}

/// Values by source, looked up without allocating; the last source found is tried first, as records of one
/// source often come in runs.
pub struct Sources<V> {
    hasher: RandomState,
    table: HashTable<usize>,
    entries: Vec<(SourceKey, V)>,
    last: usize,
}

impl<V> Default for Sources<V> {
    fn default() -> Self {
        Sources { hasher: RandomState::default(), table: HashTable::new(), entries: Vec::new(), last: usize::MAX }
    }
}

impl<V> Sources<V> {
    /// The index of a source, made with `new` the first time it is seen (indexes follow first appearance).
    pub fn index(&mut self, component: &str, host: &str, new: impl FnOnce() -> Result<V>) -> Result<usize> {
        let is = |k: &SourceKey| k.0 == component && k.1 == host;
        if self.entries.get(self.last).is_some_and(|(k, _)| is(k)) {
            return Ok(self.last);
        }
        let hash = self.hasher.hash_one((component, host));
        let i = match self.table.find(hash, |&i| is(&self.entries[i].0)) {
            Some(&i) => i,
            None => {
                let i = self.entries.len();
                self.entries.push(((component.to_owned(), host.to_owned()), new()?));
                let (entries, hasher) = (&self.entries, &self.hasher);
                self.table.insert_unique(hash, i, |&i| {
                    let (c, h) = &entries[i].0;
                    hasher.hash_one((c.as_str(), h.as_str()))
                });
                i
            }
        };
        self.last = i;
        Ok(i)
    }

    pub fn value_mut(&mut self, i: usize) -> &mut V {
        &mut self.entries[i].1
    }

    pub fn into_entries(self) -> Vec<(SourceKey, V)> {
        self.entries
    }
}

/// Makes the key functions of a new correlator (custom ones call Python, so each correlator needs its own).
pub type NewKeyFuncs = Arc<dyn Fn() -> Result<KeyFuncs> + Send + Sync>;

/// What every correlator of a replay is made with.
#[derive(Clone)]
pub struct Setup {
    pub options: CorrelatorOptions,
    /// Counts per involved object.
    pub per_object: bool,
    /// Metrics, with windows of this width.
    pub window_ns: Option<i64>,
    pub funcs: NewKeyFuncs,
}

impl Setup {
    /// Client-go's key functions.
    pub fn new(options: CorrelatorOptions, per_object: bool, window_ns: Option<i64>) -> Self {
        Setup { options, per_object, window_ns, funcs: Arc::new(|| Ok(KeyFuncs::default())) }
    }

    /// A replay of one source, or with `log_writes` one whose metrics merge with others'.
    pub fn simulator(&self, log_writes: bool) -> Result<Simulator> {
        let mut sim = Simulator::new(self.options, (self.funcs)()?, self.per_object)?;
        if let Some(w) = self.window_ns {
            sim = sim.with_metrics(w);
            if log_writes {
                sim = sim.with_write_log();
            }
        }
        Ok(sim)
    }
}

/// One pass over a trace, each record replayed by its source's own correlator.
pub struct BySource {
    setup: Setup,
    sources: Sources<Simulator>,
    next_index: u64,
}

impl BySource {
    pub fn new(setup: Setup) -> Self {
        BySource { setup, sources: Sources::default(), next_index: 0 }
    }

    /// Replays one record; the step's index is the record's in the whole trace.
    pub fn step(&mut self, r: &Record<'_>) -> Result<(Step, &Simulator)> {
        let setup = &self.setup;
        let i = self.sources.index(&r.source_component, &r.source_host, || setup.simulator(true))?;
        let sim = self.sources.value_mut(i);
        let mut step = sim.step(r)?;
        step.index = self.next_index;
        self.next_index += 1;
        Ok((step, sim))
    }

    /// Each source's replay, in the order the sources first appeared.
    pub fn into_parts(self) -> Vec<(SourceKey, Part)> {
        self.sources.into_entries().into_iter().map(|(k, sim)| (k, sim.into_part())).collect()
    }
}

/// A replay with one correlator per source or one for all.
pub enum Replayer {
    /// The counts of each source are kept beside the one replay.
    Shared(Box<Simulator>, Sources<Totals>),
    PerSource(BySource),
}

impl Replayer {
    pub fn new(setup: Setup, correlators: Correlators) -> Result<Self> {
        Ok(match correlators {
            Correlators::Shared => Replayer::Shared(Box::new(setup.simulator(false)?), Sources::default()),
            Correlators::PerSource => Replayer::PerSource(BySource::new(setup)),
        })
    }

    /// What the replay found.
    pub fn report(self) -> Result<Report> {
        match self {
            Replayer::Shared(sim, sources) => {
                let mut report = sim.report();
                report.correlators = Correlators::Shared;
                let sources = sources.into_entries();
                report.components = component_totals(&sources);
                report.sources = sources.iter().map(|(k, t)| SourceTotals::of_source(k, t)).collect();
                sort_rows(&mut report.sources);
                Ok(report)
            }
            Replayer::PerSource(by) => {
                let (per_object, window_ns) = (by.setup.per_object, by.setup.window_ns);
                report(by.into_parts(), per_object, window_ns)
            }
        }
    }
}

impl From<Simulator> for Replayer {
    fn from(sim: Simulator) -> Self {
        Replayer::Shared(Box::new(sim), Sources::default())
    }
}

impl Replay for BySource {
    fn replay(&mut self, r: &Record<'_>) -> Result<(Step, &Simulator)> {
        self.step(r)
    }
}

impl Replay for Replayer {
    fn replay(&mut self, r: &Record<'_>) -> Result<(Step, &Simulator)> {
        match self {
            Replayer::Shared(sim, sources) => {
                let step = sim.step(r)?;
                let i = sources.index(&r.source_component, &r.source_host, || Ok(Totals::default()))?;
                sources.value_mut(i).count(step.action, step.aggregated);
                Ok((step, sim))
            }
            Replayer::PerSource(by) => by.step(r),
        }
    }
}

/// Each source's counts: its component, its host (None for a component's row, which has its number of
/// `sources` instead), and what its events became.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceTotals {
    pub source_component: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<u64>,
    pub events: u64,
    pub writes: u64,
    pub creates: u64,
    pub patches: u64,
    pub skips: u64,
    pub aggregated: u64,
}

impl SourceTotals {
    fn new(component: &str, host: Option<&str>, sources: Option<u64>, t: &Totals) -> Self {
        SourceTotals {
            source_component: component.to_owned(),
            source_host: host.map(str::to_owned),
            sources,
            events: t.events,
            writes: t.writes(),
            creates: t.creates,
            patches: t.patches,
            skips: t.skips,
            aggregated: t.aggregated,
        }
    }

    fn of_source((component, host): &SourceKey, t: &Totals) -> Self {
        SourceTotals::new(component, Some(host), None, t)
    }

    fn totals(&self) -> Totals {
        Totals {
            events: self.events,
            creates: self.creates,
            patches: self.patches,
            skips: self.skips,
            aggregated: self.aggregated,
        }
    }
}

/// A source's or a component's metrics, led by its key as in `SourceTotals`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceSummaryRow {
    pub source_component: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<u64>,
    #[serde(flatten)]
    pub summary: SummaryRow,
}

/// Most API writes first, then most events, then by key.
fn busiest(a: (&str, &str, &Totals), b: (&str, &str, &Totals)) -> std::cmp::Ordering {
    b.2.writes().cmp(&a.2.writes()).then(b.2.events.cmp(&a.2.events)).then((a.0, a.1).cmp(&(b.0, b.1)))
}

fn sort_rows(rows: &mut [SourceTotals]) {
    fn key(r: &SourceTotals) -> (&str, &str, Totals) {
        (&r.source_component, r.source_host.as_deref().unwrap_or(""), r.totals())
    }
    rows.sort_by(|a, b| {
        let (a, b) = (key(a), key(b));
        busiest((a.0, a.1, &a.2), (b.0, b.1, &b.2))
    });
}

/// The sources' counts added up by component.
fn component_totals(sources: &[(SourceKey, Totals)]) -> Vec<SourceTotals> {
    let mut by: std::collections::BTreeMap<&str, (u64, Totals)> = std::collections::BTreeMap::new();
    for ((component, _), t) in sources {
        let (n, sum) = by.entry(component).or_default();
        *n += 1;
        sum.add(t);
    }
    let mut rows: Vec<_> = by.into_iter().map(|(c, (n, t))| SourceTotals::new(c, None, Some(n), &t)).collect();
    sort_rows(&mut rows);
    rows
}

/// The replays of the sources of one trace as one report: the API server's whole load, and the load of each
/// source and each component. `per_object` and `window_ns` (metrics) say what the replays kept. The result
/// does not depend on the order of `parts`.
pub fn report(mut parts: Vec<(SourceKey, Part)>, per_object: bool, window_ns: Option<i64>) -> Result<Report> {
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = parts.windows(2).find(|w| w[0].0 == w[1].0) {
        let (c, h) = &w[0].0;
        return Err(Error::value("", format!("the source ({c:?}, {h:?}) was replayed twice")));
    }
    let missing = |what: &str| Error::value("", format!("a source's replay has no {what}"));
    let mut totals = Totals::default();
    for (_, p) in &parts {
        totals.add(&p.totals);
    }
    let objects = if per_object {
        let mut all: std::collections::HashMap<ObjectKey, Totals> = std::collections::HashMap::new();
        for (_, p) in &parts {
            for (k, t) in p.objects.as_ref().ok_or_else(|| missing("per-object counts"))? {
                all.entry(k.clone()).or_default().add(t);
            }
        }
        Some(all)
    } else {
        None
    };
    let measured = match window_ns {
        Some(w) => {
            let m: Option<Vec<&MetricsPart>> = parts.iter().map(|(_, p)| p.metrics.as_ref()).collect();
            Some((w, m.ok_or_else(|| missing("metrics"))?))
        }
        None => None,
    };
    let window = window_ns.unwrap_or(metrics::DEFAULT_WINDOW_NS);
    let (summary, object_summaries) = match &measured {
        Some((w, m)) => {
            let (s, o) = metrics::merge(m, *w);
            (Some(s), o.filter(|_| per_object))
        }
        None => (None, None),
    };
    let mut report = Report::new(totals, objects.as_ref(), summary, object_summaries, window);
    report.correlators = Correlators::PerSource;

    let totals_of: Vec<(SourceKey, Totals)> = parts.iter().map(|(k, p)| (k.clone(), p.totals)).collect();
    report.components = component_totals(&totals_of);
    report.sources = totals_of.iter().map(|(k, t)| SourceTotals::of_source(k, t)).collect();
    sort_rows(&mut report.sources);

    if let Some((w, m)) = measured {
        let row = |component: &str, host: Option<&str>, sources: Option<u64>, s: &Summary| SourceSummaryRow {
            source_component: component.to_owned(),
            source_host: host.map(str::to_owned),
            sources,
            summary: s.row(w, true),
        };
        let mut by_source: Vec<(&SourceKey, &Summary)> =
            parts.iter().zip(&m).map(|((k, _), p)| (k, &p.summary)).collect();
        by_source.sort_by(|a, b| busiest((&a.0 .0, &a.0 .1, &a.1.totals), (&b.0 .0, &b.0 .1, &b.1.totals)));
        report.source_metrics = Some(by_source.iter().map(|((c, h), s)| row(c, Some(h), None, s)).collect());
        // Parts are sorted by source, so each component's sources are next to each other.
        let mut by_component = Vec::new();
        let mut start = 0;
        while start < parts.len() {
            let component = &parts[start].0 .0;
            let end = start + parts[start..].iter().take_while(|(k, _)| &k.0 == component).count();
            let (s, _) = metrics::merge(&m[start..end], w);
            by_component.push((component.as_str(), (end - start) as u64, s));
            start = end;
        }
        by_component.sort_by(|a, b| busiest((a.0, "", &a.2.totals), (b.0, "", &b.2.totals)));
        report.component_metrics = Some(by_component.iter().map(|(c, n, s)| row(c, None, Some(*n), s)).collect());
    }
    Ok(report)
}

/// Each record's source, as indexes into the sources in the order they first appear, and how many records
/// each source has.
pub struct SourceIds {
    pub keys: Vec<SourceKey>,
    pub counts: Vec<u64>,
    pub ids: Vec<u32>,
}

impl SourceIds {
    /// The sources of `trace`'s records, found by `threads` threads, each over a stretch of the trace.
    pub fn of<T: SharedTrace + ?Sized>(trace: &T, threads: usize) -> Result<Self> {
        let n = trace.record_count();
        let stretch = n.div_ceil(threads.max(1)).max(1);
        let stretches = on_threads(n.div_ceil(stretch).max(1), |k| {
            let rows = k * stretch..((k + 1) * stretch).min(n);
            let mut sources: Sources<u64> = Sources::default();
            let mut ids = Vec::with_capacity(rows.len());
            trace.each_where(
                |i| rows.contains(&i),
                |_, r| {
                    let i = sources.index(&r.source_component, &r.source_host, || Ok(0))?;
                    *sources.value_mut(i) += 1;
                    ids.push(id(i)?);
                    Ok(true)
                },
            )?;
            Ok((sources.into_entries(), ids))
        })?;
        // Taken in trace order, the stretches' sources keep the order in which they first appear.
        let mut sources: Sources<u64> = Sources::default();
        let mut ids = Vec::with_capacity(n);
        for (found, local) in stretches {
            let mut global = Vec::with_capacity(found.len());
            for ((component, host), count) in found {
                let i = sources.index(&component, &host, || Ok(0))?;
                *sources.value_mut(i) += count;
                global.push(id(i)?);
            }
            ids.extend(local.into_iter().map(|l| global[l as usize]));
        }
        let (keys, counts) = sources.into_entries().into_iter().unzip();
        Ok(SourceIds { keys, counts, ids })
    }

    /// Which of `threads` replays each source: the largest first, each to the least loaded thread.
    fn owners(&self, threads: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.keys.len()).collect();
        order.sort_by(|&a, &b| self.counts[b].cmp(&self.counts[a]).then(a.cmp(&b)));
        let mut load = vec![0u64; threads];
        let mut owner = vec![0; self.keys.len()];
        for s in order {
            let t = (0..threads).min_by_key(|&t| (load[t], t)).unwrap_or(0);
            load[t] += self.counts[s];
            owner[s] = t;
        }
        owner
    }
}

/// A source's index as the id of its records.
fn id(i: usize) -> Result<u32> {
    u32::try_from(i).map_err(|_| Error::value("", "more than 2^32 sources"))
}

/// `f(0)`, ..., `f(threads - 1)`, each on a thread of its own (on this one when there is one), in that order;
/// the first error.
fn on_threads<R: Send>(threads: usize, f: impl Fn(usize) -> Result<R> + Sync) -> Result<Vec<R>> {
    if threads <= 1 {
        return Ok(vec![f(0)?]);
    }
    let f = &f;
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for t in 0..threads {
            handles.push(threads::spawn_scoped(scope, "replay", move || f(t))?);
        }
        handles.into_iter().map(|h| h.join().map_err(|_| Error::value("", "a replay thread panicked"))?).collect()
    })
}

/// Replays each source of `trace` through its own correlator, the sources spread over `threads` threads;
/// the result equals `BySource`'s over the same trace, whatever the number of threads.
pub fn replay_split<T: SharedTrace + ?Sized>(
    trace: &T,
    setup: &Setup,
    threads: usize,
) -> Result<Vec<(SourceKey, Part)>> {
    let sources = SourceIds::of(trace, threads)?;
    let threads = threads.clamp(1, sources.keys.len().max(1));
    let owner = sources.owners(threads);
    let (sources, owner) = (&sources, &owner);
    let parts = on_threads(threads, |thread| {
        let mut sims: Vec<Option<Simulator>> = Vec::with_capacity(sources.keys.len());
        for &o in owner {
            sims.push(if o == thread { Some(setup.simulator(true)?) } else { None });
        }
        let ids = &sources.ids;
        trace.each_where(
            |i| owner[ids[i] as usize] == thread,
            |i, r| match sims[ids[i] as usize].as_mut() {
                Some(sim) => sim.step(r).map(|_| true),
                None => Err(Error::value("", "a record went to a thread that does not replay its source")),
            },
        )?;
        Ok(sims.into_iter().enumerate().filter_map(|(i, s)| s.map(|s| (i, s.into_part()))).collect::<Vec<_>>())
    })?;
    let mut parts: Vec<(usize, Part)> = parts.into_iter().flatten().collect();
    parts.sort_by_key(|(i, _)| *i);
    Ok(parts.into_iter().map(|(i, p)| (sources.keys[i].clone(), p)).collect())
}

/// The records of each source of `trace` as a batch of their own, in the order the sources first appear (and
/// the records within a source in trace order): a trace split for replays on other machines.
pub fn split<T: SharedTrace + ?Sized>(trace: &T) -> Result<Vec<(SourceKey, RecordBatch)>> {
    let mut sources: Sources<BatchBuilder> = Sources::default();
    trace.each(|r| {
        let i = sources.index(&r.source_component, &r.source_host, || Ok(BatchBuilder::default()))?;
        sources.value_mut(i).push(r);
        Ok(true)
    })?;
    Ok(sources.into_entries().into_iter().map(|(k, mut b)| (k, b.finish(false))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Action, InvolvedRecord};

    const S: i64 = 1_000_000_000;
    const T0: i64 = 1_700_000_000 * S;

    /// Three kubelets and a scheduler: pods crash-looping on each node, with similar messages that the
    /// aggregator combines, so caches and spam buckets matter.
    fn cluster(nodes: usize, n: i64) -> Vec<Record<'static>> {
        (0..n)
            .map(|i| {
                let node = (i * 7 % nodes as i64) as usize;
                let scheduler = i % 11 == 0;
                Record {
                    t_ns: T0 + i * S / 4,
                    source_component: if scheduler { "default-scheduler" } else { "kubelet" }.into(),
                    source_host: if scheduler { String::new() } else { format!("node-{node}") }.into(),
                    involved: InvolvedRecord {
                        kind: "Pod".into(),
                        namespace: "default".into(),
                        name: format!("pod-{node}-{}", i % 3).into(),
                        ..Default::default()
                    },
                    type_: "Warning".into(),
                    reason: if scheduler { "Scheduled" } else { "BackOff" }.into(),
                    message: format!("m{}", i % 13).into(),
                    ..Default::default()
                }
            })
            .collect()
    }

    fn setup(per_object: bool) -> Setup {
        let options = CorrelatorOptions { burst: 4, qps: 1.0, max_events: 5, lru_cache_size: 8, ..Default::default() };
        Setup::new(options, per_object, Some(10 * S))
    }

    fn by_source(records: &[Record<'static>], setup: &Setup) -> Vec<(SourceKey, Part)> {
        let mut by = BySource::new(setup.clone());
        for r in records {
            by.step(r).unwrap();
        }
        by.into_parts()
    }

    #[test]
    fn each_source_replays_as_it_would_alone() {
        let records = cluster(3, 2000);
        let setup = setup(true);
        let parts = by_source(&records, &setup);
        assert_eq!(parts.len(), 4);
        for (key, part) in &parts {
            let mut alone = setup.simulator(true).unwrap();
            for r in records.iter().filter(|r| (&*r.source_component, &*r.source_host) == (&*key.0, &*key.1)) {
                alone.step(r).unwrap();
            }
            assert_eq!(part, &alone.into_part(), "{key:?}");
        }
        // A cache of 8 shared by all sources evicts what each source's own would keep.
        let mut shared = setup.simulator(false).unwrap();
        for r in &records {
            shared.step(r).unwrap();
        }
        let mut apart = Totals::default();
        for (_, p) in &parts {
            apart.add(&p.totals);
        }
        assert!(shared.totals().creates > apart.creates, "{:?} {apart:?}", shared.totals());
    }

    #[test]
    fn threads_replay_what_one_pass_does() {
        let records = cluster(5, 3000);
        let setup = setup(true);
        let want = by_source(&records, &setup);
        for threads in [1, 2, 3, 8] {
            assert_eq!(replay_split(&records[..], &setup, threads).unwrap(), want, "{threads} threads");
        }
        let batch = crate::sim::table::records_to_batch(&records);
        let table = crate::sim::table::Table::new(&batch.schema(), vec![batch.slice(0, 1000), batch.slice(1000, 2000)])
            .unwrap();
        assert_eq!(replay_split(&table, &setup, 2).unwrap(), want);
    }

    #[test]
    fn sources_found_in_stretches_are_the_sources_in_trace_order() {
        let records = cluster(5, 1001);
        let one = SourceIds::of(&records[..], 1).unwrap();
        assert_eq!(one.keys[0], ("default-scheduler".to_owned(), String::new()));
        assert_eq!(one.counts.iter().sum::<u64>(), 1001);
        for threads in [2, 3, 7, 2000] {
            let got = SourceIds::of(&records[..], threads).unwrap();
            assert_eq!((&got.keys, &got.counts, &got.ids), (&one.keys, &one.counts, &one.ids), "{threads}");
        }
        assert!(SourceIds::of(&records[..0], 2).unwrap().keys.is_empty());
    }

    #[test]
    fn the_report_adds_up_the_sources() {
        let records = cluster(3, 2000);
        let setup = setup(true);
        let parts = by_source(&records, &setup);
        let mut shuffled = parts.clone();
        shuffled.reverse();
        let report = report(parts.clone(), true, setup.window_ns).unwrap();
        assert_eq!(report, super::report(shuffled, true, setup.window_ns).unwrap(), "order does not matter");
        assert_eq!(report.correlators, Correlators::PerSource);
        let mut sum = Totals::default();
        for (_, p) in &parts {
            sum.add(&p.totals);
        }
        assert_eq!(report.totals, sum);
        let m = report.metrics.as_ref().unwrap();
        assert_eq!((m.events, m.writes), (sum.events, sum.writes()));
        let own: Vec<_> = parts.iter().map(|(_, p)| p.metrics.as_ref().unwrap().summary).collect();
        assert_eq!(m.messages, own.iter().map(|s| s.messages).sum::<u64>());
        assert!(m.peak_writes >= own.iter().map(|s| s.peak_writes).max().unwrap());
        assert!(m.peak_writes <= own.iter().map(|s| s.peak_writes).sum::<u64>());

        // Sources, most writes first; the kubelets add up to their component.
        assert_eq!(report.sources.len(), 4);
        assert!(report.sources.windows(2).all(|w| w[0].writes >= w[1].writes));
        let kubelet = report.components.iter().find(|c| c.source_component == "kubelet").unwrap();
        assert_eq!(kubelet.sources, Some(3));
        let kubelets: u64 = report.sources.iter().filter(|s| s.source_component == "kubelet").map(|s| s.writes).sum();
        assert_eq!(kubelet.writes, kubelets);
        let source_metrics = report.source_metrics.as_ref().unwrap();
        let node = source_metrics.iter().find(|r| r.source_host.as_deref() == Some("node-1")).unwrap();
        let (_, node_part) = parts.iter().find(|(k, _)| k.1 == "node-1").unwrap();
        assert_eq!(node.summary, node_part.metrics.as_ref().unwrap().summary.row(10 * S, true));
        let components = report.component_metrics.as_ref().unwrap();
        assert_eq!(components.iter().map(|c| c.summary.events).sum::<u64>(), sum.events);

        // Per object: every object's counts, and their writes add up to the whole.
        let objects = report.object_metrics.as_ref().unwrap();
        assert_eq!(objects.iter().map(|o| o.summary.writes).sum::<u64>(), sum.writes());
        assert_eq!(report.objects.as_ref().unwrap().len(), objects.len());
    }

    #[test]
    fn one_source_per_source_is_the_shared_replay() {
        let records: Vec<_> = cluster(1, 1500).into_iter().filter(|r| r.source_component == "kubelet").collect();
        let setup = setup(true);
        let mut shared = setup.simulator(false).unwrap();
        for r in &records {
            shared.step(r).unwrap();
        }
        let mut want = shared.report();
        let mut got = report(by_source(&records, &setup), true, setup.window_ns).unwrap();
        want.correlators = Correlators::PerSource;
        (got.sources, got.components, got.source_metrics, got.component_metrics) = (vec![], vec![], None, None);
        assert_eq!(got, want);
    }

    #[test]
    fn the_peak_is_over_all_sources_writes() {
        // Two sources writing one event each per second, half a second apart: each peaks at 2 writes in
        // a 1 s window, both together at 3 (t = 0, 0.5, 1).
        let record = |t_ms: i64, host: &str| Record {
            t_ns: T0 + t_ms * 1_000_000,
            source_component: "kubelet".into(),
            source_host: host.to_owned().into(),
            involved: InvolvedRecord { kind: "Pod".into(), name: host.to_owned().into(), ..Default::default() },
            reason: "R".into(),
            message: format!("m{t_ms}").into(),
            ..Default::default()
        };
        let records: Vec<_> = (0..4).flat_map(|i| [record(i * 1000, "a"), record(i * 1000 + 500, "b")]).collect();
        let setup = Setup::new(CorrelatorOptions::default(), true, Some(S));
        let report = report(by_source(&records, &setup), true, Some(S)).unwrap();
        let m = report.metrics.unwrap();
        assert_eq!((m.writes, m.peak_writes, m.peak_object_writes), (8, 3, Some(2)));
        // Windows [0, 1) .. [3, 1) s hold 2 writes each (a's and b's).
        assert_eq!((m.p50_write_rate, m.p99_write_rate), (Some(2.0), Some(2.0)));
        let rows = report.source_metrics.unwrap();
        assert!(rows.iter().all(|r| r.summary.peak_writes == 2), "{rows:?}");
    }

    #[test]
    fn a_shared_replay_counts_its_sources() {
        let records = cluster(2, 500);
        let mut r = Replayer::new(setup(false), Correlators::Shared).unwrap();
        let mut skips = 0;
        for rec in &records {
            skips += u64::from(r.replay(rec).unwrap().0.action == Action::Skip);
        }
        let report = r.report().unwrap();
        assert_eq!(report.correlators, Correlators::Shared);
        assert_eq!(report.sources.iter().map(|s| s.events).sum::<u64>(), 500);
        assert_eq!(report.sources.iter().map(|s| s.skips).sum::<u64>(), skips);
        assert_eq!(report.components.len(), 2);
        assert!(report.source_metrics.is_none());
    }

    #[test]
    fn a_trace_splits_into_its_sources() {
        let records = cluster(3, 300);
        let parts = split(&records[..]).unwrap();
        assert_eq!(parts.len(), 4);
        let rows: usize = parts.iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(rows, 300);
        let (key, batch) = &parts[1];
        let table = crate::sim::table::Table::new(&batch.schema(), vec![batch.clone()]).unwrap();
        let mut got = vec![];
        table
            .each(|r| {
                got.push(r.clone().into_owned());
                Ok(true)
            })
            .unwrap();
        let want: Vec<_> =
            records.iter().filter(|r| (&*r.source_component, &*r.source_host) == (&*key.0, &*key.1)).cloned().collect();
        assert_eq!(got, want);
    }

    #[test]
    fn bad_options_and_doubled_sources_are_errors() {
        assert_eq!(Correlators::parse("shared").unwrap(), Correlators::Shared);
        let err = Correlators::parse("per_source").unwrap_err().to_string();
        assert_eq!(err, r#"correlators must be "per-source" or "shared", got "per_source""#);
        let records = cluster(2, 100);
        let mut parts = by_source(&records, &setup(false));
        parts.push(parts[0].clone());
        let err = report(parts, false, Some(S)).unwrap_err().to_string();
        assert!(err.contains("was replayed twice"), "{err}");
        let err = report(by_source(&records, &setup(false)), true, Some(S)).unwrap_err().to_string();
        assert_eq!(err, "a source's replay has no per-object counts");
    }
}
