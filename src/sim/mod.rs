//! Replays of event traces through the correlator on a virtual clock.
//!
//! Each record is handled as client-go's `recordToSink` handles an event, with a sink that never fails:
//! the clock is set to the record's time, the recorder makes the event (`makeEvent`), the correlator
//! decides, then the sink creates (assigning the next resourceVersion) or patches (count > 1), and the
//! correlator's `UpdateState` gets the sink's answer. The answer to a patch is the event as sent with a
//! new resourceVersion, which is what a server returns for these patches: they only set count,
//! lastTimestamp and message, and the correlator sends the current value of each. UUID fallback names come
//! from a seeded generator, so a replay is the same every time.

pub mod metrics;
pub mod sweep;
pub mod trace;

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;

use crate::clock::FakeClock;
use crate::correlator::{CorrelatorOptions, EventCorrelator, KeyFuncs};
use crate::error::Result;
use crate::event::Event;
use crate::recorder::{make_event_around, UuidSource};
use crate::time::Time;
pub use metrics::{Metrics, Summary};
pub use trace::{InvolvedRecord, JsonLines, Record};

/// What reached the API server for one input event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Create,
    Patch,
    Skip,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Patch => "patch",
            Action::Skip => "skip",
        }
    }
}

/// Running totals of a replay. `creates + patches + skips == events`; `aggregated` counts the events the
/// aggregator replaced by a "(combined from similar events)" event, whether written or skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub events: u64,
    pub creates: u64,
    pub patches: u64,
    pub skips: u64,
    pub aggregated: u64,
}

impl Totals {
    pub fn writes(&self) -> u64 {
        self.creates + self.patches
    }
}

/// Per involved object (kind, namespace, name): what its events became.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectTotals {
    pub events: u64,
    pub creates: u64,
    pub patches: u64,
    pub skips: u64,
}

pub type ObjectKey = (String, String, String);

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
    objects: Option<HashMap<ObjectKey, ObjectTotals>>,
    metrics: Option<Metrics>,
    // Reused for every record.
    event: Event,
    patched: bool,
}

/// Seed of the UUID fallback names in replays.
pub const UUID_SEED: u64 = 0x6b75_6265_7665_6e74;

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

    pub fn metrics(&self) -> Option<&Metrics> {
        self.metrics.as_ref()
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    pub fn objects(&self) -> Option<&HashMap<ObjectKey, ObjectTotals>> {
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
            self.correlator.update_state(event);
            if event.count > 1 {
                Action::Patch
            } else {
                Action::Create
            }
        };
        let index = self.totals.events;
        self.totals.events += 1;
        self.totals.aggregated += u64::from(outcome.aggregated);
        match action {
            Action::Create => self.totals.creates += 1,
            Action::Patch => self.totals.patches += 1,
            Action::Skip => self.totals.skips += 1,
        }
        if let Some(objects) = self.objects.as_mut() {
            let r = &self.event.involved_object;
            let key = (r.kind.clone(), r.namespace.clone(), r.name.clone());
            let o = objects.entry(key).or_default();
            o.events += 1;
            match action {
                Action::Create => o.creates += 1,
                Action::Patch => o.patches += 1,
                Action::Skip => o.skips += 1,
            }
        }
        if let Some(m) = self.metrics.as_mut() {
            let i = &record.involved;
            m.observe(&metrics::Occurrence {
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

    /// Replays every record of a JSON Lines trace, keeping only the totals.
    pub fn run_jsonl<R: BufRead>(&mut self, lines: &mut JsonLines<R>) -> Result<Totals> {
        while let Some(record) = lines.next_record() {
            self.step(&record?)?;
        }
        Ok(self.totals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::trace::InvolvedRecord;

    fn record(t_s: i64, pod: &str, message: &str) -> Record<'static> {
        Record {
            t_ns: 1_700_000_000_000_000_000 + t_s * 1_000_000_000,
            source_component: "kubelet".into(),
            source_host: "node-0".into(),
            involved: InvolvedRecord {
                kind: "Pod".into(),
                namespace: "default".into(),
                name: pod.to_owned().into(),
                api_version: "v1".into(),
                ..Default::default()
            },
            type_: "Warning".into(),
            reason: "BackOff".into(),
            message: message.to_owned().into(),
            ..Default::default()
        }
    }

    #[test]
    fn create_then_patches_then_spam() {
        let mut sim =
            Simulator::new(CorrelatorOptions { burst: 3, ..Default::default() }, KeyFuncs::default(), true).unwrap();
        let mut actions = vec![];
        let mut names = vec![];
        for i in 0..5 {
            actions.push(sim.step(&record(i, "p", "m")).unwrap().action);
            names.push(sim.event().metadata.name.clone());
            if i == 2 {
                assert_eq!(sim.event().count, 3);
                assert_eq!(
                    sim.patch().unwrap(),
                    br#"{"count":3,"lastTimestamp":"2023-11-14T22:13:22Z","message":"m"}"#
                );
            }
        }
        assert_eq!(actions, [Action::Create, Action::Patch, Action::Patch, Action::Skip, Action::Skip]);
        assert!(names[..3].iter().all(|n| n == &names[0]) && names[0].starts_with("p."));
        assert_eq!(sim.totals(), Totals { events: 5, creates: 1, patches: 2, skips: 2, aggregated: 0 });
        let o = sim.objects().unwrap()[&("Pod".to_owned(), "default".to_owned(), "p".to_owned())];
        assert_eq!((o.events, o.creates, o.patches, o.skips), (5, 1, 2, 2));
    }

    #[test]
    fn metrics_follow_the_decisions() {
        let options = CorrelatorOptions { burst: 3, ..Default::default() };
        let mut sim = Simulator::new(options, KeyFuncs::default(), false).unwrap().with_metrics(60_000_000_000);
        // Five occurrences use up the burst of 3; at 400 s the bucket has refilled one token (qps 1/300),
        // and that patch (count 6) reports the two skipped occurrences, 397 s and 396 s late.
        for t in [0, 1, 2, 3, 4, 400] {
            sim.step(&record(t, "p", "m")).unwrap();
        }
        let s = sim.metrics().unwrap().summary();
        assert_eq!((s.events, s.creates, s.patches, s.spam_skipped), (6, 1, 3, 2));
        assert_eq!((s.delayed, s.unreported, s.max_delay_ns), (2, 0, 397_000_000_000));
        assert_eq!(s.delay_sum_ns, 793_000_000_000);
        assert_eq!((s.messages, s.messages_kept, s.max_count, s.peak_writes), (1, 1, 6, 3));
    }

    #[test]
    fn replays_are_deterministic_even_with_uuid_names() {
        let run = || {
            let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), false).unwrap();
            (0..3)
                .map(|i| {
                    sim.step(&record(i, "Not_A_Subdomain", &format!("m{i}"))).unwrap();
                    sim.event().metadata.name.clone()
                })
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        assert!(uuid::Uuid::parse_str(&a[0]).is_ok());
    }
}
