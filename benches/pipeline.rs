//! criterion bench of the recording pipeline without Python: every record of the `mixed` workload goes
//! through `EventBroadcaster::record` (make the event, distribute), the sink watcher (correlate, write to a
//! sink that answers at once, `update_state`) and `shutdown`. Run: `cargo bench --bench pipeline`.

use std::sync::Arc;

#[allow(dead_code)] // each bench uses part of it
mod common;

use common::N;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kubevents::broadcaster::{EventBroadcaster, Occurrence, Options, Reporter};
use kubevents::clock::RealClock;
use kubevents::correlator::{CorrelatorOptions, KeyFuncs};
use kubevents::event::{Event, EventSource, EventType, ObjectReference};
use kubevents::pipeline::PipelineOptions;
use kubevents::sim::JsonLines;
use kubevents::sink::{EventSink, RetryPolicy, WriteError};
use kubevents::time::Time;
use kubevents::watch::FullChannel;

struct Quiet;

impl Reporter for Quiet {
    fn warn(&self, _: &str) {}
    fn error(&self, _: &str) {}
}

struct Noop;

impl EventSink for Noop {
    fn create(&self, e: &Event) -> Result<Event, WriteError> {
        Ok(e.clone())
    }
    fn patch(&self, e: &Event, _: &[u8]) -> Result<Event, WriteError> {
        Ok(e.clone())
    }
}

fn occurrences() -> Vec<Occurrence> {
    let path = common::trace_path("mixed");
    let mut lines = JsonLines::new(std::io::BufReader::new(std::fs::File::open(path).expect("open trace")));
    let mut out = Vec::with_capacity(N);
    while let Some(r) = lines.next_record() {
        let r = r.expect("parse trace");
        let i = &r.involved;
        out.push(Occurrence {
            reference: ObjectReference {
                kind: i.kind.to_string(),
                namespace: i.namespace.to_string(),
                name: i.name.to_string(),
                uid: i.uid.to_string(),
                api_version: i.api_version.to_string(),
                resource_version: i.resource_version.to_string(),
                field_path: i.field_path.to_string(),
            },
            annotations: None,
            type_: EventType::parse(&r.type_).unwrap_or(EventType::Normal),
            reason: r.reason.to_string(),
            message: r.message.to_string(),
            time: Time(r.t_ns),
            source: Arc::new(EventSource {
                component: r.source_component.to_string(),
                host: r.source_host.to_string(),
            }),
        });
    }
    out
}

fn bench_pipeline(c: &mut Criterion) {
    let all = occurrences();
    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(10);
    group.bench_function("mixed/record-to-sink", |b| {
        b.iter_batched(
            || all.clone(),
            |occurrences| {
                let options = Options {
                    pipeline: PipelineOptions {
                        name: "bench".into(),
                        queue_length: N,
                        full_channel: FullChannel::Drop,
                        clock: Arc::new(RealClock),
                        catch_up_wait: kubevents::broadcaster::DEFAULT_CATCH_UP_WAIT,
                        log_interval: kubevents::health::DEFAULT_LOG_INTERVAL_NANOS,
                    },
                    retry: RetryPolicy::default(),
                    correlator: CorrelatorOptions::default(),
                };
                let b = EventBroadcaster::new(options, Arc::new(Quiet)).unwrap();
                b.start_recording_to_sink(Arc::new(Noop), 1, KeyFuncs::default()).unwrap();
                for o in occurrences {
                    b.record(o).unwrap();
                }
                assert!(b.shutdown(None));
                assert_eq!(b.stats().pending, 0);
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_pipeline);
criterion_main!(benches);
