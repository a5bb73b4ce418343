//! Replays of event traces through the correlator on a virtual clock.
//!
//! Each record is handled as client-go's `recordToSink` handles an event, with a sink that never fails:
//! the clock is set to the record's time, the recorder makes the event (`makeEvent`), the correlator
//! decides, then the sink creates (assigning the next resourceVersion) or patches (count > 1), and the
//! correlator's `UpdateState` gets the sink's answer. The answer to a patch is the event as sent with a
//! new resourceVersion, which is what a server returns for these patches: they only set count,
//! lastTimestamp and message, and the correlator sends the current value of each. UUID fallback names come
//! from a seeded generator, so a replay is the same every time.

pub mod trace;

use std::collections::HashMap;
use std::sync::Arc;

use crate::clock::FakeClock;
use crate::correlator::{Correlation, CorrelatorOptions, EventCorrelator, KeyFuncs};
use crate::error::Result;
use crate::recorder::{make_event, UuidSource};
use crate::time::Time;
pub use trace::{JsonLines, Record};

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

/// One replayed event: the decision and the correlator's output (the event is `None` for a skip).
pub struct Step {
    pub index: u64,
    pub action: Action,
    pub correlation: Correlation,
}

pub struct Simulator {
    clock: Arc<FakeClock>,
    correlator: EventCorrelator,
    uuids: UuidSource,
    next_resource_version: u64,
    totals: Totals,
    objects: Option<HashMap<ObjectKey, ObjectTotals>>,
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
        })
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    pub fn objects(&self) -> Option<&HashMap<ObjectKey, ObjectTotals>> {
        self.objects.as_ref()
    }

    /// Replays one record.
    pub fn step(&mut self, record: Record) -> Result<Step> {
        let now = Time(record.t_ns);
        self.clock.set(now);
        let (source, spec) = record.into_parts();
        let object_key = self.objects.as_ref().map(|_| {
            let r = &spec.reference;
            (r.kind.clone(), r.namespace.clone(), r.name.clone())
        });
        let event = make_event(spec, &source, now, &mut self.uuids);
        let mut correlation = self.correlator.correlate(event)?;

        let action = match correlation.event.as_mut() {
            None => Action::Skip,
            Some(event) => {
                event.metadata.resource_version = self.next_resource_version.to_string();
                self.next_resource_version += 1;
                self.correlator.update_state(event);
                if event.count > 1 {
                    Action::Patch
                } else {
                    Action::Create
                }
            }
        };
        let index = self.totals.events;
        self.totals.events += 1;
        self.totals.aggregated += u64::from(correlation.aggregated);
        let counter = match action {
            Action::Create => &mut self.totals.creates,
            Action::Patch => &mut self.totals.patches,
            Action::Skip => &mut self.totals.skips,
        };
        *counter += 1;
        if let (Some(objects), Some(key)) = (self.objects.as_mut(), object_key) {
            let o = objects.entry(key).or_default();
            o.events += 1;
            match action {
                Action::Create => o.creates += 1,
                Action::Patch => o.patches += 1,
                Action::Skip => o.skips += 1,
            }
        }
        Ok(Step { index, action, correlation })
    }

    /// Replays every record, keeping only the totals.
    pub fn run<I: IntoIterator<Item = Result<Record>>>(&mut self, records: I) -> Result<Totals> {
        for record in records {
            self.step(record?)?;
        }
        Ok(self.totals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::trace::InvolvedRecord;

    fn record(t_s: i64, pod: &str, message: &str) -> Record {
        Record {
            t_ns: 1_700_000_000_000_000_000 + t_s * 1_000_000_000,
            source_component: "kubelet".into(),
            source_host: "node-0".into(),
            involved: InvolvedRecord { kind: "Pod".into(), namespace: "default".into(), name: pod.into(), api_version: "v1".into(), ..Default::default() },
            type_: "Warning".into(),
            reason: "BackOff".into(),
            message: message.into(),
            ..Default::default()
        }
    }

    #[test]
    fn create_then_patches_then_spam() {
        let mut sim = Simulator::new(CorrelatorOptions { burst: 3, ..Default::default() }, KeyFuncs::default(), true).unwrap();
        let steps: Vec<Step> = (0..5).map(|i| sim.step(record(i, "p", "m")).unwrap()).collect();
        let actions: Vec<_> = steps.iter().map(|s| s.action).collect();
        assert_eq!(actions, [Action::Create, Action::Patch, Action::Patch, Action::Skip, Action::Skip]);
        let names: Vec<_> = steps[..3].iter().map(|s| s.correlation.event.as_ref().unwrap().metadata.name.clone()).collect();
        assert!(names.iter().all(|n| n == &names[0]) && names[0].starts_with("p."));
        assert_eq!(steps[2].correlation.event.as_ref().unwrap().count, 3);
        assert_eq!(sim.totals(), Totals { events: 5, creates: 1, patches: 2, skips: 2, aggregated: 0 });
        let o = sim.objects().unwrap()[&("Pod".to_owned(), "default".to_owned(), "p".to_owned())];
        assert_eq!((o.events, o.creates, o.patches, o.skips), (5, 1, 2, 2));
    }

    #[test]
    fn replays_are_deterministic_even_with_uuid_names() {
        let run = || {
            let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), false).unwrap();
            (0..3).map(|i| sim.step(record(i, "Not_A_Subdomain", &format!("m{i}"))).unwrap().correlation.event.unwrap().metadata.name).collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        assert!(uuid::Uuid::parse_str(&a[0]).is_ok());
    }
}
