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
//! left out or null (empty). `involved.resource_version` and `annotations` (a string map) are optional extras.
//! Unknown keys are rejected, so a misspelt field is an error rather than a silently empty one.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::Arc;

use serde::de::{Deserializer, Visitor};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::event::{EventSource, ObjectReference};

/// One trace record. Strings borrow from the JSON line when they have no escapes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record<'a> {
    pub t_ns: i64,
    #[serde(default, borrow, deserialize_with = "text")]
    pub source_component: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub source_host: Cow<'a, str>,
    #[serde(borrow)]
    pub involved: InvolvedRecord<'a>,
    #[serde(default, borrow, rename = "type", deserialize_with = "text")]
    pub type_: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub reason: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub message: Cow<'a, str>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvolvedRecord<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub namespace: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub name: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub uid: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub api_version: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub resource_version: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "text")]
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

/// A string field: borrowed from the line when it has no escapes; null is empty, as in a record dict.
fn text<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> std::result::Result<Cow<'a, str>, D::Error> {
    struct TextVisitor;
    impl<'de> Visitor<'de> for TextVisitor {
        type Value = Cow<'de, str>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
            Ok(Cow::Borrowed(v))
        }
        fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
            Ok(Cow::Owned(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
            Ok(Cow::Owned(v))
        }
        fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
            Ok(Cow::Borrowed(""))
        }
    }
    d.deserialize_any(TextVisitor)
}

/// The error of a trace line that failed to parse, naming its field: `reason: expected a string, got 5`.
/// Type mismatches are `Type`, everything else `Value`. Parsing a second time, with the field's path kept,
/// costs only lines in error.
fn line_error(line: &str, first: serde_json::Error) -> Error {
    let (path, e) =
        match serde_path_to_error::deserialize::<_, Record<'_>>(&mut serde_json::Deserializer::from_str(line)) {
            Err(e) => (e.path().to_string(), e.into_inner()),
            Ok(_) => (String::from("."), first),
        };
    let msg = e.to_string();
    // serde_json appends " at line L column C"; the line is the trace's, so drop that part.
    let msg = msg.rfind(" at line ").map_or(msg.as_str(), |i| &msg[..i]);
    if e.is_syntax() || e.is_eof() {
        // Not JSON: no field to name (its path would read "?"), but the column shows where.
        return Error::value("", format!("{msg} at column {}", e.column()));
    }
    let field = if path == "." { String::new() } else { format!("{path}: ") };
    match msg.strip_prefix("invalid type: ").and_then(|m| m.split_once(", expected ")) {
        Some((got, expected)) => {
            // "integer `5`" shows the value itself; "null" or "map" has none to show.
            let got = got.split('`').nth(1).unwrap_or(got);
            Error::type_("", format!("{field}expected {expected}, got {got}"))
        }
        None => Error::value("", format!("{field}{msg}")),
    }
}

/// The error of a line the fast parser refused, in serde_json's words (`line_error`), so that messages do not
/// depend on the parser; should serde_json accept the line, the fast parser's own message is kept.
fn parse_error(line: &str, fast: sonic_rs::Error) -> Error {
    match serde_json::from_str::<Record<'_>>(line) {
        Err(e) => line_error(line, e),
        Ok(_) => Error::value("", fast.to_string()),
    }
}

/// Reads records from JSON Lines, skipping blank lines; errors carry the 1-based line number, and the file's
/// name when it has one.
pub struct JsonLines<R> {
    reader: R,
    line: String,
    line_no: u64,
    name: Option<Arc<str>>,
}

impl<R: BufRead> JsonLines<R> {
    pub fn new(reader: R) -> Self {
        JsonLines { reader, line: String::with_capacity(512), line_no: 0, name: None }
    }

    /// Lines read from the file `name`, which errors then name.
    pub fn named(reader: R, name: &str) -> Self {
        JsonLines { name: Some(Arc::from(name)), ..JsonLines::new(reader) }
    }

    fn error(&self, e: Error) -> Error {
        let e = e.at_line(self.line_no);
        match &self.name {
            Some(name) => e.in_file(name),
            None => e,
        }
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
                Err(e) => return Some(Err(self.error(Error::from(e)))),
            }
            if !self.line.trim().is_empty() {
                break;
            }
        }
        match sonic_rs::from_str(self.line.trim()) {
            Ok(record) => Some(Ok(record)),
            Err(e) => Some(Err(self.error(parse_error(self.line.trim(), e)))),
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
    fn null_strings_are_empty_as_in_a_record_dict() {
        let line = r#"{"t_ns": 1, "involved": {"kind": "Pod", "name": null}, "message": null, "reason": "R"}"#;
        let r = JsonLines::new(line.as_bytes()).next_record().unwrap().unwrap().into_owned();
        assert_eq!((&*r.message, &*r.involved.name, &*r.involved.kind, &*r.reason), ("", "", "Pod", "R"));
    }

    #[test]
    fn a_line_that_is_not_json_says_where_and_names_the_file() {
        let err = JsonLines::new("{oops\n".as_bytes()).next_record().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "line 1: key must be a string at column 2");
        let text = format!("{LINE}\n\n{{\"t_ns\": 1,\n");
        let mut lines = JsonLines::named(text.as_bytes(), "trace.jsonl");
        lines.next_record().unwrap().unwrap();
        let err = lines.next_record().unwrap().unwrap_err();
        assert!(matches!(&err, Error::Trace { line: 3, source, .. } if matches!(**source, Error::Value { .. })));
        assert_eq!(err.to_string(), "trace.jsonl: line 3: EOF while parsing a value at column 11");
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let text = format!("{LINE}\n{{\"t_ns\": 1.5, \"involved\": {{}}}}\n");
        let mut lines = JsonLines::new(text.as_bytes());
        lines.next_record().unwrap().unwrap();
        let err = lines.next_record().unwrap().unwrap_err();
        assert!(
            matches!(&err, Error::Trace { line: 2, source, file: None } if matches!(**source, Error::Type { .. })),
            "{err}"
        );
        assert_eq!(err.to_string(), "line 2: t_ns: expected i64, got 1.5");
        for (line, expected) in [
            (r#"{"t_ns": 1, "involved": {}, "reason": 5}"#, "line 1: reason: expected a string, got 5"),
            (r#"{"t_ns": 1, "involved": {"kind": 3}}"#, "line 1: involved.kind: expected a string, got 3"),
            (r#"{"t_ns": 1, "involved": {}, "type": {}}"#, "line 1: type: expected a string, got map"),
            (
                r#"{"t_ns": 1, "involved": {}, "annotations": {"a": 1}}"#,
                "line 1: annotations.a: expected a string, got 1",
            ),
        ] {
            let err = JsonLines::new(line.as_bytes()).next_record().unwrap().unwrap_err();
            assert_eq!(err.to_string(), expected);
            assert!(matches!(&err, Error::Trace { source, .. } if matches!(**source, Error::Type { .. })), "{err}");
        }

        let err = JsonLines::new(r#"{"t_ns": 1}"#.as_bytes()).next_record().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "line 1: missing field `involved`");
        let err = JsonLines::new(r#"{"t_ns": 1, "involved": {}, "reson": "x"}"#.as_bytes())
            .next_record()
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `reson`"), "{err}");
    }

    /// The fast parser accepts and refuses what serde_json does, for what traces hold.
    #[test]
    fn the_fast_parser_agrees_with_serde_json() {
        for line in [
            r#"{"t_ns": 1, "involved": {"name": "a\"b\u00e9\ud83d\ude00"}, "message": "tab\there"}"#,
            r#"{"t_ns": 1, "involved": {}} x"#,
            r#"{"t_ns": 1, "involved": {}, "t_ns": 2}"#,
            r#"{"t_ns": 1e3, "involved": {}}"#,
            r#"{"t_ns": 99999999999999999999, "involved": {}}"#,
            r#"{"t_ns": -5, "involved": {"kind": null}}"#,
            r#"{"t_ns": 1, "involved": {}, "annotations": {"k": "v", "l": null}}"#,
            r#"{"t_ns": 1, "involved": {},}"#,
            r#"{"t_ns": 1, "involved": {}, "message": "\x"}"#,
            r#"[1]"#,
        ] {
            let fast: std::result::Result<Record<'_>, _> = sonic_rs::from_str(line);
            let slow: std::result::Result<Record<'_>, _> = serde_json::from_str(line);
            match (fast, slow) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{line}"),
                (Err(_), Err(_)) => {}
                (a, b) => panic!("{line}: sonic-rs {a:?}, serde_json {b:?}"),
            }
        }
    }
}
