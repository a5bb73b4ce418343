//! `EventSourceObjectSpamFilter`: one token bucket per spam key, in an LRU of buckets.

use std::num::NonZeroUsize;

use lru::LruCache;

use super::rate::TokenBucket;
use crate::time::Time;

pub struct SpamFilter {
    cache: LruCache<String, TokenBucket>,
    limit: f64,
    burst: i64,
}

impl SpamFilter {
    pub fn new(size: NonZeroUsize, qps: f32, burst: i64) -> Self {
        // The Go limiter is built from a float32 QPS, so the refill rate is float32(qps) widened to float64.
        SpamFilter { cache: LruCache::new(size), limit: f64::from(qps), burst }
    }

    /// `Filter`: true means the event is spam and must be skipped. `key` is consumed; an evicted key's
    /// buffer is handed back for reuse.
    pub fn filter(&mut self, key: &mut String, now: impl FnOnce() -> crate::error::Result<Time>) -> crate::error::Result<bool> {
        let now_ref;
        if let Some(bucket) = self.cache.get_mut(key.as_str()) {
            now_ref = now()?;
            return Ok(!bucket.allow(now_ref, self.limit, self.burst));
        }
        let mut bucket = TokenBucket::new(self.burst);
        now_ref = now()?;
        let accepted = bucket.allow(now_ref, self.limit, self.burst);
        if let Some((mut old_key, _)) = self.cache.push(std::mem::take(key), bucket) {
            old_key.clear();
            *key = old_key;
        }
        Ok(!accepted)
    }

    pub fn len(&self) -> usize {
        self.cache.len()
    }

}
