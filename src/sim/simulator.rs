//! One replay: each record made into an event, correlated and written to a sink that never fails.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::cluster::{Correlators, SourceSummaryRow, SourceTotals};
use super::counts::{busiest_first, Action, ObjectKey, ObjectTotals, Totals};
use super::metrics::{self, Metrics, MetricsPart, ObjectSummaryRow, SummaryRow};
use super::trace::{JsonLines, Record};
use crate::clock::FakeClock;
use crate::correlator::{CorrelatorOptions, EventCorrelator, KeyFuncs};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::event::{make_event_around, UuidSource};
use crate::time::Time;

/// One replayed event. The event written (or skipped) and its patch are `Simulator::event`/`patch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub index: u64,
    pub action: Action,
    pub aggregated: bool,
}

pub struct Simulator {
    clock: Arc<FakeClock>,
    correlator: EventCorrelator,
    uuids: UuidSource,
    next_resource_version: u64,
    totals: Totals,
    objects: Option<HashMap<ObjectKey, Totals>>,
    metrics: Option<Metrics>,
    // Reused for every record.
    event: Event,
    patched: bool,
}

/// Replays records one at a time: one `Simulator`, or several (one per source).
pub trait Replay {
    /// Replays one record; returns its step and the simulator that replayed it.
    fn replay(&mut self, r: &Record<'_>) -> Result<(Step, &Simulator)>;
}

impl Replay for Simulator {
    fn replay(&mut self, r: &Record<'_>) -> Result<(Step, &Simulator)> {
        let step = self.step(r)?;
        Ok((step, self))
    }
}

/// A replay's counts and metrics, as a merge with other replays needs them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub totals: Totals,
    /// With `track_objects`.
    pub objects: Option<HashMap<ObjectKey, Totals>>,
    pub metrics: Option<MetricsPart>,
}

/// Seed of the UUID fallback names in replays.
pub const UUID_SEED: u64 = 0x6b75_6265_7665_6e74;

/// What `kubevents.Simulation` shows of a replay; the per-object, per-source and per-component lists are most
/// API writes first.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub totals: Totals,
    /// With `track_objects`.
    pub objects: Option<Vec<ObjectTotals>>,
    /// With metrics.
    pub metrics: Option<SummaryRow>,
    /// With metrics and `track_objects`.
    pub object_metrics: Option<Vec<ObjectSummaryRow>>,
    pub correlators: Correlators,
    /// Each source's counts (empty for a replay of one `Simulator`, which sees no sources apart).
    pub sources: Vec<SourceTotals>,
    pub components: Vec<SourceTotals>,
    /// With metrics, of a replay with one correlator per source.
    pub source_metrics: Option<Vec<SourceSummaryRow>>,
    pub component_metrics: Option<Vec<SourceSummaryRow>>,
}

impl Report {
    /// A report of these counts and metrics (with windows of `window_ns`), and no sources.
    pub fn new(
        totals: Totals,
        objects: Option<&HashMap<ObjectKey, Totals>>,
        summary: Option<metrics::Summary>,
        object_summaries: Option<Vec<(ObjectKey, metrics::Summary)>>,
        window_ns: i64,
    ) -> Report {
        let objects = objects.map(|objects| {
            let mut v: Vec<_> = objects.iter().collect();
            v.sort_by(|a, b| busiest_first(*a, *b));
            v.into_iter().map(|(k, t)| ObjectTotals::new(k.clone(), t)).collect()
        });
        let object_metrics = object_summaries.map(|mut v| {
            v.sort_by(|a, b| busiest_first((&a.0, &a.1.totals), (&b.0, &b.1.totals)));
            let row = |((kind, namespace, name), s): (ObjectKey, metrics::Summary)| ObjectSummaryRow {
                kind,
                namespace,
                name,
                summary: s.row(window_ns, false),
            };
            v.into_iter().map(row).collect()
        });
        Report {
            totals,
            objects,
            metrics: summary.map(|s| s.row(window_ns, true)),
            object_metrics,
            correlators: Correlators::Shared,
            sources: Vec::new(),
            components: Vec::new(),
            source_metrics: None,
            component_metrics: None,
        }
    }

    /// The `n` sources (or components) with the most API writes, all for None.
    pub fn top_sources(&self, components: bool, n: Option<usize>) -> &[SourceTotals] {
        let rows = if components { &self.components } else { &self.sources };
        &rows[..n.unwrap_or(usize::MAX).min(rows.len())]
    }

    /// The metrics of the `n` sources (or components) with the most API writes, all for None; needs
    /// metrics and one correlator per source.
    pub fn source_metrics(&self, components: bool, n: Option<usize>) -> Result<&[SourceSummaryRow]> {
        self.metrics()?;
        let rows = if components { &self.component_metrics } else { &self.source_metrics };
        let rows = rows.as_deref().ok_or_else(|| {
            Error::type_(
                "",
                "metrics by source need one correlator per source: call simulate(..., correlators=\"per-source\")",
            )
        })?;
        Ok(&rows[..n.unwrap_or(usize::MAX).min(rows.len())])
    }

    /// The `n` objects with the most API writes; needs `track_objects`.
    pub fn top_objects(&self, n: usize) -> Result<&[ObjectTotals]> {
        let objects = self
            .objects
            .as_deref()
            .ok_or_else(|| Error::type_("", "per-object totals were not kept: call simulate(..., per_object=True)"))?;
        Ok(&objects[..n.min(objects.len())])
    }

    /// The metrics of the whole replay; needs metrics.
    pub fn metrics(&self) -> Result<&SummaryRow> {
        self.metrics
            .as_ref()
            .ok_or_else(|| Error::type_("", "metrics were not collected: call simulate(..., metrics=True)"))
    }

    /// The metrics of the `n` objects (all for None) with the most API writes; needs metrics and
    /// `track_objects`.
    pub fn object_metrics(&self, n: Option<usize>) -> Result<&[ObjectSummaryRow]> {
        self.metrics()?;
        let objects = self.object_metrics.as_deref().ok_or_else(|| {
            Error::type_("", "per-object metrics were not kept: call simulate(..., metrics=True, per_object=True)")
        })?;
        Ok(&objects[..n.unwrap_or(usize::MAX).min(objects.len())])
    }
}

impl Simulator {
    /// A replay with client-go's correlator under `options`. With `track_objects`, totals are also kept
    /// per involved object (memory grows with the number of distinct objects).
    pub fn new(options: CorrelatorOptions, funcs: KeyFuncs, track_objects: bool) -> Result<Self> {
        let clock = Arc::new(FakeClock::new(Time::UNIX_EPOCH));
        let correlator = EventCorrelator::new(options, clock.clone(), funcs)?;
        Ok(Simulator {
            clock,
            correlator,
            uuids: UuidSource::seeded(UUID_SEED),
            next_resource_version: 1,
            totals: Totals::default(),
            objects: track_objects.then(HashMap::new),
            metrics: None,
            event: Event::default(),
            patched: false,
        })
    }

    /// Also collects the metrics of `metrics.rs`, with peak write rates over windows of `window_ns`; per
    /// object too when the replay tracks objects.
    pub fn with_metrics(mut self, window_ns: i64) -> Self {
        self.metrics = Some(Metrics::new(window_ns, self.objects.is_some()));
        self
    }

    /// With metrics, also keeps each write's time and object, for a merge of this replay's metrics with
    /// others' (`into_part`).
    pub fn with_write_log(mut self) -> Self {
        self.metrics = self.metrics.map(Metrics::with_write_log);
        self
    }

    /// What the replay found, as a merge with other replays (one per source) needs it.
    pub fn into_part(self) -> Part {
        let Simulator { totals, objects, metrics, .. } = self;
        let metrics = metrics.map(|m| {
            let per_object = |k: &ObjectKey| objects.as_ref().and_then(|o| o.get(k)).copied().unwrap_or_default();
            m.into_part(totals, per_object)
        });
        Part { totals, objects, metrics }
    }

    /// The metrics so far, if collected.
    pub fn summary(&self) -> Option<metrics::Summary> {
        self.metrics.as_ref().map(|m| m.summary(self.totals))
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    pub fn objects(&self) -> Option<&HashMap<ObjectKey, Totals>> {
        self.objects.as_ref()
    }

    /// The event of the last step as it was written (for a skip: as the correlator left it).
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// The patch of the last step, if it was a written repeat.
    pub fn patch(&self) -> Option<&[u8]> {
        self.patched.then(|| self.correlator.patch())
    }

    /// Replays one record.
    pub fn step(&mut self, record: &Record<'_>) -> Result<Step> {
        let now = Time(record.t_ns);
        self.clock.set(now);
        // The record's reference and source go straight into the event; the correlator keeps both (an
        // aggregate event has the same involved object), so they also name the object below.
        let event = &mut self.event;
        record.fill(&mut event.involved_object, &mut event.source);
        let annotations = Some(&record.annotations).filter(|a| !a.is_empty());
        make_event_around(event, annotations, &record.type_, &record.reason, &record.message, now, &mut self.uuids);
        let outcome = self.correlator.correlate_in_place(&mut self.event)?;
        self.patched = outcome.patched && !outcome.skip;

        let action = if outcome.skip {
            Action::Skip
        } else {
            let event = &mut self.event;
            event.metadata.resource_version.clear();
            event.metadata.resource_version.push_str(itoa::Buffer::new().format(self.next_resource_version));
            self.next_resource_version += 1;
            self.correlator.update_last_state(event);
            if event.count > 1 {
                Action::Patch
            } else {
                Action::Create
            }
        };
        let index = self.totals.events;
        self.totals.count(action, outcome.aggregated);
        if let Some(objects) = self.objects.as_mut() {
            let r = &self.event.involved_object;
            let key = (r.kind.clone(), r.namespace.clone(), r.name.clone());
            objects.entry(key).or_default().count(action, outcome.aggregated);
        }
        if let Some(m) = self.metrics.as_mut() {
            let i = &record.involved;
            m.observe(&metrics::Observation {
                t_ns: record.t_ns,
                object: (&i.kind, &i.namespace, &i.name),
                reason: &record.reason,
                message: &record.message,
                action,
                aggregated: outcome.aggregated,
                event_name: &self.event.metadata.name,
                count: self.event.count,
            });
        }
        Ok(Step { index, action, aggregated: outcome.aggregated })
    }

    /// Replays every record of a JSON Lines trace.
    pub fn run_jsonl<R: BufRead>(&mut self, lines: &mut JsonLines<R>) -> Result<Totals> {
        while let Some(record) = lines.next_record() {
            self.step(&record?)?;
        }
        Ok(self.totals)
    }

    /// What the replay found so far.
    pub fn report(&self) -> Report {
        let metrics = self.metrics.as_ref();
        let window_ns = metrics.map_or(metrics::DEFAULT_WINDOW_NS, Metrics::window_ns);
        let object_summaries = metrics.and_then(|m| {
            let objects = self.objects.as_ref()?;
            m.objects(|k| objects.get(k).copied().unwrap_or_default())
        });
        Report::new(self.totals, self.objects.as_ref(), self.summary(), object_summaries, window_ns)
    }
}
