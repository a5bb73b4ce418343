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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::event::{EventSource, ObjectReference};

/// One trace record. Strings borrow from the JSON line when they have no escapes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record<'a> {
    pub t_ns: i64,
    #[serde(default, borrow)]
    pub source_component: Cow<'a, str>,
    #[serde(default, borrow)]
    pub source_host: Cow<'a, str>,
    #[serde(borrow)]
    pub involved: InvolvedRecord<'a>,
    #[serde(default, borrow, rename = "type")]
    pub type_: Cow<'a, str>,
    #[serde(default, borrow)]
    pub reason: Cow<'a, str>,
    #[serde(default, borrow)]
    pub message: Cow<'a, str>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvolvedRecord<'a> {
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub namespace: Cow<'a, str>,
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub uid: Cow<'a, str>,
    #[serde(default, borrow)]
    pub api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub resource_version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub field_path: Cow<'a, str>,
}

impl Record<'_> {
    /// Writes the record's object reference and source into reusable buffers.
    pub fn fill(&self, reference: &mut ObjectReference, source: &mut EventSource) {
        let i = &self.involved;
        for (dst, src) in [
            (&mut reference.kind, &i.kind),
            (&mut reference.namespace, &i.namespace),
            (&mut reference.name, &i.name),
            (&mut reference.uid, &i.uid),
            (&mut reference.api_version, &i.api_version),
            (&mut reference.resource_version, &i.resource_version),
            (&mut reference.field_path, &i.field_path),
            (&mut source.component, &self.source_component),
            (&mut source.host, &self.source_host),
        ] {
            dst.clear();
            dst.push_str(src);
        }
    }

    pub fn into_owned(self) -> Record<'static> {
        let o = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        let i = self.involved;
        Record {
            t_ns: self.t_ns,
            source_component: o(self.source_component),
            source_host: o(self.source_host),
            involved: InvolvedRecord {
                kind: o(i.kind),
                namespace: o(i.namespace),
                name: o(i.name),
                uid: o(i.uid),
                api_version: o(i.api_version),
                resource_version: o(i.resource_version),
                field_path: o(i.field_path),
            },
            type_: o(self.type_),
            reason: o(self.reason),
            message: o(self.message),
            annotations: self.annotations,
        }
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

impl<R: BufRead> JsonLines<R> {
    /// The next record, borrowing from the line just read; `None` at the end.
    pub fn next_record(&mut self) -> Option<Result<Record<'_>>> {
        loop {
            self.line.clear();
            self.line_no += 1;
            match self.reader.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(Error::from(e).at_line(self.line_no))),
            }
            if !self.line.trim().is_empty() {
                break;
            }
        }
        let line_no = self.line_no;
        Some(serde_json::from_str(self.line.trim()).map_err(|e| json_error(e).at_line(line_no)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"t_ns":1700000000001000000,"source_component":"kubelet","source_host":"node-3","involved":{"kind":"Pod","namespace":"default","name":"pod-17","uid":"uid-pod-17","api_version":"v1","field_path":"spec.containers{app}"},"type":"Warning","reason":"BackOff","message":"m"}"#;

    #[test]
    fn reads_the_workload_format() {
        let text = format!("{LINE}\n\n{LINE}\n");
        let mut lines = JsonLines::new(text.as_bytes());
        let mut n = 0;
        while let Some(r) = lines.next_record() {
            let r = r.unwrap();
            assert!(matches!(r.involved.field_path, Cow::Borrowed("spec.containers{app}")));
            assert_eq!(r.t_ns, 1_700_000_000_001_000_000);
            n += 1;
        }
        assert_eq!(n, 2);
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let text = format!("{LINE}\n{{\"t_ns\": 1.5, \"involved\": {{}}}}\n");
        let mut lines = JsonLines::new(text.as_bytes());
        lines.next_record().unwrap().unwrap();
        let err = lines.next_record().unwrap().unwrap_err();
        assert!(matches!(&err, Error::Trace { line: 2, source } if matches!(**source, Error::Type { .. })), "{err}");
        assert!(err.to_string().starts_with("line 2: invalid type: floating point"), "{err}");

        let err = JsonLines::new(r#"{"t_ns": 1}"#.as_bytes()).next_record().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "line 1: missing field `involved`");
        let err = JsonLines::new(r#"{"t_ns": 1, "involved": {}, "reson": "x"}"#.as_bytes())
            .next_record()
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `reson`"), "{err}");
    }
}
