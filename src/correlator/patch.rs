//! The strategic merge patch client-go sends for a repeated event.
//!
//! `eventObserve` diffs the event against a copy with `count` 0, `lastTimestamp` at the Unix epoch and no
//! message, so `CreateTwoWayMergePatch` can only ever produce the keys `count`, `lastTimestamp` and
//! `message`, each present when its value differs from the copy's, in the sorted key order of Go's
//! `json.Marshal` of a map. Strings are escaped as Go's encoder escapes them (HTML characters included).

use crate::time::Time;

const EPOCH_RFC3339: &str = "1970-01-01T00:00:00Z";

/// Bytes `push_go_json_string` must look at: controls, `"`, `\\`, `<`, `>`, `&`, and 0xE2, the first byte of
/// U+2028 and U+2029.
const SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t[b'<' as usize] = true;
    t[b'>' as usize] = true;
    t[b'&' as usize] = true;
    t[0xE2] = true;
    t
};

/// Appends `s` as a JSON string the way Go's `encoding/json` writes it with HTML escaping on:
/// `<`, `>`, `&`, U+2028 and U+2029 as `\u` escapes; `\b \f \n \r \t` short; other controls `\u00xx`.
pub fn push_go_json_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        let c = bytes[i];
        if !SPECIAL[c as usize] {
            i += 1;
            continue;
        }
        let (len, short): (usize, Option<&[u8]>) = match c {
            b'"' => (1, Some(b"\\\"")),
            b'\\' => (1, Some(b"\\\\")),
            0x08 => (1, Some(b"\\b")),
            0x0c => (1, Some(b"\\f")),
            b'\n' => (1, Some(b"\\n")),
            b'\r' => (1, Some(b"\\r")),
            b'\t' => (1, Some(b"\\t")),
            // U+2028 and U+2029 are E2 80 A8 and E2 80 A9; other E2 sequences are copied as they are.
            0xE2 if matches!(bytes[i + 1..], [0x80, 0xA8 | 0xA9, ..]) => (3, None),
            0xE2 => {
                i += 1;
                continue;
            }
            _ => (1, None),
        };
        out.extend_from_slice(&bytes[start..i]);
        match short {
            Some(esc) => out.extend_from_slice(esc),
            None => {
                let v = s[i..].chars().next().expect("char boundary") as u32;
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((v >> shift) & 0xf) as usize]);
                }
            }
        }
        i += len;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Writes the patch for a repeat with the given count, last timestamp and message into `out` (cleared).
pub fn count_patch_into(out: &mut Vec<u8>, count: i32, last_timestamp: Option<Time>, message: &str) {
    out.clear();
    out.push(b'{');
    if count != 0 {
        out.extend_from_slice(b"\"count\":");
        out.extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
    }
    match last_timestamp {
        None => {
            sep(out);
            out.extend_from_slice(b"\"lastTimestamp\":null");
        }
        Some(t) => {
            let stamp = t.rfc3339_bytes();
            if stamp != EPOCH_RFC3339.as_bytes() {
                sep(out);
                out.extend_from_slice(b"\"lastTimestamp\":\"");
                out.extend_from_slice(&stamp);
                out.push(b'"');
            }
        }
    }
    if !message.is_empty() {
        sep(out);
        out.extend_from_slice(b"\"message\":");
        push_go_json_string(out, message);
    }
    out.push(b'}');
}

/// A comma unless this is the first key.
fn sep(out: &mut Vec<u8>) {
    if out.len() > 1 {
        out.push(b',');
    }
}

/// The patch bytes for a repeat (see `count_patch_into`).
pub fn count_patch(count: i32, last_timestamp: Option<Time>, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + message.len());
    count_patch_into(&mut out, count, last_timestamp, message);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn worked_example_of_the_reference() {
        assert_eq!(
            s(count_patch(2, Some(Time(1_704_067_202_000_000_000)), "some verbose message: 1")),
            r#"{"count":2,"lastTimestamp":"2024-01-01T00:00:02Z","message":"some verbose message: 1"}"#
        );
    }

    #[test]
    fn keys_equal_to_the_old_copy_are_left_out() {
        assert_eq!(
            s(count_patch(3, Some(Time(1_000_000_000)), "")),
            r#"{"count":3,"lastTimestamp":"1970-01-01T00:00:01Z"}"#
        );
        assert_eq!(s(count_patch(3, Some(Time(999_999_999)), "m")), r#"{"count":3,"message":"m"}"#);
        assert_eq!(s(count_patch(0, None, "")), r#"{"lastTimestamp":null}"#);
    }

    #[test]
    fn escapes_as_go_does() {
        let mut out = Vec::new();
        push_go_json_string(&mut out, "a<b>&\"\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}\u{2028}\u{2029}é✓");
        assert_eq!(
            s(out),
            r#""a\u003cb\u003e\u0026\"\\\b\f\n\r\t\u0001\u001f\u007f\u2028\u2029é✓""#.replace("\\u007f", "\u{7f}")
        );
    }

    #[test]
    fn every_char_is_escaped_as_go_does() {
        // Go's encodeState.string, one char at a time.
        let go = |c: char| match c {
            '"' => "\\\"".to_owned(),
            '\\' => "\\\\".to_owned(),
            '\u{8}' => "\\b".to_owned(),
            '\u{c}' => "\\f".to_owned(),
            '\n' => "\\n".to_owned(),
            '\r' => "\\r".to_owned(),
            '\t' => "\\t".to_owned(),
            '\0'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => format!("\\u{:04x}", c as u32),
            _ => c.to_string(),
        };
        for c in (0..0x3000).chain(0xfff0..0x10100).filter_map(char::from_u32) {
            let mut out = Vec::new();
            push_go_json_string(&mut out, &format!("a{c}{c}b"));
            assert_eq!(s(out), format!("\"a{}{}b\"", go(c), go(c)), "{c:?}");
        }
    }

    #[test]
    fn neighbours_of_u2028_and_odd_counts() {
        let mut out = Vec::new();
        push_go_json_string(&mut out, "\u{2027}\u{202a}\u{2028}x\u{2029}");
        assert_eq!(s(out), "\"\u{2027}\u{202a}\\u2028x\\u2029\"");
        for c in [1, 9, 10, 12345, -1, i32::MAX, i32::MIN] {
            assert_eq!(s(count_patch(c, Some(Time(999_999_999)), "")), format!(r#"{{"count":{c}}}"#));
        }
    }
}
