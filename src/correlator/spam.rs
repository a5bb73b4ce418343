//! `EventSourceObjectSpamFilter`: one token bucket per spam key, in an LRU of buckets.

use std::num::NonZeroUsize;

use super::rate::TokenBucket;
use crate::error::Result;
use crate::lru::Lru;
use crate::time::Time;

pub struct SpamFilter {
    cache: Lru<TokenBucket>,
    limit: f64,
    burst: i64,
}

impl SpamFilter {
    pub fn new(size: NonZeroUsize, qps: f32, burst: i64) -> Self {
        // The Go limiter is built from a float32 QPS, so the refill rate is float32(qps) widened to float64.
        SpamFilter { cache: Lru::new(size), limit: f64::from(qps), burst }
    }

    /// `Filter`: true means the event is spam and must be skipped. As in Go, the bucket is looked up
    /// (`Get`) before the clock is read, and a new bucket is added only once the clock has been read.
    pub fn filter(&mut self, key: &[u8], now: impl FnOnce() -> Result<Time>) -> Result<bool> {
        let hash = self.cache.hash(key);
        if let Some(bucket) = self.cache.get(hash, key) {
            return Ok(!bucket.allow(now()?, self.limit, self.burst));
        }
        let now = now()?;
        let (bucket, _) = self.cache.add(hash, key);
        *bucket = TokenBucket::new(self.burst);
        Ok(!bucket.allow(now, self.limit, self.burst))
    }

    pub fn len(&self) -> usize {
        self.cache.len()
    }
}
