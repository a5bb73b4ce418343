//! Parameter sweeps: one trace in memory, replayed under many correlator options on a pool of threads.
//!
//! Workers take the next combination from a shared counter, so the pool stays busy when replays differ in
//! length. Results travel back to the calling thread, which hands each one to a callback as it arrives (for
//! progress) and is woken every `TICK` with no result, so a caller can stop the sweep (on an interrupt, say).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::cluster::{BySource, Correlators, Setup};
use super::metrics::{self, Summary};
use super::simulator::Replay;
use super::table::Table;
use super::trace::Record;
use crate::correlator::CorrelatorOptions;
use crate::error::{count_option, Error, Result};

/// How often the calling thread wakes while no replay finishes.
pub const TICK: Duration = Duration::from_millis(100);

/// Records replayed between two looks at the stop flag.
const STOP_EVERY: usize = 4096;

/// A trace held in memory, which the replays of a sweep, or the threads of one replay, read at once.
pub trait SharedTrace: Sync {
    /// Hands every record to `f` in order, until `f` returns false or fails.
    fn each(&self, f: impl FnMut(&Record<'_>) -> Result<bool>) -> Result<()>;

    /// The number of records.
    fn record_count(&self) -> usize;

    /// Hands the records whose index `wanted` accepts to `f` with their index, in order, until `f` returns
    /// false or fails; the others are not read.
    fn each_where(
        &self,
        wanted: impl FnMut(usize) -> bool,
        f: impl FnMut(usize, &Record<'_>) -> Result<bool>,
    ) -> Result<()>;
}

impl SharedTrace for [Record<'static>] {
    fn record_count(&self) -> usize {
        self.len()
    }

    fn each(&self, mut f: impl FnMut(&Record<'_>) -> Result<bool>) -> Result<()> {
        self.each_where(|_| true, |_, r| f(r))
    }

    fn each_where(
        &self,
        mut wanted: impl FnMut(usize) -> bool,
        mut f: impl FnMut(usize, &Record<'_>) -> Result<bool>,
    ) -> Result<()> {
        for (i, r) in self.iter().enumerate() {
            if wanted(i) && !f(i, r)? {
                break;
            }
        }
        Ok(())
    }
}

impl SharedTrace for Table {
    fn record_count(&self) -> usize {
        usize::try_from(self.rows()).unwrap_or(usize::MAX)
    }

    fn each(&self, f: impl FnMut(&Record<'_>) -> Result<bool>) -> Result<()> {
        Table::each(self, f)
    }

    fn each_where(
        &self,
        wanted: impl FnMut(usize) -> bool,
        f: impl FnMut(usize, &Record<'_>) -> Result<bool>,
    ) -> Result<()> {
        Table::each_where(self, wanted, f)
    }
}

/// Replays `trace` under `options` with `correlators`, collecting metrics with windows of `window_ns`; None
/// once stopped.
pub fn replay<T: SharedTrace + ?Sized>(
    trace: &T,
    options: CorrelatorOptions,
    correlators: Correlators,
    window_ns: i64,
    stop: &AtomicBool,
) -> Result<Option<Summary>> {
    let setup = Setup::new(options, false, Some(window_ns));
    match correlators {
        Correlators::Shared => {
            let mut sim = setup.simulator(false)?;
            Ok(run(trace, &mut sim, stop)?.then(|| sim.summary()).flatten())
        }
        Correlators::PerSource => {
            let mut by = BySource::new(setup);
            if !run(trace, &mut by, stop)? {
                return Ok(None);
            }
            let parts = by.into_parts();
            let metrics: Vec<_> = parts.iter().filter_map(|(_, p)| p.metrics.as_ref()).collect();
            Ok(Some(metrics::merge(&metrics, window_ns).0))
        }
    }
}

/// Replays the whole trace unless stopped; false once stopped.
fn run<T: SharedTrace + ?Sized, R: Replay>(trace: &T, sim: &mut R, stop: &AtomicBool) -> Result<bool> {
    let (mut n, mut stopped) = (0usize, false);
    trace.each(|r| {
        if n % STOP_EVERY == 0 && stop.load(Ordering::Relaxed) {
            stopped = true;
            return Ok(false);
        }
        n += 1;
        sim.replay(r).map(|_| true)
    })?;
    Ok(!stopped)
}

/// What the calling thread is told while the sweep runs.
pub enum SweepProgress<'a> {
    /// Combination `index` finished with this summary.
    Done(usize, &'a Summary),
    /// Nothing finished for a `TICK`.
    Idle,
}

/// The `workers` option of a sweep, its threads: `requested`, at least 1, or one per CPU.
pub fn sweep_workers_option(requested: Option<i64>) -> Result<usize> {
    match requested {
        Some(w) => Ok(count_option("workers", w)?.get()),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// Replays `records` once per entry of `grid` (each with `correlators`) on `workers` threads; the results are
/// in grid order. `on_progress` runs on the calling thread; returning an error stops the workers and the
/// sweep returns it.
pub fn sweep<T: SharedTrace + ?Sized, E: From<Error>>(
    records: &T,
    grid: &[CorrelatorOptions],
    correlators: Correlators,
    window_ns: i64,
    workers: usize,
    mut on_progress: impl FnMut(SweepProgress<'_>) -> std::result::Result<(), E>,
) -> std::result::Result<Vec<Summary>, E> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let mut results: Vec<Option<Summary>> = vec![None; grid.len()];
    let workers = workers.clamp(1, grid.len().max(1));
    let outcome = std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<(usize, Result<Option<Summary>>)>();
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= grid.len() || stop.load(Ordering::Relaxed) {
                    break;
                }
                let r = replay(records, grid[i], correlators, window_ns, stop);
                let failed = r.is_err();
                if tx.send((i, r)).is_err() || failed {
                    break;
                }
            });
        }
        drop(tx);
        let mut done = 0;
        let outcome = loop {
            if done == grid.len() {
                break Ok(());
            }
            let step = match rx.recv_timeout(TICK) {
                Ok((i, Ok(Some(summary)))) => {
                    done += 1;
                    results[i] = Some(summary);
                    on_progress(SweepProgress::Done(i, &summary))
                }
                // Replays stop early only once the sweep is stopping.
                Ok((_, Ok(None))) => Ok(()),
                Ok((_, Err(e))) => Err(E::from(e)),
                Err(mpsc::RecvTimeoutError::Timeout) => on_progress(SweepProgress::Idle),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    Err(E::from(Error::value("", "a replay thread ended without a result")))
                }
            };
            if let Err(e) = step {
                break Err(e);
            }
        };
        stop.store(true, Ordering::Relaxed);
        outcome
    });
    outcome?;
    Ok(results.into_iter().map(|r| r.expect("every combination finished")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::InvolvedRecord;

    fn records() -> Vec<Record<'static>> {
        (0..200i64)
            .map(|i| Record {
                t_ns: 1_700_000_000_000_000_000 + i * 100_000_000,
                source_component: "kubelet".into(),
                involved: InvolvedRecord {
                    kind: "Pod".into(),
                    name: format!("p{}", i % 3).into(),
                    ..Default::default()
                },
                reason: "BackOff".into(),
                message: format!("m{}", i % 13).into(),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn workers_are_at_least_one_and_default_to_the_cpus() {
        assert_eq!(sweep_workers_option(Some(3)).unwrap(), 3);
        assert_eq!(sweep_workers_option(Some(0)).unwrap_err().to_string(), "workers must be >= 1, got 0");
        assert!(matches!(sweep_workers_option(Some(-2)), Err(Error::Option(_))));
        assert!(sweep_workers_option(None).unwrap() >= 1);
    }

    #[test]
    fn sweep_equals_one_replay_per_combination() {
        let records = records();
        let grid: Vec<_> = [1, 5, 25, 100]
            .iter()
            .flat_map(|&burst| [2, 10].map(|max_events| CorrelatorOptions { burst, max_events, ..Default::default() }))
            .collect();
        let mut seen = vec![];
        let got = sweep::<_, Error>(&records[..], &grid, Correlators::Shared, 1_000_000_000, 2, |p| {
            if let SweepProgress::Done(i, _) = p {
                seen.push(i);
            }
            Ok(())
        })
        .unwrap();
        seen.sort();
        assert_eq!(seen, (0..grid.len()).collect::<Vec<_>>());
        let never = AtomicBool::new(false);
        for (options, summary) in grid.iter().zip(&got) {
            assert_eq!(
                Some(*summary),
                replay(&records[..], *options, Correlators::Shared, 1_000_000_000, &never).unwrap()
            );
        }
        assert_ne!(got[0].writes(), got[6].writes());
    }

    #[test]
    fn an_error_from_the_callback_stops_the_sweep() {
        let records = records();
        let grid = vec![CorrelatorOptions::default(); 50];
        let mut calls = 0;
        let err = sweep::<_, Error>(&records[..], &grid, Correlators::PerSource, 1, 2, |_| {
            calls += 1;
            Err(Error::value("", "stop"))
        })
        .unwrap_err();
        assert_eq!(calls, 1);
        assert!(err.to_string().contains("stop"), "{err}");
    }
}
