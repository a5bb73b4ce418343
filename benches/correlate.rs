//! criterion benches of `EventCorrelator::correlate` and of a whole replay on the project's workloads.
//!
//! Traces come from the workload generator (`../shared/workloads.py` by default, or the script named by
//! `KUBEVENTS_WORKLOADS`) and are cached under `target/traces/`. Run: `cargo bench --bench correlate`.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kubevents::clock::FakeClock;
use kubevents::correlator::{CorrelatorOptions, EventCorrelator, KeyFuncs};
use kubevents::event::Event;
use kubevents::recorder::{make_event, UuidSource};
use kubevents::sim::{JsonLines, Record, Simulator};
use kubevents::time::Time;

const N: usize = 100_000;
const WORKLOADS: [&str; 5] = ["unique", "identical", "similar", "mixed", "storm"];

fn trace_path(workload: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/traces");
    let path = dir.join(format!("{workload}-{N}.jsonl"));
    if !path.exists() {
        std::fs::create_dir_all(&dir).expect("create target/traces");
        let script = std::env::var("KUBEVENTS_WORKLOADS")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/workloads.py").to_owned());
        let status = Command::new("python3")
            .args([script.as_str(), workload, "-n", &N.to_string(), "-o"])
            .arg(&path)
            .status()
            .expect("run the workload generator");
        assert!(status.success(), "workload generator failed for {workload}");
    }
    path
}

fn records(workload: &str) -> Vec<Record> {
    let file = File::open(trace_path(workload)).expect("open trace");
    JsonLines::new(BufReader::new(file)).collect::<Result<_, _>>().expect("parse trace")
}

/// The events a recorder would have made, each with the instant it was made at.
fn events(records: &[Record]) -> Vec<(Time, Event)> {
    let mut uuids = UuidSource::seeded(1);
    records
        .iter()
        .map(|r| {
            let t = Time(r.t_ns);
            let (source, spec) = r.clone().into_parts();
            (t, make_event(spec, &source, t, &mut uuids))
        })
        .collect()
}

fn bench_correlate(c: &mut Criterion) {
    let mut group = c.benchmark_group("correlate");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(20);
    for workload in WORKLOADS {
        let events = events(&records(workload));
        group.bench_function(workload, |b| {
            b.iter_batched(
                || {
                    let clock = Arc::new(FakeClock::new(Time(0)));
                    let correlator =
                        EventCorrelator::new(CorrelatorOptions::default(), clock.clone(), KeyFuncs::default()).unwrap();
                    (clock, correlator, events.clone())
                },
                |(clock, mut correlator, events)| {
                    for (t, event) in events {
                        clock.set(t);
                        let r = correlator.correlate(event).unwrap();
                        std::hint::black_box(&r);
                    }
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

fn bench_replay(c: &mut Criterion) {
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(10);
    for workload in WORKLOADS {
        let records = records(workload);
        group.bench_function(format!("{workload}/records"), |b| {
            b.iter_batched(
                || records.clone(),
                |records| {
                    let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), false).unwrap();
                    sim.run(records.into_iter().map(Ok)).unwrap()
                },
                BatchSize::PerIteration,
            )
        });
        let path = trace_path(workload);
        group.bench_function(format!("{workload}/jsonl"), |b| {
            b.iter(|| {
                let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), false).unwrap();
                sim.run(JsonLines::new(BufReader::new(File::open(&path).unwrap()))).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_correlate, bench_replay);
criterion_main!(benches);
