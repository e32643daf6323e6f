//! Log lines that an attacker or an outage could repeat thousands of times a
//! second (refused handshakes, failed authentications, a store that is
//! down): one line per period, saying how many were left out since.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

/// Allows one event per `period`; counts the rest.
#[derive(Debug)]
pub(crate) struct Throttle {
    period: Duration,
    /// Milliseconds since `start` of the last allowed event, plus one (0:
    /// none yet).
    last: AtomicU64,
    skipped: AtomicU64,
    start: Instant,
}

impl Throttle {
    pub(crate) fn new(period: Duration) -> Self {
        Self { period, last: AtomicU64::new(0), skipped: AtomicU64::new(0), start: Instant::now() }
    }

    /// `Some(n)` when this event may be logged, `n` the events left out
    /// since the last one logged; `None` when it is to be left out.
    pub(crate) fn allow(&self) -> Option<u64> {
        let now = self.start.elapsed().as_millis() as u64 + 1;
        let last = self.last.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= self.period.as_millis() as u64;
        if due && self.last.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            return Some(self.skipped.swap(0, Ordering::Relaxed));
        }
        self.skipped.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// `" (12 more since the last one)"`, or nothing.
pub(crate) fn more(skipped: u64) -> String {
    match skipped {
        0 => String::new(),
        n => format!(" ({n} more since the last one)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_a_period_and_the_rest_counted() {
        let throttle = Throttle::new(Duration::from_millis(50));
        assert_eq!(throttle.allow(), Some(0));
        assert_eq!(throttle.allow(), None);
        assert_eq!(throttle.allow(), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(throttle.allow(), Some(2));
        assert_eq!(more(2), " (2 more since the last one)");
        assert_eq!(more(0), "");
    }
}
