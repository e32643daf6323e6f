//! `notifications/tools/list_changed`: after each swap of the snapshot (a
//! reload, an MCP server's new listing) a listening client's tools are
//! listed again, and it is told only when what it sees changed. A listener
//! holds a digest of what its client sees, not the listing: the tools
//! themselves stay the snapshot's, whatever the number of listeners.

use std::future::Future;

use sha2::{Digest, Sha256};

use super::{convert, listed, Asked, View};

/// Lists `asked`'s tools again after every swap of `view`'s snapshot and
/// calls `notify` when the listing differs from the last one, until `ended`
/// resolves, the snapshot's owner is gone or `notify` fails (the client
/// left).
pub(super) async fn tell<N, F>(mut view: View, asked: Asked, ended: impl Future<Output = ()>, notify: N)
where
    N: Fn() -> F,
    F: Future<Output = bool>,
{
    tokio::pin!(ended);
    view.swaps.borrow_and_update();
    let caller = asked.caller.clone();
    let toolset = asked.toolset.clone();
    let search = asked.search;
    // Each digest's future is boxed: a listener waits far longer than it
    // lists, and waits small.
    let mut seen = Box::pin(digest(&asked)).await;
    // Only who asks and which toolset are kept: the snapshot each digest
    // was taken of is let go.
    drop(asked);
    loop {
        tokio::select! {
            changed = view.swaps.changed() => if changed.is_err() { return },
            () = &mut ended => return,
        }
        let now =
            Asked { snapshot: view.current.load_full(), caller: caller.clone(), toolset: toolset.clone(), search };
        let tools = Box::pin(digest(&now)).await;
        if tools != seen {
            seen = tools;
            if !notify().await {
                return;
            }
        }
    }
}

/// A digest of the listing `asked` is shown (every tool as `tools/list`
/// writes it, in order); `None` when it cannot be listed.
async fn digest(asked: &Asked) -> Option<[u8; 32]> {
    let ids = listed(asked).await.ok()?;
    let catalog = asked.snapshot.executor().catalog();
    let mut hasher = Sha256::new();
    for id in ids {
        serde_json::to_writer(&mut hasher, &convert::tool(catalog.tool(id))).expect("a hasher takes every byte");
    }
    Some(hasher.finalize().into())
}
