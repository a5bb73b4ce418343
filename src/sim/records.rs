//! Where a replay's records come from: a JSON Lines file read here, or batches of records that the caller
//! converts (the binding, from Python objects, holding the GIL only for that).

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::{Arc, Mutex, TryLockError};

use serde::Serialize;

use super::cluster::Replayer;
use super::counts::Action;
use super::simulator::{Replay, Simulator, Step};
use super::table::{BatchBuilder, DecisionColumns, Table};
use super::trace::{JsonLines, Record};
use crate::error::{Error, Result};
use crate::sync::lock;

/// Records per batch: a batch shorter than this ends the trace.
pub const BATCH: usize = 1024;

/// Appends up to `BATCH` records to the vector.
pub type NextBatch = Box<dyn FnMut(&mut Vec<Record<'static>>) -> Result<()> + Send>;

pub enum Records {
    File(JsonLines<BufReader<File>>),
    Batches(NextBatch),
    /// An Arrow table, read in place from its next row (batch, row within it).
    Table(Arc<Table>, usize, usize),
}

impl Records {
    /// A JSON Lines file; errors name the path.
    pub fn open(path: &Path) -> Result<Records> {
        let file = File::open(path)
            .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))))?;
        Ok(Records::File(JsonLines::named(BufReader::new(file), &path.display().to_string())))
    }

    /// Replays the next `BATCH` records, or the rest, through `sim`, handing each step to `each`; false once
    /// the trace has ended.
    fn step_batch<R: Replay>(
        &mut self,
        sim: &mut R,
        batch: &mut Vec<Record<'static>>,
        mut each: impl FnMut(Step, &Simulator),
    ) -> Result<bool> {
        match self {
            Records::File(lines) => {
                for _ in 0..BATCH {
                    let Some(record) = lines.next_record() else { return Ok(false) };
                    let (step, sim) = sim.replay(&record?)?;
                    each(step, sim);
                }
                Ok(true)
            }
            Records::Batches(next) => {
                batch.clear();
                next(batch)?;
                for record in batch.iter() {
                    let (step, sim) = sim.replay(record)?;
                    each(step, sim);
                }
                Ok(batch.len() == BATCH)
            }
            Records::Table(table, at_batch, at_row) => {
                let mut record = Record::default();
                let mut left = BATCH;
                while left > 0 && *at_batch < table.batches() {
                    let view = table.view(*at_batch);
                    while *at_row < view.rows() && left > 0 {
                        view.fill(*at_row, &mut record)?;
                        let (step, sim) = sim.replay(&record)?;
                        each(step, sim);
                        *at_row += 1;
                        left -= 1;
                    }
                    if *at_row == view.rows() {
                        *at_batch += 1;
                        *at_row = 0;
                    }
                }
                Ok(*at_batch < table.batches())
            }
        }
    }

    /// Replays the whole trace through `sim`.
    pub fn run<R: Replay>(&mut self, sim: &mut R) -> Result<()> {
        if let Records::File(lines) = self {
            while let Some(record) = lines.next_record() {
                sim.replay(&record?)?;
            }
            return Ok(());
        }
        if let Records::Table(table, 0, 0) = self {
            return table.each(|r| sim.replay(r).map(|_| true));
        }
        let mut batch = Vec::with_capacity(BATCH);
        while self.step_batch(sim, &mut batch, |_, _| {})? {}
        Ok(())
    }

    /// The trace as a table (in batches of up to 65,536 rows; a table stays as it is), for replays that split
    /// it: its columns take less memory than records.
    pub fn into_table(self) -> Result<Arc<Table>> {
        const ROWS: usize = 1 << 16;
        let mut builder = BatchBuilder::default();
        let mut batches = Vec::new();
        let mut flush = |b: &mut BatchBuilder, at_least: usize| {
            if b.rows() >= at_least.max(1) {
                batches.push(b.finish(true));
            }
        };
        match self {
            Records::Table(table, ..) => return Ok(table),
            Records::File(mut lines) => {
                while let Some(r) = lines.next_record() {
                    builder.push(&r?);
                    flush(&mut builder, ROWS);
                }
            }
            Records::Batches(mut next) => {
                let mut batch = Vec::with_capacity(BATCH);
                loop {
                    batch.clear();
                    next(&mut batch)?;
                    for r in &batch {
                        builder.push(r);
                    }
                    flush(&mut builder, ROWS);
                    if batch.len() < BATCH {
                        break;
                    }
                }
            }
        }
        flush(&mut builder, 1);
        let schema = BatchBuilder::default().finish(true).schema();
        Ok(Arc::new(Table::new(&schema, batches)?))
    }

    /// Every record, for replays that go over the trace many times (sweeps).
    pub fn collect(self) -> Result<Vec<Record<'static>>> {
        let mut out = Vec::new();
        match self {
            Records::File(mut lines) => {
                while let Some(r) = lines.next_record() {
                    out.push(r?.into_owned());
                }
            }
            Records::Batches(mut next) => loop {
                let before = out.len();
                next(&mut out)?;
                if out.len() - before < BATCH {
                    break;
                }
            },
            Records::Table(table, ..) => table.each(|r| {
                out.push(r.clone().into_owned());
                Ok(true)
            })?,
        }
        Ok(out)
    }
}

/// What one input event became, as `Simulation.decisions()` yields it. `name`, `count`, `message` and
/// `patch` are None for a skip, `patch` also for a create; the source is the input event's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub index: u64,
    pub action: Action,
    pub name: Option<String>,
    pub count: Option<i32>,
    pub message: Option<String>,
    pub patch: Option<String>,
    pub source_component: String,
    pub source_host: String,
}

impl Decision {
    fn new(step: Step, sim: &Simulator) -> Decision {
        let (name, count, message) = match step.action {
            Action::Skip => (None, None, None),
            _ => {
                let e = sim.event();
                (Some(e.metadata.name.clone()), Some(e.count), Some(e.message.clone()))
            }
        };
        let source = &sim.event().source;
        Decision {
            index: step.index,
            action: step.action,
            name,
            count,
            message,
            patch: sim.patch().map(|p| String::from_utf8_lossy(p).into_owned()),
            source_component: source.component.clone(),
            source_host: source.host.clone(),
        }
    }
}

/// The decisions of a replay, computed a batch at a time.
pub struct Decisions {
    sim: Replayer,
    records: Records,
    batch: Vec<Record<'static>>,
    ready: VecDeque<Decision>,
    done: bool,
}

impl Decisions {
    pub fn new(sim: impl Into<Replayer>, records: Records) -> Self {
        Decisions { sim: sim.into(), records, batch: Vec::new(), ready: VecDeque::new(), done: false }
    }

    /// The next decision if it is computed already; `next()` computes more.
    pub fn next_ready(&mut self) -> Option<Decision> {
        self.ready.pop_front()
    }

    /// Every decision not taken yet, as columns; the iterator is exhausted afterwards.
    pub fn drain_columns(&mut self) -> Result<DecisionColumns> {
        let mut cols = DecisionColumns::default();
        for d in self.ready.drain(..) {
            let event = match (&d.name, d.count, &d.message) {
                (Some(n), Some(c), Some(m)) => Some((n.as_str(), c, m.as_str())),
                _ => None,
            };
            cols.push(d.index, d.action, event, d.patch.as_deref(), (&d.source_component, &d.source_host));
        }
        let Decisions { sim, records, batch, done, .. } = self;
        while !*done {
            *done = !records.step_batch(sim, batch, |step, sim| cols.push_step(&step, sim))?;
        }
        Ok(cols)
    }
}

impl Iterator for Decisions {
    type Item = Result<Decision>;

    fn next(&mut self) -> Option<Result<Decision>> {
        if self.ready.is_empty() && !self.done {
            let Decisions { sim, records, batch, ready, done } = self;
            match records.step_batch(sim, batch, |step, sim| ready.push_back(Decision::new(step, sim))) {
                Ok(more) => *done = !more,
                Err(e) => return Some(Err(e)),
            }
        }
        self.ready.pop_front().map(Ok)
    }
}

/// `Decisions` for callers on several threads, one of which must never wait for another's batch (the
/// binding's, which holds the GIL).
pub struct SharedDecisions(Mutex<Decisions>);

impl SharedDecisions {
    pub fn new(decisions: Decisions) -> Self {
        SharedDecisions(Mutex::new(decisions))
    }

    /// The next decision if it is computed already and no thread is computing more; else None.
    pub fn ready(&self) -> Option<Decision> {
        match self.0.try_lock() {
            Ok(mut d) => d.next_ready(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().next_ready(),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    pub fn next(&self) -> Option<Result<Decision>> {
        lock(&self.0).next()
    }

    pub fn drain_columns(&self) -> Result<DecisionColumns> {
        lock(&self.0).drain_columns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correlator::{CorrelatorOptions, KeyFuncs};
    use crate::sim::InvolvedRecord;

    fn records(n: i64) -> Vec<Record<'static>> {
        (0..n)
            .map(|i| Record {
                t_ns: 1_700_000_000_000_000_000 + i * 1_000_000,
                involved: InvolvedRecord {
                    kind: "Pod".into(),
                    name: format!("p{}", i % 7).into(),
                    ..Default::default()
                },
                reason: "BackOff".into(),
                message: format!("m{}", i % 3).into(),
                ..Default::default()
            })
            .collect()
    }

    /// Batches of the records as a converting caller hands them over, counting the calls.
    fn batches(all: Vec<Record<'static>>, calls: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> Records {
        let mut rest = all.into_iter();
        Records::Batches(Box::new(move |out| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            out.extend(rest.by_ref().take(BATCH));
            Ok(())
        }))
    }

    fn simulator() -> Simulator {
        Simulator::new(CorrelatorOptions { burst: 5, ..Default::default() }, KeyFuncs::default(), true).unwrap()
    }

    #[test]
    fn a_report_says_which_option_its_parts_need() {
        let run = |track: bool, metrics: bool| {
            let mut sim = Simulator::new(CorrelatorOptions::default(), KeyFuncs::default(), track).unwrap();
            if metrics {
                sim = sim.with_metrics(1_000_000_000);
            }
            batches(records(20), std::sync::Arc::default()).run(&mut sim).unwrap();
            sim.report()
        };
        let plain = run(false, false);
        assert!(plain.top_objects(3).unwrap_err().to_string().contains("per_object=True"));
        assert!(plain.metrics().unwrap_err().to_string().starts_with("metrics were not collected"));
        assert!(plain.object_metrics(None).unwrap_err().to_string().starts_with("metrics were not collected"));
        let tracked = run(true, false);
        assert_eq!(tracked.top_objects(3).unwrap().len(), 3);
        assert_eq!(tracked.top_objects(100).unwrap().len(), 7);
        let measured = run(false, true);
        assert!(measured.metrics().is_ok());
        assert!(measured.object_metrics(None).unwrap_err().to_string().starts_with("per-object metrics were not kept"));
        let both = run(true, true);
        assert_eq!((both.object_metrics(Some(2)).unwrap().len(), both.object_metrics(None).unwrap().len()), (2, 7));
    }

    #[test]
    fn shared_decisions_hand_out_ready_ones_without_waiting() {
        let calls = std::sync::Arc::default();
        let d = SharedDecisions::new(Decisions::new(simulator(), batches(records(5), calls)));
        assert!(d.ready().is_none(), "nothing is computed before the first next()");
        assert_eq!(d.next().unwrap().unwrap().index, 0);
        let held = d.0.lock().unwrap();
        assert!(d.ready().is_none(), "a caller computing more is never waited for");
        drop(held);
        assert_eq!(d.ready().unwrap().index, 1);
        assert_eq!(d.drain_columns().unwrap().finish().num_rows(), 3);
        assert!(d.next().is_none());
    }

    #[test]
    fn batches_replay_every_record_and_stop_at_a_short_batch() {
        for n in [0, 1, BATCH as i64, 2 * BATCH as i64 + 5] {
            let calls = std::sync::Arc::default();
            let mut sim = simulator();
            batches(records(n), std::sync::Arc::clone(&calls)).run(&mut sim).unwrap();
            let mut one_by_one = simulator();
            for r in &records(n) {
                one_by_one.step(r).unwrap();
            }
            assert_eq!(sim.report(), one_by_one.report(), "n={n}");
            assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), n as usize / BATCH + 1, "n={n}");
            let collected = batches(records(n), std::sync::Arc::default()).collect().unwrap();
            assert_eq!(collected, records(n));
        }
    }

    #[test]
    fn decisions_follow_the_replay() {
        let n = BATCH as i64 + 10;
        let decisions: Vec<_> =
            Decisions::new(simulator(), batches(records(n), std::sync::Arc::default())).map(Result::unwrap).collect();
        assert_eq!(decisions.len(), n as usize);
        let mut lazy = Decisions::new(simulator(), batches(records(n), std::sync::Arc::default()));
        assert_eq!(lazy.next_ready(), None, "nothing is computed before next()");
        assert_eq!(lazy.next().unwrap().unwrap(), decisions[0]);
        assert_eq!(lazy.next_ready().as_ref(), Some(&decisions[1]), "next() computed a batch");
        assert!(decisions.iter().enumerate().all(|(i, d)| d.index == i as u64));
        let mut sim = simulator();
        for (r, d) in records(n).iter().zip(&decisions) {
            let step = sim.step(r).unwrap();
            assert_eq!(d.action, step.action);
            assert_eq!(d.count.is_none(), step.action == Action::Skip);
        }
        let first_patch = decisions.iter().find(|d| d.action == Action::Patch).unwrap();
        assert!(first_patch.patch.as_deref().unwrap().starts_with(r#"{"count":2"#), "{first_patch:?}");
        assert!(decisions.iter().any(|d| d.action == Action::Skip));
    }

    /// The records as a table of two batches, split at `at`.
    fn table(all: &[Record<'static>], at: usize) -> Records {
        let (a, b) =
            (super::super::table::records_to_batch(&all[..at]), super::super::table::records_to_batch(&all[at..]));
        Records::Table(Arc::new(Table::new(&a.schema(), vec![a, b]).unwrap()), 0, 0)
    }

    #[test]
    fn a_table_replays_and_decides_as_its_records() {
        let n = 2 * BATCH + 5;
        let all = records(n as i64);
        let mut sim = simulator();
        table(&all, 700).run(&mut sim).unwrap();
        let mut want = simulator();
        batches(all.clone(), std::sync::Arc::default()).run(&mut want).unwrap();
        assert_eq!(sim.report(), want.report());
        assert_eq!(table(&all, BATCH).collect().unwrap(), all);
        let decisions: Vec<_> =
            Decisions::new(simulator(), batches(all.clone(), std::sync::Arc::default())).map(Result::unwrap).collect();
        let mut from_table = Decisions::new(simulator(), table(&all, 700));
        let first = from_table.next().unwrap().unwrap();
        assert_eq!(first, decisions[0]);
        let rest = from_table.drain_columns().unwrap().finish();
        assert_eq!(rest.num_rows(), n - 1, "the rest, across both batches");
        assert!(from_table.next().is_none());
    }

    #[test]
    fn an_error_of_the_caller_ends_the_replay_with_it() {
        let mut records = Records::Batches(Box::new(|_| Err(Error::value("trace item 3", "bad"))));
        let err = records.run(&mut simulator()).unwrap_err();
        assert_eq!(err.to_string(), "trace item 3: bad");
    }

    #[test]
    fn a_missing_file_is_named() {
        let Err(err) = Records::open(Path::new("/nonexistent/trace.jsonl")) else { panic!("opened") };
        assert!(err.to_string().starts_with("/nonexistent/trace.jsonl: "), "{err}");
    }
}
