//! criterion benches of `EventCorrelator::correlate` and of a whole replay on the project's workloads.
//!
//! Traces come from the workload generator (`../shared/workloads.py` by default, or the script named by
//! `KUBEVENTS_WORKLOADS`) and are cached under `target/traces/`. Run: `cargo bench --bench correlate`.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kubevents::clock::FakeClock;
use kubevents::correlator::{CorrelatorOptions, EventCorrelator, KeyFuncs};
use kubevents::event::{Event, EventSource, ObjectReference};
use kubevents::recorder::{make_event_into, EventInput, UuidSource};
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

fn records(workload: &str) -> Vec<Record<'static>> {
    let file = File::open(trace_path(workload)).expect("open trace");
    let mut lines = JsonLines::new(BufReader::new(file));
    let mut out = Vec::with_capacity(N);
    while let Some(r) = lines.next_record() {
        out.push(r.expect("parse trace").into_owned());
    }
    out
}

/// `correlate` on every record of a workload, with a fresh correlator. Each event is built into a reused
/// buffer first (`make_event_into`), so the figure includes making the event, as Go's callers pay for it too.
fn bench_correlate(c: &mut Criterion) {
    let mut group = c.benchmark_group("correlate");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(20);
    for workload in WORKLOADS {
        let records = records(workload);
        group.bench_function(workload, |b| {
            b.iter(|| {
                let clock = Arc::new(FakeClock::new(Time(0)));
                let mut correlator =
                    EventCorrelator::new(CorrelatorOptions::default(), clock.clone(), KeyFuncs::default()).unwrap();
                let mut uuids = UuidSource::seeded(1);
                let (mut reference, mut source, mut event) =
                    (ObjectReference::default(), EventSource::default(), Event::default());
                let mut skips = 0u32;
                for r in &records {
                    let t = Time(r.t_ns);
                    clock.set(t);
                    r.fill(&mut reference, &mut source);
                    let input = EventInput {
                        reference: &reference,
                        annotations: None,
                        type_: &r.type_,
                        reason: &r.reason,
                        message: &r.message,
                        source: &source,
                    };
                    make_event_into(&mut event, &input, t, &mut uuids);
                    skips += u32::from(correlator.correlate_in_place(&mut event).unwrap().skip);
                }
                skips
            })
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
            b.iter(|| {
                let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), false).unwrap();
                for r in &records {
                    sim.step(r).unwrap();
                }
                sim.totals()
            })
        });
        let path = trace_path(workload);
        group.bench_function(format!("{workload}/jsonl"), |b| {
            b.iter(|| {
                let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), false).unwrap();
                sim.run_jsonl(&mut JsonLines::new(BufReader::new(File::open(&path).unwrap()))).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_correlate, bench_replay);
criterion_main!(benches);
