//! The kubelet's pod lifecycle event generator (`pkg/kubelet/pleg`) and pod status cache
//! (`pkg/kubelet/container/cache.go`), decision for decision. Design notes: docs/pleg.md.
//!
//! * `pod`: runtime pods and containers as the relist sees them, and the lifecycle events.
//! * `diff`: the pure old-vs-new comparison behind every relist (`generateEvents`).
//! * `records`: the per-pod `old`/`current` snapshots (`podRecords`).
//! * `cache`: the pod status cache with `GetNewerThan` waiters.
//! * `channel`: the bounded queue with non-blocking sends (the event channel, the relist requests).
//! * `generic`: GenericPLEG (relist, reinspection, watch conditions, health, the relist loop).
//! * `evented`: EventedPLEG (CRI container events into the cache and the channel, stream fall-back).

pub mod cache;
pub mod channel;
pub mod diff;
pub mod evented;
pub mod generic;
pub mod pod;
pub mod records;

#[cfg(test)]
mod tests;

pub use cache::{Lookup, PodCache};
pub use channel::EventChannel;
pub use diff::{diff, diff_into};
pub use evented::{CriEvent, CriEventType, EventedOptions, EventedPleg};
pub use generic::{GenericPleg, PlegOptions, RelistDuration, Runtime};
pub use pod::{Container, ContainerState, Pod, PodLifecycleEvent, PodLifecycleEventType, StatusView};

/// Formats nanoseconds as Go's `time.Duration.String()` does (`3m0s`, `1.5s`, `250ms`), for the
/// health messages, which quote it.
pub fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let neg = nanos < 0;
    let u = nanos.unsigned_abs();
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if u < 1_000_000_000 {
        // Sub-second values use the largest unit that keeps a non-zero integer part.
        let (unit, div) = if u < 1_000 {
            ("ns", 1)
        } else if u < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        s.push_str(&frac(u, div));
        s.push_str(unit);
        return s;
    }
    let h = u / 3_600_000_000_000;
    let m = (u / 60_000_000_000) % 60;
    let rem = u % 60_000_000_000;
    if h > 0 {
        s.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        s.push_str(&format!("{m}m"));
    }
    s.push_str(&frac(rem, 1_000_000_000));
    s.push('s');
    s
}

/// `v / div` with the fraction's trailing zeros trimmed, as Go prints it.
fn frac(v: u64, div: u64) -> String {
    let whole = v / div;
    let rest = v % div;
    if rest == 0 {
        return whole.to_string();
    }
    let width = div.ilog10() as usize;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod duration_tests {
    use super::go_duration;

    #[test]
    fn durations_print_as_go_does() {
        assert_eq!(go_duration(180_000_000_000), "3m0s");
        assert_eq!(go_duration(185_300_154_470), "3m5.30015447s");
        assert_eq!(go_duration(240_000_000_000), "4m0s");
        assert_eq!(go_duration(600_000_000_000), "10m0s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(250_000_000), "250ms");
        assert_eq!(go_duration(1_500), "1.5µs");
        assert_eq!(go_duration(7), "7ns");
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(-2_000_000_000), "-2s");
    }
}
