//! The composition root (docs/architecture.md, "Layers"): everything the
//! gateway is made of, built once from [`Settings`]: the state store,
//! identity (principals and the verifier of users' tokens), the MCP
//! servers, the executor's shared parts and the live catalogue; then the
//! front doors over them. `serve`, the other commands and the tests all
//! start the gateway through [`App::start`]; there is no other wiring.
//!
//! A reload (`App::reload`, triggered by `reload::Reloader`) reads the
//! settings again, builds identity and sources anew, and swaps the snapshot
//! only when the whole of it is valid. What a reload cannot change is named
//! (config's `Fixed`); everything else takes effect.

pub(crate) mod reload;
mod serve;

use std::{path::PathBuf, sync::Arc};

use anyhow::{anyhow, Context};

use crate::{
    catalog::{self, Catalog, LoadError, Problem},
    config::Settings,
    env::Env,
    exec::{CallState, HttpClients, Shared},
    identity::{Identity, OauthVerifier, Principals, UserVerifier},
    live::{LiveCatalog, Sources},
    mcp::McpPool,
    process::Inherited,
    state::{MemoryStore, RedisStore, Store, DEFAULT_MAX_RECORDS},
    telemetry::Observer,
};

pub use serve::{Listeners, Serving};

pub use crate::{
    front::grpc::Gateway,
    live::{Reloaded, Snapshot},
    server::ServeError,
};

/// What the process gives the gateway besides its settings.
pub struct Host {
    /// The environment `${VAR}` reads from and command tools inherit from.
    pub env: Env,
    /// What records calls (disabled, or the OTLP exporters', or a test's).
    pub observer: Observer,
    /// The program command tools run under (`toolgate supervise`), so that
    /// nothing they start outlives their call; `None`: they run directly.
    pub supervisor: Option<PathBuf>,
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The catalogue (or an MCP server under strict validation) failed.
    #[error(transparent)]
    Catalogue(#[from] LoadError),
    /// What the settings describe could not be built (a JWKS file that is
    /// not one, a Redis URL the store refuses).
    #[error("{0}")]
    Settings(String),
    #[error("cannot build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// Why a reload was rejected (the running snapshot keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The settings or what they name (a JWKS file) are invalid.
    #[error("{0}")]
    Settings(String),
    /// The catalogue is invalid: every problem.
    #[error("{} catalogue problems", .0.len())]
    Catalogue(Vec<Problem>),
}

/// The running gateway: the live catalogue (snapshots of executor and
/// identity), and what a reload needs.
#[derive(Clone)]
pub struct App {
    live: Arc<LiveCatalog>,
    env: Env,
}

impl App {
    /// Builds everything `settings` describe and connects the MCP servers the
    /// catalogue names; the catalogue's warnings. Must run inside the Tokio
    /// runtime.
    pub async fn start(settings: &Settings, host: Host) -> Result<(Self, Vec<Problem>), StartError> {
        crate::tls::install_crypto_provider();
        let identity = identity(settings, None).map_err(StartError::Settings)?;
        // Read where every reload reads (see `live::on_loader`): the memory
        // the start's files and YAML leave free is what reloads reuse.
        let (settings_now, env) = (settings.clone(), host.env.clone());
        let read = tokio::spawn(crate::live::on_loader(move || sources(&settings_now, &env, identity, None)));
        // Meanwhile, on this thread: the HTTP backends' clients (each loads
        // the system's CA certificates).
        let http = HttpClients::new();
        let sources = match read.await {
            Ok(sources) => sources,
            Err(err) => std::panic::resume_unwind(err.into_panic()),
        };
        let http = http?;
        let inherited = match host.supervisor {
            Some(binary) => Inherited::from_env(&host.env).supervised_by(binary),
            None => Inherited::from_env(&host.env),
        };
        let store: Arc<dyn Store> = match &settings.state.redis {
            Some(url) => Arc::new(RedisStore::new(url).map_err(StartError::Settings)?),
            None => Arc::new(MemoryStore::with_capacity(settings.state.max_records.unwrap_or(DEFAULT_MAX_RECORDS))),
        };
        let state = &settings.state;
        let calls = CallState::new(store, state.idempotency_ttl, state.session_ttl, settings.retry_budget);
        let (pool, events) = McpPool::new(sources.files.servers(), &inherited);
        let shared = Shared::new(pool, inherited, host.observer, calls, http);
        let (live, mut warnings) = LiveCatalog::start(sources, shared, events).await?;
        let app = Self { live, env: host.env };
        match checked(&app.snapshot(), settings) {
            Ok(more) => warnings.extend(more),
            Err(more) => {
                app.shutdown().await;
                warnings.extend(more);
                return Err(StartError::Catalogue(crate::catalog::LoadError { problems: warnings }));
            }
        }
        Ok((app, warnings))
    }

    /// The catalogue of the current snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.live.catalog()
    }

    /// The pins files the catalogue files name (`mcp_pins`).
    pub(crate) async fn pins_files(&self) -> Vec<std::path::PathBuf> {
        self.live.pins_files().await
    }

    /// `toolgate mcp approve SERVER [TOOL]`: records those tools, as listed
    /// now, as first seen (docs/security.md, "Pinning").
    pub(crate) async fn approve_first_sight(&self, server: &str, tool: Option<&str>) -> Result<(), String> {
        self.live.approve(server, tool).await
    }

    /// The current snapshot: what a request started now works on.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.live.current().load_full()
    }

    /// The current snapshot and its swaps, for a front door that tells its
    /// clients when their tools change.
    fn view(&self) -> crate::front::mcp::View {
        crate::front::mcp::View { current: self.live.current(), swaps: self.live.swaps() }
    }

    /// The gRPC front door over the current snapshot.
    pub fn grpc(&self) -> Gateway {
        Gateway::new(self.live.current())
    }

    /// Serves MCP on this process's stdin and stdout for the caller that
    /// `principal` and `user_token` name, until the client closes them.
    pub(crate) async fn serve_mcp_stdio(
        &self,
        principal: Option<&str>,
        user_token: Option<&str>,
        search: bool,
    ) -> anyhow::Result<()> {
        use rmcp::ServiceExt;
        let caller = self.snapshot().identity.local(principal, user_token).map_err(|why| anyhow!(why))?;
        let door = crate::front::mcp::Handler::for_caller(self.view(), caller, search);
        let (answers, messages, written) = crate::front::mcp::stdio::transport();
        let running = door.serve((answers, messages)).await.context("cannot serve MCP on stdio")?;
        running.waiting().await.context("MCP on stdio ended")?;
        // Every answer written before the process ends.
        let _ = written.await;
        Ok(())
    }

    /// Reads `settings`' files and key sets again and swaps in the new
    /// snapshot if the whole is valid (the files are read on the one thread
    /// kept for catalogue loads, `live::on_loader`; unchanged schemas are
    /// shared with the current catalogue). What only a restart changes is
    /// left as it is: compare the settings' fixed parts to say so.
    pub async fn reload(&self, settings: &Settings) -> Result<Reloaded, ReloadError> {
        let previous = Arc::clone(&self.live.current().load().identity);
        let catalog = self.catalog();
        let (settings_now, env) = (settings.clone(), self.env.clone());
        let read = crate::live::on_loader(move || {
            let identity = identity(&settings_now, Some(&previous))?;
            Ok::<_, String>(sources(&settings_now, &env, identity, Some(&catalog)))
        });
        let sources = match read.await {
            Ok(sources) => sources,
            Err(why) => {
                self.live.observer().metrics.reload("rejected");
                return Err(ReloadError::Settings(why));
            }
        };
        self.live.reload(sources, |next| checked(next, settings)).await.map_err(ReloadError::Catalogue)
    }

    /// Stops the background work and ends every MCP server.
    pub async fn shutdown(&self) {
        self.live.shutdown().await;
    }
}

/// What `settings` say wrongly of `snapshot`'s catalogue, checked at start
/// and before a reload is swapped in: warnings (`Ok`), or, under strict
/// validation, errors that fail either (`Err`), like catalogue warnings.
fn checked(snapshot: &Snapshot, settings: &Settings) -> Result<Vec<Problem>, Vec<Problem>> {
    let problems = [limit_warnings(snapshot, settings), user_warnings(snapshot, settings)].concat();
    match settings.load.strict && !problems.is_empty() {
        true => Err(problems),
        false => Ok(problems),
    }
}

/// A tool bound to the user with no way to verify a user (neither
/// `users.jwt` nor the MCP front door's OAuth) refuses every call.
fn user_warnings(snapshot: &Snapshot, settings: &Settings) -> Vec<Problem> {
    let oauth = settings.doors.mcp.as_ref().is_some_and(|mcp| mcp.oauth.is_some());
    if settings.users.is_some() || oauth {
        return Vec::new();
    }
    snapshot
        .executor
        .catalog()
        .tools()
        .iter()
        .filter(|tool| tool.binding.as_ref().is_some_and(|b| b.binds_user()))
        .map(|tool| Problem {
            severity: crate::catalog::Severity::Warning,
            origin: tool.declared_at.origin.to_string(),
            path: format!("{}.bind", tool.declared_at.path),
            message: format!(
                "the tool '{}' binds a parameter to the user, but no users.jwt is configured: no user can be \
                 verified, so every call of it is refused",
                tool.name
            ),
        })
        .collect()
}

/// A limit that applies to no call: under a tool no principal may use, or
/// keyed by an alias or a toolset.
fn limit_warnings(snapshot: &Snapshot, settings: &Settings) -> Vec<Problem> {
    snapshot
        .executor
        .idle_limits()
        .into_iter()
        .map(|(name, message)| Problem {
            severity: crate::catalog::Severity::Warning,
            origin: settings.origin.clone(),
            path: format!("rate_limits.tools.{name}"),
            message,
        })
        .collect()
}

/// Who may call under `settings`: their principals, a verifier of users'
/// tokens and one of the MCP front door's access tokens. A verifier of a
/// JWKS URL with unchanged settings is kept from `previous` (its keys and
/// its refresh); any other is built anew, so a JWKS file is read again on
/// every reload and tokens verified with the old keys are forgotten.
fn identity(settings: &Settings, previous: Option<&Arc<Identity>>) -> Result<Arc<Identity>, String> {
    let previous_users = previous.and_then(|p| p.users());
    let users = match &settings.users {
        None => None,
        Some(jwt) => match previous_users.filter(|p| p.config() == jwt && jwt.jwks_url.is_some()) {
            Some(kept) => Some(Arc::clone(kept)),
            None => {
                let verifier = Arc::new(UserVerifier::new(jwt.clone())?);
                verifier.keep_keys_fresh();
                Some(verifier)
            }
        },
    };
    let oauth = match settings.doors.mcp.as_ref().and_then(|m| m.oauth.as_ref()) {
        Some(config) => {
            let users_issuer = settings.users.as_ref().map(|jwt| jwt.issuer.as_str());
            Some(Arc::new(OauthVerifier::new(config, previous.and_then(|p| p.oauth()), users_issuer)?))
        }
        None => None,
    };
    let origins = crate::config::door_origins(&settings.doors);
    Ok(Arc::new(Identity::new(Principals::clone(&settings.principals), users, oauth).with_origins(origins)))
}

/// What a snapshot is built from: the files `settings` name (with the
/// principals' grants to check against them), limits, policy and identity.
/// On a reload, `previous` is the catalogue being replaced: its unchanged
/// schemas are shared (see [`catalog::read_again`]).
fn sources(settings: &Settings, env: &Env, identity: Arc<Identity>, previous: Option<&catalog::Catalog>) -> Sources {
    let mut files = match previous {
        Some(previous) => catalog::read_again(&settings.load, env, previous),
        None => catalog::read(&settings.load, env),
    };
    files.add_grants(identity.principals().grant_decls());
    files.add_grants(settings.rate_limit_decl());
    Sources { files, limits: settings.limits, policy: settings.policy, identity, rates: Arc::clone(&settings.rates) }
}
