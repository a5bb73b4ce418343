//! criterion bench of what the replay metrics cost: a replay of the `mixed` workload from records in memory,
//! with and without `Simulator::with_metrics`. Traces are cached under `target/traces/`. Run: `cargo bench --bench metrics`.

mod common;

use common::records;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kubevents::correlator::{CorrelatorOptions, KeyFuncs};
use kubevents::sim::Simulator;

fn bench_metrics(c: &mut Criterion) {
    let records = records("mixed");
    let mut group = c.benchmark_group("replay_metrics/mixed");
    group.throughput(Throughput::Elements(common::N as u64));
    group.sample_size(20);
    for (name, metrics) in [("without", false), ("with", true)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), false).unwrap();
                if metrics {
                    sim = sim.with_metrics(60_000_000_000);
                }
                for r in &records {
                    sim.step(r).unwrap();
                }
                sim.totals().writes()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_metrics);
criterion_main!(benches);
