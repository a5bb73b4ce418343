//! One write of an events.k8s.io/v1 event (`tools/events` `recordEvent`): a series is patched (and created
//! when the patch finds nothing), anything else is created; the error decides whether to try again.

use std::fmt::Write as _;

use super::event::EventV1;
use crate::sink::{SinkCalls, Verdict, WriteError, Written};

/// Where events.k8s.io/v1 events are written (`tools/events` `EventSink`, less the unused `Update`).
/// `answer` says whether the caller uses the stored object (only the refresh round does), so that a sink
/// may skip reading it.
pub trait SinkV1 {
    fn create(&mut self, event: &EventV1, answer: bool) -> Result<Option<EventV1>, WriteError>;
    /// `patch` is a strategic merge patch of `event`'s stored object (`event.metadata` names it).
    fn patch(&mut self, event: &EventV1, patch: &[u8], answer: bool) -> Result<Option<EventV1>, WriteError>;
    /// What the lines of the sink's health call it (a Python sink: its class).
    fn describe(&self) -> String {
        "sink".to_owned()
    }
}

/// The strategic merge patch from `event` without its series to `event`: exactly
/// `{"series":{"count":N,"lastObservedTime":"…"}}` (what `CreateTwoWayMergePatch` yields, keys sorted).
pub fn series_patch(event: &EventV1) -> Vec<u8> {
    let mut out = String::with_capacity(72);
    match &event.series {
        None => out.push_str("{}"),
        Some(s) => {
            let _ = write!(out, r#"{{"series":{{"count":{},"lastObservedTime":"#, s.count);
            match s.last_observed_time {
                Some(t) => {
                    out.push('"');
                    t.write_rfc3339_micro(&mut out);
                    out.push('"');
                }
                None => out.push_str("null"),
            }
            out.push_str("}}");
        }
    }
    out.into_bytes()
}

/// The outcome of `record_event`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The object the server returned, if it succeeded and returned one.
    pub answer: Option<EventV1>,
    pub error: Option<WriteError>,
}

impl Recorded {
    /// Whether the failure is worth another attempt.
    pub fn retry(&self) -> bool {
        self.error.as_ref().is_some_and(|e| e.verdict == Verdict::Retry)
    }
}

/// `recordEvent`: a series is patched; a 404 turns it into a create of the whole event (with its series
/// and no `resourceVersion`); anything else is created. The error's verdict decides, but for a 409 on a
/// series: the first event's create raced this one, so it is retried. Each sink call is counted in `calls`.
pub fn record_event(sink: &mut dyn SinkV1, event: &EventV1, answer: bool, calls: &SinkCalls) -> Recorded {
    let is_series = event.series.is_some();
    let result = if is_series {
        match calls.counted(Written::Patched, sink.patch(event, &series_patch(event), answer)) {
            Err(e) if e.is_not_found() => create_fresh(sink, event, answer, calls),
            other => other,
        }
    } else {
        create_fresh(sink, event, answer, calls)
    };
    match result {
        Ok(answer) => Recorded { answer, error: None },
        Err(mut e) => {
            if is_series && e.status == Some(409) {
                e.verdict = Verdict::Retry;
            }
            Recorded { answer: None, error: Some(e) }
        }
    }
}

fn create_fresh(
    sink: &mut dyn SinkV1,
    event: &EventV1,
    answer: bool,
    calls: &SinkCalls,
) -> Result<Option<EventV1>, WriteError> {
    let result = if event.metadata.resource_version.is_empty() {
        sink.create(event, answer)
    } else {
        let mut fresh = event.clone();
        fresh.metadata.resource_version.clear();
        sink.create(&fresh, answer)
    };
    calls.counted(Written::Created, result)
}
