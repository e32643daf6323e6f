//! Once-only calls (docs/architecture.md, "Once-only calls and budgets"): the
//! first call with an idempotency key claims it and runs; the same call again
//! gets the first's answer, replayed; a different call with the key is
//! refused. With the store down, an idempotent tool runs anyway and any other
//! is refused in-band: once-only fails closed.
//!
//! A claim has two phases, so that a claim whose answer was lost never burns
//! its key. The holder (a random id per attempt) first claims the key as
//! `claimed`, then turns it into `dispatching` by compare-and-set, and only
//! then runs the tool. A claim that is still `claimed` after
//! [`CLAIM_GRACE`] belongs to an attempt that gave up before running
//! (its store answer came too late) or died before: a retry takes it over,
//! and the first holder, should it come back, loses its compare-and-set and
//! does not run. Only a `dispatching` claim whose lease ran out becomes
//! "effect unknown": it may have run. A claim the holder gave up on is also
//! released (compare-and-delete) in the background once the store answers.
//! The final answer is written the same way, and retried in the background
//! until the lease ends; if it never lands, later retries hear "effect
//! unknown" (true: the gateway cannot prove the outcome), never a second run.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{
    call_state::{self, now_ms, CallState, STORE_DEADLINE},
    Call, ErrorKind, Executor, Expiry, Outcome, Ready, RequestError, ToolError,
};
use crate::state::StoreError;

/// A running claim lasts the tool's timeout and this much more.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// A claim not yet dispatching may be taken over after this long: its
/// holder's compare-and-set would have answered by then.
const CLAIM_GRACE: Duration = Duration::from_secs(1);
/// How often a call waiting for the first with its key looks again.
const POLL: Duration = Duration::from_millis(20);
/// How often a record the store did not take is written again.
const REWRITE_EVERY: Duration = Duration::from_millis(250);
/// What a call is told when once-only delivery cannot be checked.
const CANNOT_GUARANTEE: &str = "cannot guarantee once-only delivery right now; the call did not run";
/// What a call is told while another holds its key.
const STILL_RUNNING: &str = "the first call with this key is still running";

impl Executor {
    /// A call with an idempotency key: the first claims the key and runs;
    /// the same call again gets the first's answer, replayed; a different
    /// call with the key is refused.
    pub(super) async fn once(&self, ready: Ready, call: &Call, expiry: Expiry) -> Result<Outcome, RequestError> {
        let once = Once::new(self, &ready, call, expiry);
        match once.claim().await {
            Claim::Ours => {}
            Claim::Answered(outcome) => return Ok(once.replayed(*outcome)),
            Claim::Reused => return Err(RequestError::KeyReused(call.idempotency_key.clone())),
            // Once-only cannot be checked: an idempotent tool runs anyway.
            Claim::Unchecked if once.tool.idempotent => return Ok(self.dispatched(ready, call, expiry).await),
            Claim::Unchecked => return Ok(once.unavailable(ready, CANNOT_GUARANTEE)),
            Claim::Refused(message) => return Ok(once.unavailable(ready, message)),
        }
        match once.run(ready).await {
            Ok(ran) => {
                once.store(&ran).await;
                Ok(ran)
            }
            Err(not_run) => Ok(not_run),
        }
    }
}

/// One call with an idempotency key, on its way: claim the key
/// ([`Once::claim`]), run the call ([`Once::run`]), store its answer
/// ([`Once::store`]).
struct Once<'a> {
    executor: &'a Executor,
    call: &'a Call,
    tool: &'a crate::catalog::Tool,
    state: &'a CallState,
    expiry: Expiry,
    /// The key in the store (the caller's key, scoped to who calls).
    key: String,
    /// The call's hash: the same call again has the same.
    hash: String,
    /// When the holder gives up waiting for another with the key.
    lease: Duration,
    holder: Holder,
}

/// What claiming a key came to.
enum Claim {
    /// The key is ours: the call may run.
    Ours,
    /// The first call with the key answered (or vanished): its answer.
    Answered(Box<Outcome>),
    /// Another call holds the key.
    Reused,
    /// The store could not be asked before anything was claimed:
    /// once-only cannot be checked (an idempotent tool runs anyway).
    Unchecked,
    /// Not now: why.
    Refused(&'static str),
}

impl<'a> Once<'a> {
    fn new(executor: &'a Executor, ready: &Ready, call: &'a Call, expiry: Expiry) -> Self {
        let tool = executor.catalog.tool(ready.tool);
        let hash = call_state::call_hash(&tool.name, &ready.arguments);
        let lease = expiry.cap(tool.timeout) + LEASE_MARGIN;
        Once {
            executor,
            call,
            tool,
            state: &executor.shared.state,
            expiry,
            key: call_state::idempotency_key(&call.caller, &call.idempotency_key),
            holder: Holder::new(&hash, lease),
            hash,
            lease,
        }
    }

    /// Claims the key, waiting for the first holder until its answer, a
    /// claim to take over, or the caller's deadline.
    async fn claim(&self) -> Claim {
        let state = self.state;
        let mut claim = self.bounded(state.store.claim(&self.key, &self.holder.claimed, state.idempotency_ttl)).await;
        let waiting = self.expiry.at(self.lease + STORE_DEADLINE);
        loop {
            let existing = match claim {
                Ok(None) => return Claim::Ours,
                Ok(Some(existing)) => existing,
                Err(err) => {
                    // The claim may yet land: release it when the store answers.
                    self.store_down(&err, true);
                    return Claim::Unchecked;
                }
            };
            match Record::parse(&existing) {
                Some(record) if record.hash() != self.hash => return Claim::Reused,
                Some(Record::Done { outcome, .. }) => return Claim::Answered(outcome),
                Some(record) if record.abandoned() => {
                    // Never dispatched: ours to take, by compare-and-set.
                    let taken = state.store.replace(&self.key, &existing, &self.holder.claimed, state.idempotency_ttl);
                    match self.bounded(taken).await {
                        Ok(true) => return Claim::Ours,
                        Ok(false) => {}
                        Err(err) => {
                            self.store_down(&err, true);
                            return Claim::Refused(CANNOT_GUARANTEE);
                        }
                    }
                }
                Some(record @ Record::Running { .. }) if record.expired() => {
                    // Dispatched, and its holder vanished: its effect is
                    // unknown, for every caller from now on.
                    let outcome = vanished(&self.tool.name);
                    let stored = Record::done(&self.hash, &outcome);
                    let replaced = state.store.replace(&self.key, &existing, &stored, state.idempotency_ttl);
                    match self.bounded(replaced).await {
                        Ok(true) => return Claim::Answered(Box::new(outcome)),
                        Ok(false) => {}
                        Err(err) => {
                            self.store_down(&err, false);
                            return Claim::Refused(CANNOT_GUARANTEE);
                        }
                    }
                }
                _ => {
                    if Instant::now() + POLL > waiting {
                        return Claim::Refused(STILL_RUNNING);
                    }
                    tokio::time::sleep(POLL).await;
                }
            }
            claim = match self.bounded(state.store.get(&self.key)).await {
                // Released meanwhile: claim it afresh.
                Ok(None) => {
                    self.bounded(state.store.claim(&self.key, &self.holder.claimed, state.idempotency_ttl)).await
                }
                other => other,
            };
        }
    }

    /// Runs the claimed call: the claim turned into dispatching (or, if
    /// another took it over meanwhile, no run), the call's rate limits
    /// taken at the same time (a replay, answered earlier, never counts: no
    /// round trip more than a keyed call without limits), then dispatch.
    /// `Ok`: the call ran, its answer to store; `Err`: it did not, and the
    /// key is released (or another's).
    async fn run(&self, ready: Ready) -> Result<Outcome, Outcome> {
        let state = self.state;
        let dispatching =
            state.store.replace(&self.key, &self.holder.claimed, &self.holder.dispatching, state.idempotency_ttl);
        let rated = self.executor.within_rate(&self.call.caller, &self.tool.name);
        let (dispatching, rated) = tokio::join!(self.bounded(dispatching), rated);
        match dispatching {
            Ok(true) => {}
            Ok(false) => return Err(self.unavailable(ready, STILL_RUNNING)),
            Err(err) => {
                self.store_down(&err, true);
                return Err(self.unavailable(ready, CANNOT_GUARANTEE));
            }
        }
        match rated {
            Ok(room) => {
                let mut outcome = self.executor.dispatched(ready, self.call, self.expiry).await;
                outcome.rate_remaining = room;
                Ok(outcome)
            }
            Err(limited) => {
                self.holder.finish(state, &self.key, End::Release, self.expiry).await;
                Err(Outcome::of(self.tool, ready, Err(limited)))
            }
        }
    }

    /// Stores the answer of a call that ran (kept to replay, or the key
    /// released when the answer is one a retry should not get).
    async fn store(&self, outcome: &Outcome) {
        let end = match to_store(outcome, self.tool.idempotent) {
            Some(kept) => End::Keep(Record::done(&self.hash, &kept)),
            None => End::Release,
        };
        self.holder.finish(self.state, &self.key, end, self.expiry).await;
    }

    /// A store operation, bounded by the store's deadline and the caller's.
    async fn bounded<T>(
        &self,
        operation: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.state.bounded(self.expiry, operation).await
    }

    /// The store did not answer: said (and counted); the claim released
    /// once it answers if it may have landed (`release`).
    fn store_down(&self, err: &StoreError, release: bool) {
        self.state.warn_unreachable("idempotency keys cannot be checked", err);
        self.executor.shared.observer.metrics.store_error("idempotency");
        if release {
            self.holder.release_later(self.state, &self.key);
        }
    }

    /// The first call's answer, replayed (and counted).
    fn replayed(&self, mut outcome: Outcome) -> Outcome {
        outcome.replayed = true;
        self.executor.shared.observer.metrics.replayed(Some(&self.tool.name));
        outcome
    }

    /// The call did not run, and a retry may help: why.
    fn unavailable(&self, ready: Ready, message: &str) -> Outcome {
        let mut error = ToolError::new(ErrorKind::Unavailable, message, false);
        error.retryable = true;
        Outcome::of(self.tool, ready, Err(error))
    }
}

/// One attempt at a key: its claim, then its dispatching record (the same
/// but for the phase), with a holder id no other attempt has.
struct Holder {
    claimed: Vec<u8>,
    dispatching: Vec<u8>,
    /// When the lease ends: writes are retried until then.
    until: Instant,
}

/// A holder id no other attempt has, in any process: 64 random bits drawn
/// once per process, then a counter.
fn holder_id() -> String {
    use std::sync::{
        atomic::{AtomicU64, Ordering},
        OnceLock,
    };
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let process = PROCESS.get_or_init(|| {
        let mut bytes = [0u8; 8];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .expect("the system's random source works");
        u64::from_le_bytes(bytes)
    });
    format!("{process:016x}-{:x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What becomes of a claim once its call has an outcome.
enum End {
    Keep(Vec<u8>),
    Release,
}

impl Holder {
    fn new(hash: &str, lease: Duration) -> Self {
        let holder = holder_id();
        let at = now_ms();
        let until = at + lease.as_millis() as u64;
        let record = |phase| Record::Running { hash: hash.to_owned(), until, holder: holder.clone(), phase, at };
        Self {
            claimed: record(Phase::Claimed).to_bytes(),
            dispatching: record(Phase::Dispatching).to_bytes(),
            until: Instant::now() + lease,
        }
    }

    /// Writes the end of the call in place of the dispatching record: the
    /// answer kept, or the key released. A write the store does not take is
    /// retried in the background until the lease ends.
    async fn finish(&self, state: &CallState, key: &str, end: End, expiry: Expiry) {
        let written = match &end {
            End::Keep(done) => {
                let write = state.store.replace(key, &self.dispatching, done, state.idempotency_ttl);
                state.bounded(expiry, write).await.map(|_| ())
            }
            End::Release => state.bounded(expiry, state.store.remove(key, &self.dispatching)).await,
        };
        if let Err(err) = written {
            state.warn_unreachable("an idempotency record could not be written (retried until its lease ends)", &err);
            self.rewrite_later(state, key, end);
        }
    }

    /// Releases the key (if the record is still ours: claimed, or turned
    /// into dispatching by a compare-and-set whose answer was lost; either
    /// way the tool was not called) once the store answers, until the lease
    /// ends.
    fn release_later(&self, state: &CallState, key: &str) {
        let (store, key, until) = (state.store.clone(), key.to_owned(), self.until);
        let ours = [self.claimed.clone(), self.dispatching.clone()];
        tokio::spawn(async move {
            while Instant::now() < until {
                let release = async {
                    for record in &ours {
                        store.remove(&key, record).await?;
                    }
                    Ok::<_, StoreError>(())
                };
                if matches!(tokio::time::timeout(STORE_DEADLINE, release).await, Ok(Ok(()))) {
                    return;
                }
                tokio::time::sleep(REWRITE_EVERY).await;
            }
        });
    }

    fn rewrite_later(&self, state: &CallState, key: &str, end: End) {
        let (store, key, dispatching, until) =
            (state.store.clone(), key.to_owned(), self.dispatching.clone(), self.until);
        let ttl = state.idempotency_ttl;
        tokio::spawn(async move {
            while Instant::now() < until {
                tokio::time::sleep(REWRITE_EVERY).await;
                let write = async {
                    match &end {
                        End::Keep(done) => store.replace(&key, &dispatching, done, ttl).await.map(|_| ()),
                        End::Release => store.remove(&key, &dispatching).await,
                    }
                };
                if matches!(tokio::time::timeout(STORE_DEADLINE, write).await, Ok(Ok(()))) {
                    return;
                }
            }
            tracing::warn!(
                "an idempotency record could not be written before its lease ended: a retry with its key hears \
                 that the call's effect is unknown"
            );
        });
    }
}

/// Where a running claim is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Phase {
    /// Claimed; the tool has not been called.
    Claimed,
    /// The tool may have been called. (Records written without a phase
    /// are taken to be here: the cautious reading.)
    #[default]
    Dispatching,
}

/// An idempotency record.
#[derive(Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Record {
    Running {
        hash: String,
        /// When the lease ends (ms since the epoch).
        until: u64,
        #[serde(default)]
        holder: String,
        #[serde(default)]
        phase: Phase,
        /// When it was claimed (ms since the epoch).
        #[serde(default)]
        at: u64,
    },
    Done {
        hash: String,
        outcome: Box<Outcome>,
    },
}

impl Record {
    fn hash(&self) -> &str {
        match self {
            Record::Running { hash, .. } | Record::Done { hash, .. } => hash,
        }
    }

    /// A claim whose holder never dispatched and is past [`CLAIM_GRACE`]
    /// (or past its lease): a retry may take it.
    fn abandoned(&self) -> bool {
        let grace = CLAIM_GRACE.as_millis() as u64;
        matches!(self, Record::Running { phase: Phase::Claimed, at, until, .. }
            if now_ms() >= at.saturating_add(grace) || *until <= now_ms())
    }

    fn expired(&self) -> bool {
        matches!(self, Record::Running { until, .. } if *until <= now_ms())
    }

    fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("records serialise")
    }

    fn done(hash: &str, outcome: &Outcome) -> Vec<u8> {
        Record::Done { hash: hash.to_owned(), outcome: Box::new(outcome.clone()) }.to_bytes()
    }

    fn parse(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice(bytes).ok()
    }
}

/// What to do with a claimed key once the call has an outcome: keep the
/// outcome (`Some`, perhaps reworded for replays), or release the key.
fn to_store(outcome: &Outcome, idempotent: bool) -> Option<Outcome> {
    let Err(error) = &outcome.result else { return Some(outcome.clone()) };
    match error.kind {
        ErrorKind::NotFound | ErrorKind::Refused | ErrorKind::ToolCrashed => Some(outcome.clone()),
        // The tool did not act, or never got the call: the key may be used again.
        ErrorKind::InvalidArguments
        | ErrorKind::UnknownTool
        | ErrorKind::RetryBudgetExhausted
        | ErrorKind::RateLimited
        | ErrorKind::PermissionDenied => None,
        ErrorKind::Unavailable => None,
        // It may have acted: an idempotent tool may run again, any other
        // must not.
        ErrorKind::Timeout if idempotent => None,
        ErrorKind::Timeout => {
            let mut kept = outcome.clone();
            if let Err(error) = &mut kept.result {
                error.message = format!(
                    "{}; this is the answer of an earlier call with the same idempotency key: its effect is \
                     unknown, and the call was not run twice",
                    error.message
                );
                error.retryable = false;
            }
            Some(kept)
        }
    }
}

/// The answer when a dispatched claim's holder vanished (its lease ran
/// out): stored in its place, never a second run.
fn vanished(tool: &str) -> Outcome {
    let message = format!(
        "an earlier call with this idempotency key to '{tool}' ended without an answer; its effect is unknown, \
         and the call was not run twice"
    );
    Outcome {
        tool: Some(tool.to_owned()),
        repairs: Vec::new(),
        arguments_json: String::new(),
        result: Err(ToolError::new(ErrorKind::Unavailable, message, false)),
        replayed: true,
        sent: None,
        budget_remaining: None,
        rate_remaining: None,
        tool_type: None,
    }
}
