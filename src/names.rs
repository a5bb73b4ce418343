//! Event names: client-go's `util.GenerateEventName` and the DNS subdomain rule it checks.

use std::fmt::Write as _;

/// `IsDNS1123Subdomain`: at most 253 characters of dot-separated labels, each
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            match (b.first(), b.last()) {
                (Some(first), Some(last)) => {
                    alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
                }
                _ => false,
            }
        })
}

/// Appends Go's `fmt.Sprintf("%x", n)` of a signed integer: a minus sign and the magnitude, no padding.
pub fn push_go_hex(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    let _ = write!(out, "{:x}", n.unsigned_abs());
}

/// `<ref_name>.<hex UnixNano>`, or a fresh UUIDv4 from `uuid` when that is not a DNS subdomain.
pub fn generate_event_name(ref_name: &str, unix_nanos: i64, uuid: impl FnOnce() -> String) -> String {
    let mut name = String::with_capacity(ref_name.len() + 17);
    name.push_str(ref_name);
    name.push('.');
    push_go_hex(&mut name, unix_nanos);
    if is_dns1123_subdomain(&name) {
        name
    } else {
        uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // client-go's TestGenerateEventName.
    #[test]
    fn generate_event_name_matches_client_go() {
        let ts = 105_999_103_295_324_396;
        let uuid = || uuid::Uuid::new_v4().to_string();
        assert_eq!(generate_event_name("test-pod", ts, uuid), "test-pod.178959f726d80ec");
        for bad in ["x".repeat(300).as_str(), "test.POD", "test.pod/invalid!chars?", "--test.pod/invalid!chars?"] {
            let name = generate_event_name(bad, ts, uuid);
            assert!(is_dns1123_subdomain(&name), "{name}");
            assert!(uuid::Uuid::parse_str(&name).is_ok(), "{name} is not a UUID");
        }
    }

    #[test]
    fn subdomain_rule() {
        assert!(is_dns1123_subdomain("a"));
        assert!(is_dns1123_subdomain("a-b.c0"));
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        for bad in ["", ".a", "a.", "a..b", "-a", "a-", "A", "a_b", "a.-b", "é"] {
            assert!(!is_dns1123_subdomain(bad), "{bad:?}");
        }
    }

    #[test]
    fn go_hex_of_negative_numbers() {
        let mut s = String::new();
        push_go_hex(&mut s, -255);
        assert_eq!(s, "-ff");
        // An empty or negative-time name is not a subdomain, so the UUID fallback applies.
        assert_eq!(generate_event_name("", 1, || "u".into()), "u");
        assert_eq!(generate_event_name("a", -1, || "u".into()), "u");
    }
}
