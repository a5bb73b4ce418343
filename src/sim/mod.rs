//! Replays of event traces through the correlator on a virtual clock.
//!
//! Each record is handled as client-go's `recordToSink` handles an event, with a sink that never fails:
//! the clock is set to the record's time, the recorder makes the event (`makeEvent`), the correlator
//! decides, then the sink creates (assigning the next resourceVersion) or patches (count > 1), and the
//! correlator's `UpdateState` gets the sink's answer. The answer to a patch is the event as sent with a
//! new resourceVersion, which is what a server returns for these patches: they only set count,
//! lastTimestamp and message, and the correlator sends the current value of each. UUID fallback names come
//! from a seeded generator, so a replay is the same every time.

pub mod cluster;
mod counts;
pub mod metrics;
pub mod records;
mod simulator;
pub mod sweep;
pub mod table;
pub mod trace;

pub use counts::{Action, ObjectKey, ObjectTotals, Totals};
pub use metrics::{Metrics, Summary};
pub use simulator::{Part, Replay, Report, Simulator, Step, UUID_SEED};
pub use trace::{InvolvedRecord, JsonLines, Record};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correlator::{CorrelatorOptions, KeyFuncs};

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
        let objects = sim.report().objects.unwrap();
        assert_eq!((objects.len(), objects[0].name.as_str(), objects[0].writes), (1, "p", 3));
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
        let s = sim.summary().unwrap();
        let t = s.totals;
        assert_eq!((t.events, t.creates, t.patches, t.skips), (6, 1, 3, 2));
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
