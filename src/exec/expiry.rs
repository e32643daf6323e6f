//! The caller's deadline, as every wait of a call sees it.

use std::time::{Duration, Instant};

use super::Call;

/// When the caller stops waiting (its deadline, from when the call
/// arrived), if it said: every wait of the call (the store, a concurrent
/// holder of its key, the tool) is bounded by what is left of it, so the
/// answer reaches the caller before it gives up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expiry(Option<Instant>);

impl Expiry {
    pub(super) fn of(call: &Call) -> Self {
        Self(call.deadline.map(|d| Instant::now() + d))
    }

    /// `limit`, or what is left of the caller's deadline if that is less.
    pub(crate) fn cap(self, limit: Duration) -> Duration {
        match self.0 {
            Some(at) => limit.min(at.saturating_duration_since(Instant::now())),
            None => limit,
        }
    }

    /// The instant `limit` from now, or the caller's deadline if sooner.
    pub(crate) fn at(self, limit: Duration) -> Instant {
        Instant::now() + self.cap(limit)
    }
}
