//! The records calls share across requests and replicas
//! (docs/architecture.md, "Once-only calls and budgets"): the state store and
//! its settings, and the keys records live under. The store holds opaque
//! bytes; [`super::once`] and [`super::budget`] give them their meaning.
//!
//! Keys, `toolgate:<kind>:<owner>:<scope>…`, the owner the principal's
//! (the first 16 hex digits of its SHA-256; `-` for the caller of a gateway
//! without principals), so that a store can keep each principal's records
//! apart (the memory store gives each a quota):
//! - `toolgate:idem:<owner>:<sha256 of principal, user and key>`: a record
//!   `{"hash", "state": "running", "holder", "phase", "until"}` while the
//!   first call runs (a lease of the tool's timeout and a margin), then
//!   `{"hash", "state": "done", "outcome"}` for `idempotency_ttl`.
//! - `toolgate:rate:<owner>:principal`, `…:user:<user>`, `…:tool:<tool>[:<user>]`
//!   and `toolgate:rate:*:tool:<tool>`: rate-limit buckets (GCRA times).
//! - `toolgate:budget:<owner>:<sha256 of principal, user and session>:<tool>`:
//!   the count of consecutive failures the model could fix, for
//!   `session_ttl`; names that resolve to no tool share the bucket
//!   `(unresolved)`, which no tool can be named.

use std::{
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{
    identity::Caller,
    state::{Store, StoreError},
    telemetry::throttle::{self, Throttle},
};

/// An idempotency key or session id is at most this long.
pub(crate) const MAX_ID_BYTES: usize = 256;
/// Every state operation, reconnection included, answers within this, or
/// counts as the store being unreachable.
pub(crate) const STORE_DEADLINE: Duration = Duration::from_millis(500);

/// `operation` on the store, within `limit`: past it, the store is
/// unavailable.
pub(crate) async fn within<T>(
    limit: Duration,
    operation: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, operation).await {
        Ok(answered) => answered,
        Err(_) => Err(StoreError::Unavailable(format!("no answer within {limit:?}"))),
    }
}
/// Defaults of `state:` and `policy.retry_budget`.
pub(crate) const DEFAULT_IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);
pub(crate) const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(3600);
pub(crate) const DEFAULT_RETRY_BUDGET: u32 = 3;

/// The store and its settings.
#[derive(Clone)]
pub(crate) struct CallState {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) idempotency_ttl: Duration,
    pub(crate) session_ttl: Duration,
    pub(crate) retry_budget: u32,
    /// "Store unreachable" warnings: one a minute.
    warned: Arc<Throttle>,
}

impl std::fmt::Debug for CallState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallState").field("retry_budget", &self.retry_budget).finish_non_exhaustive()
    }
}

impl CallState {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        idempotency_ttl: Option<Duration>,
        session_ttl: Option<Duration>,
        retry_budget: Option<u32>,
    ) -> Self {
        Self {
            store,
            idempotency_ttl: idempotency_ttl.unwrap_or(DEFAULT_IDEMPOTENCY_TTL),
            session_ttl: session_ttl.unwrap_or(DEFAULT_SESSION_TTL),
            retry_budget: retry_budget.unwrap_or(DEFAULT_RETRY_BUDGET),
            warned: Arc::new(Throttle::new(Duration::from_secs(60))),
        }
    }

    /// `operation` on the store, within [`STORE_DEADLINE`] or what is left
    /// of `expiry` if less.
    pub(crate) async fn bounded<T>(
        &self,
        expiry: super::Expiry,
        operation: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        within(expiry.cap(STORE_DEADLINE), operation).await
    }

    /// Logs that the store is unreachable, at most once a minute.
    pub(crate) fn warn_unreachable(&self, what: &str, err: &StoreError) {
        if let Some(skipped) = self.warned.allow() {
            tracing::warn!("{what}: {err}{}", throttle::more(skipped));
        }
    }
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Whether an id (key or session) is acceptable: at most 256 bytes, no
/// control characters.
pub(crate) fn check_id(field: &'static str, id: &str) -> Result<(), String> {
    if id.len() > MAX_ID_BYTES {
        return Err(format!("{field} is {} bytes long; at most {MAX_ID_BYTES}", id.len()));
    }
    if id.chars().any(char::is_control) {
        return Err(format!("{field} holds a control character"));
    }
    Ok(())
}

/// `sha256(principal \0 issuer \0 subject \0 id)` in hex: a scope no caller can enter
/// from another's.
fn scoped(caller: &Caller, id: &str) -> String {
    let user = caller.user.as_ref().map(|user| user.key());
    let mut hash = Sha256::new();
    for part in [caller.principal.as_deref().unwrap_or(""), user.as_deref().unwrap_or(""), id] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    base16ct::lower::encode_string(&hash.finalize())
}

/// The owner part of a key: the principal's, as the store's quotas see it.
fn owner(caller: &Caller) -> String {
    match &caller.principal {
        None => ANONYMOUS_OWNER.to_owned(),
        Some(principal) => base16ct::lower::encode_string(&Sha256::digest(principal.as_bytes())[..8]),
    }
}

/// The owner of the calls of a gateway without principals.
pub(crate) const ANONYMOUS_OWNER: &str = "-";

pub(crate) fn idempotency_key(caller: &Caller, key: &str) -> String {
    format!("toolgate:idem:{}:{}", owner(caller), scoped(caller, key))
}

/// A rate-limit bucket of the caller's principal: `toolgate:rate:<owner>:<what>`.
pub(crate) fn rate_key(caller: &Caller, what: &str) -> String {
    format!("toolgate:rate:{}:{what}", owner(caller))
}

/// The first 16 hex digits of `text`'s SHA-256 (a user in a key).
pub(crate) fn digest(text: &str) -> String {
    base16ct::lower::encode_string(&Sha256::digest(text.as_bytes())[..8])
}

pub(crate) fn budget_key(caller: &Caller, session: &str, tool: &str) -> String {
    format!("toolgate:budget:{}:{}:{tool}", owner(caller), scoped(caller, session))
}

/// The hash of a call: the canonical tool and its arguments (after repair
/// and binding) as JSON with sorted keys.
pub(crate) fn call_hash(tool: &str, arguments: &serde_json::Map<String, Value>) -> String {
    /// A value that serialises with every object's keys sorted.
    struct Sorted<'a>(&'a Value);
    impl Serialize for Sorted<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::{SerializeMap, SerializeSeq};
            match self.0 {
                Value::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort_unstable();
                    let mut out = serializer.serialize_map(Some(keys.len()))?;
                    for key in keys {
                        out.serialize_entry(key, &Sorted(&map[key]))?;
                    }
                    out.end()
                }
                Value::Array(items) => {
                    let mut out = serializer.serialize_seq(Some(items.len()))?;
                    for item in items {
                        out.serialize_element(&Sorted(item))?;
                    }
                    out.end()
                }
                other => other.serialize(serializer),
            }
        }
    }
    struct SortedMap<'a>(&'a serde_json::Map<String, Value>);
    impl Serialize for SortedMap<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut keys: Vec<&String> = self.0.keys().collect();
            keys.sort_unstable();
            let mut out = serializer.serialize_map(Some(keys.len()))?;
            for key in keys {
                out.serialize_entry(key, &Sorted(&self.0[key]))?;
            }
            out.end()
        }
    }
    let text = serde_json::to_string(&SortedMap(arguments)).expect("JSON values serialise");
    let mut hash = Sha256::new();
    hash.update(tool.as_bytes());
    hash.update([0]);
    hash.update(text.as_bytes());
    base16ct::lower::encode_string(&hash.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bounded_and_printable() {
        assert!(check_id("idempotency_key", "call_0").is_ok());
        assert!(check_id("idempotency_key", &"k".repeat(257)).is_err());
        assert!(check_id("session_id", "a\nb").is_err());
    }

    #[test]
    fn scopes_never_meet() {
        let a = Caller { principal: Some("a".into()), ..Caller::default() };
        let b = Caller { principal: Some("b".into()), ..Caller::default() };
        assert_ne!(idempotency_key(&a, "call_0"), idempotency_key(&b, "call_0"));
        assert_eq!(idempotency_key(&a, "call_0"), idempotency_key(&a, "call_0"));
    }

    #[test]
    fn the_hash_ignores_key_order() {
        let one: serde_json::Map<String, Value> = serde_json::from_str(r#"{"a": 1, "b": {"y": 2, "x": 1}}"#).unwrap();
        let two: serde_json::Map<String, Value> = serde_json::from_str(r#"{"b": {"x": 1, "y": 2}, "a": 1}"#).unwrap();
        assert_eq!(call_hash("t", &one), call_hash("t", &two));
        assert_ne!(call_hash("t", &one), call_hash("u", &one));
    }
}
