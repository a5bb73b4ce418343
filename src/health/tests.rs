//! The outage policy on a fake clock: which lines, when, and what they say.

use super::*;
use crate::clock::FakeClock;

const S: i64 = NANOS_PER_SECOND;
const T0: Time = Time(1_704_067_200 * S);

#[derive(Default)]
struct Lines(Mutex<Vec<(&'static str, String)>>);

impl Reporter for Lines {
    fn warn(&self, m: &str) {
        lock(&self.0).push(("warn", m.to_owned()));
    }
    fn error(&self, m: &str) {
        lock(&self.0).push(("error", m.to_owned()));
    }
    fn info(&self, m: &str) {
        lock(&self.0).push(("info", m.to_owned()));
    }
    fn debug(&self, m: &str) {
        lock(&self.0).push(("debug", m.to_owned()));
    }
}

impl Lines {
    /// The lines above DEBUG.
    fn shown(&self) -> Vec<String> {
        lock(&self.0).iter().filter(|(l, _)| *l != "debug").map(|(_, m)| m.clone()).collect()
    }
}

fn health() -> (Arc<FakeClock>, Arc<Lines>, SinkHealth) {
    let clock = Arc::new(FakeClock::new(T0));
    let lines = Arc::new(Lines::default());
    let h = SinkHealth::new("B-1", "sink-1", "CoreV1Sink".into(), clock.clone(), lines.clone(), 30 * S);
    (clock, lines, h)
}

fn refused() -> WriteError {
    WriteError::retry("MaxRetryError: connection refused").with_kind("MaxRetryError")
}

fn retry(h: &SinkHealth, tries: u32, at: Time) {
    let step = Step::Retry { in_nanos: 10 * S, tries_left: Some(12 - tries) };
    h.failed(&refused(), step, Some(at), tries, &|| "Pod web/api-0: Warning BackOff".into(), &|| 7);
}

#[test]
fn an_outage_is_one_line_then_one_per_interval_then_its_end() {
    let (clock, lines, h) = health();
    // Every 0.5 s, a failed attempt; 60 s in all.
    for i in 0..120 {
        retry(&h, 1 + (i % 11) as u32, T0);
        clock.step(S / 2);
    }
    h.succeeded(Some(T0), 3);
    let shown = lines.shown();
    assert_eq!(shown.len(), 3, "{shown:#?}");
    assert_eq!(
        shown[0],
        "kubevents: sink B-1/sink-1 (CoreV1Sink) failed to write an event: MaxRetryError: connection refused; \
         retrying in 10 s (11 tries left); further failures are summed up every 30 s"
    );
    assert!(shown[1].starts_with("kubevents: sink B-1/sink-1 (CoreV1Sink) failing for 30 s: 60 failed writes and 60 retries in the last 30 s; 7 events pending (the oldest retried event is 30 s old)"), "{}", shown[1]);
    assert!(shown[1].ends_with("; last error: MaxRetryError: connection refused"), "{}", shown[1]);
    assert_eq!(
        shown[2],
        "kubevents: sink B-1/sink-1 (CoreV1Sink) recovered: writes failed for 60 s; 120 retries, 0 events given up"
    );
    let s = h.snapshot();
    assert!(s.up);
    assert_eq!((s.failing_since, s.last_success, s.failed_writes), (None, Some(clock.get()), 120));
}

#[test]
fn events_given_up_are_counted_by_reason_with_an_example_and_a_debug_line_each() {
    let (clock, lines, h) = health();
    let forbidden = WriteError::status(403, "Forbidden: events is forbidden").with_kind("ApiException");
    for i in 0..1000 {
        let why = Abandoned::GaveUp(forbidden.clone());
        h.failed(&forbidden, Step::GiveUp(&why), Some(T0), 1, &|| format!("Pod web/api-{i}"), &|| 0);
        clock.step(S / 100);
    }
    let shown = lines.shown();
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert_eq!(
        shown[0],
        "kubevents: sink B-1/sink-1 (CoreV1Sink) failed to write an event: HTTP 403: Forbidden: events is \
         forbidden; the event is given up (rejected (HTTP 403)): Pod web/api-0; further failures are summed up every \
         30 s"
    );
    assert_eq!(lock(&lines.0).iter().filter(|(l, _)| *l == "debug").count(), 1000);
    assert_eq!(h.snapshot().given_up.get("rejected (HTTP 403)"), Some(&1000));
    assert_eq!(
        h.shutdown_text().unwrap(),
        (
            "sink B-1/sink-1 (CoreV1Sink): 1000 failed writes, 1000 events given up (1000 rejected (HTTP 403)), \
             last error: HTTP 403: Forbidden: events is forbidden"
                .to_owned(),
            true
        )
    );
    // Ten seconds later, a summary is due at the next failure.
    clock.step(30 * S);
    let why = Abandoned::GaveUp(forbidden.clone());
    h.failed(&forbidden, Step::GiveUp(&why), Some(T0), 1, &|| "Pod web/late".into(), &|| 0);
    let shown = lines.shown();
    assert_eq!(shown.len(), 2);
    assert!(
        shown[1].contains("1000 events given up: 1000 rejected (HTTP 403); for example Pod web/api-1"),
        "{}",
        shown[1]
    );
}

#[test]
fn failures_between_successes_are_summed_up_not_told_one_by_one() {
    let (clock, lines, h) = health();
    for _ in 0..50 {
        retry(&h, 1, T0);
        h.succeeded(Some(T0), 1);
        clock.step(S);
    }
    // A failure and its recovery at once, then nothing for 30 s, then the next failure tells of the 29 in
    // between.
    let shown = lines.shown();
    assert_eq!(shown.len(), 4, "{shown:#?}");
    assert!(shown[1].contains("recovered"), "{}", shown[1]);
    assert!(shown[2].contains("; 29 other failed writes since the last line;"), "{}", shown[2]);
    clock.step(20 * S);
    h.tick(&|| 0);
    let shown = lines.shown();
    assert_eq!(shown.len(), 5, "{shown:#?}");
    assert!(
        shown[4].starts_with(
            "kubevents: sink B-1/sink-1 (CoreV1Sink) had failures and is writing again: 19 failed writes and 19 \
             retries in the last 40 s"
        ),
        "{}",
        shown[4]
    );
}

#[test]
fn a_traceback_is_shown_once_per_kind_of_error() {
    let (_, lines, h) = health();
    let mut e = WriteError::give_up("TypeError: bad").with_kind("TypeError");
    e.traceback = Some("Traceback (most recent call last): ...".into());
    let why = Abandoned::GaveUp(e.clone());
    h.failed(&e, Step::GiveUp(&why), None, 1, &|| "x".into(), &|| 0);
    h.succeeded(None, 0);
    h.failed(&e, Step::GiveUp(&why), None, 1, &|| "x".into(), &|| 0);
    let shown = lines.shown();
    assert!(shown[0].ends_with("\nTraceback (most recent call last): ..."), "{}", shown[0]);
    assert!(shown.iter().skip(1).all(|l| !l.contains("Traceback")), "{shown:#?}");
}

#[test]
fn a_round_failure_says_when_the_next_round_tries_again() {
    let (_, lines, h) = health();
    h.failed(&refused(), Step::Retry { in_nanos: 360 * S, tries_left: None }, None, 1, &|| "x".into(), &|| 0);
    assert!(lines.shown()[0].contains("; trying again at the next round, in 360 s;"), "{:?}", lines.shown());
}

#[test]
fn the_snapshot_says_since_when_the_sink_fails_and_its_last_error() {
    let (clock, _, h) = health();
    assert!(h.snapshot().up, "no write yet");
    h.succeeded(None, 0);
    clock.step(5 * S);
    retry(&h, 1, T0);
    clock.step(5 * S);
    retry(&h, 2, T0);
    let s = h.snapshot();
    assert!(!s.up);
    assert_eq!((s.failing_since, s.last_success), (Some(Time(T0.0 + 5 * S)), Some(T0)));
    let e = s.last_error.unwrap();
    assert_eq!((e.kind.as_str(), e.status), ("MaxRetryError", None));
    assert_eq!(serde_json::to_value(h.snapshot()).unwrap()["failing_since"], serde_json::json!("2024-01-01T00:00:05Z"));
}

#[test]
fn the_interval_is_checked() {
    assert_eq!(log_interval_option(S).unwrap(), S);
    assert_eq!(log_interval_option(0).unwrap_err().to_string(), "log_interval must be > 0 seconds, got 0");
}
