//! Keeps the gateway's snapshot current while it runs: connects the MCP
//! servers the files name, assembles the catalogue with their tools, and
//! swaps in a new snapshot whenever a server's tools change (a server that
//! was down comes up, `notifications/tools/list_changed`, a restart) or the
//! files and configuration are reloaded (docs/architecture.md, "The path of
//! one reload").
//!
//! Every new snapshot is assembled and checked before it is swapped in; if
//! it is invalid the old one stays. Calls in flight finish on the snapshot
//! they started with. A server that is down at start is retried in the
//! background with exponential backoff (1 s, doubling, at most 60 s).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use arc_swap::ArcSwap;
use tokio::{sync::Mutex, task::JoinHandle};

mod snapshot;

pub use snapshot::Snapshot;
pub(crate) use snapshot::{Refused, SnapshotSlot};

use crate::{
    catalog::{self, Files, McpListing, McpToolInfo, Problem},
    exec::call_state::{within, STORE_DEADLINE},
    exec::{rate::RateLimits, ExecLimits, Executor, Policy, Shared},
    identity::{Granted, Identity},
    mcp::{Event, Retired},
    state::StoreError,
    telemetry::Observer,
};

const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_RETRY: Duration = Duration::from_secs(60);

/// How long servers a reload removed stay connected at most, for calls in
/// flight on them to finish.
const RETIRE_AFTER: Duration = Duration::from_secs(300);

/// Runs `work` on the one thread that reads and assembles every catalogue,
/// the first and every reload, and waits for it.
///
/// One thread, so one allocator arena: glibc gives each new thread an arena
/// of its own and keeps the pages freed in it, so reloads run on the
/// blocking pool's changing threads each left a catalogue's worth of freed
/// memory behind (RSS 3.5× the steady size after a few reloads at 10,000
/// tools). On one thread each reload reuses what the last one freed. (The
/// second half of a file's entries is read on one more thread kept for the
/// process, `catalog::raw`, for the same reason.)
pub(crate) async fn on_loader<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    type Job = Box<dyn FnOnce() + Send>;
    static LOADER: std::sync::OnceLock<std::sync::mpsc::Sender<Job>> = std::sync::OnceLock::new();
    let loader = LOADER.get_or_init(|| {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("toolgate-catalogue".to_owned())
            .spawn(move || queue.into_iter().for_each(|job| job()))
            .expect("a thread for catalogue loads");
        jobs
    });
    let (done, result) = tokio::sync::oneshot::channel();
    // The work runs inside the caller's runtime, as on its blocking pool.
    let runtime = tokio::runtime::Handle::current();
    let job: Job = Box::new(move || {
        let _inside = runtime.enter();
        let _ = done.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
    });
    loader.send(job).expect("the catalogue thread runs as long as the process");
    match result.await.expect("the catalogue thread answers every job") {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The snapshot of `sources` with the MCP servers' `listings`, assembled
/// on the catalogue thread ([`on_loader`]), and its warnings; `sources` and
/// `listings` are handed back.
async fn assembled(
    sources: Sources,
    mut listings: Vec<McpListing>,
    (shared, records): (&Arc<Shared>, &PinRecords),
    previous: Option<Arc<catalog::Catalog>>,
) -> (Sources, Vec<McpListing>, Result<(Snapshot, Vec<Problem>), catalog::LoadError>) {
    remember_first_sight(shared.store(), records, sources.files.servers(), &mut listings).await;
    let shared = Arc::clone(shared);
    on_loader(move || {
        let built = catalog::assemble_after(&sources.files, &listings, previous.as_deref())
            .map(|loaded| (snapshot(&sources, loaded.catalog, &shared), loaded.warnings));
        (sources, listings, built)
    })
    .await
}

/// What a snapshot is built from, and what a reload replaces.
pub(crate) struct Sources {
    pub(crate) files: Files,
    pub(crate) limits: ExecLimits,
    pub(crate) policy: Policy,
    pub(crate) identity: Arc<Identity>,
    pub(crate) rates: Arc<RateLimits>,
}

/// A reload that was swapped in.
#[derive(Debug)]
pub struct Reloaded {
    pub(crate) version: String,
    pub(crate) tools: usize,
    pub warnings: Vec<Problem>,
    /// MCP servers connected for it, and those ended (removed or changed).
    pub connected: Vec<String>,
    pub ended: Vec<String>,
}

struct Current {
    sources: Sources,
    /// The latest listing of each server; a new snapshot is built from these.
    listings: HashMap<String, McpListing>,
}

/// The live catalogue: its sources, the MCP servers' latest listings, and
/// the slot holding the current snapshot.
pub(crate) struct LiveCatalog {
    shared: Arc<Shared>,
    slot: SnapshotSlot,
    /// Counts the swaps of the snapshot, for whoever tells clients that
    /// their tools changed (MCP's `list_changed`).
    swaps: tokio::sync::watch::Sender<u64>,
    /// Held while a snapshot is assembled, so that reloads and MCP updates
    /// take turns.
    current: Mutex<Current>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
    pin_records: PinRecords,
}

impl LiveCatalog {
    /// Lists every MCP server of `shared`'s pool (the servers the files
    /// name), assembles the catalogue and starts keeping it current, following
    /// the pool's `events`. Under strict validation a server that cannot be
    /// reached fails the start, like any catalogue problem; a failed start
    /// ends the servers.
    pub(crate) async fn start(
        sources: Sources,
        shared: Arc<Shared>,
        events: tokio::sync::mpsc::UnboundedReceiver<Event>,
    ) -> Result<(Arc<Self>, Vec<Problem>), catalog::LoadError> {
        let pool = Arc::clone(shared.mcp());
        let listings = pool.list_all().await;
        let pin_records = PinRecords::default();
        let (sources, listings, built) = assembled(sources, listings, (&shared, &pin_records), None).await;
        let (snapshot, warnings) = match built {
            Ok(built) => built,
            Err(err) => {
                pool.shutdown().await;
                return Err(err);
            }
        };
        let failed: Vec<String> = listings.iter().filter(|l| l.tools.is_err()).map(|l| l.server.clone()).collect();
        let live = Arc::new(Self {
            shared,
            slot: Arc::new(ArcSwap::from_pointee(snapshot)),
            swaps: tokio::sync::watch::Sender::new(0),
            current: Mutex::new(Current {
                sources,
                listings: listings.into_iter().map(|l| (l.server.clone(), l)).collect(),
            }),
            tasks: std::sync::Mutex::new(Vec::new()),
            pin_records,
        });
        live.count_pin_changes(&live.catalog());
        live.spawn(Arc::clone(&live).follow(events));
        for server in failed {
            live.spawn(Arc::clone(&live).retry(server));
        }
        Ok((live, warnings))
    }

    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = crate::lock::lock(&self.tasks);
        tasks.retain(|t| !t.is_finished());
        tasks.push(tokio::spawn(task));
    }

    /// What records the gateway's telemetry.
    pub(crate) fn observer(&self) -> &Observer {
        self.shared.observer()
    }

    /// Changes with every snapshot swapped in (a reload, an MCP server's
    /// new listing).
    pub(crate) fn swaps(&self) -> tokio::sync::watch::Receiver<u64> {
        self.swaps.subscribe()
    }

    /// The catalogue of the current snapshot.
    pub(crate) fn catalog(&self) -> Arc<catalog::Catalog> {
        Arc::clone(self.slot.load().executor.catalog())
    }

    /// The slot the service reads the current snapshot from.
    pub(crate) fn current(&self) -> SnapshotSlot {
        Arc::clone(&self.slot)
    }

    /// Stops the background work and ends every MCP connection (child
    /// processes exit or are killed, with their process groups).
    pub(crate) async fn shutdown(&self) {
        for task in crate::lock::lock(&self.tasks).drain(..) {
            task.abort();
        }
        self.shared.mcp().shutdown().await;
    }

    /// Replaces the sources (files re-read, configuration re-read): the MCP
    /// servers that did not change keep their connections and are listed
    /// again over them, new or changed ones are connected and listed, then
    /// the whole is assembled
    /// and checked (strict rules included, and `check`: the settings'
    /// checks of the new snapshot, whose `Ok` adds warnings and whose `Err`
    /// rejects) before it is swapped in. A
    /// rejected reload changes nothing: the problems are returned and the new
    /// servers' connections ended. Servers the reload removed are ended once
    /// no call in flight can use them (the old snapshot is dropped, or after
    /// five minutes).
    pub(crate) async fn reload(
        self: &Arc<Self>,
        sources: Sources,
        check: impl FnOnce(&Snapshot) -> Result<Vec<Problem>, Vec<Problem>>,
    ) -> Result<Reloaded, Vec<Problem>> {
        let mut current = self.current.lock().await;
        let pool = self.shared.mcp();
        let plan = pool.plan(sources.files.servers());
        let mut listings: HashMap<String, McpListing> = plan
            .kept()
            .iter()
            .filter_map(|name| current.listings.get(name).map(|l| (name.clone(), l.clone())))
            .collect();
        // Kept servers that were up are listed again over their open
        // connections: a reload compares every federated tool with its pin
        // as the server lists it now. One that fails to answer keeps its
        // last listing (it is retried as before).
        let up: Vec<String> = listings.values().filter(|l| l.tools.is_ok()).map(|l| l.server.clone()).collect();
        let relisted = futures::future::join_all(up.into_iter().map(|name| async move {
            let tools = pool.list(&name).await;
            (name, tools)
        }))
        .await;
        for (name, tools) in relisted {
            if let Ok(tools) = tools {
                listings.insert(name.clone(), McpListing::new(name, Ok(tools)));
            }
        }
        let fresh = plan.list_fresh().await;
        let connected: Vec<String> = fresh.iter().map(|l| l.server.clone()).collect();
        let failed: Vec<String> = fresh.iter().filter(|l| l.tools.is_err()).map(|l| l.server.clone()).collect();
        listings.extend(fresh.into_iter().map(|l| (l.server.clone(), l)));
        let all: Vec<McpListing> = listings.values().cloned().collect();
        let previous = self.catalog();
        let (sources, _, built) = assembled(sources, all, (&self.shared, &self.pin_records), Some(previous)).await;
        // The settings' own checks of the new catalogue (`check`), before
        // anything is swapped in: a rejection changes nothing.
        let checked = built.map_err(|err| err.problems).and_then(|(next, mut warnings)| match check(&next) {
            Ok(more) => {
                warnings.extend(more);
                Ok((next, warnings))
            }
            Err(more) => Err([warnings, more].concat()),
        });
        let (next, warnings) = match checked {
            Ok(checked) => checked,
            Err(problems) => {
                plan.abandon().await;
                self.shared.observer().metrics.reload("rejected");
                return Err(problems);
            }
        };
        let retired = pool.apply(plan);
        let reloaded = Reloaded {
            version: next.executor.catalog().version().to_owned(),
            tools: next.executor.catalog().tools().len(),
            warnings,
            connected,
            ended: retired.names(),
        };
        let old = self.slot.swap(Arc::new(next));
        self.swaps.send_modify(|n| *n += 1);
        self.count_pin_changes(&self.catalog());
        *current = Current { sources, listings };
        drop(current);
        self.shared.observer().metrics.reload("ok");
        if !retired.is_empty() {
            self.spawn(retire(old, retired));
        }
        for server in failed {
            self.spawn(Arc::clone(self).retry(server));
        }
        Ok(reloaded)
    }

    /// Counts each federated tool that differs from its pin in `catalog`
    /// (`toolgate.mcp.pin_changes`), once per tool and listed digest: a
    /// change is counted where it is first seen, not again at every listing.
    fn count_pin_changes(&self, catalog: &catalog::Catalog) {
        let mut counted = crate::lock::lock(&self.pin_records.counted);
        for state in catalog.pins() {
            let (Some(change), Some(listed)) = (&state.change, &state.listed) else { continue };
            if counted.insert((state.key(), listed.clone())) {
                self.shared.observer().metrics.pin_change(&state.server, &state.tool, change.action, &change.fields);
            }
        }
    }

    /// The pins files of the current catalogue files (`mcp_pins`), watched
    /// like the files themselves.
    pub(crate) async fn pins_files(&self) -> Vec<std::path::PathBuf> {
        let current = self.current.lock().await;
        let mut files: Vec<std::path::PathBuf> =
            current.sources.files.servers().iter().filter_map(|s| Some(s.pins.as_ref()?.path.clone())).collect();
        files.sort();
        files.dedup();
        files
    }

    /// `toolgate mcp approve SERVER [TOOL]`: the first-sight records of
    /// those tools as listed now (see [`approve_first_sight`]). An error
    /// says why the store did not take them.
    pub(crate) async fn approve(&self, server: &str, tool: Option<&str>) -> Result<(), String> {
        let current = self.current.lock().await;
        let Some(listing) = current.listings.get(server) else { return Ok(()) };
        approve_first_sight(self.shared.store(), listing, tool).await.map_err(|err| err.to_string())
    }

    /// Re-lists a server whose tools changed and swaps in the new snapshot.
    async fn follow(self: Arc<Self>, mut events: tokio::sync::mpsc::UnboundedReceiver<Event>) {
        while let Some(Event::ToolsChanged(server)) = events.recv().await {
            if !self.shared.mcp().has(&server) {
                continue;
            }
            let tools = self.shared.mcp().list(&server).await;
            if let Err(why) = &tools {
                tracing::warn!(server = %server, "MCP server's tools could not be listed again: {why}");
            }
            self.update(McpListing::new(server, tools)).await;
        }
    }

    /// Tries a server that was down until it answers, then adds its tools;
    /// gives up when a reload removed it.
    async fn retry(self: Arc<Self>, server: String) {
        let mut wait = FIRST_RETRY;
        loop {
            tokio::time::sleep(wait).await;
            if !self.shared.mcp().has(&server) {
                return;
            }
            match self.shared.mcp().list(&server).await {
                Ok(tools) => {
                    tracing::info!(server = %server, tools = tools.len(), "MCP server is up");
                    self.update(McpListing::new(server, Ok(tools))).await;
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
    async fn update(&self, mut listing: McpListing) {
        let mut current = self.current.lock().await;
        if !current.sources.files.servers().iter().any(|s| s.name == listing.server) {
            return;
        }
        let servers = current.sources.files.servers();
        remember_first_sight(self.shared.store(), &self.pin_records, servers, std::slice::from_mut(&mut listing)).await;
        current.listings.insert(listing.server.clone(), listing);
        let all: Vec<McpListing> = current.listings.values().cloned().collect();
        let previous = self.catalog();
        match catalog::assemble_after(&current.sources.files, &all, Some(&previous)) {
            Ok(loaded) => {
                // What this listing changed is said again (a tool that no
                // longer matches its pin, hidden instructions).
                catalog::log_problems(&loaded.warnings, false);
                let version = loaded.catalog.version().to_owned();
                let tools = loaded.catalog.tools().len();
                self.slot.store(Arc::new(snapshot(&current.sources, loaded.catalog, &self.shared)));
                self.swaps.send_modify(|n| *n += 1);
                self.count_pin_changes(&self.catalog());
                tracing::info!(catalog_version = version, tools, "catalogue updated");
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

/// How long a first-sight record is kept: as long as the store keeps it.
const FIRST_SIGHT_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The state store's record of a tool's digest at its first sight.
fn first_sight_key(server: &str, tool: &str) -> String {
    format!("toolgate:pin:mcp:{server}/{tool}")
}

/// The state store's record of a tool as listed when it had `digest` (its
/// canonical JSON), kept to say what changed against a pin of that digest.
fn listed_key(digest: &str) -> String {
    format!("toolgate:pin:listed:{digest}")
}

/// What this process wrote to the state store about listed tools, and the
/// pin changes it counted.
#[derive(Default)]
pub(crate) struct PinRecords {
    /// Digests whose listing is recorded ([`listed_key`]).
    recorded: std::sync::Mutex<HashSet<String>>,
    /// Changes counted in `toolgate.mcp.pin_changes`: each tool once per
    /// listed digest.
    counted: std::sync::Mutex<HashSet<(String, String)>>,
}

/// One answer of the state store, within [`STORE_DEADLINE`].
async fn in_time<T>(operation: impl std::future::Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    within(STORE_DEADLINE, operation).await
}

/// Records `tool` as listed (its canonical JSON) under its digest, once: a
/// record already there stays.
async fn record_listed(store: &Arc<dyn crate::state::Store>, tool: &McpToolInfo) -> Result<(), StoreError> {
    let listed = serde_jcs::to_vec(&tool.listed()).expect("JSON values serialise");
    in_time(store.claim(&listed_key(&tool.digest), &listed, FIRST_SIGHT_TTL)).await.map(drop)
}

/// Records each listed tool's digest at its first sight in the state store
/// (shared by replicas through Redis; in memory, until a restart), and
/// gives each listing the digests first seen: a tool's pin when the pins
/// file (of `servers`) has none (docs/security.md, "Pinning"). A tool
/// listed as pinned has that listing recorded too, and a tool that differs
/// from its pin gets the pinned listing back, for the warning's diff. A
/// store that does not answer leaves tools without a first sight, with one
/// warning.
async fn remember_first_sight(
    store: &Arc<dyn crate::state::Store>,
    records: &PinRecords,
    servers: &[catalog::McpServer],
    listings: &mut [McpListing],
) {
    for listing in listings.iter_mut() {
        let Ok(tools) = &listing.tools else { continue };
        let server = &listing.server;
        let Some(spec) = servers.iter().find(|s| s.name == *server) else { continue };
        if spec.pin == catalog::PinMode::Off {
            // Nothing is compared: nothing is recorded.
            continue;
        }
        let claims = tools.iter().map(|tool| async move {
            let key = first_sight_key(server, &tool.name);
            (tool, in_time(store.claim(&key, tool.digest.as_bytes(), FIRST_SIGHT_TTL)).await)
        });
        let mut unanswered = None;
        let mut first_seen = HashMap::new();
        for (tool, claimed) in futures::future::join_all(claims).await {
            match claimed {
                Ok(None) => first_seen.insert(tool.name.clone(), tool.digest.clone()),
                Ok(Some(first)) => first_seen.insert(tool.name.clone(), String::from_utf8_lossy(&first).into_owned()),
                Err(why) => {
                    unanswered = Some(why);
                    continue;
                }
            };
        }
        // Each tool's pin: the file's entry, else its first sight.
        let pins: Vec<(&McpToolInfo, String)> = tools
            .iter()
            .filter_map(|tool| Some((tool, spec.pinned(&tool.name).or(first_seen.get(&tool.name))?.clone())))
            .collect();
        let recorded = |digest: &str| crate::lock::lock(&records.recorded).contains(digest);
        let work =
            pins.iter().filter(|(tool, pin)| *pin != tool.digest || !recorded(pin)).map(|(tool, pin)| async move {
                match *pin == tool.digest {
                    // As pinned: recorded once per process (claimed: the first
                    // record of a digest stays).
                    true => record_listed(store, tool).await.map(|()| {
                        crate::lock::lock(&records.recorded).insert(pin.clone());
                        None
                    }),
                    false => in_time(store.get(&listed_key(pin))).await.map(|was| {
                        let was = was.and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
                        was.map(|was| (pin.clone(), was))
                    }),
                }
            });
        for answer in futures::future::join_all(work).await {
            match answer {
                Ok(Some((pin, was))) => {
                    listing.pinned_as.insert(pin, was);
                }
                Ok(None) => {}
                Err(why) => unanswered = Some(why),
            }
        }
        listing.first_seen = first_seen;
        if let Some(why) = unanswered {
            tracing::warn!(server = %listing.server, "tools not compared with their first sight: {why}");
        }
    }
}

/// `toolgate mcp approve`: records the listed tools of `server` (`tool`
/// only, when given) as first seen now, replacing their first-sight
/// records, with their listings.
async fn approve_first_sight(
    store: &Arc<dyn crate::state::Store>,
    listing: &McpListing,
    tool: Option<&str>,
) -> Result<(), StoreError> {
    let Ok(tools) = &listing.tools else { return Ok(()) };
    for info in tools.iter().filter(|info| tool.is_none_or(|tool| tool == info.name)) {
        let key = first_sight_key(&listing.server, &info.name);
        let digest = info.digest.as_bytes();
        // Set, whatever was there: claimed if absent, else replaced from
        // what it holds (again if another replica wrote in between).
        while let Some(held) = in_time(store.claim(&key, digest, FIRST_SIGHT_TTL)).await? {
            if held == digest || in_time(store.replace(&key, &held, digest, FIRST_SIGHT_TTL)).await? {
                break;
            }
        }
        record_listed(store, info).await?;
    }
    Ok(())
}

/// The snapshot of `catalog` under `sources`' configuration: its grants
/// resolved in this catalogue, once.
fn snapshot(sources: &Sources, catalog: catalog::Catalog, shared: &Arc<Shared>) -> Snapshot {
    let granted = Granted::resolve(sources.identity.principals(), &catalog);
    let catalog = Arc::new(catalog);
    catalog.index_in_background();
    let executor =
        Executor::new(catalog, sources.limits, sources.policy, Arc::clone(shared), granted, Arc::clone(&sources.rates));
    Snapshot { identity: Arc::clone(&sources.identity), executor }
}

/// Ends the servers a reload took out of the pool once the snapshot that
/// could call them is no longer held by any request (or after
/// [`RETIRE_AFTER`]).
async fn retire(old: Arc<Snapshot>, retired: Retired) {
    let deadline = tokio::time::Instant::now() + RETIRE_AFTER;
    while Arc::strong_count(&old) > 1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(old);
    retired.end().await;
}
