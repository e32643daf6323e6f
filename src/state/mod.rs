//! The state calls share across requests and replicas: idempotency records
//! and retry budgets (docs/architecture.md, "Once-only calls and budgets"), as opaque byte records under
//! string keys. The store knows nothing of outcomes; the executor gives the
//! bytes their meaning. Every operation is atomic on its own (claim if
//! absent, replace if unchanged, increment): no read-then-write.
//!
//! Two stores: in memory (one process, bounded) and Redis or Valkey
//! ([`redis::RedisStore`]), which several replicas share.
//!
//! Rate limits are GCRA buckets ([`Store::admit`]): a bucket is one time
//! (its theoretical arrival time), checked and moved atomically for every
//! bucket a call touches, all or none.
//!
//! Keys are `toolgate:<kind>:<owner>:<…>`: the owner (a principal) is the
//! third part, so that a store can hold each owner's records apart.

pub(crate) mod memory;
pub(crate) mod redis;

use std::{collections::BTreeMap, future::Future, pin::Pin, time::Duration};

use serde::Deserialize;

pub(crate) use memory::{MemoryStore, DEFAULT_MAX_RECORDS};
pub(crate) use redis::{check_url, RedisStore};

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why the store could not answer. The caller decides what that means
/// (idempotency fails closed, budgets fail open).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("the state store is unreachable: {0}")]
    Unavailable(String),
    /// The store holds as many live records of this owner (or in all) as
    /// it may; none is dropped to make room.
    #[error("the state store is full for this caller: {0}")]
    Full(String),
}

/// Opaque records with a time to live.
pub(crate) trait Store: Send + Sync {
    /// Sets `key` to `value` for `ttl` if it is absent: `None`, claimed;
    /// else the record already there.
    fn claim<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>>;

    /// Sets `key` to `value` for `ttl` if it still holds `expected`; whether
    /// it did.
    fn replace<'a>(
        &'a self,
        key: &'a str,
        expected: &'a [u8],
        value: &'a [u8],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// The record of `key`, if any.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>>;

    /// Removes `key` if it still holds `expected` (so a release never
    /// removes what another call claimed since).
    fn remove<'a>(&'a self, key: &'a str, expected: &'a [u8]) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Adds one to the counter `key` (0 if absent), keeps it `ttl` from
    /// now; the new count.
    fn increment<'a>(&'a self, key: &'a str, ttl: Duration) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// Removes the counter `key`.
    fn reset<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;

    /// One call through every bucket of `buckets`, atomically: if each has
    /// room, each takes the call; if one is empty, none does.
    fn admit<'a>(&'a self, buckets: &'a [Bucket]) -> BoxFuture<'a, Result<Admission, StoreError>>;
}

/// A rate-limit bucket (GCRA, a token bucket without timers): one call
/// every `interval` sustained, `burst` back to back on a full bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub(crate) key: String,
    pub(crate) interval: Duration,
    pub(crate) burst: u32,
}

/// What [`Store::admit`] answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Every bucket took the call: how many more calls each would take now.
    Admitted(Vec<u32>),
    /// Bucket `index` had no room: no bucket took the call, which would pass
    /// after `retry_after`.
    Limited { index: usize, retry_after: Duration },
}

/// GCRA over buckets whose theoretical arrival times (µs, on the clock
/// `now` reads) are `tats` (0: never used): the new times and the room
/// left in each, or the first bucket without room and how long until it
/// has some. A bucket has room while its time is at most `interval ×
/// (burst − 1)` ahead of now.
pub(crate) fn gcra(buckets: &[Bucket], tats: &[u64], now: u64) -> Result<Vec<(u64, u32)>, (usize, Duration)> {
    let mut next = Vec::with_capacity(buckets.len());
    for (index, (bucket, &tat)) in buckets.iter().zip(tats).enumerate() {
        let interval = bucket.interval.as_micros().max(1) as u64;
        let tolerance = interval * u64::from(bucket.burst.max(1) - 1);
        let tat = tat.max(now);
        let ahead = tat - now;
        if ahead > tolerance {
            return Err((index, Duration::from_micros(ahead - tolerance)));
        }
        let new = tat + interval;
        let room = (interval * u64::from(bucket.burst.max(1))).saturating_sub(new - now) / interval;
        next.push((new, room as u32));
    }
    Ok(next)
}

/// `rate_limits:` of the configuration file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateLimitsConfig {
    /// Each principal's requests (and the anonymous caller's).
    pub(crate) principal: Option<RateConfig>,
    /// Each (principal, user)'s calls.
    pub(crate) user: Option<RateConfig>,
    /// Calls of one tool, counted per user, per principal or in all.
    #[serde(default)]
    pub(crate) tools: BTreeMap<String, ToolRateConfig>,
}

/// One limit as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateConfig {
    pub(crate) per_minute: Option<f64>,
    pub(crate) burst: Option<f64>,
    pub(crate) concurrent: Option<f64>,
}

/// A tool's limit as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolRateConfig {
    pub(crate) per_minute: Option<f64>,
    pub(crate) burst: Option<f64>,
    pub(crate) per: Option<String>,
}

/// `state:` of the configuration file.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateConfig {
    /// `redis://HOST:6379/0` (or `rediss://`): shared by every replica.
    pub(crate) redis: Option<String>,
    /// How long an idempotency record is kept (default 24 h).
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) idempotency_ttl: Option<Duration>,
    /// How long an idle session's budgets are kept (default 1 h).
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) session_ttl: Option<Duration>,
    /// Without `redis`: records kept in memory at most (default 100,000), a
    /// quarter of them per principal.
    pub(crate) max_records: Option<usize>,
}

/// Durations written as `24h`, `90s`.
mod humantime_serde_opt {
    use std::time::Duration;

    use serde::Deserialize;

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
        let text: Option<String> = Option::deserialize(deserializer)?;
        text.map(|t| humantime::parse_duration(&t).map_err(serde::de::Error::custom)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcra_lets_a_burst_through_then_one_call_per_interval() {
        let bucket = Bucket { key: "k".into(), interval: Duration::from_secs(30), burst: 2 };
        let second = 1_000_000;
        let buckets = std::slice::from_ref(&bucket);
        // Two back to back (burst 2), then the third waits 30 s.
        let [(tat, room)] = gcra(buckets, &[0], 100 * second).unwrap()[..] else { panic!() };
        assert_eq!(room, 1);
        let [(tat, room)] = gcra(buckets, &[tat], 100 * second).unwrap()[..] else { panic!() };
        assert_eq!(room, 0);
        assert_eq!(gcra(buckets, &[tat], 100 * second), Err((0, Duration::from_secs(30))));
        assert_eq!(gcra(buckets, &[tat], 120 * second), Err((0, Duration::from_secs(10))));
        assert!(gcra(buckets, &[tat], 130 * second).is_ok());
        // All or none: the second bucket's refusal names it.
        let full = Bucket { key: "f".into(), interval: Duration::from_secs(1), burst: 1 };
        let both = [bucket.clone(), full];
        assert_eq!(gcra(&both, &[0, 5 * second], 4 * second), Err((1, Duration::from_secs(1))));
    }
}
