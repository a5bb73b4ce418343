//! Where a replay's records come from: a JSON Lines file read here, or batches of records that the caller
//! converts (the binding, from Python objects, holding the GIL only for that).

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde::Serialize;

use super::counts::Action;
use super::simulator::{Simulator, Step};
use super::trace::{JsonLines, Record};
use crate::error::{Error, Result};

/// Records per batch: a batch shorter than this ends the trace.
pub const BATCH: usize = 1024;

/// Appends up to `BATCH` records to the vector.
pub type NextBatch = Box<dyn FnMut(&mut Vec<Record<'static>>) -> Result<()> + Send>;

pub enum Records {
    File(JsonLines<BufReader<File>>),
    Batches(NextBatch),
}

impl Records {
    /// A JSON Lines file; errors name the path.
    pub fn open(path: &Path) -> Result<Records> {
        let file = File::open(path)
            .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))))?;
        Ok(Records::File(JsonLines::new(BufReader::new(file))))
    }

    /// Replays the next `BATCH` records, or the rest, through `sim`, handing each step to `each`; false once
    /// the trace has ended.
    fn step_batch(
        &mut self,
        sim: &mut Simulator,
        batch: &mut Vec<Record<'static>>,
        mut each: impl FnMut(Step, &Simulator),
    ) -> Result<bool> {
        match self {
            Records::File(lines) => {
                for _ in 0..BATCH {
                    let Some(record) = lines.next_record() else { return Ok(false) };
                    let step = sim.step(&record?)?;
                    each(step, sim);
                }
                Ok(true)
            }
            Records::Batches(next) => {
                batch.clear();
                next(batch)?;
                for record in batch.iter() {
                    let step = sim.step(record)?;
                    each(step, sim);
                }
                Ok(batch.len() == BATCH)
            }
        }
    }

    /// Replays the whole trace through `sim`.
    pub fn run(&mut self, sim: &mut Simulator) -> Result<()> {
        if let Records::File(lines) = self {
            return sim.run_jsonl(lines).map(drop);
        }
        let mut batch = Vec::with_capacity(BATCH);
        while self.step_batch(sim, &mut batch, |_, _| {})? {}
        Ok(())
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
        }
        Ok(out)
    }
}

/// What one input event became, as `Simulation.decisions()` yields it. `name`, `count`, `message` and
/// `patch` are None for a skip, `patch` also for a create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub index: u64,
    pub action: Action,
    pub name: Option<String>,
    pub count: Option<i32>,
    pub message: Option<String>,
    pub patch: Option<String>,
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
        Decision {
            index: step.index,
            action: step.action,
            name,
            count,
            message,
            patch: sim.patch().map(|p| String::from_utf8_lossy(p).into_owned()),
        }
    }
}

/// The decisions of a replay, computed a batch at a time.
pub struct Decisions {
    sim: Simulator,
    records: Records,
    batch: Vec<Record<'static>>,
    ready: VecDeque<Decision>,
    done: bool,
}

impl Decisions {
    pub fn new(sim: Simulator, records: Records) -> Self {
        Decisions { sim, records, batch: Vec::new(), ready: VecDeque::new(), done: false }
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
