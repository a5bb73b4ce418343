//! criterion benches of `EventCorrelator::correlate` and of a whole replay on the project's workloads.
//!
//! Traces come from the workload generator (`../shared/workloads.py` by default, or the script named by
//! `KUBEVENTS_WORKLOADS`) and are cached under `target/traces/`. Run: `cargo bench --bench correlate`.

use std::fs::File;
use std::io::BufReader;
use std::sync::Arc;

mod common;

use common::{records, trace_path, N};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kubevents::clock::FakeClock;
use kubevents::correlator::{CorrelatorOptions, EventCorrelator, KeyFuncs};
use kubevents::event::{make_event_into, EventInput, UuidSource};
use kubevents::event::{Event, EventSource, ObjectReference};
use kubevents::sim::{JsonLines, Simulator};
use kubevents::time::Time;

const WORKLOADS: [&str; 5] = ["unique", "identical", "similar", "mixed", "storm"];

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
