//! Event names: client-go's `util.GenerateEventName` and the DNS subdomain rule it checks.

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
    const HEX: &[u8; 16] = b"0123456789abcdef";
    if n < 0 {
        out.push('-');
    }
    let mut v = n.unsigned_abs();
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = HEX[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    out.extend(buf[i..].iter().map(|&c| char::from(c)));
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
        for n in [0, 1, 15, 16, i64::MAX, i64::MIN, 1_704_067_201_000_000_000] {
            let mut s = String::new();
            push_go_hex(&mut s, n);
            let expected = if n < 0 { format!("-{:x}", n.unsigned_abs()) } else { format!("{n:x}") };
            assert_eq!(s, expected);
        }
        // An empty or negative-time name is not a subdomain, so the UUID fallback applies.
        assert_eq!(generate_event_name("", 1, || "u".into()), "u");
        assert_eq!(generate_event_name("a", -1, || "u".into()), "u");
    }
}
