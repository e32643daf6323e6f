//! The gateway's connections: accepted with `TCP_NODELAY` and TCP
//! keepalive, capped in number, closed when they never start or stay idle,
//! and an accept loop that backs off when the process runs out of file
//! descriptors instead of spinning.
//!
//! tonic's own serve loop `continue`s on every accept error (a core at
//! 100 % while `accept` fails with EMFILE) and has no handshake or idle
//! timeout, so these live here, one concern a file: the settings (here),
//! the stream of accepted connections ([`accept`]: the cap and the
//! backoff), the wrapper of each ([`conn`]: the preface and idle
//! deadlines, which keeps tonic's connect info) and the count of each
//! connection's calls ([`calls`]). Whether a connection is idle is counted
//! in calls, not bytes: HTTP/2 keepalive pings are bytes, and a connection
//! that only answers pings is idle.

mod accept;
mod calls;
mod conn;

use std::{
    sync::{atomic::Ordering, Arc, OnceLock},
    time::Duration,
};

use tokio::sync::Semaphore;

pub(crate) use accept::Incoming;
pub(crate) use calls::{CallGuard, Calls, Guarded, Registry, TrackCalls};
pub(crate) use conn::{Conn, PrefaceWatch};

/// How the gateway treats connections. The defaults are in docs/limits.md's
/// limits table.
///
/// Clones share one budget of connections: every door served with clones
/// of one settings (the gRPC and MCP doors) counts against the same
/// `max_connections`, so no door takes the descriptors the others and the
/// tools need. The budget's size is read when the first of them starts.
#[derive(Clone, Debug)]
pub struct ConnectionSettings {
    /// Connections open at once, over every door sharing these settings;
    /// more wait in the listen queue until one closes. Default: three
    /// quarters of the process's file-descriptor limit (the rest is for
    /// tools, backends, the store and files), at most 10,000.
    pub max_connections: usize,
    /// A connection must send the whole HTTP/2 preface and its first
    /// SETTINGS frame within this time (counted after the TLS handshake,
    /// which has as long again), or it is closed.
    pub handshake_timeout: Duration,
    /// A connection without a call for this long is closed.
    pub idle_timeout: Duration,
    /// TCP keepalive probes after this long without a packet from the
    /// peer…
    pub keepalive_interval: Duration,
    /// …spread over this time, and the connection is closed if none is
    /// answered (or data sent stays unacknowledged for both together): a
    /// peer that vanished (half-open) does not hold a connection.
    pub keepalive_timeout: Duration,
    /// Connections one principal holds at once, counted from each
    /// connection's first authenticated request
    /// (`limits.connections_per_principal`); `None`: a quarter of
    /// `max_connections`.
    pub connections_per_principal: Option<usize>,
    /// The permits of `max_connections`, shared by clones.
    pub(crate) budget: Budget,
}

/// Connections open at once over the doors sharing one settings: the
/// permits, the connections holding them, and how many each principal
/// holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct Budget(Arc<Shared>);

#[derive(Debug, Default)]
pub(crate) struct Shared {
    permits: OnceLock<Arc<Semaphore>>,
    /// Every connection's calls, to find idle ones when permits run low.
    open: std::sync::Mutex<Vec<std::sync::Weak<Calls>>>,
    principals: std::sync::Mutex<std::collections::HashMap<Arc<str>, usize>>,
}

/// Below this share of the permits free, idle connections are closed.
const LOW_WATER: usize = 10;
/// A connection without a call this long may be closed for room.
const SHED_IDLE: Duration = Duration::from_secs(5);

impl Budget {
    /// The shared permits, `max` of them if this is the first to ask.
    pub(crate) fn permits(&self, max: usize) -> Arc<Semaphore> {
        Arc::clone(self.0.permits.get_or_init(|| Arc::new(Semaphore::new(max))))
    }

    /// A connection counts in the budget (its permit held apart).
    pub(super) fn enlist(&self, calls: &Arc<Calls>) {
        let mut open = crate::lock::lock(&self.0.open);
        if open.len() >= 64 && open.len().is_power_of_two() {
            open.retain(|calls| calls.strong_count() > 0);
        }
        open.push(Arc::downgrade(calls));
    }

    /// With fewer than a tenth of the `max` permits free, connections
    /// without a call for 5 s are closed until a tenth is free again (or
    /// none is left to close): anonymous before authenticated, the idlest
    /// first. An idle kept-alive connection never holds a permit others
    /// need.
    pub(super) fn shed(&self, max: usize) {
        let free = self.permits(max).available_permits();
        let want = (max / LOW_WATER).max(1).saturating_sub(free);
        if want == 0 {
            return;
        }
        let now = calls::now_millis();
        let idle_ms = SHED_IDLE.as_millis() as u64;
        let mut idle: Vec<Arc<Calls>> = {
            let mut open = crate::lock::lock(&self.0.open);
            open.retain(|calls| calls.strong_count() > 0);
            open.iter().filter_map(std::sync::Weak::upgrade).collect()
        };
        idle.retain(|calls| {
            calls.active.load(Ordering::Acquire) == 0
                && !calls.closing.load(Ordering::Acquire)
                && now.saturating_sub(calls.idle_since.load(Ordering::Acquire)) >= idle_ms
        });
        idle.sort_by_key(|calls| (calls.principal.get().is_some(), calls.idle_since.load(Ordering::Acquire)));
        let closed = idle.iter().take(want).inspect(|calls| calls.close()).count();
        if closed > 0 {
            tracing::info!(closed, "connections idle for 5 s closed to make room: few connections were left");
        }
    }

    /// One more connection of `principal`; `false` (not counted) when it
    /// holds `limit` already.
    pub(super) fn join(&self, principal: &Arc<str>, limit: usize) -> bool {
        let mut principals = crate::lock::lock(&self.0.principals);
        let held = principals.entry(Arc::clone(principal)).or_default();
        if *held >= limit {
            return false;
        }
        *held += 1;
        true
    }

    /// A connection of `principal` closed.
    pub(super) fn leave(&self, principal: &Arc<str>) {
        let mut principals = crate::lock::lock(&self.0.principals);
        if let Some(held) = principals.get_mut(principal) {
            *held -= 1;
            if *held == 0 {
                principals.remove(principal);
            }
        }
    }
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            max_connections: default_max_connections(),
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            keepalive_interval: Duration::from_secs(60),
            keepalive_timeout: Duration::from_secs(20),
            connections_per_principal: None,
            budget: Budget::default(),
        }
    }
}

/// Connections the probe port (`health_listen`) keeps open at once.
const PROBE_CONNECTIONS: usize = 16;
/// How long a probe connection may take to send its preface, and stay idle.
const PROBE_HANDSHAKE: Duration = Duration::from_secs(2);
const PROBE_IDLE: Duration = Duration::from_secs(30);

impl ConnectionSettings {
    /// The settings of the probe port: a cap of its own, small (16 or this
    /// port's, if smaller), and deadlines no longer than 2 s to send the
    /// preface and 30 s idle. A probe connects, asks and leaves. The probes'
    /// budget is their own: a full gateway still answers its probes.
    pub(crate) fn for_probes(&self) -> ConnectionSettings {
        ConnectionSettings {
            max_connections: self.max_connections.min(PROBE_CONNECTIONS),
            handshake_timeout: self.handshake_timeout.min(PROBE_HANDSHAKE),
            idle_timeout: self.idle_timeout.min(PROBE_IDLE),
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            connections_per_principal: self.connections_per_principal,
            budget: Budget::default(),
        }
    }

    /// Connections one principal may hold: `connections_per_principal`, or
    /// a quarter of the budget.
    pub(crate) fn per_principal(&self) -> usize {
        self.connections_per_principal.unwrap_or(self.max_connections / 4).max(1)
    }
}

/// Three quarters of the descriptors the process has left under its soft
/// limit (the limit less those open now: the log, listeners, the runtime's,
/// and those the connection threads will hold), between 16 and 10,000. The
/// last quarter is for what calls open: a command tool's pipes, backend and
/// store connections, files.
pub(crate) fn default_max_connections() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    // Linux lists a process's descriptors in /proc; elsewhere none are
    // counted.
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count) + super::threads::descriptors_to_come();
    limit.map_or(10_000, |n| ((n.min(1 << 20) as usize).saturating_sub(open) * 3 / 4).clamp(16, 10_000))
}
