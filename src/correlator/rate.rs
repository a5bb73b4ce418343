//! The token bucket of `golang.org/x/time/rate`, as client-go's spam filter uses it
//! (`flowcontrol.NewTokenBucketPassiveRateLimiterWithClock` + `TryAccept` = `AllowN(clock.Now(), 1)`).
//!
//! Written out rather than taken from `governor`: governor is a GCRA over integer nanoseconds, while the Go
//! limiter keeps a float64 token count refilled by `elapsed.Seconds() * limit` and accepts when the deficit
//! converts to a zero `time.Duration` (a truncating float-to-int conversion). The two disagree at
//! boundaries (e.g. an acceptance with a deficit under one nanosecond's worth of tokens, or refills that
//! round differently), and the spam decisions must match Go's at every boundary.

use crate::time::Time;

/// Per-bucket state: `tokens` and `last` of `rate.Limiter`. A new bucket is full; the default one is empty.
#[derive(Clone, Debug, Default)]
pub struct TokenBucket {
    tokens: f64,
    /// `None` is Go's zero `time.Time`: so long ago that any refill fills the bucket.
    last: Option<Time>,
}

/// `time.Duration.Seconds()`: whole seconds plus the remainder, so large durations keep their precision.
fn duration_seconds(d: i64) -> f64 {
    let sec = d / 1_000_000_000;
    let nsec = d % 1_000_000_000;
    sec as f64 + nsec as f64 / 1e9
}

/// `Limit.tokensFromDuration`.
fn tokens_from_duration(limit: f64, d: i64) -> f64 {
    if limit <= 0.0 {
        0.0
    } else {
        duration_seconds(d) * limit
    }
}

/// `Limit.durationFromTokens`, `None` for `InfDuration`.
fn duration_from_tokens(limit: f64, tokens: f64) -> Option<i64> {
    if limit <= 0.0 {
        return None;
    }
    let duration = (tokens / limit) * 1e9;
    if duration > i64::MAX as f64 {
        return None;
    }
    // Go's float64 -> int64 conversion truncates toward zero.
    Some(duration as i64)
}

impl TokenBucket {
    /// `rate.NewLimiter(limit, burst)`: full.
    pub fn new(burst: i64) -> Self {
        TokenBucket { tokens: burst as f64, last: None }
    }

    /// `AllowN(now, 1)` with `limit` as Go's `rate.Limit(float32 qps)` and the limiter's `burst`.
    /// A rejection changes nothing.
    pub fn allow(&mut self, now: Time, limit: f64, burst: i64) -> bool {
        if limit == f64::MAX {
            // rate.Inf
            return true;
        }
        // advance(now)
        let elapsed = match self.last {
            Some(last) if now < last => 0,
            Some(last) => now.since(last),
            None => i64::MAX,
        };
        let mut tokens = self.tokens + tokens_from_duration(limit, elapsed);
        if tokens > burst as f64 {
            tokens = burst as f64;
        }
        tokens -= 1.0;
        let wait = if tokens < 0.0 { duration_from_tokens(limit, -tokens) } else { Some(0) };
        let ok = 1 <= burst && wait.is_some_and(|w| w <= 0);
        if ok {
            self.last = Some(now);
            self.tokens = tokens;
        }
        ok
    }

    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    // Go's rate.Limit(float32(1. / 300.)).
    const QPS: f64 = (1.0f32 / 300.0f32) as f64;

    #[test]
    fn starts_full_and_refills_continuously() {
        let mut b = TokenBucket::new(25);
        let t0 = Time(1_700_000_000 * S);
        for i in 0..25 {
            assert!(b.allow(Time(t0.0 + i), QPS, 25), "token {i}");
        }
        assert!(!b.allow(Time(t0.0 + 25), QPS, 25));
        // One token takes 1/QPS seconds (~300 s, a little less since float32(1/300) > 1/300).
        assert!(!b.allow(Time(t0.0 + 24 + 299 * S), QPS, 25));
        assert!(b.allow(Time(t0.0 + 24 + 300 * S), QPS, 25));
        assert!(!b.allow(Time(t0.0 + 24 + 301 * S), QPS, 25));
    }

    #[test]
    fn rejection_does_not_move_last() {
        let mut b = TokenBucket::new(1);
        let t0 = Time(1_700_000_000 * S);
        assert!(b.allow(t0, 1.0, 1));
        // Rejections at +0.5 s do not reset the refill clock: at +1 s a whole token is back.
        assert!(!b.allow(Time(t0.0 + S / 2), 1.0, 1));
        assert!(b.allow(Time(t0.0 + S), 1.0, 1));
    }

    #[test]
    fn deficit_below_one_nanosecond_is_accepted() {
        // limit 1e9 tokens/s: a deficit of 0.4 tokens is 0.4 ns, which truncates to a zero wait.
        let mut b = TokenBucket { tokens: 0.6, last: Some(Time(0)) };
        assert!(b.allow(Time(0), 1e9, 1));
        assert!((b.tokens() + 0.4).abs() < 1e-12);
    }

    #[test]
    fn time_going_backwards_refills_nothing() {
        let mut b = TokenBucket::new(1);
        assert!(b.allow(Time(10 * S), 1.0, 1));
        assert!(!b.allow(Time(5 * S), 1.0, 1));
    }

    #[test]
    fn zero_limit_spends_the_burst_for_good() {
        let mut b = TokenBucket::new(2);
        assert!(b.allow(Time(0), 0.0, 2));
        assert!(b.allow(Time(0), 0.0, 2));
        assert!(!b.allow(Time(1_000 * S), 0.0, 2));
    }
}
