//! `notifications/tools/list_changed`: after each swap of the snapshot (a
//! reload, an MCP server's new listing) a listening client's tools are
//! listed again, and it is told only when what it sees changed.

use std::future::Future;

use super::{listing, Asked, View};

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
    let mut seen = listing(&asked).await.ok();
    loop {
        tokio::select! {
            changed = view.swaps.changed() => if changed.is_err() { return },
            () = &mut ended => return,
        }
        let now = Asked { snapshot: view.current.load_full(), ..asked.clone() };
        let tools = listing(&now).await.ok();
        if tools != seen {
            seen = tools;
            if !notify().await {
                return;
            }
        }
    }
}
