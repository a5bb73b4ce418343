//! A sink's health, and what an operator is told of it: one policy for every sink of both event APIs.
//!
//! client-go logs every failed attempt and every event it gives up, so an outage of the API server floods the
//! log with one line per event and retry. Here, for each sink:
//! - the first failure after a success is logged at once (WARNING): the sink, the error, and what comes next
//!   (a retry in so many seconds with so many tries left, or the event given up);
//! - while the sink keeps failing, at most one line per interval (30 s by default) sums up the failures,
//!   retries and events given up since the last line, the events pending and the age of the oldest;
//! - the first success after an announced failure is logged at once: how long writes failed, how many events
//!   were retried and how many given up;
//! - events given up are counted by reason, with one example each line; a line per event only at DEBUG;
//! - a shutdown logs one summary line.
//!
//! Failures that come and go within an interval of the last line are not announced one by one: they are
//! summed up in the next line.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Serialize, Serializer};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::sink::{Abandoned, WriteError};
use crate::sync::lock;
use crate::time::{Time, NANOS_PER_SECOND};

/// The default of the brodcasters' `log_interval`: at most one line per sink in this time while it fails.
pub const DEFAULT_LOG_INTERVAL_NANOS: i64 = 30 * NANOS_PER_SECOND;

/// The `log_interval` option, checked.
pub fn log_interval_option(nanos: i64) -> Result<i64> {
    if nanos <= 0 {
        return Err(Error::Option(format!("log_interval must be > 0 seconds, got {}", nanos as f64 / 1e9)));
    }
    Ok(nanos)
}

/// Where a pipeline's lines go (a Python logger, in the bindings).
pub trait Reporter: Send + Sync {
    fn warn(&self, message: &str);
    fn error(&self, message: &str);
    fn info(&self, message: &str) {
        let _ = message;
    }
    fn debug(&self, message: &str) {
        let _ = message;
    }
}

/// What happens to an event after a failed write.
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    /// Tried again in `in_nanos`; `tries_left` attempts remain (None: at the next round, as long as it lives).
    Retry {
        in_nanos: i64,
        tries_left: Option<u32>,
    },
    GiveUp(&'a Abandoned),
}

/// Why events were given up, as the counts by reason name them.
pub fn reason(why: &Abandoned) -> String {
    match why {
        Abandoned::GaveUp(e) => match e.status {
            Some(s) => format!("rejected (HTTP {s})"),
            None if e.kind.is_empty() => "not retryable".to_owned(),
            None => format!("not retryable ({})", e.kind),
        },
        Abandoned::RetryLimit(_) => "retry limit".to_owned(),
        Abandoned::ShutDown(_) => "failed at shutdown".to_owned(),
    }
}

/// The last error of a sink, as `stats()` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LastError {
    /// The exception's class (`ApiException`, `ConnectionRefusedError` ...), or empty for an error of the core.
    #[serde(rename = "type")]
    pub kind: String,
    pub status: Option<u16>,
    pub message: String,
}

fn rfc3339<S: Serializer>(t: &Option<Time>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&t.to_rfc3339()),
        None => s.serialize_none(),
    }
}

/// A sink's health as `stats()["sinks"]` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HealthSnapshot {
    /// The sink's class.
    pub sink: String,
    /// The last write succeeded (or none has been made yet).
    pub up: bool,
    #[serde(serialize_with = "rfc3339")]
    pub failing_since: Option<Time>,
    #[serde(serialize_with = "rfc3339")]
    pub last_success: Option<Time>,
    pub last_error: Option<LastError>,
    /// Failed writes, and events given up by reason, since the sink started.
    pub failed_writes: u64,
    pub given_up: BTreeMap<String, u64>,
}

/// What happened since the last line.
#[derive(Default)]
struct Tally {
    failures: u64,
    retries: u64,
    given_up: BTreeMap<String, u64>,
    example: Option<String>,
}

impl Tally {
    fn is_empty(&self) -> bool {
        self.failures == 0
    }

    fn given_up_total(&self) -> u64 {
        self.given_up.values().sum()
    }
}

/// The outage under way: since when, and what became of the events it touched.
struct Outage {
    since: Time,
    /// A line told of it: its end is told too.
    announced: bool,
    retries: u64,
    given_up: u64,
}

#[derive(Default)]
struct State {
    snapshot: HealthSnapshot,
    outage: Option<Outage>,
    tally: Tally,
    last_line: Option<Time>,
    /// Event times of the events waiting for a retry, for the age of the oldest.
    retrying: BTreeMap<Time, u32>,
    /// Error kinds whose traceback was shown.
    tracebacks: HashSet<String>,
}

/// One sink's health and the lines of its outages.
pub struct SinkHealth {
    /// How the lines name the sink: `<broadcaster>/<watcher> (<sink class>)`.
    label: String,
    clock: Arc<dyn Clock>,
    reporter: Arc<dyn Reporter>,
    interval: i64,
    state: Mutex<State>,
    /// Nothing to tell: up, no outage, no failure untold, no event waiting for a retry. While it holds, a
    /// success only notes its time (`last_success`) and a writer's wake-up looks at nothing else: the writes
    /// of a healthy sink take no lock here.
    quiet: AtomicBool,
    /// `HealthSnapshot::last_success` in nanoseconds, `i64::MIN` before any.
    last_success: AtomicI64,
}

/// `n` with its noun, singular or plural.
pub(crate) fn count(n: u64, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "retry") => format!("{n} retries"),
        (_, "try") => format!("{n} tries"),
        _ => format!("{n} {noun}s"),
    }
}

fn seconds(nanos: i64) -> String {
    let s = nanos as f64 / 1e9;
    if s < 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

impl SinkHealth {
    pub fn new(
        broadcaster: &str,
        watcher: &str,
        sink: String,
        clock: Arc<dyn Clock>,
        reporter: Arc<dyn Reporter>,
        interval: i64,
    ) -> Self {
        let label = format!("{broadcaster}/{watcher} ({sink})");
        let snapshot = HealthSnapshot { sink, up: true, ..Default::default() };
        SinkHealth {
            label,
            clock,
            reporter,
            interval,
            state: Mutex::new(State { snapshot, ..Default::default() }),
            quiet: AtomicBool::new(true),
            last_success: AtomicI64::new(i64::MIN),
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    fn now(&self) -> Time {
        // A clock that fails is reported where it is read for the pipeline's own work.
        self.clock.now().unwrap_or(Time(0))
    }

    /// A write succeeded; `event_time` and `tries` (failed attempts before it) of the event written.
    pub fn succeeded(&self, event_time: Option<Time>, tries: u32) {
        let now = self.now();
        self.last_success.store(now.0, Ordering::Relaxed);
        if tries == 0 && self.quiet.load(Ordering::Acquire) {
            return;
        }
        let mut st = lock(&self.state);
        if tries > 0 {
            forget(&mut st.retrying, event_time);
        }
        st.snapshot.up = true;
        st.snapshot.failing_since = None;
        let recovered = st.outage.take().filter(|o| o.announced).map(|o| {
            format!(
                "kubevents: sink {} recovered: writes failed for {}; {}, {} given up",
                self.label,
                seconds(now.since(o.since)),
                count(o.retries, "retry"),
                count(o.given_up, "event"),
            )
        });
        if recovered.is_some() {
            st.last_line = Some(now);
            st.tally = Tally::default();
        }
        self.settle(&st);
        drop(st);
        if let Some(line) = recovered {
            self.reporter.warn(&line);
        }
    }

    /// A write failed, and `step` is what becomes of its event (recorded at `event_time`, `tries` failed
    /// attempts so far, this one included); `example` describes the event, `pending` counts the events
    /// waiting to be written.
    pub fn failed(
        &self,
        e: &WriteError,
        step: Step<'_>,
        event_time: Option<Time>,
        tries: u32,
        example: &dyn Fn() -> String,
        pending: &dyn Fn() -> u64,
    ) {
        let now = self.now();
        let mut st = lock(&self.state);
        self.quiet.store(false, Ordering::Release);
        st.snapshot.up = false;
        st.snapshot.failed_writes += 1;
        st.snapshot.last_error = Some(LastError { kind: e.kind.clone(), status: e.status, message: e.message.clone() });
        st.tally.failures += 1;
        let mut per_event = None;
        match step {
            Step::Retry { .. } => {
                st.tally.retries += 1;
                if tries == 1 {
                    if let Some(t) = event_time {
                        *st.retrying.entry(t).or_default() += 1;
                    }
                }
            }
            Step::GiveUp(why) => {
                if tries > 1 {
                    forget(&mut st.retrying, event_time);
                }
                let r = reason(why);
                *st.snapshot.given_up.entry(r.clone()).or_default() += 1;
                *st.tally.given_up.entry(r).or_default() += 1;
                let text = example();
                per_event = Some(format!("kubevents: sink {} gave up an event ({why}): {text}", self.label));
                st.tally.example.get_or_insert(text);
            }
        }
        let outage = st.outage.get_or_insert(Outage { since: now, announced: false, retries: 0, given_up: 0 });
        match step {
            Step::Retry { .. } => outage.retries += 1,
            Step::GiveUp(_) => outage.given_up += 1,
        }
        let first = !outage.announced;
        if st.snapshot.failing_since.is_none() {
            st.snapshot.failing_since = Some(now);
        }
        let due = st.last_line.is_none_or(|t| now.since(t) >= self.interval);
        let line = if first && due {
            if let Some(o) = st.outage.as_mut() {
                o.announced = true;
            }
            Some(self.first_line(&mut st, e, step, example))
        } else if due {
            Some(self.summary(&st, now, pending()))
        } else {
            None
        };
        if line.is_some() {
            st.last_line = Some(now);
            st.tally = Tally::default();
        }
        drop(st);
        if let Some(l) = per_event {
            self.reporter.debug(&l);
        }
        if let Some(l) = line {
            self.reporter.warn(&l);
        }
    }

    fn first_line(&self, st: &mut State, e: &WriteError, step: Step<'_>, example: &dyn Fn() -> String) -> String {
        let mut line = format!("kubevents: sink {} failed to write an event: {e}; ", self.label);
        match step {
            Step::Retry { in_nanos, tries_left: Some(n) } => {
                let _ = write!(line, "retrying in {} ({} left)", seconds(in_nanos), count(n.into(), "try"));
            }
            Step::Retry { in_nanos, tries_left: None } => {
                let _ = write!(line, "trying again at the next round, in {}", seconds(in_nanos));
            }
            Step::GiveUp(why) => {
                let _ = write!(line, "the event is given up ({}): {}", reason(why), example());
            }
        }
        // Failures since the last line that were not told one by one (the sink was writing in between).
        let earlier = st.tally.failures.saturating_sub(1);
        if earlier > 0 {
            let _ = write!(line, "; {} since the last line", count(earlier, "other failed write"));
        }
        let _ = write!(line, "; further failures are summed up every {}", seconds(self.interval));
        if let Some(tb) = &e.traceback {
            if st.tracebacks.insert(e.kind.clone()) {
                let _ = write!(line, "\n{tb}");
            }
        }
        line
    }

    fn summary(&self, st: &State, now: Time, pending: u64) -> String {
        let t = &st.tally;
        let mut line = match &st.outage {
            Some(o) => format!("kubevents: sink {} failing for {}: ", self.label, seconds(now.since(o.since))),
            None => format!("kubevents: sink {} had failures and is writing again: ", self.label),
        };
        let _ = write!(
            line,
            "{} and {} in the last {}",
            count(t.failures, "failed write"),
            count(t.retries, "retry"),
            seconds(st.last_line.map_or(0, |l| now.since(l))),
        );
        let _ = write!(line, "; {} pending", count(pending, "event"));
        if let Some((oldest, _)) = st.retrying.first_key_value() {
            let _ = write!(line, " (the oldest retried event is {} old)", seconds(now.since(*oldest)));
        }
        if t.given_up_total() > 0 {
            let _ = write!(line, "; {} given up: {}", count(t.given_up_total(), "event"), by_reason(&t.given_up));
            if let Some(x) = &t.example {
                let _ = write!(line, "; for example {x}");
            }
        }
        if let Some(e) = &st.snapshot.last_error {
            let _ = write!(line, "; last error: {}", error_text(e));
        }
        line
    }

    /// Marks the sink quiet again once nothing is left to tell (the state's lock held).
    fn settle(&self, st: &State) {
        if st.snapshot.up && st.outage.is_none() && st.tally.is_empty() && st.retrying.is_empty() {
            self.quiet.store(true, Ordering::Release);
        }
    }

    /// When the failures not told yet are due to be summed up (`tick`), if there are any.
    pub fn next_line_at(&self) -> Option<Time> {
        if self.quiet.load(Ordering::Acquire) {
            return None;
        }
        let st = lock(&self.state);
        if st.tally.is_empty() {
            return None;
        }
        Some(st.last_line.map_or(Time(0), |t| t.add_nanos(self.interval)))
    }

    /// Called by a writer that woke up: sums up the failures not told yet, once an interval has passed.
    pub fn tick(&self, pending: &dyn Fn() -> u64) {
        if self.quiet.load(Ordering::Acquire) {
            return;
        }
        let now = self.now();
        let mut st = lock(&self.state);
        if st.tally.is_empty() || st.last_line.is_some_and(|t| now.since(t) < self.interval) {
            return;
        }
        let line = self.summary(&st, now, pending());
        st.last_line = Some(now);
        st.tally = Tally::default();
        if let Some(o) = st.outage.as_mut() {
            o.announced = true;
        }
        self.settle(&st);
        drop(st);
        self.reporter.warn(&line);
    }

    /// The sink's part of a shutdown summary, and whether it gave events up; None when it never failed.
    pub fn shutdown_text(&self) -> Option<(String, bool)> {
        let st = lock(&self.state);
        let s = &st.snapshot;
        if s.failed_writes == 0 {
            return None;
        }
        let given_up: u64 = s.given_up.values().sum();
        let mut text = format!("sink {}: {}", self.label, count(s.failed_writes, "failed write"));
        if given_up > 0 {
            let _ = write!(text, ", {} given up ({})", count(given_up, "event"), by_reason(&s.given_up));
        }
        if !s.up {
            if let Some(e) = &s.last_error {
                let _ = write!(text, ", last error: {}", error_text(e));
            }
        }
        Some((text, given_up > 0))
    }

    pub fn snapshot(&self) -> HealthSnapshot {
        let last = self.last_success.load(Ordering::Relaxed);
        HealthSnapshot { last_success: (last != i64::MIN).then_some(Time(last)), ..lock(&self.state).snapshot.clone() }
    }
}

fn forget(retrying: &mut BTreeMap<Time, u32>, event_time: Option<Time>) {
    let Some(t) = event_time else { return };
    if let Some(n) = retrying.get_mut(&t) {
        *n -= 1;
        if *n == 0 {
            retrying.remove(&t);
        }
    }
}

fn by_reason(m: &BTreeMap<String, u64>) -> String {
    m.iter().map(|(r, n)| format!("{n} {r}")).collect::<Vec<_>>().join(", ")
}

fn error_text(e: &LastError) -> String {
    let first = e.message.lines().next().unwrap_or_default();
    match e.status {
        Some(s) => format!("HTTP {s}: {first}"),
        None => first.to_owned(),
    }
}

#[cfg(test)]
mod tests;
