//! The gate of every front door ([`Snapshot::admit`], [`Refused`]) and
//! what it admits to: one snapshot of identity and executor, swapped whole
//! by the snapshot keeper ([`super::LiveCatalog`]).

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::{
    exec::{
        rate::{Admitted, Limited},
        Executor,
    },
    identity::{Caller, Credentials, Identity, Unauthenticated},
};

/// What every request works on: who may call (identity), and the executor
/// of one catalogue snapshot under the policy and grants of the
/// configuration it was loaded with. Swapped whole, so a request never sees
/// one configuration's principals with another's grants.
pub struct Snapshot {
    pub(crate) identity: Arc<Identity>,
    pub(crate) executor: Executor,
}

impl Snapshot {
    /// The core of this snapshot: what a front door calls.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// The gate of every front door: who `credentials` prove, admitted
    /// under its principal's request rate and `concurrent` limit (the place
    /// is held while [`Admitted`] lives), for the toolset its endpoint
    /// names, if any (one outside the caller's grants is as absent).
    pub(crate) async fn admit(
        &self,
        credentials: &Credentials<'_>,
        toolset: Option<&str>,
        connection_counts: impl FnOnce(Option<&Arc<str>>) -> bool,
    ) -> Result<(Caller, Admitted), Refused> {
        let caller = self.identity.authenticate(credentials).map_err(Refused::Unauthenticated)?;
        // The connection counts for the principal (its door's `Peer`):
        // refused past `limits.connections_per_principal`.
        if !connection_counts(caller.principal.as_ref()) {
            return Err(Refused::Connections);
        }
        let admitted = self.executor.admit(&caller).await.map_err(Refused::Limited)?;
        if let Some(name) = toolset {
            self.executor.toolset(&caller, name).map_err(Refused::UnknownToolset)?;
        }
        Ok((caller, admitted))
    }
}

/// Why [`Snapshot::admit`] let a request no further; each door says it in
/// its protocol.
#[derive(Debug)]
pub(crate) enum Refused {
    Unauthenticated(Unauthenticated),
    Limited(Limited),
    /// The message: an unknown toolset, with a did-you-mean among those the
    /// caller may see.
    UnknownToolset(String),
    /// The principal holds as many connections as it may
    /// (`limits.connections_per_principal`); this one closes.
    Connections,
}

impl Refused {
    /// What [`Refused::Connections`] says.
    pub(crate) const CONNECTIONS: &'static str =
        "this client holds as many connections as it may (limits.connections_per_principal): reuse one";
}

/// The current snapshot, swapped atomically; each request holds the one it
/// loaded until it ends.
pub(crate) type SnapshotSlot = Arc<ArcSwap<Snapshot>>;
