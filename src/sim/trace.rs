//! Trace records: one occurrence of an event as a component records it, in the JSON Lines format of the
//! project's workload generator:
//!
//! ```json
//! {"t_ns": 1700000000001000000, "source_component": "kubelet", "source_host": "node-3",
//!  "involved": {"kind": "Pod", "namespace": "default", "name": "pod-17", "uid": "uid-pod-17",
//!               "api_version": "v1", "field_path": "spec.containers{app}"},
//!  "type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container"}
//! ```
//!
//! `t_ns` (integer nanoseconds since the Unix epoch) and `involved` are required; every string may be
//! left out (empty). `involved.resource_version` and `annotations` (a string map) are optional extras.
//! Unknown keys are rejected, so a misspelt field is an error rather than a silently empty one.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::event::{EventSource, ObjectReference};
use crate::recorder::EventSpec;

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvolvedRecord {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub resource_version: String,
    #[serde(default)]
    pub field_path: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub t_ns: i64,
    #[serde(default)]
    pub source_component: String,
    #[serde(default)]
    pub source_host: String,
    pub involved: InvolvedRecord,
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl Record {
    /// Splits the record into the recorder's source and what `make_event` needs.
    pub fn into_parts(self) -> (EventSource, EventSpec) {
        let i = self.involved;
        (
            EventSource { component: self.source_component, host: self.source_host },
            EventSpec {
                reference: ObjectReference {
                    kind: i.kind,
                    namespace: i.namespace,
                    name: i.name,
                    uid: i.uid,
                    api_version: i.api_version,
                    resource_version: i.resource_version,
                    field_path: i.field_path,
                },
                annotations: self.annotations,
                type_: self.type_,
                reason: self.reason,
                message: self.message,
            },
        )
    }
}

/// Maps a serde_json error to a field error: type mismatches are `Type`, everything else `Value`.
pub fn json_error(e: serde_json::Error) -> Error {
    let msg = e.to_string();
    // serde_json appends " at line L column C"; the line is the trace's, so drop that part.
    let msg = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg,
    };
    if msg.starts_with("invalid type") {
        Error::type_("", msg)
    } else {
        Error::value("", msg)
    }
}

/// Reads records from JSON Lines, skipping blank lines; errors carry the 1-based line number.
pub struct JsonLines<R> {
    reader: R,
    line: String,
    line_no: u64,
}

impl<R: BufRead> JsonLines<R> {
    pub fn new(reader: R) -> Self {
        JsonLines { reader, line: String::with_capacity(512), line_no: 0 }
    }
}

impl<R: BufRead> Iterator for JsonLines<R> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.line.clear();
            self.line_no += 1;
            match self.reader.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(Error::from(e).at_line(self.line_no))),
            }
            let text = self.line.trim();
            if text.is_empty() {
                continue;
            }
            return Some(serde_json::from_str(text).map_err(|e| json_error(e).at_line(self.line_no)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"t_ns":1700000000001000000,"source_component":"kubelet","source_host":"node-3","involved":{"kind":"Pod","namespace":"default","name":"pod-17","uid":"uid-pod-17","api_version":"v1","field_path":"spec.containers{app}"},"type":"Warning","reason":"BackOff","message":"m"}"#;

    #[test]
    fn reads_the_workload_format() {
        let text = format!("{LINE}\n\n{LINE}\n");
        let records: Vec<Record> = JsonLines::new(text.as_bytes()).collect::<Result<_>>().unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].involved.field_path, "spec.containers{app}");
        assert_eq!(records[0].t_ns, 1_700_000_000_001_000_000);
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let text = format!("{LINE}\n{{\"t_ns\": 1.5, \"involved\": {{}}}}\n");
        let err = JsonLines::new(text.as_bytes()).nth(1).unwrap().unwrap_err();
        assert!(matches!(&err, Error::Trace { line: 2, source } if matches!(**source, Error::Type { .. })), "{err}");
        assert!(err.to_string().starts_with("line 2: invalid type: floating point"), "{err}");

        let err = JsonLines::new(r#"{"t_ns": 1}"#.as_bytes()).next().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "line 1: missing field `involved`");
        let err = JsonLines::new(r#"{"t_ns": 1, "involved": {}, "reson": "x"}"#.as_bytes()).next().unwrap().unwrap_err();
        assert!(err.to_string().contains("unknown field `reson`"), "{err}");
    }
}
