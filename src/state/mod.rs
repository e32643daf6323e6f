//! The state calls share across requests and replicas: idempotency records
//! and retry budgets (docs/architecture.md, "Once-only calls and budgets"), as opaque byte records under
//! string keys. The store knows nothing of outcomes; the executor gives the
//! bytes their meaning. Every operation is atomic on its own (claim if
//! absent, replace if unchanged, increment): no read-then-write.
//!
//! Two stores: in memory (one process, bounded) and Redis or Valkey
//! ([`redis::RedisStore`]), which several replicas share.
//!
//! Keys are `toolgate:<kind>:<owner>:<…>`: the owner (a principal) is the
//! third part, so that a store can hold each owner's records apart.

pub(crate) mod memory;
pub(crate) mod redis;

use std::{future::Future, pin::Pin, time::Duration};

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
