//! Instants as nanoseconds since the Unix epoch, and their Kubernetes JSON forms.
//!
//! `metav1.Time` marshals as RFC 3339 with whole seconds and `Z`; `metav1.MicroTime` with six fractional
//! digits. Go's zero time (year 1) marshals as `null`; it is `None` here, since year 1 does not fit in i64
//! nanoseconds. Formatting is written out by hand because it sits on the correlator's hot path (every repeat
//! formats `lastTimestamp` into a patch); parsing uses the `time` crate.

use serde::{Deserialize, Deserializer, Serializer};

pub const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// Float seconds (epoch seconds or a duration) as nanoseconds, whole and fractional parts apart so large
/// epochs keep their precision; None when not finite or out of range.
pub fn nanos_from_secs_f64(secs: f64) -> Option<i64> {
    if !secs.is_finite() || secs.abs() > 9.2e9 {
        return None;
    }
    let whole = secs.floor();
    let frac = ((secs - whole) * 1e9).round() as i64;
    (whole as i64).checked_mul(NANOS_PER_SECOND)?.checked_add(frac)
}

/// A duration option in nanoseconds, checked: at least 0, or more than 0 when `positive`.
pub fn check_duration(ns: i64, what: &str, positive: bool) -> Result<i64, crate::error::Error> {
    if ns < 0 || (positive && ns == 0) {
        let bound = if positive { ">" } else { ">=" };
        let secs = ns as f64 / NANOS_PER_SECOND as f64;
        return Err(crate::error::Error::Option(format!("{what} must be {bound} 0 seconds, got {secs}")));
    }
    Ok(ns)
}

/// An instant, nanoseconds since 1970-01-01T00:00:00Z (Go's `time.Time` inside `metav1.Time`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub i64);

impl Time {
    pub const UNIX_EPOCH: Time = Time(0);

    pub fn from_unix_nanos(ns: i64) -> Self {
        Time(ns)
    }

    pub fn unix_nanos(self) -> i64 {
        self.0
    }

    /// Go's `t.Sub(u)`: saturating at the ends of the duration range.
    pub fn since(self, earlier: Time) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    pub fn add_nanos(self, d: i64) -> Time {
        Time(self.0.saturating_add(d))
    }

    /// Epoch seconds as an instant; `what` names the value in the error.
    pub fn from_unix_secs(secs: i64, what: &str) -> Result<Time, crate::error::Error> {
        let outside = || crate::error::Error::value(what, format!("{secs} s is outside years 1678..2261"));
        secs.checked_mul(NANOS_PER_SECOND).map(Time).ok_or_else(outside)
    }

    /// Float epoch seconds as an instant (see `nanos_from_secs_f64`).
    pub fn from_unix_secs_f64(secs: f64, what: &str) -> Result<Time, crate::error::Error> {
        let outside = || crate::error::Error::value(what, format!("{secs} s is not a finite time in years 1678..2261"));
        nanos_from_secs_f64(secs).map(Time).ok_or_else(outside)
    }

    /// The instant `metav1.Time` keeps of this one: its whole seconds (floored, also before 1970). None in the
    /// last fraction of a second of the range, whose floor is outside it.
    pub fn whole_seconds(self) -> Option<Time> {
        split(self.0).0.checked_mul(NANOS_PER_SECOND).map(Time)
    }

    /// `2006-01-02T15:04:05Z` (RFC 3339, whole seconds, UTC), as `metav1.Time` writes it.
    pub fn rfc3339_bytes(self) -> [u8; 20] {
        let mut b = [0u8; 20];
        let (secs, _) = split(self.0);
        write_civil(secs, &mut b);
        b[19] = b'Z';
        b
    }

    pub fn write_rfc3339(self, out: &mut String) {
        // Every byte is ASCII.
        out.extend(self.rfc3339_bytes().iter().map(|&c| char::from(c)));
    }

    /// `2006-01-02T15:04:05.000000Z` (RFC 3339, microseconds, UTC), as `metav1.MicroTime` writes it.
    pub fn rfc3339_micro_bytes(self) -> [u8; 27] {
        let (secs, nanos) = split(self.0);
        let mut b = [0u8; 27];
        write_civil(secs, &mut b);
        b[19] = b'.';
        let mut micros = nanos / 1000;
        for digit in b[20..26].iter_mut().rev() {
            *digit = b'0' + (micros % 10) as u8;
            micros /= 10;
        }
        b[26] = b'Z';
        b
    }

    pub fn write_rfc3339_micro(self, out: &mut String) {
        // Every byte is ASCII.
        out.extend(self.rfc3339_micro_bytes().iter().map(|&c| char::from(c)));
    }

    /// UTC calendar fields: (year, month, day, hour, minute, second, nanosecond).
    pub fn to_civil(self) -> (i64, u32, u32, u32, u32, u32, u32) {
        let (secs, nanos) = split(self.0);
        let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400) as u32;
        (y, m, d, sod / 3600, sod / 60 % 60, sod % 60, nanos as u32)
    }

    /// The instant of UTC calendar fields, `None` outside the i64 nanosecond range.
    pub fn from_civil(
        year: i64,
        month: u32,
        day: u32,
        hour: u32,
        minute: u32,
        second: u32,
        nanos: u32,
    ) -> Option<Time> {
        let days = i128::from(days_from_civil(year, month, day));
        let secs = days * 86_400 + i128::from(hour * 3600 + minute * 60 + second);
        i64::try_from(secs * i128::from(NANOS_PER_SECOND) + i128::from(nanos)).ok().map(Time)
    }

    pub fn to_rfc3339(self) -> String {
        let mut s = String::with_capacity(20);
        self.write_rfc3339(&mut s);
        s
    }

    pub fn to_rfc3339_micro(self) -> String {
        let mut s = String::with_capacity(27);
        self.write_rfc3339_micro(&mut s);
        s
    }

    /// Parses RFC 3339 (any offset, optional fractional seconds), as `metav1.Time.UnmarshalJSON` accepts.
    pub fn parse_rfc3339(s: &str) -> Result<Time, TimeError> {
        let dt = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
            .map_err(|e| TimeError::Parse(format!("{s:?} is not an RFC 3339 timestamp: {e}")))?;
        i64::try_from(dt.unix_timestamp_nanos()).map(Time).map_err(|_| TimeError::OutOfRange(s.to_owned()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeError {
    Parse(String),
    OutOfRange(String),
}

impl std::fmt::Display for TimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeError::Parse(m) => f.write_str(m),
            TimeError::OutOfRange(s) => {
                write!(f, "{s:?} is outside the supported range (years 1678 to 2261)")
            }
        }
    }
}

impl std::error::Error for TimeError {}

/// Floor division into (seconds, nanoseconds in [0, 1e9)), so instants before 1970 format correctly.
fn split(ns: i64) -> (i64, i64) {
    (ns.div_euclid(NANOS_PER_SECOND), ns.rem_euclid(NANOS_PER_SECOND))
}

fn put2(out: &mut [u8], at: usize, v: u32) {
    out[at] = b'0' + (v / 10) as u8;
    out[at + 1] = b'0' + (v % 10) as u8;
}

/// Writes `YYYY-MM-DDTHH:MM:SS` into the first 19 bytes.
fn write_civil(secs: i64, out: &mut [u8]) {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    // i64 nanoseconds span years 1677..2262, so the year always has four digits.
    let y = y as u32;
    put2(out, 0, y / 100);
    put2(out, 2, y % 100);
    out[4] = b'-';
    put2(out, 5, m);
    out[7] = b'-';
    put2(out, 8, d);
    out[10] = b'T';
    put2(out, 11, sod / 3600);
    out[13] = b':';
    put2(out, 14, sod / 60 % 60);
    out[16] = b':';
    put2(out, 17, sod % 60);
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Proleptic Gregorian (year, month, day) to days since 1970-01-01 (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// serde for `metav1.Time` fields: RFC 3339 seconds, `null` for the zero time.
pub mod rfc3339 {
    use super::*;

    pub fn serialize<S: Serializer>(t: &Option<Time>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&t.to_rfc3339()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
        let s: Option<std::borrow::Cow<'de, str>> = Option::deserialize(d)?;
        match s.as_deref() {
            None | Some("") => Ok(None),
            Some(s) => Time::parse_rfc3339(s).map(Some).map_err(serde::de::Error::custom),
        }
    }
}

/// serde for `metav1.MicroTime` fields: RFC 3339 with microseconds, `null` for the zero time.
pub mod rfc3339_micro {
    use super::*;

    pub fn serialize<S: Serializer>(t: &Option<Time>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&t.to_rfc3339_micro()),
            None => s.serialize_none(),
        }
    }

    pub use super::rfc3339::deserialize;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_seconds_keep_their_precision() {
        assert_eq!(nanos_from_secs_f64(1.5), Some(1_500_000_000));
        assert_eq!(nanos_from_secs_f64(-0.25), Some(-250_000_000));
        assert_eq!(nanos_from_secs_f64(1_700_000_000.5), Some(1_700_000_000_500_000_000));
        assert_eq!(nanos_from_secs_f64(f64::NAN), None);
        assert_eq!(nanos_from_secs_f64(1e10), None);
    }

    #[test]
    fn epoch_seconds() {
        assert_eq!(Time::from_unix_secs(2, "t").unwrap(), Time(2 * NANOS_PER_SECOND));
        assert_eq!(
            Time::from_unix_secs(i64::MAX, "t").unwrap_err().to_string(),
            format!("t: {} s is outside years 1678..2261", i64::MAX)
        );
        assert_eq!(Time::from_unix_secs_f64(0.5, "t").unwrap(), Time(NANOS_PER_SECOND / 2));
        assert_eq!(
            Time::from_unix_secs_f64(f64::INFINITY, "t").unwrap_err().to_string(),
            "t: inf s is not a finite time in years 1678..2261"
        );
    }

    #[test]
    fn durations_are_checked() {
        assert_eq!(check_duration(0, "timeout", false).unwrap(), 0);
        assert_eq!(
            check_duration(0, "relist_period", true).unwrap_err().to_string(),
            "relist_period must be > 0 seconds, got 0"
        );
        assert_eq!(
            check_duration(-1, "timeout", false).unwrap_err().to_string(),
            "timeout must be >= 0 seconds, got -0.000000001"
        );
    }

    #[test]
    fn formats_whole_seconds_in_utc() {
        assert_eq!(Time(1_704_067_201_000_000_000).to_rfc3339(), "2024-01-01T00:00:01Z");
        assert_eq!(Time(1_704_067_201_999_999_999).to_rfc3339(), "2024-01-01T00:00:01Z");
        assert_eq!(Time(0).to_rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(Time(-1).to_rfc3339(), "1969-12-31T23:59:59Z");
        assert_eq!(Time(951_782_400 * NANOS_PER_SECOND).to_rfc3339(), "2000-02-29T00:00:00Z");
        assert_eq!(Time(i64::MAX).to_rfc3339(), "2262-04-11T23:47:16Z");
        assert_eq!(Time(i64::MIN).to_rfc3339(), "1677-09-21T00:12:43Z");
    }

    #[test]
    fn whole_seconds_floor_like_the_formatting() {
        assert_eq!(Time(1_704_067_201_999_999_999).whole_seconds(), Some(Time(1_704_067_201_000_000_000)));
        assert_eq!(Time(-1).whole_seconds(), Some(Time(-NANOS_PER_SECOND)));
        assert_eq!(Time(i64::MAX).whole_seconds(), Some(Time(i64::MAX / NANOS_PER_SECOND * NANOS_PER_SECOND)));
        assert_eq!(Time(i64::MIN).whole_seconds(), None);
        for t in [Time(1_704_067_201_500_000_000), Time(-1), Time(i64::MAX)] {
            assert_eq!(Time::parse_rfc3339(&t.to_rfc3339()).ok(), t.whole_seconds());
        }
    }

    #[test]
    fn formats_microseconds() {
        assert_eq!(Time(1_704_067_201_123_456_789).to_rfc3339_micro(), "2024-01-01T00:00:01.123456Z");
        assert_eq!(Time(-1).to_rfc3339_micro(), "1969-12-31T23:59:59.999999Z");
        assert_eq!(Time(1_704_067_201_000_999_999).to_rfc3339_micro(), "2024-01-01T00:00:01.000999Z");
        assert_eq!(Time(i64::MAX).to_rfc3339_micro(), "2262-04-11T23:47:16.854775Z");
        assert_eq!(Time(i64::MIN).to_rfc3339_micro(), "1677-09-21T00:12:43.145224Z");
        for t in [Time(0), Time(1_704_067_201_123_456_000), Time(-1_000)] {
            assert_eq!(Time::parse_rfc3339(&t.to_rfc3339_micro()), Ok(t));
        }
    }

    #[test]
    fn parses_offsets_and_fractions() {
        assert_eq!(Time::parse_rfc3339("2024-01-01T00:00:01Z").unwrap(), Time(1_704_067_201_000_000_000));
        assert_eq!(Time::parse_rfc3339("2024-01-01T02:00:01.5+02:00").unwrap(), Time(1_704_067_201_500_000_000));
        assert!(matches!(Time::parse_rfc3339("yesterday"), Err(TimeError::Parse(_))));
        assert!(matches!(Time::parse_rfc3339("2300-01-01T00:00:00Z"), Err(TimeError::OutOfRange(_))));
    }

    #[test]
    fn civil_fields_round_trip() {
        for ns in [0, -1, 1_704_067_201_123_456_789, i64::MAX, i64::MIN] {
            let (y, mo, d, h, mi, s, n) = Time(ns).to_civil();
            assert_eq!(Time::from_civil(y, mo, d, h, mi, s, n), Some(Time(ns)));
        }
        assert_eq!(Time::from_civil(9999, 1, 1, 0, 0, 0, 0), None);
    }

    #[test]
    fn civil_round_trip_over_many_days() {
        // Every day of 1900..2100 formats to a date that the parser maps back to the same instant.
        for day in -25_567..47_482i64 {
            let t = Time(day * 86_400 * NANOS_PER_SECOND + 3_723 * NANOS_PER_SECOND);
            assert_eq!(Time::parse_rfc3339(&t.to_rfc3339()).unwrap(), t);
        }
    }
}
