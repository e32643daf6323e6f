//! The state in Redis or Valkey, shared by every replica. Each operation is
//! one atomic command or Lua script, answered within 500 ms in all
//! (reconnection included) or counted as the store being unreachable. The connection (the `redis` crate's
//! tokio connection manager, which reconnects by itself) is made on first
//! use and again after a failure, at most once a second: the gateway starts
//! while Redis is down, and a call that needs it meanwhile gets
//! [`StoreError::Unavailable`] at once instead of waiting.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use ::redis::{aio::ConnectionManager, AsyncCommands, Client, Script};
use tokio::sync::Mutex as AsyncMutex;

use super::{Admission, BoxFuture, Bucket, Store, StoreError};

/// How long one command may take, and a connection attempt.
const TIMEOUT: Duration = Duration::from_millis(500);
/// The least time between two connection attempts.
const RETRY_AFTER: Duration = Duration::from_secs(1);

pub(crate) struct RedisStore {
    client: Client,
    connection: AsyncMutex<Option<ConnectionManager>>,
    last_attempt: Mutex<Option<Instant>>,
    claim: Script,
    replace: Script,
    remove: Script,
    increment: Script,
    admit: Script,
}

/// Whether `url` is a Redis URL this store can use (`redis://`, `rediss://`,
/// `unix://`): checked without connecting or building anything.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    ::redis::IntoConnectionInfo::into_connection_info(url)
        .map(|_| ())
        .map_err(|err| format!("invalid Redis URL: {err}"))
}

impl RedisStore {
    /// For a `redis://` or `rediss://` URL (checked now: a malformed one is
    /// an error); nothing is connected yet.
    pub(crate) fn new(url: &str) -> Result<Self, String> {
        let client = Client::open(url).map_err(|err| format!("invalid Redis URL: {err}"))?;
        Ok(Self {
            client,
            connection: AsyncMutex::new(None),
            last_attempt: Mutex::new(None),
            // Set if absent, else return what is there.
            claim: Script::new(
                "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end \
                 return redis.call('GET', KEYS[1])",
            ),
            replace: Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                 redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end return 0",
            ),
            remove: Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end return 1",
            ),
            increment: Script::new(
                "local n = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return n",
            ),
            // GCRA over every bucket, all or none (state::gcra, in Lua), on
            // the server's clock so that replicas share one: {1, room…}, or
            // {0, index, µs to wait}.
            admit: Script::new(ADMIT),
        })
    }

    /// The connection, made now if there is none (not more than once a
    /// second).
    async fn connection(&self) -> Result<ConnectionManager, StoreError> {
        let mut connection = self.connection.lock().await;
        if let Some(connection) = connection.as_ref() {
            return Ok(connection.clone());
        }
        {
            let last = crate::lock::lock(&self.last_attempt);
            if last.is_some_and(|at| at.elapsed() < RETRY_AFTER) {
                return Err(StoreError::Unavailable("not connected".to_owned()));
            }
        }
        let config = ::redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(RETRY_AFTER);
        let made = ConnectionManager::new_with_config(self.client.clone(), config).await.map_err(|err| {
            // Only a failed attempt holds the next one back.
            *crate::lock::lock(&self.last_attempt) = Some(Instant::now());
            StoreError::Unavailable(err.to_string())
        })?;
        tracing::info!("connected to Redis");
        *connection = Some(made.clone());
        Ok(made)
    }

    /// One operation, within [`TIMEOUT`] in all: waiting for the connection
    /// (or making it) included, so that no caller queues behind a
    /// reconnection for longer.
    async fn run<T>(
        &self,
        f: impl AsyncFnOnce(&mut ConnectionManager) -> ::redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(TIMEOUT, self.run_unbounded(f)).await {
            Ok(answered) => answered,
            Err(_) => Err(StoreError::Unavailable(format!("no answer within {TIMEOUT:?}"))),
        }
    }

    async fn run_unbounded<T>(
        &self,
        f: impl AsyncFnOnce(&mut ConnectionManager) -> ::redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection().await?;
        f(&mut connection).await.map_err(|err| {
            // A connection that broke is made again on a later call (at most
            // once a second after a failed attempt), whatever the manager's
            // own retries did. A slow answer is no broken connection: the
            // next command waits its turn on the same one.
            if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
                if let Ok(mut cached) = self.connection.try_lock() {
                    *cached = None;
                }
            }
            StoreError::Unavailable(err.to_string())
        })
    }
}

/// [`super::gcra`] in Lua. Times in µs (exact in a Lua number until the
/// year 2255); ARGV holds each bucket's interval and burst.
const ADMIT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local next = {}
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 * i - 1])
  local tolerance = interval * (tonumber(ARGV[2 * i]) - 1)
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  if tat < now then tat = now end
  if tat - now > tolerance then return {0, i - 1, tat - now - tolerance} end
  next[i] = tat + interval
end
local answer = {1}
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 * i - 1])
  local ahead = next[i] - now
  redis.call('SET', KEYS[i], string.format('%.0f', next[i]), 'PX', math.ceil(ahead / 1000))
  answer[i + 1] = math.floor((interval * tonumber(ARGV[2 * i]) - ahead) / interval)
end
return answer
";

fn millis(ttl: Duration) -> u64 {
    ttl.as_millis().max(1) as u64
}

impl Store for RedisStore {
    fn claim<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(self.run(async move |c| self.claim.key(key).arg(value).arg(millis(ttl)).invoke_async(c).await))
    }

    fn replace<'a>(
        &'a self,
        key: &'a str,
        expected: &'a [u8],
        value: &'a [u8],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.run(async move |c| {
            let replaced: i64 = self.replace.key(key).arg(expected).arg(value).arg(millis(ttl)).invoke_async(c).await?;
            Ok(replaced == 1)
        }))
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(self.run(async move |c| c.get(key).await))
    }

    fn remove<'a>(&'a self, key: &'a str, expected: &'a [u8]) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.run(async move |c| {
            let _: i64 = self.remove.key(key).arg(expected).invoke_async(c).await?;
            Ok(())
        }))
    }

    fn increment<'a>(&'a self, key: &'a str, ttl: Duration) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(self.run(async move |c| self.increment.key(key).arg(millis(ttl)).invoke_async(c).await))
    }

    fn reset<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.run(async move |c| c.del(key).await))
    }

    fn admit<'a>(&'a self, buckets: &'a [Bucket]) -> BoxFuture<'a, Result<Admission, StoreError>> {
        Box::pin(self.run(async move |c| {
            let mut invocation = self.admit.prepare_invoke();
            for bucket in buckets {
                let interval = bucket.interval.as_micros().max(1) as u64;
                invocation.key(&bucket.key).arg(interval).arg(bucket.burst.max(1));
            }
            let answer: Vec<i64> = invocation.invoke_async(c).await?;
            Ok(match answer.as_slice() {
                [1, rooms @ ..] => Admission::Admitted(rooms.iter().map(|r| (*r).max(0) as u32).collect()),
                [_, index, wait, ..] => Admission::Limited {
                    index: (*index).max(0) as usize,
                    retry_after: Duration::from_micros((*wait).max(0) as u64),
                },
                _ => Admission::Admitted(vec![0; buckets.len()]),
            })
        }))
    }
}
