//! One write of an events.k8s.io/v1 event (`tools/events` `recordEvent`): a series is patched (and created
//! when the patch finds nothing), anything else is created; the error decides whether to try again.

use std::fmt::Write as _;

use super::event::EventV1;

/// How a sink call failed, in the terms `recordEvent` distinguishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkError {
    /// HTTP 404: the patched event does not exist.
    NotFound,
    /// HTTP 409 on a create.
    AlreadyExists,
    /// Any other status the server answered with (a `StatusError`): not retried.
    Rejected(String),
    /// The request could not be built (client-go's `RequestConstructionError`): not retried.
    RequestConstruction(String),
    /// Anything else (connection errors, unexpected answers): retried.
    Transient(String),
}

/// Where events.k8s.io/v1 events are written (`tools/events` `EventSink`, less the unused `Update`).
/// `answer` says whether the caller uses the stored object (only the refresh round does), so that a sink
/// may skip reading it.
pub trait SinkV1 {
    fn create(&mut self, event: &EventV1, answer: bool) -> Result<Option<EventV1>, SinkError>;
    /// `patch` is a strategic merge patch of `event`'s stored object (`event.metadata` names it).
    fn patch(&mut self, event: &EventV1, patch: &[u8], answer: bool) -> Result<Option<EventV1>, SinkError>;
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
    pub error: Option<SinkError>,
    /// Whether the failure is worth another attempt.
    pub retry: bool,
}

/// `recordEvent`: a series is patched; a 404 turns it into a create of the whole event (with its series
/// and no `resourceVersion`); anything else is created. A 409 on the create of a series means the first
/// event's create raced this one, so it is retried; a 409 on a plain create, any other server answer, and
/// an unbuildable request are not.
pub fn record_event(sink: &mut dyn SinkV1, event: &EventV1, answer: bool) -> Recorded {
    let is_series = event.series.is_some();
    let result = if is_series {
        match sink.patch(event, &series_patch(event), answer) {
            Err(SinkError::NotFound) => create_fresh(sink, event, answer),
            other => other,
        }
    } else {
        create_fresh(sink, event, answer)
    };
    match result {
        Ok(answer) => Recorded { answer, error: None, retry: false },
        Err(e) => {
            let retry = match e {
                SinkError::AlreadyExists => is_series,
                SinkError::NotFound | SinkError::Rejected(_) | SinkError::RequestConstruction(_) => false,
                SinkError::Transient(_) => true,
            };
            Recorded { answer: None, error: Some(e), retry }
        }
    }
}

fn create_fresh(sink: &mut dyn SinkV1, event: &EventV1, answer: bool) -> Result<Option<EventV1>, SinkError> {
    if event.metadata.resource_version.is_empty() {
        return sink.create(event, answer);
    }
    let mut fresh = event.clone();
    fresh.metadata.resource_version.clear();
    sink.create(&fresh, answer)
}

/// `wait.Jitter(d, 0.25)`: `d` plus up to a quarter of it, `unit` being a uniform draw in [0, 1).
pub fn jitter(d: i64, unit: f64) -> i64 {
    d.saturating_add((d as f64 * 0.25 * unit) as i64)
}
