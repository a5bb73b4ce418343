//! criterion benches of the events.k8s.io/v1 series engine: making the event and `SeriesEngine::observe`
//! to a sink that does nothing, per workload, and the cache over a million distinct keys.
//!
//! Traces come from the workload generator as for `benches/correlate.rs` (`KUBEVENTS_WORKLOADS` or
//! `../shared/workloads.py`), cached under `target/traces/`. Run: `cargo bench --bench series`.

use std::num::NonZeroUsize;
use std::sync::Arc;

mod common;

use common::{records as trace, N};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kubevents::clock::{Clock, FakeClock};
use kubevents::event::UuidSource;
use kubevents::event::{EventSource, ObjectReference};
use kubevents::series::{make_event_v1, EngineOptions, EventV1, EventV1Call, SeriesEngine, SinkV1};
use kubevents::sim::Record;
use kubevents::sink::WriteError;
use kubevents::time::Time;

struct NoopSink;

impl SinkV1 for NoopSink {
    fn create(&mut self, _: &EventV1, _: bool) -> Result<Option<EventV1>, WriteError> {
        Ok(None)
    }

    fn patch(&mut self, _: &EventV1, _: &[u8], _: bool) -> Result<Option<EventV1>, WriteError> {
        Ok(None)
    }
}

/// A trace record as the event an events.k8s.io/v1 recorder makes (the reason doubles as the action).
fn make(r: &Record<'_>, uuids: &mut UuidSource) -> EventV1 {
    let mut regarding = ObjectReference::default();
    let mut source = EventSource::default();
    r.fill(&mut regarding, &mut source);
    let call = EventV1Call {
        regarding,
        type_: r.type_.to_string(),
        reason: r.reason.to_string(),
        action: r.reason.to_string(),
        note: r.message.to_string(),
        ..Default::default()
    };
    make_event_v1(call, &source.component, &source.host, Time(r.t_ns), uuids).0
}

fn engine(cache_size: usize) -> SeriesEngine {
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(Time(0)));
    let options =
        EngineOptions { cache_size: NonZeroUsize::new(cache_size).unwrap(), seed: Some(1), ..Default::default() };
    SeriesEngine::new(clock, options).unwrap()
}

fn bench_observe(c: &mut Criterion) {
    let mut group = c.benchmark_group("series_observe");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(20);
    for workload in ["identical", "mixed"] {
        let records = trace(workload);
        // Making the events alone, to tell the recorder's cost from the cache's.
        group.bench_function(format!("{workload}/make_only"), |b| {
            b.iter(|| {
                let mut uuids = UuidSource::seeded(1);
                records.iter().map(|r| make(r, &mut uuids).note.len()).sum::<usize>()
            })
        });
        group.bench_function(workload, |b| {
            b.iter(|| {
                let mut eng = engine(4096);
                let mut uuids = UuidSource::seeded(1);
                for r in &records {
                    eng.observe(make(r, &mut uuids), &mut NoopSink).unwrap();
                }
                eng.stats().cache.observed
            })
        });
    }
    group.finish();
}

/// A million distinct keys through the default 4096-entry cache: the bound holds, each new key evicts one.
fn bench_distinct_keys(c: &mut Criterion) {
    const KEYS: usize = 1_000_000;
    let mut group = c.benchmark_group("series_distinct_keys");
    group.throughput(Throughput::Elements(KEYS as u64));
    group.sample_size(10);
    let template = trace("identical").swap_remove(0);
    group.bench_function("1M", |b| {
        b.iter(|| {
            let mut eng = engine(4096);
            let mut uuids = UuidSource::seeded(1);
            let mut e = make(&template, &mut uuids);
            for i in 0..KEYS {
                e.regarding.uid = i.to_string();
                eng.observe(e.clone(), &mut NoopSink).unwrap();
            }
            let st = eng.stats();
            assert_eq!(st.cache_len, 4096);
            st.cache.evicted
        })
    });
    group.finish();
}

criterion_group!(benches, bench_observe, bench_distinct_keys);
criterion_main!(benches);
