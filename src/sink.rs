//! Writing events to an API server: the sink protocol, client-go's error classification and its retry decisions
//! (`recordToSink` / `recordEvent` in `tools/record/event.go`).
//!
//! One error model, classification and retry schedule for both event APIs: the core/v1 writer
//! (`crate::broadcaster`) and `tools/events` (`crate::series`) decide every retry with `Attempts`.

use crate::sync::lock;
use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand::Rng;

use crate::clock::{Clock, StopSignal};
use crate::error::{count_option, Error};
use crate::event::Event;
use crate::time::{check_duration, Time, NANOS_PER_SECOND};

/// Client-go's `maxTriesPerEvent` (`tools/record` and `tools/events` alike).
pub const DEFAULT_MAX_TRIES: u32 = 12;
/// Client-go's `defaultSleepDuration`, 10 s (`tools/record` and `tools/events` alike).
pub const DEFAULT_SLEEP_NANOS: i64 = 10_000_000_000;
/// How long a client sink gives each request unless told otherwise: client-go's REST client has no limit,
/// but it does not hang on a dead connection as the Python clients, which wait forever, would.
pub const DEFAULT_REQUEST_TIMEOUT_NANOS: i64 = 30 * NANOS_PER_SECOND;
/// The longest request timeout, 1e9 s: a socket timeout holds at most about 292 years.
pub const MAX_REQUEST_TIMEOUT_NANOS: i64 = 1_000_000_000 * NANOS_PER_SECOND;

/// The `request_timeout` option of the client sinks, checked: more than 0, at most `MAX_REQUEST_TIMEOUT_NANOS`.
pub fn request_timeout_option(nanos: i64) -> crate::error::Result<i64> {
    check_duration(nanos, "request_timeout", true)?;
    if nanos > MAX_REQUEST_TIMEOUT_NANOS {
        let (max, got) = (MAX_REQUEST_TIMEOUT_NANOS / NANOS_PER_SECOND, nanos as f64 / NANOS_PER_SECOND as f64);
        return Err(Error::Option(format!("request_timeout must be <= {max} seconds, got {got}")));
    }
    Ok(nanos)
}

/// What to do after a failed write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Try again after sleeping (connection errors, timeouts, 429, 5xx).
    Retry,
    /// Abandon the event (the server rejected it, or the request cannot be built).
    GiveUp,
}

/// A failed write, with the HTTP status when the error carried one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteError {
    pub status: Option<u16>,
    pub verdict: Verdict,
    pub message: String,
    /// The class of the exception the sink raised (`ApiException`, `ConnectionRefusedError` ...); empty for an
    /// error of the core.
    pub kind: String,
    /// The traceback of an exception that is not an answer of the server, the first time it is seen.
    pub traceback: Option<String>,
}

impl WriteError {
    /// An error answered by the server with `status`.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        WriteError::new(Some(status), verdict_for_status(status), message)
    }

    pub fn retry(message: impl Into<String>) -> Self {
        WriteError::new(None, Verdict::Retry, message)
    }

    pub fn give_up(message: impl Into<String>) -> Self {
        WriteError::new(None, Verdict::GiveUp, message)
    }

    fn new(status: Option<u16>, verdict: Verdict, message: impl Into<String>) -> Self {
        WriteError { status, verdict, message: message.into(), kind: String::new(), traceback: None }
    }

    /// The error with the class of the exception it came from.
    pub fn with_kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = kind.into();
        self
    }

    /// A failed sink call: its HTTP `status` when it has one in 100..=599 (an answer; the message then is the
    /// `Status` in `body` if there is one; `ApiException(status=0)` is the client's own error), else it gives
    /// up when the call itself was `invalid` and is retried otherwise.
    pub fn from_call(status: Option<i64>, body: Option<&[u8]>, invalid: bool, message: String) -> Self {
        match status {
            Some(s @ 100..=599) => WriteError::status(s as u16, body.and_then(status_text).unwrap_or(message)),
            _ if invalid => WriteError::give_up(message),
            _ => WriteError::retry(message),
        }
    }

    /// The sink raised `name` (`KeyboardInterrupt`, `SystemExit`): never retried; the caller raises it again.
    pub fn interrupted(name: &str) -> Self {
        WriteError::give_up(format!(
            "the sink raised {name}: not retried; the next shutdown() or wait_idle() raises it again"
        ))
    }

    /// client-go's `IsKeyNotFoundError`: a patch of an event the server no longer has.
    pub fn is_not_found(&self) -> bool {
        self.status == Some(404)
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(s) => write!(f, "HTTP {s}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// The `Status` an API server answered, from an error's JSON `body`, as one line: `Reason: message` (either
/// alone when the other is empty); None when the body is not a `Status`.
pub fn status_text(body: &[u8]) -> Option<String> {
    let status: serde_json::Value = serde_json::from_slice(body).ok()?;
    if status.get("kind")?.as_str()? != "Status" {
        return None;
    }
    let field = |key| status.get(key).and_then(serde_json::Value::as_str).unwrap_or_default();
    Some(match (field("reason"), field("message")) {
        ("", message) => message.to_owned(),
        (reason, "") => reason.to_owned(),
        (reason, message) => format!("{reason}: {message}"),
    })
}

/// What a pipeline keeps of the errors its sinks and callbacks raised: the first interrupt, for a caller's
/// thread to raise again, and the places whose traceback was reported already (each only once).
pub struct Failures<E> {
    interrupt: Mutex<Option<E>>,
    reported: Mutex<HashSet<String>>,
}

impl<E> Default for Failures<E> {
    fn default() -> Self {
        Failures { interrupt: Mutex::new(None), reported: Mutex::default() }
    }
}

impl<E> Failures<E> {
    /// Keeps an interrupt unless one is kept already.
    pub fn keep(&self, interrupt: impl FnOnce() -> E) {
        lock(&self.interrupt).get_or_insert_with(interrupt);
    }

    /// The interrupt kept and not taken yet.
    pub fn take(&self) -> Option<E> {
        lock(&self.interrupt).take()
    }

    /// Whether the error raised at `place` is reported for the first time (from now on it is not).
    pub fn first_report(&self, place: String) -> bool {
        lock(&self.reported).insert(place)
    }
}

/// The verdict for an HTTP status. client-go abandons every `StatusError` at this layer, but its REST client
/// has already retried 429 and 5xx answers underneath (honouring `Retry-After`); a Python client does not,
/// so here 429 and 5xx are retried and the other statuses (409 AlreadyExists included) abandon the event;
/// `tools/events` retries a 409 on the create of a series (`series::record_event`).
pub fn verdict_for_status(status: u16) -> Verdict {
    if status == 429 || status >= 500 {
        Verdict::Retry
    } else {
        Verdict::GiveUp
    }
}

/// How the sleeps between attempts are jittered: client-go's two recorders differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Jitter {
    /// `tools/record`: the first sleep is `sleep * U[0,1)`, the later ones exactly `sleep`.
    #[default]
    FirstSleep,
    /// `tools/events`: every sleep is `wait.Jitter(sleep, 0.25)`, `sleep` plus up to a quarter of it.
    Quarter,
}

/// Attempts and the sleep between them (jittered as each event's `Attempts` says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_tries: u32,
    pub sleep_nanos: i64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_tries: DEFAULT_MAX_TRIES, sleep_nanos: DEFAULT_SLEEP_NANOS }
    }
}

impl RetryPolicy {
    /// The `max_tries` and `sleep_duration` options, checked: `max_tries` attempts (at least 1; more than a u32
    /// holds are as good as unlimited), `sleep_nanos` (at least 0) apart.
    pub fn new(max_tries: i64, sleep_nanos: i64) -> crate::error::Result<Self> {
        let max_tries = count_option("max_tries", max_tries)?.get();
        let sleep_nanos = check_duration(sleep_nanos, "sleep_duration", false)?;
        Ok(RetryPolicy { max_tries: u32::try_from(max_tries).unwrap_or(u32::MAX), sleep_nanos })
    }

    /// The sleep after the `tries`-th failed attempt (1-based).
    pub fn delay_after(&self, tries: u32, jitter: Jitter, rng: &mut impl Rng) -> i64 {
        let d = self.sleep_nanos;
        match jitter {
            Jitter::FirstSleep if tries == 1 => (d as f64 * rng.random::<f64>()) as i64,
            Jitter::FirstSleep => d,
            Jitter::Quarter => d.saturating_add((d as f64 * 0.25 * rng.random::<f64>()) as i64),
        }
    }
}

/// Why an event was abandoned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Abandoned {
    /// The error said not to retry.
    GaveUp(WriteError),
    /// `max_tries` attempts failed.
    RetryLimit(WriteError),
    /// The attempt failed after shutdown, when each event gets one try.
    ShutDown(WriteError),
}

impl Abandoned {
    pub fn error(&self) -> &WriteError {
        match self {
            Abandoned::GaveUp(e) | Abandoned::RetryLimit(e) | Abandoned::ShutDown(e) => e,
        }
    }
}

impl fmt::Display for Abandoned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Not an answer of the server: the sink itself failed (a bug in it, a request it could not make).
            Abandoned::GaveUp(e) if e.status.is_none() => write!(f, "the sink failed (will not retry!): {e}"),
            Abandoned::GaveUp(e) => write!(f, "server rejected event (will not retry!): {e}"),
            Abandoned::RetryLimit(e) => write!(f, "unable to write event (retry limit exceeded!): {e}"),
            Abandoned::ShutDown(e) => write!(f, "unable to write event (broadcaster is shut down): {e}"),
        }
    }
}

/// Sleeps on a clock: for the system clock a plain timed wait, for any other clock (a fake one, or user code)
/// a wait until the clock reads the deadline, so that stepping a fake clock makes retries run at once.
pub struct ClockSleeper {
    pub clock: Arc<dyn Clock>,
    pub stop: Arc<StopSignal>,
}

impl ClockSleeper {
    /// Sleeps until `deadline` on the clock. Returns false when interrupted by the stop signal (or when the
    /// clock cannot be read), true when the deadline passed.
    pub fn sleep_until(&self, deadline: Time) -> bool {
        self.stop.sleep_until(self.clock.as_ref(), deadline)
    }
}

/// A core/v1 event sink (`record.EventSink`): create, and patch with a strategic merge patch. Each returns
/// the server's event.
pub trait EventSink: Send + Sync {
    fn create(&self, event: &Event) -> Result<Event, WriteError>;
    fn patch(&self, event: &Event, patch: &[u8]) -> Result<Event, WriteError>;
    /// `create` for a caller that is done with `event` once it is written: `Ok(None)` means the answer was
    /// left in `event` (a sink whose answer is mostly the event sent saves copying it).
    fn create_in_place(&self, event: &mut Event) -> Result<Option<Event>, WriteError> {
        self.create(event).map(Some)
    }
    /// `patch`, answering as `create_in_place` does.
    fn patch_in_place(&self, event: &mut Event, patch: &[u8]) -> Result<Option<Event>, WriteError> {
        self.patch(event, patch).map(Some)
    }
    /// Runs `f`, holding across it whatever the sink's calls would otherwise take one by one (a Python sink
    /// takes the GIL once for a batch of writes).
    fn batch(&self, f: &mut dyn FnMut()) {
        f()
    }
    /// What the lines of the sink's health call it (a Python sink: its class).
    fn describe(&self) -> String {
        "sink".to_owned()
    }
}

/// What one `record_event` attempt did; also the verb of a sink call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    Created,
    Patched,
}

/// What came of a sink's writes, as both broadcasters' `stats()` list it: the sink calls that succeeded and
/// that failed, by verb, the failed writes tried again, and the events given up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WriteStats {
    pub created: u64,
    pub patched: u64,
    pub create_errors: u64,
    pub patch_errors: u64,
    pub retries: u64,
    pub abandoned: u64,
}

/// Sink calls by verb and result (`kubevents_sink_writes_total{verb,result}`): a patch that finds no event
/// and the create that follows are two calls.
#[derive(Debug, Default)]
pub struct SinkCalls([AtomicU64; 4]);

impl SinkCalls {
    fn slot(verb: Written, ok: bool) -> usize {
        (verb as usize) * 2 + usize::from(!ok)
    }

    pub fn count(&self, verb: Written, ok: bool) {
        self.0[Self::slot(verb, ok)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, verb: Written, ok: bool) -> u64 {
        self.0[Self::slot(verb, ok)].load(Ordering::Relaxed)
    }

    /// The calls counted so far, with the `retries` and `abandoned` counted beside them.
    pub fn write_stats(&self, retries: u64, abandoned: u64) -> WriteStats {
        WriteStats {
            created: self.get(Written::Created, true),
            patched: self.get(Written::Patched, true),
            create_errors: self.get(Written::Created, false),
            patch_errors: self.get(Written::Patched, false),
            retries,
            abandoned,
        }
    }

    /// Counts the call `verb` that answered `result`, and returns the answer.
    pub fn counted<T>(&self, verb: Written, result: Result<T, WriteError>) -> Result<T, WriteError> {
        self.count(verb, result.is_ok());
        result
    }
}

/// `recordEvent`: a patch for a repeat (`count > 1`), a create otherwise or when the patch finds no event
/// (with `resourceVersion` cleared). Returns the server's event, to be passed to `update_state`; None when
/// the sink left it in `event`. Each sink call is counted in `calls`.
pub fn record_event(
    sink: &dyn EventSink,
    event: &mut Event,
    patch: &[u8],
    calls: &SinkCalls,
) -> Result<(Option<Event>, Written), WriteError> {
    if event.count > 1 {
        match calls.counted(Written::Patched, sink.patch_in_place(event, patch)) {
            Ok(answer) => return Ok((answer, Written::Patched)),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    event.metadata.resource_version.clear();
    calls.counted(Written::Created, sink.create_in_place(event)).map(|answer| (answer, Written::Created))
}

/// One event on its way through the retry loop: the tries made so far, and its API's jitter.
#[derive(Debug, Default, Clone, Copy)]
pub struct Attempts {
    pub tries: u32,
    pub jitter: Jitter,
}

/// What to do after an attempt failed: abandon, or sleep `delay_nanos` and try again.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Abandon(Abandoned),
    SleepThenRetry { delay_nanos: i64 },
}

impl Attempts {
    /// client-go's decision after a failed attempt: give up on a rejection, at the retry limit, or once the
    /// broadcaster is shut down; otherwise sleep (the first sleep randomised).
    pub fn after_failure(&mut self, e: WriteError, policy: &RetryPolicy, shut_down: bool, rng: &mut impl Rng) -> Next {
        self.tries += 1;
        if e.verdict == Verdict::GiveUp {
            return Next::Abandon(Abandoned::GaveUp(e));
        }
        if self.tries >= policy.max_tries {
            return Next::Abandon(Abandoned::RetryLimit(e));
        }
        if shut_down {
            return Next::Abandon(Abandoned::ShutDown(e));
        }
        Next::SleepThenRetry { delay_nanos: policy.delay_after(self.tries, self.jitter, rng) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn sink_calls_classify_by_status_then_kind() {
        let body = br#"{"kind":"Status","reason":"Forbidden","message":"no"}"#;
        let e = WriteError::from_call(Some(403), Some(body), false, "ApiException: (403)".into());
        assert_eq!((e.status, e.verdict, e.message.as_str()), (Some(403), Verdict::GiveUp, "Forbidden: no"));
        let e = WriteError::from_call(Some(503), Some(b"not json"), true, "ApiException: (503)".into());
        assert_eq!((e.status, e.verdict, e.message.as_str()), (Some(503), Verdict::Retry, "ApiException: (503)"));
        // Status 0 is the client's own error.
        assert_eq!(WriteError::from_call(Some(0), None, false, "x".into()), WriteError::retry("x"));
        assert_eq!(WriteError::from_call(None, None, true, "TypeError: x".into()), WriteError::give_up("TypeError: x"));
        assert_eq!(WriteError::interrupted("SystemExit").verdict, Verdict::GiveUp);
    }

    #[test]
    fn status_text_is_one_line() {
        assert_eq!(status_text(br#"{"kind":"Status","reason":"R","message":"m"}"#).as_deref(), Some("R: m"));
        assert_eq!(status_text(br#"{"kind":"Status","reason":"R"}"#).as_deref(), Some("R"));
        assert_eq!(status_text(br#"{"kind":"Status","reason":null,"message":"m"}"#).as_deref(), Some("m"));
        assert_eq!(status_text(br#"{"kind":"Event"}"#), None);
        assert_eq!(status_text(b"[1]"), None);
    }

    #[test]
    fn failures_keep_the_first_interrupt_and_report_each_place_once() {
        let f = Failures::<&str>::default();
        f.keep(|| "first");
        f.keep(|| "second");
        assert_eq!(f.take(), Some("first"));
        assert_eq!(f.take(), None);
        assert!(f.first_report("TypeError at a.py:1".into()));
        assert!(!f.first_report("TypeError at a.py:1".into()));
        assert!(f.first_report("TypeError at a.py:2".into()));
    }

    #[test]
    fn retry_policy_checks_its_options() {
        assert_eq!(RetryPolicy::new(3, 5).unwrap(), RetryPolicy { max_tries: 3, sleep_nanos: 5 });
        assert_eq!(RetryPolicy::new(i64::MAX, 5).unwrap().max_tries, u32::MAX);
        assert_eq!(RetryPolicy::new(0, 5).unwrap_err().to_string(), "max_tries must be >= 1, got 0");
        let err = RetryPolicy::new(3, -1_500_000_000).unwrap_err().to_string();
        assert_eq!(err, "sleep_duration must be >= 0 seconds, got -1.5");
    }

    /// Patches find nothing; creates fail with `create_error` when it is set.
    struct NoPatch {
        create_error: Option<WriteError>,
    }

    impl EventSink for NoPatch {
        fn create(&self, event: &Event) -> Result<Event, WriteError> {
            self.create_error.clone().map_or_else(|| Ok(event.clone()), Err)
        }
        fn patch(&self, _: &Event, _: &[u8]) -> Result<Event, WriteError> {
            Err(WriteError::status(404, "not found"))
        }
    }

    #[test]
    fn record_event_counts_each_sink_call_by_verb_and_result() {
        let calls = SinkCalls::default();
        let all = |c: &SinkCalls| {
            [(Written::Created, true), (Written::Created, false), (Written::Patched, true), (Written::Patched, false)]
                .map(|(v, ok)| c.get(v, ok))
        };
        // A repeat whose patch finds nothing: a failed patch, then a create.
        let mut repeat = Event { count: 2, ..Default::default() };
        assert!(record_event(&NoPatch { create_error: None }, &mut repeat, b"{}", &calls).is_ok());
        assert_eq!(all(&calls), [1, 0, 0, 1]);
        let failing = NoPatch { create_error: Some(WriteError::status(503, "unavailable")) };
        assert!(record_event(&failing, &mut Event::default(), b"{}", &calls).is_err());
        assert_eq!(all(&calls), [1, 1, 0, 1]);
    }

    #[test]
    fn request_timeouts_are_positive_and_bounded() {
        assert_eq!(request_timeout_option(DEFAULT_REQUEST_TIMEOUT_NANOS).unwrap(), 30 * NANOS_PER_SECOND);
        assert_eq!(request_timeout_option(MAX_REQUEST_TIMEOUT_NANOS).unwrap(), MAX_REQUEST_TIMEOUT_NANOS);
        assert_eq!(request_timeout_option(0).unwrap_err().to_string(), "request_timeout must be > 0 seconds, got 0");
        let err = request_timeout_option(MAX_REQUEST_TIMEOUT_NANOS + NANOS_PER_SECOND).unwrap_err().to_string();
        assert_eq!(err, "request_timeout must be <= 1000000000 seconds, got 1000000001");
    }

    #[test]
    fn first_sleep_is_randomised_and_later_ones_are_fixed() {
        let p = RetryPolicy { max_tries: 12, sleep_nanos: 1000 };
        let mut rng = SmallRng::seed_from_u64(3);
        let firsts: Vec<i64> = (0..50).map(|_| p.delay_after(1, Jitter::FirstSleep, &mut rng)).collect();
        assert!(firsts.iter().all(|d| (0..1000).contains(d)));
        assert!(firsts.iter().any(|d| *d != firsts[0]));
        assert_eq!(p.delay_after(2, Jitter::FirstSleep, &mut rng), 1000);
        assert_eq!(p.delay_after(11, Jitter::FirstSleep, &mut rng), 1000);
    }

    #[test]
    fn events_sleeps_add_up_to_a_quarter_every_time() {
        let p = RetryPolicy { max_tries: 12, sleep_nanos: 1000 };
        let mut rng = SmallRng::seed_from_u64(3);
        for tries in 1..12 {
            let d = p.delay_after(tries, Jitter::Quarter, &mut rng);
            assert!((1000..1250).contains(&d), "{d}");
        }
        let mut a = Attempts { jitter: Jitter::Quarter, ..Attempts::default() };
        for _ in 0..11 {
            let next = a.after_failure(WriteError::status(503, "x"), &p, false, &mut rng);
            assert!(matches!(next, Next::SleepThenRetry { delay_nanos: 1000..1250 }), "{next:?}");
        }
        let next = a.after_failure(WriteError::status(503, "x"), &p, false, &mut rng);
        assert!(matches!(next, Next::Abandon(Abandoned::RetryLimit(_))));
    }

    #[test]
    fn sleeps_follow_a_fake_clock() {
        let clock = Arc::new(FakeClock::new(Time(0)));
        let s = ClockSleeper { clock: clock.clone(), stop: Arc::new(StopSignal::default()) };
        let stepper = {
            let clock = clock.clone();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    clock.step(1_000_000_000);
                }
            })
        };
        assert!(s.sleep_until(Time(5_000_000_000)));
        assert!(clock.get() >= Time(5_000_000_000));
        stepper.join().unwrap();
        s.stop.stop();
        assert!(!s.sleep_until(Time(i64::MAX)));
    }

    #[test]
    fn verdicts() {
        for (s, v) in [(400, Verdict::GiveUp), (404, Verdict::GiveUp), (409, Verdict::GiveUp), (422, Verdict::GiveUp)] {
            assert_eq!(verdict_for_status(s), v);
        }
        for s in [429, 500, 502, 503, 504] {
            assert_eq!(verdict_for_status(s), Verdict::Retry);
        }
    }
}
