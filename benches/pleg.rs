//! criterion benches of the PLEG on a large node: 10,000 pods of 1 sandbox + 4 containers, 1 % of the
//! containers (400) changing state between listings. Run: `cargo bench --bench pleg`.
//!
//! * `diff`: the pure old-vs-new comparison of every pod (what one relist computes).
//! * `relist`: a whole `GenericPleg::relist` against an in-process runtime that alternates two listings,
//!   including the records, 400 status inspections into the cache and the sends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use kubevents::clock::FakeClock;
use kubevents::error::Error;
use kubevents::pleg::generic::{Abort, Inspection};
use kubevents::pleg::pod::{BasicStatus, StatusFields};
use kubevents::pleg::records::PodRecords;
use kubevents::pleg::{
    diff_into, Container, ContainerState, EventChannel, GenericPleg, PlegOptions, Pod, PodCache, Runtime,
};
use kubevents::time::Time;

const PODS: usize = 10_000;
const CONTAINERS: usize = 4;
/// Every 100th container changes: 1 %.
const CHANGE_EVERY: usize = 100;

/// The node's listing; `flipped` turns the changing containers from running to exited.
fn node(flipped: bool) -> Vec<Pod> {
    (0..PODS)
        .map(|p| {
            let uid = format!("8f9c2a7e-1d3b-4c5a-9e6f-{p:012}");
            let containers = (0..CONTAINERS)
                .map(|c| {
                    let changing = (p * CONTAINERS + c) % CHANGE_EVERY == 0;
                    let state = if changing && flipped { ContainerState::Exited } else { ContainerState::Running };
                    Container::new(format!("{:064x}", p * 8 + c + 1), state)
                })
                .collect();
            Pod {
                id: uid,
                name: format!("web-{p}"),
                namespace: "default".into(),
                containers,
                sandboxes: vec![Container::new(format!("{:064x}", p * 8), ContainerState::Running)],
            }
        })
        .collect()
}

fn bench_diff(c: &mut Criterion) {
    let (a, b) = (node(false), node(true));
    let mut out = Vec::with_capacity(1024);
    for (o, p) in a.iter().zip(&b) {
        diff_into(Some(o), Some(p), &mut out);
    }
    assert_eq!(out.len(), PODS * CONTAINERS / CHANGE_EVERY);
    c.bench_function("pleg/diff 10k pods x 5, 1% changed", |bch| {
        bch.iter(|| {
            out.clear();
            for (o, p) in a.iter().zip(&b) {
                diff_into(Some(o), Some(p), &mut out);
            }
            out.len()
        })
    });
}

struct Alternating {
    lists: [Vec<Arc<Pod>>; 2],
    flip: AtomicBool,
}

impl Runtime for Alternating {
    type Status = BasicStatus;
    type Error = String;
    fn get_pods(&self, _: &PodRecords) -> Result<Vec<Arc<Pod>>, Error> {
        let f = self.flip.fetch_xor(true, Ordering::Relaxed);
        Ok(self.lists[usize::from(f)].clone())
    }
    fn get_pod_status(&self, pod: &Pod) -> Result<Inspection<BasicStatus, String>, Abort> {
        let fields = StatusFields { ips: vec!["10.0.0.1".into()], ..StatusFields::default() };
        let status = BasicStatus { id: pod.id.clone(), fields };
        Ok(Inspection { status: Some(status), err: None, invalid: None })
    }
    fn timeout_error(&self, _: String) -> String {
        "timeout".into()
    }
}

fn bench_relist(c: &mut Criterion) {
    let shared = |v: Vec<Pod>| v.into_iter().map(Arc::new).collect();
    let rt = Alternating { lists: [shared(node(false)), shared(node(true))], flip: AtomicBool::new(false) };
    let channel = Arc::new(EventChannel::new(1000));
    let pleg = GenericPleg::new(
        rt,
        Arc::new(PodCache::new(false)),
        Arc::new(FakeClock::new(Time(0))),
        channel.clone(),
        PlegOptions::default(),
    )
    .expect("options");
    pleg.relist().expect("relist");
    channel.drain();
    pleg.relist().expect("relist");
    assert_eq!(channel.drain().len(), PODS * CONTAINERS / CHANGE_EVERY);
    c.bench_function("pleg/relist 10k pods x 5, 1% changed", |bch| {
        bch.iter(|| {
            pleg.relist().expect("relist");
            channel.drain().len()
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(5));
    targets = bench_diff, bench_relist
}
criterion_main!(benches);
