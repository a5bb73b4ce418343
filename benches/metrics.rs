//! criterion bench of what the replay metrics cost: a replay of the `mixed` workload from records in memory,
//! with and without `Simulator::with_metrics`. Traces are cached under `target/traces/` (written by
//! `python benches/bench_sweep.py` or `cargo bench --bench correlate`). Run: `cargo bench --bench metrics`.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kubevents::correlator::{CorrelatorOptions, KeyFuncs};
use kubevents::sim::{JsonLines, Record, Simulator};

const N: u64 = 100_000;

fn records(workload: &str) -> Vec<Record<'static>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("target/traces/{workload}-{N}.jsonl"));
    let file = File::open(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; write it with `python benches/bench_sweep.py` first", path.display())
    });
    let mut lines = JsonLines::new(BufReader::new(file));
    let mut out = Vec::new();
    while let Some(r) = lines.next_record() {
        out.push(r.expect("parse trace").into_owned());
    }
    out
}

fn bench_metrics(c: &mut Criterion) {
    let records = records("mixed");
    let mut group = c.benchmark_group("replay_metrics/mixed");
    group.throughput(Throughput::Elements(N));
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
