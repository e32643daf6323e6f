//! Settings as plain data (docs/configuration.md): read from flags, the
//! environment and the configuration file, merged and validated. Nothing
//! here builds a client, reads a key set or connects anything: the
//! composition root ([`crate::app`]) builds what the settings describe, so
//! `validate`, `tools list` and a reload's first pass build nothing they
//! throw away.
//!
//! Precedence: command-line flags, then environment, then the optional
//! configuration file (`--config FILE`), then defaults. The environment is a
//! parameter ([`Env`]), never read here directly.

mod doors;
mod mcp;
mod model;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use serde::Deserialize;

pub(crate) use self::doors::origins as door_origins;
pub use self::doors::{Door, DOORS};
pub(crate) use self::{
    doors::DoorSettings,
    mcp::{
        McpFrontDoorConfig, McpSettings, DEFAULT_SESSIONS_PER_PRINCIPAL, DEFAULT_SESSIONS_PER_USER,
        DEFAULT_STREAMS_PER_PRINCIPAL, DEFAULT_STREAMS_PER_USER,
    },
    model::{Api, ModelDoorConfig, ModelSettings, StreamCalls, ToolLimits, Upstream, UpstreamProxy},
};
pub use crate::tls::TlsConfig;

pub(crate) use crate::exec::Policy;
use crate::{
    catalog::{GrantDecl, LoadOptions, Place},
    env::Env,
    exec::{
        rate::{RateLimits, RateLimitsConfig},
        ArgumentLimits, ExecLimits,
    },
    identity::{JwtConfig, PrincipalConfig, Principals, UsersConfig},
    state::StateConfig,
};

/// The environment variable that sets the strict policy.
pub(crate) const STRICT_ENV: &str = "TOOLGATE_STRICT_TOOLS";
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:50051";

/// The policy of requests that do not choose: the first that is set of the
/// `--strict` flag, `TOOLGATE_STRICT_TOOLS` (`1`, `true`, `yes` after
/// trimming, any case, mean strict; any other value, empty included, means
/// non-strict), the configuration's `policy.strict`; else non-strict.
fn policy_from_sources(flag: bool, env: &Env, configured: Option<bool>) -> Policy {
    let strict = if flag { true } else { env_strict(env).or(configured).unwrap_or(false) };
    Policy { strict }
}

/// `TOOLGATE_STRICT_TOOLS` read as the policy reads it; `None` when unset.
fn env_strict(env: &Env) -> Option<bool> {
    env.flag(STRICT_ENV)
}

/// The optional configuration file (YAML). Every key is optional.
///
/// ```yaml
/// listen: 127.0.0.1:50051
/// catalog: [catalog]          # files or folders; relative to this file
/// packs_dir: catalog/packs    # relative to this file
/// packs: [courier]
/// policy: {strict: false}
/// limits:                     # every Execute limit answers in-band
///   max_argument_bytes: 1048576
///   max_argument_depth: 64
///   max_result_bytes: 1048576
///   inventory_cap: 100        # names in an "Available tools" list
/// tls:                        # the server's certificate (re-read on SIGHUP)
///   cert: certs/server.pem
///   key: certs/server.key
///   client_ca: certs/ca.pem   # optional: client certificates (mTLS)
/// health_listen: 0.0.0.0:8081 # plaintext grpc.health.v1 only, for probes
/// metrics_listen: 0.0.0.0:9464 # GET /metrics, Prometheus text, plaintext
/// principals:                 # who may call, and what each may use
///   - name: support-bot
///     api_key_sha256: 2c26…   # toolgate auth hash-key
///     tools: [courier]
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub(crate) listen: Option<String>,
    pub(crate) tls: Option<TlsConfig>,
    pub(crate) health_listen: Option<String>,
    /// `GET /metrics` (every metric as Prometheus text), plaintext.
    pub(crate) metrics_listen: Option<String>,
    #[serde(default)]
    pub(crate) principals: Vec<PrincipalConfig>,
    pub(crate) users: Option<UsersConfig>,
    pub(crate) state: Option<StateConfig>,
    /// The file this was read from (for messages), when it was.
    #[serde(skip)]
    pub(crate) origin: Option<String>,
    pub(crate) catalog: Option<Vec<PathBuf>>,
    pub(crate) packs_dir: Option<PathBuf>,
    pub(crate) packs: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) policy: PolicyConfig,
    #[serde(default)]
    pub(crate) limits: LimitsConfig,
    pub(crate) mcp_front_door: Option<McpFrontDoorConfig>,
    pub(crate) model_door: Option<ModelDoorConfig>,
    pub(crate) rate_limits: Option<RateLimitsConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Connections one principal holds at once (default a quarter of the
    /// connection budget).
    pub(crate) connections_per_principal: Option<std::num::NonZeroUsize>,
    pub(crate) max_argument_bytes: Option<usize>,
    pub(crate) max_argument_depth: Option<usize>,
    pub(crate) max_result_bytes: Option<usize>,
    pub(crate) inventory_cap: Option<usize>,
}

impl LimitsConfig {
    fn limits(&self) -> ExecLimits {
        let defaults = ExecLimits::default();
        ExecLimits {
            arguments: ArgumentLimits {
                max_bytes: self.max_argument_bytes.unwrap_or(defaults.arguments.max_bytes),
                max_depth: self.max_argument_depth.unwrap_or(defaults.arguments.max_depth),
            },
            inventory_cap: self.inventory_cap.unwrap_or(defaults.inventory_cap),
            max_result_bytes: self.max_result_bytes.unwrap_or(defaults.max_result_bytes),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    pub(crate) strict: Option<bool>,
    /// Consecutive fixable failures of one tool in one session before
    /// RETRY_BUDGET_EXHAUSTED (default 3).
    pub(crate) retry_budget: Option<u32>,
}

impl FileConfig {
    /// Reads the file; relative paths in it resolve against its folder.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let failed = |message: String| ConfigError::File { path: path.display().to_string(), message };
        let bytes = crate::catalog::read_bounded(path).map_err(failed)?;
        let text = String::from_utf8(bytes).map_err(|_| failed("not valid UTF-8".to_owned()))?;
        let mut config: FileConfig = serde_yaml::from_str(&text).map_err(|err| failed(err.to_string()))?;
        config.origin = Some(path.display().to_string());
        let dir = path.parent().unwrap_or(Path::new(""));
        if let Some(jwt) = config.users.as_mut().and_then(|u| u.jwt.as_mut()) {
            if let Some(file) = &mut jwt.jwks_file {
                *file = dir.join(&*file);
            }
        }
        if let Some(oauth) = config.mcp_front_door.as_mut().and_then(|d| d.oauth.as_mut()) {
            if let Some(file) = &mut oauth.jwks_file {
                *file = dir.join(&*file);
            }
        }
        if let Some(tls) = &mut config.tls {
            tls.cert = dir.join(&tls.cert);
            tls.key = dir.join(&tls.key);
            if let Some(ca) = &mut tls.client_ca {
                *ca = dir.join(&*ca);
            }
        }
        if let Some(catalog) = &mut config.catalog {
            catalog.iter_mut().for_each(|p| *p = dir.join(&*p));
        }
        if let Some(packs_dir) = &mut config.packs_dir {
            *packs_dir = dir.join(&*packs_dir);
        }
        Ok(config)
    }
}

/// What the command line said about the catalogue and policy.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub catalog: Vec<PathBuf>,
    pub packs_dir: Option<PathBuf>,
    pub packs: Vec<String>,
    pub strict: bool,
    pub listen: Option<String>,
    /// `--tls-cert` and `--tls-key` (both or neither).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// The address flags of the doors of [`DOORS`] that were given, by
    /// door name (`--mcp-listen` under `mcp`).
    pub door_listen: Vec<(&'static str, String)>,
    /// `--metrics-listen`.
    pub metrics_listen: Option<String>,
}

/// Settings after every source is merged and checked.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The gRPC listener's address; `None`: off (`listen: off`), the
    /// other doors serve alone.
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) load: LoadOptions,
    pub(crate) policy: Policy,
    pub(crate) limits: ExecLimits,
    /// The server's certificate and key (and client CA), when it speaks TLS.
    pub(crate) tls: Option<TlsConfig>,
    /// A plaintext listener serving only `grpc.health.v1`.
    pub(crate) health_listen: Option<SocketAddr>,
    /// A plaintext listener serving `GET /metrics` (Prometheus text).
    pub(crate) metrics_listen: Option<SocketAddr>,
    /// Who may call; empty: everyone, as before identity existed.
    pub(crate) principals: Arc<Principals>,
    /// How end users' tokens are verified, when `users.jwt` is configured
    /// (the shape checked; the key set is read by the app).
    pub(crate) users: Option<JwtConfig>,
    /// Where idempotency records and retry budgets live (the Redis URL
    /// checked; nothing connected), and how long they are kept.
    pub(crate) state: StateConfig,
    /// Consecutive fixable failures before RETRY_BUDGET_EXHAUSTED.
    pub(crate) retry_budget: Option<u32>,
    /// What a reload cannot change: compared with the running one's.
    pub(crate) fixed: Fixed,
    /// The doors of [`DOORS`], each when it is on.
    pub(crate) doors: DoorSettings,
    /// `limits.connections_per_principal`, when set.
    pub(crate) connections_per_principal: Option<usize>,
    /// `rate_limits` and the principals' `rate`, checked (reloadable).
    pub(crate) rates: Arc<RateLimits>,
    /// The file the settings came from, for messages.
    pub(crate) origin: String,
}

/// The settings a reload cannot change (they are bound to sockets, or to
/// state that outlives a snapshot); a reload that changes them says they
/// need a restart. TLS files are re-read on every reload; their paths are
/// fixed. Principals, users (and their key set), policy, limits and the
/// catalogue all reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fixed {
    listen: Option<SocketAddr>,
    tls: Option<TlsConfig>,
    health_listen: Option<SocketAddr>,
    metrics_listen: Option<SocketAddr>,
    doors: DoorSettings,
    state: StateConfig,
    retry_budget: Option<u32>,
}

impl Fixed {
    /// The configuration keys whose values differ in `next`.
    pub(crate) fn changed(&self, next: &Fixed) -> Vec<&'static str> {
        let gateway = [
            (self.listen != next.listen, "listen"),
            (self.tls != next.tls, "tls"),
            (self.health_listen != next.health_listen, "health_listen"),
            (self.metrics_listen != next.metrics_listen, "metrics_listen"),
        ];
        let shared =
            [(self.state != next.state, "state"), (self.retry_budget != next.retry_budget, "policy.retry_budget")];
        let mut changed: Vec<&'static str> =
            gateway.into_iter().filter(|(differs, _)| *differs).map(|(_, key)| key).collect();
        changed.extend(doors::changed(&self.doors, &next.doors));
        changed.extend(shared.into_iter().filter(|(differs, _)| *differs).map(|(_, key)| key));
        changed
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {message}")]
    File { path: String, message: String },
    #[error("invalid listen address '{0}': expected IP:PORT, e.g. 127.0.0.1:50051")]
    Listen(String),
    #[error("{}", .0.join("\n"))]
    Principals(Vec<String>),
    #[error("--tls-cert and --tls-key go together: give both, or neither")]
    TlsPair,
    #[error("client certificates identify principals only over TLS with a client CA: add tls.client_ca")]
    NoClientCa,
    #[error("{0}")]
    Users(String),
    #[error("state.redis: {0}")]
    Redis(String),
    #[error(
        "refusing to listen on {0}: not a loopback address, and no principals are configured; \
         configure principals (and tls), or pass --allow-remote to accept every caller on the network"
    )]
    Unauthenticated(SocketAddr),
    #[error(
        "refusing to listen on {0} without TLS: API keys would travel in clear; configure tls, \
         or pass --allow-remote"
    )]
    Cleartext(SocketAddr),
    /// Every problem of one configuration, one a line, in the file's order.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    All(Vec<ConfigError>),
}

/// The problems [`Settings::build`] found so far: it goes on past each one,
/// so that a configuration is corrected in one pass, not one problem at a
/// time.
#[derive(Default)]
struct Problems(Vec<ConfigError>);

impl Problems {
    /// The value, or `None` with its problem kept.
    fn keep<T>(&mut self, result: Result<T, ConfigError>) -> Option<T> {
        result.map_err(|err| self.0.push(err)).ok()
    }

    fn push(&mut self, problem: ConfigError) {
        self.0.push(problem);
    }

    /// Every problem as one error (a single one as itself), if there is one.
    fn into_error(mut self) -> Option<ConfigError> {
        match self.0.len() {
            0 => None,
            1 => self.0.pop(),
            _ => Some(ConfigError::All(self.0)),
        }
    }
}

/// `text` as a listen address.
fn address(text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse().map_err(|_| ConfigError::Listen(text.to_owned()))
}

impl Settings {
    /// The settings of `flags` over `file` over the defaults; every problem
    /// found, when there is one (all of them, not the first).
    pub fn build(flags: Flags, file: FileConfig, env: &Env) -> Result<Self, ConfigError> {
        let mut problems = Problems::default();
        let listen_text = flags.listen.or(file.listen).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        // `off`: no gRPC listener; the other doors serve alone.
        let listen = match listen_text.trim() {
            "off" => Some(None),
            text => problems.keep(address(text)).map(Some),
        };
        let policy = policy_from_sources(flags.strict, env, file.policy.strict);
        let defaults = LoadOptions::default();
        let registry = match (flags.catalog.is_empty(), file.catalog) {
            (false, _) => flags.catalog,
            (true, Some(paths)) => paths,
            // A model door alone needs no catalogue: without one named and
            // without the default folder, the gateway has no tools of its
            // own (a gateway without a model door still needs one).
            (true, None) if file.model_door.is_some() && !defaults.registry.iter().any(|p| p.exists()) => Vec::new(),
            (true, None) => defaults.registry,
        };
        let load = LoadOptions {
            registry,
            packs_dir: flags.packs_dir.or(file.packs_dir).unwrap_or(defaults.packs_dir),
            packs: if flags.packs.is_empty() { file.packs.unwrap_or_default() } else { flags.packs },
            strict: policy.strict,
        };
        let tls = match (flags.tls_cert, flags.tls_key) {
            (Some(cert), Some(key)) => {
                Some(TlsConfig { cert, key, client_ca: file.tls.as_ref().and_then(|t| t.client_ca.clone()) })
            }
            (None, None) => file.tls,
            _ => problems.keep(Err(ConfigError::TlsPair)),
        };
        let health_listen = file.health_listen.and_then(|text| problems.keep(address(&text)));
        let metrics_listen =
            flags.metrics_listen.or(file.metrics_listen).and_then(|text| problems.keep(address(&text)));
        let origin = file.origin.as_deref().unwrap_or("<configuration>");
        let principals = Principals::from_config(&file.principals, origin).map_err(ConfigError::Principals);
        let principals = problems.keep(principals).unwrap_or_default();
        let rates = RateLimits::from_config(file.rate_limits.as_ref(), &file.principals, origin)
            .map_err(ConfigError::Principals);
        let rates = problems.keep(rates).unwrap_or_default();
        let origin = origin.to_owned();
        if principals.use_certificates() && tls.as_ref().is_none_or(|t| t.client_ca.is_none()) {
            problems.push(ConfigError::NoClientCa);
        }
        let users = file.users.and_then(|u: UsersConfig| u.jwt);
        if let Some(jwt) = &users {
            problems.keep(jwt.check().map_err(ConfigError::Users));
        }
        let state = file.state.unwrap_or_default();
        if let Some(url) = &state.redis {
            problems.keep(crate::state::check_url(url).map_err(ConfigError::Redis));
        }
        let retry_budget = file.policy.retry_budget;
        let doors =
            door_settings(&flags.door_listen, file.mcp_front_door, file.model_door, &principals, env, &mut problems);
        if let Some(all) = problems.into_error() {
            return Err(all);
        }
        let listen = listen.expect("no problem: the address parsed");
        if listen.is_none() && doors::addresses(&doors).next().is_none() {
            return Err(ConfigError::Principals(vec![
                "listen: off leaves nothing to serve: configure a door (model_door, mcp_front_door) or a listen address"
                    .to_owned(),
            ]));
        }
        let fixed = Fixed {
            listen,
            tls: tls.clone(),
            health_listen,
            metrics_listen,
            doors: doors.clone(),
            state: state.clone(),
            retry_budget,
        };
        let limits = file.limits.limits();
        let connections_per_principal = file.limits.connections_per_principal.map(std::num::NonZeroUsize::get);
        let principals = Arc::new(principals);
        Ok(Self {
            listen,
            load,
            policy,
            limits,
            tls,
            health_listen,
            metrics_listen,
            principals,
            users,
            state,
            retry_budget,
            fixed,
            doors,
            connections_per_principal,
            rates: Arc::new(rates),
            origin,
        })
    }
}

impl Settings {
    /// The address of every door besides the gateway's (`listen`), by the
    /// door's name: the probe port (`health_listen`) and each door of
    /// [`DOORS`] that is on.
    pub(crate) fn door_addresses(&self) -> Vec<(&'static str, SocketAddr)> {
        let health = self.health_listen.map(|listen| ("health", listen));
        let metrics = self.metrics_listen.map(|listen| ("metrics", listen));
        health
            .into_iter()
            .chain(metrics)
            .chain(doors::addresses(&self.doors).map(|(door, listen)| (door.name, listen)))
            .collect()
    }

    /// What is likely wrong in the configuration though allowed, one line
    /// each (`validate` prints them, `serve` logs them).
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.doors.model.as_ref().map(|model| model.warnings()).unwrap_or_default()
    }

    /// The tools `rate_limits.tools` names, for the catalogue to check like
    /// grants (an unknown one is a load error with a did-you-mean).
    pub(crate) fn rate_limit_decl(&self) -> Vec<GrantDecl> {
        let names: Vec<(usize, String)> = self.rates.tool_names().map(|n| (0, n.to_owned())).collect();
        if names.is_empty() {
            return Vec::new();
        }
        let place = Place { origin: self.origin.as_str().into(), path: "rate_limits.tools".to_owned() };
        vec![GrantDecl { owner: "rate_limits.tools".to_owned(), names, place, keyed: true }]
    }

    /// Refuses settings that would expose the gateway, unless
    /// `allow_remote`: a listen address other than loopback with no
    /// principals (every caller on the network trusted), or with principals
    /// but without TLS (API keys in clear).
    pub(crate) fn check_exposure(&self, allow_remote: bool) -> Result<(), ConfigError> {
        let (principals, tls) = (!self.principals.is_empty(), self.tls.is_some());
        if let Some(listen) = self.listen {
            exposure(listen, principals, tls, allow_remote)?;
        }
        doors::check_exposure(&self.doors, &self.doors, principals, tls, allow_remote)
    }

    /// [`Settings::check_exposure`] for settings reloaded into a gateway
    /// that listens as `running` says (a reload changes neither an address
    /// nor TLS): the same guard as at start, every door's, on the new
    /// principals.
    pub(crate) fn check_reload_exposure(&self, running: &Fixed, allow_remote: bool) -> Result<(), ConfigError> {
        let (principals, tls) = (!self.principals.is_empty(), running.tls.is_some());
        if let Some(listen) = running.listen {
            exposure(listen, principals, tls, allow_remote)?;
        }
        doors::check_exposure(&running.doors, &self.doors, principals, tls, allow_remote)
    }
}

/// The doors of [`DOORS`] as the flags, the environment and their sections
/// say; a door's problems kept in `problems`.
fn door_settings(
    flags: &[(&'static str, String)],
    mcp: Option<McpFrontDoorConfig>,
    model: Option<ModelDoorConfig>,
    principals: &Principals,
    env: &Env,
    problems: &mut Problems,
) -> DoorSettings {
    let mcp = mcp.unwrap_or_default();
    let mcp = mcp::DOOR
        .listen(flags, env, mcp.listen.clone(), problems)
        .map(|listen| mcp.settings(listen, principals, problems));
    let model = model.unwrap_or_default();
    let model = model::DOOR
        .listen(flags, env, model.listen.clone(), problems)
        .and_then(|listen| problems.keep(model.settings(listen, env).map(Arc::new).map_err(ConfigError::Principals)));
    DoorSettings { mcp, model }
}

/// A listener on the network needs credentials (`authenticates`) and TLS,
/// unless `--allow-remote` says otherwise.
fn exposure(listen: SocketAddr, authenticates: bool, tls: bool, allow_remote: bool) -> Result<(), ConfigError> {
    if listen.ip().is_loopback() || allow_remote {
        return Ok(());
    }
    if !authenticates {
        return Err(ConfigError::Unauthenticated(listen));
    }
    if !tls {
        return Err(ConfigError::Cleartext(listen));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(value: &str) -> Env {
        Env::from_pairs([(STRICT_ENV, value)])
    }

    #[test]
    fn env_values_that_mean_strict() {
        for v in ["1", "true", "TRUE", " yes ", "Yes\n", "tRuE"] {
            assert_eq!(env_strict(&env(v)), Some(true), "{v:?}");
        }
        for v in ["", "0", "false", "no", "on", "y", "strict", "2"] {
            assert_eq!(env_strict(&env(v)), Some(false), "{v:?}");
        }
        assert_eq!(env_strict(&Env::default()), None);
    }

    #[test]
    fn precedence_request_then_flag_then_env_then_config() {
        let none = Env::default();
        assert!(!policy_from_sources(false, &none, None).strict);
        assert!(policy_from_sources(false, &none, Some(true)).strict);
        // The environment, when set, wins over the configuration, either way.
        assert!(!policy_from_sources(false, &env("0"), Some(true)).strict);
        assert!(!policy_from_sources(false, &env(""), Some(true)).strict);
        assert!(policy_from_sources(false, &env("yes"), Some(false)).strict);
        assert!(policy_from_sources(true, &env("0"), Some(false)).strict);
        // The request's own field wins over everything.
        let strict = Policy { strict: true };
        assert!(!strict.strict_for(Some(false)));
        assert!(strict.strict_for(None));
        assert!(Policy::default().strict_for(Some(true)));
    }

    #[test]
    fn flags_win_over_the_file() {
        let file = FileConfig {
            listen: Some("127.0.0.1:7000".into()),
            packs: Some(vec!["a".into()]),
            catalog: Some(vec!["x".into()]),
            ..FileConfig::default()
        };
        let flags = Flags { packs: vec!["b".into()], ..Flags::default() };
        let s = Settings::build(flags, file, &Env::default()).unwrap();
        assert_eq!(s.listen.map(|l| l.port()), Some(7000));
        assert_eq!(s.load.packs, ["b"]);
        assert_eq!(s.load.registry, [PathBuf::from("x")]);
        assert!(Settings::build(
            Flags { listen: Some("nope".into()), ..Flags::default() },
            FileConfig::default(),
            &Env::default()
        )
        .is_err());
    }

    /// Every door of the list is guarded at reload as at start: principals
    /// removed while a door listens beyond loopback is refused, the model
    /// door's included.
    #[test]
    fn a_reload_guards_every_door_of_the_list() {
        let key = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
        let with = format!(
            "listen: 127.0.0.1:50051\ntls: {{cert: c.pem, key: k.pem}}\n\
             principals: [{{name: bot, api_key_sha256: {key}, tools: ['*']}}]\n\
             model_door: {{listen: '0.0.0.0:4000', upstreams: [{{name: up, base_url: 'http://127.0.0.1:8000/v1'}}]}}\n"
        );
        let build =
            |yaml: &str| Settings::build(Flags::default(), serde_yaml::from_str(yaml).unwrap(), &Env::default());
        let running = build(&with).unwrap();
        running.check_exposure(false).unwrap();
        let without = with.lines().filter(|l| !l.starts_with("principals")).collect::<Vec<_>>().join("\n");
        let next = build(&without).unwrap();
        let refused = next.check_reload_exposure(&running.fixed, false).unwrap_err().to_string();
        assert!(refused.contains("refusing to listen on 0.0.0.0:4000"), "{refused}");
        assert!(next.check_reload_exposure(&running.fixed, true).is_ok(), "--allow-remote");
        assert_eq!(running.door_addresses(), [("model", "0.0.0.0:4000".parse().unwrap())]);
    }
}
