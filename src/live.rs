//! Keeps the catalogue current while the gateway runs: connects the MCP
//! servers the files name, assembles the catalogue with their tools, and
//! swaps in a new snapshot whenever a server's tools change (a server that
//! was down comes up, `notifications/tools/list_changed`, a restart).
//!
//! Every new snapshot is assembled and checked before it is swapped in; if
//! it is invalid the old one stays. Calls in flight finish on the snapshot
//! they started with. A server that is down at start is retried in the
//! background with exponential backoff (1 s, doubling, at most 60 s).

use std::{collections::HashMap, sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use tokio::{sync::Mutex, task::JoinHandle};

use crate::{
    catalog::{self, Files, LoadError, McpListing, Problem},
    exec::{CallState, ExecLimits, Executor, ExecutorSlot, Grants, Shared},
    mcp::{Event, McpPool},
    process::Inherited,
    telemetry::Observer,
};

const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_RETRY: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Catalogue(#[from] LoadError),
    #[error("cannot build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// The live catalogue: the files, the MCP servers' latest listings, and the
/// slot holding the executor of the current snapshot.
pub struct LiveCatalog {
    files: Files,
    limits: ExecLimits,
    shared: Arc<Shared>,
    current: ExecutorSlot,
    /// The latest listing of each server; a new snapshot is built from these.
    listings: Mutex<HashMap<String, McpListing>>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl LiveCatalog {
    /// Connects every MCP server of `files`, assembles the catalogue and
    /// starts keeping it current. Under strict validation a server that
    /// cannot be reached fails the start, like any catalogue problem.
    pub async fn start(
        files: Files,
        limits: ExecLimits,
        inherited: Inherited,
        grants: Grants,
        state: CallState,
        observer: Observer,
    ) -> Result<(Arc<Self>, Vec<Problem>), StartError> {
        let (pool, events) = McpPool::new(files.servers(), &inherited);
        let shared = Shared::granting(pool.clone(), inherited, observer, grants)?.keeping(state);
        let listings = pool.list_all().await;
        let loaded = match catalog::assemble(&files, &listings) {
            Ok(loaded) => loaded,
            Err(err) => {
                pool.shutdown().await;
                return Err(err.into());
            }
        };
        let failed: Vec<String> = listings.iter().filter(|l| l.tools.is_err()).map(|l| l.server.clone()).collect();
        let executor = Executor::new(Arc::new(loaded.catalog), limits, shared.clone());
        let live = Arc::new(Self {
            files,
            limits,
            shared,
            current: Arc::new(ArcSwap::from_pointee(executor)),
            listings: Mutex::new(listings.into_iter().map(|l| (l.server.clone(), l)).collect()),
            tasks: std::sync::Mutex::new(Vec::new()),
        });
        let mut tasks = vec![tokio::spawn(Arc::clone(&live).follow(events))];
        tasks.extend(failed.into_iter().map(|server| tokio::spawn(Arc::clone(&live).retry(server))));
        live.tasks.lock().expect("not poisoned").extend(tasks);
        Ok((live, loaded.warnings))
    }

    /// The slot the service reads the current executor from.
    pub fn current(&self) -> ExecutorSlot {
        Arc::clone(&self.current)
    }

    /// Stops the background work and ends every MCP connection (child
    /// processes exit or are killed, with their process groups).
    pub async fn shutdown(&self) {
        for task in self.tasks.lock().expect("not poisoned").drain(..) {
            task.abort();
        }
        self.shared.mcp().shutdown().await;
    }

    /// Re-lists a server whose tools changed and swaps in the new snapshot.
    async fn follow(self: Arc<Self>, mut events: tokio::sync::mpsc::UnboundedReceiver<Event>) {
        while let Some(Event::ToolsChanged(server)) = events.recv().await {
            let tools = self.shared.mcp().list(&server).await;
            if let Err(why) = &tools {
                tracing::warn!(server = %server, "MCP server's tools could not be listed again: {why}");
            }
            self.update(McpListing { server, tools }).await;
        }
    }

    /// Tries a server that was down until it answers, then adds its tools.
    async fn retry(self: Arc<Self>, server: String) {
        let mut wait = FIRST_RETRY;
        loop {
            tokio::time::sleep(wait).await;
            match self.shared.mcp().list(&server).await {
                Ok(tools) => {
                    tracing::info!(server = %server, tools = tools.len(), "MCP server is up");
                    self.update(McpListing { server, tools: Ok(tools) }).await;
                    return;
                }
                Err(why) => {
                    wait = (wait * 2).min(LAST_RETRY);
                    let next = humantime::format_duration(wait);
                    tracing::warn!(server = %server, "MCP server is still down ({why}); next try in {next}");
                }
            }
        }
    }

    /// Records a listing; assembles and, if valid, swaps in the new snapshot.
    async fn update(&self, listing: McpListing) {
        let mut listings = self.listings.lock().await;
        listings.insert(listing.server.clone(), listing);
        let all: Vec<McpListing> = listings.values().cloned().collect();
        match catalog::assemble(&self.files, &all) {
            Ok(loaded) => {
                let version = loaded.catalog.version().to_owned();
                let tools = loaded.catalog.tools().len();
                let executor = Executor::new(Arc::new(loaded.catalog), self.limits, Arc::clone(&self.shared));
                self.current.store(Arc::new(executor));
                tracing::info!(version, tools, "catalogue updated");
            }
            Err(err) => {
                for problem in &err.problems {
                    tracing::error!("{problem}");
                }
                tracing::error!("the updated catalogue is invalid; the current one stays");
            }
        }
    }
}
