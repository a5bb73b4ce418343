//! Event names: client-go's `util.GenerateEventName` and the DNS subdomain rule it checks.

/// `IsDNS1123Subdomain`: at most 253 characters of dot-separated labels, each
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 253 {
        return false;
    }
    // One pass: a label starts and ends with an alphanumeric, so the string does too, and a '.' or '-' is
    // never next to a '.'.
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut prev = b'.';
    for &c in b {
        let ok = if alnum(c) { true } else { (c == b'-' && prev != b'.') || (c == b'.' && alnum(prev)) };
        if !ok {
            return false;
        }
        prev = c;
    }
    alnum(prev)
}

/// The eight hex digits of `x`, most significant first, as ASCII bytes in a u64 (SWAR: no loop, no table).
fn hex8(x: u32) -> u64 {
    // Spread the nibbles one per byte (byte k, little-endian, holds nibble k), then map 0-9 and 10-15 to
    // '0'-'9' and 'a'-'f': a byte past 9 gets 39 more.
    let mut v = u64::from(x);
    v = (v | (v << 16)) & 0x0000_ffff_0000_ffff;
    v = (v | (v << 8)) & 0x00ff_00ff_00ff_00ff;
    v = (v | (v << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    let past_nine = ((v + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    (v + 0x3030_3030_3030_3030 + past_nine * 39).swap_bytes()
}

/// Appends Go's `fmt.Sprintf("%x", n)` of a signed integer: a minus sign and the magnitude, no padding.
pub fn push_go_hex(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    let v = n.unsigned_abs();
    let mut digits = [0u8; 16];
    digits[..8].copy_from_slice(&hex8((v >> 32) as u32).to_le_bytes());
    digits[8..].copy_from_slice(&hex8(v as u32).to_le_bytes());
    // No leading zero digit.
    let len = (64 - v.leading_zeros() as usize).div_ceil(4).max(1);
    // SAFETY: `hex8` writes only the ASCII digits 0-9 and a-f.
    out.push_str(unsafe { std::str::from_utf8_unchecked(&digits[16 - len..]) });
}

/// Whether `<ref_name>.<hex unix_nanos>` is a DNS subdomain, without building it: the hex label is valid
/// unless it has a minus sign, so this comes down to the reference name and the length.
pub fn event_name_is_subdomain(ref_name: &str, unix_nanos: i64) -> bool {
    let hex_digits = (64 - unix_nanos.leading_zeros() as usize).div_ceil(4).max(1);
    unix_nanos >= 0 && ref_name.len() + 1 + hex_digits <= 253 && is_dns1123_subdomain(ref_name)
}

/// `<ref_name>.<hex UnixNano>`, or a fresh UUIDv4 from `uuid` when that is not a DNS subdomain.
pub fn generate_event_name(ref_name: &str, unix_nanos: i64, uuid: impl FnOnce() -> String) -> String {
    if !event_name_is_subdomain(ref_name, unix_nanos) {
        return uuid();
    }
    let mut name = String::with_capacity(ref_name.len() + 17);
    name.push_str(ref_name);
    name.push('.');
    push_go_hex(&mut name, unix_nanos);
    name
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
        assert!(is_dns1123_subdomain("a--b.0-0.9"));
        for bad in ["", ".", "-", ".a", "a.", "a..b", "-a", "a-", "A", "a_b", "a.-b", "a-.b", "é", "a.é"] {
            assert!(!is_dns1123_subdomain(bad), "{bad:?}");
        }
    }

    #[test]
    fn subdomain_rule_matches_the_per_label_definition() {
        let by_labels = |s: &str| {
            s.len() <= 253
                && s.split('.').all(|l| {
                    let b = l.as_bytes();
                    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
                    !b.is_empty() && alnum(&b[0]) && alnum(&b[b.len() - 1]) && b.iter().all(|c| alnum(c) || *c == b'-')
                })
        };
        let alphabet = ['a', '0', '-', '.', 'A'];
        let mut strings = vec![String::new()];
        for _ in 0..6 {
            let longer: Vec<String> =
                strings.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            for s in &longer {
                assert_eq!(is_dns1123_subdomain(s), by_labels(s), "{s:?}");
            }
            strings = longer;
        }
    }

    #[test]
    fn event_name_check_matches_checking_the_built_name() {
        let long = |n: usize| "a".repeat(n);
        let names = ["", "a", "a.b", "a-", "-a", "a.", ".", "A", "pod-0", "x_y", &long(235), &long(236), &long(252)];
        for name in names {
            for n in [0, 1, 15, 16, 255, 1 << 60, i64::MAX, -1, i64::MIN, 1_704_067_201_000_000_000] {
                let mut built = format!("{name}.");
                push_go_hex(&mut built, n);
                assert_eq!(event_name_is_subdomain(name, n), is_dns1123_subdomain(&built), "{name:?} {n}");
            }
        }
    }

    #[test]
    fn go_hex_of_negative_numbers() {
        let mut s = String::new();
        push_go_hex(&mut s, -255);
        assert_eq!(s, "-ff");
        for n in
            [0, 1, 15, 16, 255, 256, 4095, 4096, 1 << 32, i64::MAX, i64::MIN, i64::MIN + 1, 1_704_067_201_000_000_000]
                .into_iter()
                // Every digit count and every digit value.
                .chain((0..64).flat_map(|k| {
                    [1i64 << k, (1i64 << k).wrapping_sub(1), 0x0123_4567_89ab_cdef >> k, -(0x7edc_ba98_7654_3210 >> k)]
                }))
        {
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
