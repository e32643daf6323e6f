//! The `toolgate` command line (README, "Commands"; every flag in docs/configuration.md):
//! arguments and dispatch. `serve` starts the gateway through the
//! composition root ([`crate::app`]) and adds what a process has: signals,
//! file watching, the listeners. `start` reports catalogue problems to a
//! person; `output` renders what a person reads. The only module that
//! prints.

#![allow(clippy::print_stdout, clippy::print_stderr)] // the CLI speaks to a person

mod call;
mod gateway;
mod output;
mod search;
mod start;

use std::{future::Future, path::PathBuf, process::ExitCode, sync::Arc, time::Duration};

use anyhow::{anyhow, bail, Context};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::{
    app::{reload, App, Host, Listeners, Serving},
    catalog::{render, Catalog, Problem, Severity, Tool, ToolFormat},
    config::{FileConfig, Flags, Settings, DOORS},
    env::Env,
    resolve, server,
    telemetry::Telemetry,
};
use call::CallArgs;
use output::{emit, table};
use search::SearchArgs;
use start::{announce, inspect, start, supervisor, Report};

#[derive(Parser, Debug)]
#[command(name = "toolgate", version, about = "A tool gateway for LLM agent backends, over gRPC and MCP")]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load the catalogue and serve the gateway over gRPC (and MCP and the model door, with --mcp-listen and --model-listen).
    Serve(ServeArgs),
    /// Load the catalogue, report every problem, and exit non-zero if any is an error.
    Validate(CatalogArgs),
    /// Inspect the catalogue's tools.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Resolve tool, alias and toolset names as the Resolve RPC does.
    Resolve(ResolveArgs),
    /// Send one tool call to a running gateway, as a model would emit it.
    Call(CallArgs),
    /// Ask a running gateway which of your tools fit a task (SearchTools).
    Search(SearchArgs),
    /// Make and hash API keys for principals.
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Ask a running gateway's grpc.health.v1 service; exit 0 only when it
    /// is SERVING (the probe for compose and for anyone without grpcurl).
    Health(HealthArgs),
    /// Serve MCP on stdin and stdout (what desktop clients launch); logs go
    /// to stderr.
    McpStdio(McpStdioArgs),
    /// Pin federated MCP tools: compare each with its pin, write the pins.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Run a command tool, and end everything it started when it ends (the
    /// gateway runs each command tool this way).
    #[command(hide = true)]
    Supervise(SuperviseArgs),
}

#[derive(Args, Debug)]
struct HealthArgs {
    /// The gateway's address (plaintext: the serving port without TLS, or
    /// the health_listen port).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:50051")]
    addr: String,
    /// The service to ask about; empty: the server as a whole.
    #[arg(long, value_name = "NAME", default_value = "")]
    service: String,
    /// How long to wait for the answer.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5s")]
    timeout: Duration,
}

#[derive(Subcommand, Debug)]
enum McpCommand {
    /// Connect to every MCP server and print each federated tool as
    /// `SERVER/TOOL sha256:… same|changed|new|gone` against the catalogue's
    /// pins file (`mcp_pins`); with --write, pin every tool as listed now.
    Pins(PinsArgs),
    /// Pin the tools of SERVER (or only TOOL, its name on the server) as
    /// listed now: what a reviewer runs after reading a changed tool.
    Approve(ApproveArgs),
}

#[derive(Args, Debug)]
struct PinsArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// Write the pins file(s): every tool as listed now; tools no longer
    /// listed are dropped.
    #[arg(long)]
    write: bool,
}

#[derive(Args, Debug)]
struct ApproveArgs {
    /// The MCP server (its name under mcp_servers).
    server: String,
    /// One tool (its name on the server); default: every tool it lists.
    tool: Option<String>,
    #[command(flatten)]
    catalog: CatalogArgs,
}

#[derive(Args, Debug)]
struct McpStdioArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// The principal whose grants apply (required when principals are
    /// configured). A user token may come in TOOLGATE_USER_TOKEN.
    #[arg(long, value_name = "NAME")]
    principal: Option<String>,
    /// Offer two tools, find_tools and call_tool, instead of the caller's
    /// tools (as /mcp/search does): for clients that should not hold every
    /// schema.
    #[arg(long)]
    search: bool,
}

#[derive(Args, Debug)]
struct SuperviseArgs {
    /// The gateway's pid: the call ends if the gateway does (even killed).
    #[arg(long, value_name = "PID")]
    parent: Option<u32>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
    command: Vec<std::ffi::OsString>,
}

#[derive(Subcommand, Debug)]
enum AuthCommand {
    /// Print a fresh random API key and the SHA-256 that a principal's
    /// `api_key_sha256` holds (give the key to the caller, keep the hash).
    NewKey,
    /// Print the SHA-256 of an API key read from stdin, for `api_key_sha256`.
    HashKey,
    /// Print a signed token for trying identity without an identity
    /// provider: makes (or reuses) a signing key in DIR and writes
    /// DIR/jwks.json, for `users.jwt: {issuer: toolgate-dev, audience:
    /// toolgate, jwks_file: DIR/jwks.json}`; with --aud the MCP endpoint's
    /// URL (and --scope, --client-id), an access token for
    /// `mcp_front_door.oauth`. The token is the output's last word.
    DevToken(DevTokenArgs),
}

#[derive(Args, Debug)]
struct DevTokenArgs {
    /// The user (the token's `sub`).
    #[arg(long, value_name = "USER")]
    sub: String,
    /// How long the token is valid.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "1h")]
    ttl: Duration,
    /// The folder of the signing key and jwks.json (made when missing).
    #[arg(long, value_name = "DIR", default_value = ".toolgate-dev")]
    dir: PathBuf,
    /// The audience (`aud`): `toolgate` for a user token, the MCP
    /// endpoint's URL (`mcp_front_door.oauth.resource`) for an access token.
    #[arg(long, value_name = "AUDIENCE", default_value = crate::identity::dev::AUDIENCE)]
    aud: String,
    /// The issuer (`iss`).
    #[arg(long, value_name = "ISSUER", default_value = crate::identity::dev::ISSUER)]
    iss: String,
    /// A scope the token holds (`scope`); repeatable.
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<String>,
    /// The OAuth client the token was issued to (`client_id`): a
    /// principal whose `oauth_client_id` it is gets its grants.
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
}

#[derive(Subcommand, Debug)]
enum ToolsCommand {
    /// List every tool of the catalogue.
    List(ListArgs),
}

impl CatalogArgs {
    /// The same with relative `--catalog` and `--packs-dir` paths made
    /// absolute against the configuration file's folder when `--config` is
    /// given, else the working directory: a desktop client launches
    /// `toolgate mcp-stdio` from a folder of its own, and what fails to
    /// load is then named by its whole path.
    fn anchored(&self) -> anyhow::Result<Self> {
        let cwd = std::env::current_dir().context("cannot read the working directory")?;
        let base = match &self.config {
            Some(config) => cwd.join(config).parent().map_or_else(|| cwd.clone(), std::path::Path::to_path_buf),
            None => cwd,
        };
        let mut anchored = self.clone();
        anchored.catalog.iter_mut().for_each(|path| *path = base.join(&*path));
        if let Some(packs_dir) = &mut anchored.packs_dir {
            *packs_dir = base.join(&*packs_dir);
        }
        Ok(anchored)
    }
}

#[derive(Args, Debug, Clone)]
struct CatalogArgs {
    /// A registry file or folder (every *.yaml directly in it); repeatable. Default: catalog/
    #[arg(long = "catalog", value_name = "PATH")]
    catalog: Vec<PathBuf>,
    /// The folder of tool packs. Default: catalog/packs/
    #[arg(long, value_name = "DIR")]
    packs_dir: Option<PathBuf>,
    /// Enable a tool pack by name; repeatable.
    #[arg(long = "pack", value_name = "NAME")]
    pack: Vec<String>,
    /// Strict policy: every catalogue warning is an error, unknown names fail.
    #[arg(long)]
    strict: bool,
    /// A YAML configuration file (below flags and environment).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    /// Address to listen on; port 0 picks a free port; `off`: no gRPC listener (the other doors serve alone). Default: 127.0.0.1:50051
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Allow a listen address other than loopback without principals (every caller is trusted), or with principals but without TLS.
    #[arg(long)]
    allow_remote: bool,
    /// How long shutdown waits for calls in flight (e.g. 10s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s")]
    drain_timeout: Duration,
    /// Serve every metric as Prometheus text on GET /metrics at this address (plaintext); also metrics_listen.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// The server's TLS certificate chain (PEM); with --tls-key. Re-read on SIGHUP.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The server's TLS private key (PEM); with --tls-cert. Re-read on SIGHUP.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// `--NAME-listen` of every door in the list.
    #[command(flatten)]
    doors: DoorListens,
}

/// The address flag of each door in the list ([`DOORS`]), by door name.
#[derive(Clone, Debug, Default)]
struct DoorListens(Vec<(&'static str, String)>);

impl clap::FromArgMatches for DoorListens {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut listens = Self::default();
        listens.update_from_arg_matches(matches)?;
        Ok(listens)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for door in DOORS {
            if let Some(address) = matches.get_one::<String>(door.flag) {
                self.0.retain(|(name, _)| *name != door.name);
                self.0.push((door.name, address.clone()));
            }
        }
        Ok(())
    }
}

impl Args for DoorListens {
    fn augment_args(command: clap::Command) -> clap::Command {
        DOORS.iter().fold(command, |command, door| {
            command.arg(clap::Arg::new(door.flag).long(door.flag).value_name("ADDR").help(door.flag_help()))
        })
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

#[derive(Args, Debug)]
struct ListArgs {
    #[command(flatten)]
    catalog: CatalogArgs,
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    format: ListFormat,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ListFormat {
    Table,
    Json,
    Openai,
    Anthropic,
    Mcp,
}

#[derive(Args, Debug)]
struct ResolveArgs {
    /// Tool, alias or toolset names.
    #[arg(required = true, value_name = "NAME")]
    names: Vec<String>,
    #[command(flatten)]
    catalog: CatalogArgs,
}

/// Parses the command line and runs the command.
pub fn run() -> anyhow::Result<ExitCode> {
    // A bug must not show a user a backtrace: one line, then the exit code.
    std::panic::set_hook(Box::new(|info| eprintln!("toolgate: internal error: {info}")));
    let cli = Cli::parse();
    if let Command::Supervise(args) = &cli.command {
        // First and alone: it runs for every command call, and sets up nothing.
        return Ok(crate::process::supervise::run(&args.command, args.parent));
    }
    let env = Env::from_process();
    crate::tls::install_crypto_provider();
    if !matches!(cli.command, Command::Serve(_)) {
        Telemetry::logs_only(&env);
    }
    match cli.command {
        Command::Serve(args) => serve(args, &env),
        Command::Validate(args) => validate(&args, &env),
        Command::Mcp(McpCommand::Pins(args)) => pins(&args, &env),
        Command::Mcp(McpCommand::Approve(args)) => approve(&args, &env),
        Command::Tools(ToolsCommand::List(args)) => list(&args, &env),
        Command::Resolve(args) => resolve_names(&args, &env),
        Command::Call(args) => call::call(args, &env),
        Command::Search(args) => search::search(args, &env),
        Command::Health(args) => health(&args),
        Command::McpStdio(args) => mcp_stdio(&args, &env),
        Command::Auth(AuthCommand::NewKey) => {
            let (key, hash) = crate::identity::new_key();
            emit(&format!("key:            {key}\napi_key_sha256: {hash}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Auth(AuthCommand::HashKey) => {
            let mut key = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut key).context("cannot read stdin")?;
            if key.trim().is_empty() {
                bail!("no key on stdin: echo -n \"$KEY\" | toolgate auth hash-key");
            }
            emit(&crate::identity::hash_key(&key))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Auth(AuthCommand::DevToken(args)) => {
            let claims = crate::identity::dev::Claims {
                sub: &args.sub,
                iss: &args.iss,
                aud: &args.aud,
                scopes: &args.scopes,
                client_id: args.client_id.as_deref(),
            };
            let made = crate::identity::dev::dev_token(&args.dir, &claims, args.ttl).map_err(|why| anyhow!(why))?;
            emit(&describe_dev_token(&args, &made))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Supervise(_) => unreachable!("handled first"),
    }
}

/// What `auth dev-token` prints: the files, the configuration that takes
/// the token (a user token's, or the MCP door's OAuth when the audience is
/// a URL), and the token last.
fn describe_dev_token(args: &DevTokenArgs, made: &crate::identity::dev::DevToken) -> String {
    let key = if made.new_key { "made now" } else { "reused" };
    let (signing, jwks) = (made.key.display(), made.jwks.display());
    let (issuer, audience) = (&args.iss, &args.aud);
    let configuration = match audience.starts_with("http://") || audience.starts_with("https://") {
        false => format!("  users:\n    jwt: {{issuer: {issuer}, audience: {audience}, jwks_file: {jwks}}}"),
        true => {
            let scopes = match args.scopes.is_empty() {
                true => String::new(),
                false => format!(", scopes: [{}]", args.scopes.join(", ")),
            };
            format!(
                "  mcp_front_door:\n    oauth: {{resource: {audience}, issuer: {issuer}, jwks_file: {jwks}{scopes}}}"
            )
        }
    };
    format!(
        "signing key: {signing} ({key})\n\
         jwks:        {jwks}\n\
         for the configuration:\n{configuration}\n\
         token for {sub}, valid for {ttl}:\n{token}",
        sub = args.sub,
        ttl = humantime::format_duration(args.ttl),
        token = made.token,
    )
}

/// The settings of a command that takes only the catalogue flags.
fn settings(args: &CatalogArgs, env: &Env) -> anyhow::Result<Settings> {
    settings_with(args, ServeFlags::default(), env)
}

/// What `serve` adds to the catalogue flags.
#[derive(Clone, Default)]
struct ServeFlags {
    listen: Option<String>,
    metrics_listen: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    doors: Vec<(&'static str, String)>,
}

fn settings_with(args: &CatalogArgs, serve: ServeFlags, env: &Env) -> anyhow::Result<Settings> {
    let file = match &args.config {
        Some(path) => FileConfig::read(path)?,
        None => FileConfig::default(),
    };
    let flags = Flags {
        catalog: args.catalog.clone(),
        packs_dir: args.packs_dir.clone(),
        packs: args.pack.clone(),
        strict: args.strict,
        listen: serve.listen,
        tls_cert: serve.tls_cert,
        tls_key: serve.tls_key,
        door_listen: serve.doors,
        metrics_listen: serve.metrics_listen,
    };
    Ok(Settings::build(flags, file, env)?)
}

impl ServeArgs {
    fn flags(&self) -> ServeFlags {
        ServeFlags {
            listen: self.listen.clone(),
            metrics_listen: self.metrics_listen.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            doors: self.doors.0.clone(),
        }
    }
}

fn serve(args: ServeArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings_with(&args.catalog, args.flags(), env)?;
    settings.check_exposure(args.allow_remote)?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    let served = runtime.block_on(async move {
        let telemetry = Telemetry::start(env, settings.metrics_listen.is_some());
        let served = serve_with(&args, &settings, env, telemetry.observer()).await;
        // Flushing waits on the exporters' threads, at most FINAL_FLUSH: a
        // collector that does not answer must not hold up the exit past the
        // grace periods of compose and Kubernetes.
        let flush = tokio::task::spawn_blocking(move || telemetry.shutdown());
        if tokio::time::timeout(FINAL_FLUSH, flush).await.is_err() {
            tracing::warn!(
                "telemetry not flushed within {}: the collector does not answer; what was pending is dropped",
                humantime::format_duration(FINAL_FLUSH)
            );
        }
        served
    });
    // The flush left behind (if any) is abandoned, not waited for.
    runtime.shutdown_background();
    served
}

/// How long the last flush of spans and metrics may take at exit.
const FINAL_FLUSH: Duration = Duration::from_secs(2);

/// Starts the catalogue, serves every door until a signal, reloads on
/// SIGHUP and file changes, ends the MCP servers.
async fn serve_with(
    args: &ServeArgs,
    settings: &Settings,
    env: &Env,
    observer: crate::telemetry::Observer,
) -> anyhow::Result<ExitCode> {
    // Every handler first: SIGHUP's default action would end the process.
    let signals = shutdown_signals()?;
    let hangup = {
        use tokio::signal::unix::{signal, SignalKind};
        signal(SignalKind::hangup()).context("cannot handle SIGHUP")?
    };
    let mut shutdown = Box::pin(signals.first());
    let host = Host { env: env.clone(), observer, supervisor: supervisor() };
    let (app, _) = tokio::select! {
        started = start(settings, host, Report::Log) => started?,
        () = &mut shutdown => {
            tracing::info!("stopped before the catalogue was ready");
            return Ok(ExitCode::FAILURE);
        }
    };
    let bound = async { anyhow::Ok((Listeners::bind(settings).await?, Serving::new(settings, Default::default())?)) };
    let (listeners, serving) = match bound.await {
        Ok(bound) => bound,
        Err(err) => {
            app.shutdown().await;
            return Err(err);
        }
    };
    let reloading = reloading(args, env, settings, (&app, &app.pins_files().await), &serving, hangup);
    announce(settings, &app, &listeners, &serving)?;
    let stop = server::Stop { shutdown, drain: args.drain_timeout, now: signals.second() };
    let served = app.serve(listeners, serving, Some(reloading), stop).await;
    app.shutdown().await;
    served?;
    tracing::info!("toolgate stopped");
    Ok(ExitCode::SUCCESS)
}

/// The reloader of `serve`: on SIGHUP (`hangup`) and on changes in the
/// folders the settings read from.
fn reloading(
    args: &ServeArgs,
    env: &Env,
    settings: &Settings,
    (app, pins): (&App, &[PathBuf]),
    serving: &Serving,
    hangup: tokio::signal::unix::Signal,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    let watched = reload::Watched::of(settings, args.catalog.config.as_deref(), pins);
    let folders = watched.folders.len();
    let (watcher, changes) = reload::watch(watched);
    let reloader = reload::Reloader {
        app: app.clone(),
        tls: serving.tls.clone(),
        rebuild: rebuild(args, env),
        fixed: settings.fixed.clone(),
        allow_remote: args.allow_remote,
    };
    tracing::info!("reloads on SIGHUP and on changes in {} watched folders", folders);
    Box::pin(async move {
        let _watcher = watcher;
        reloader.run(hangup, changes).await;
    })
}

/// Reads the settings again as `serve` read them at start.
fn rebuild(args: &ServeArgs, env: &Env) -> reload::Rebuild {
    let (catalog, serve, env) = (args.catalog.clone(), args.flags(), env.clone());
    Arc::new(move || settings_with(&catalog, serve.clone(), &env))
}

/// Ctrl-C and SIGTERM: the first asks every listener to stop, the next ends
/// the drain at once.
struct Signals {
    first: tokio::sync::watch::Receiver<bool>,
    second: tokio::sync::watch::Receiver<bool>,
}

impl Signals {
    /// Completes on the first signal.
    fn first(&self) -> impl Future<Output = ()> + Send + 'static {
        Self::after(self.first.clone())
    }

    /// Completes on the second signal.
    fn second(&self) -> impl Future<Output = ()> + Send + 'static {
        Self::after(self.second.clone())
    }

    async fn after(mut signalled: tokio::sync::watch::Receiver<bool>) {
        let _ = signalled.wait_for(|&s| s).await;
    }
}

/// The handlers are installed before this returns, so a signal that arrives
/// once the gateway says it is listening always ends it gracefully.
fn shutdown_signals() -> anyhow::Result<Signals> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let (first, first_rx) = tokio::sync::watch::channel(false);
    let (second, second_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        for sender in [first, second] {
            tokio::select! {
                _ = interrupt.recv() => {},
                _ = terminate.recv() => {},
            }
            let _ = sender.send(true);
        }
    });
    Ok(Signals { first: first_rx, second: second_rx })
}

/// Where once-only records, retry budgets and rate limits are kept, for the
/// start-up log (a password in the Redis URL is not shown).
fn state_line(state: &crate::state::StateConfig) -> String {
    match &state.redis {
        Some(redis) => {
            let shown = match url::Url::parse(redis) {
                Ok(mut url) if url.password().is_some() => {
                    let _ = url.set_password(Some("***"));
                    url.to_string()
                }
                Ok(url) => url.to_string(),
                Err(_) => "the configured URL".to_owned(),
            };
            format!("state: Redis at {shown}, shared by every gateway using it (once-only calls, retry budgets, rate limits)")
        }
        None => format!(
            "state: in memory, at most {} records, not shared with other gateways (once-only calls, retry budgets, \
             rate limits); set state.redis to share them",
            state.max_records.unwrap_or(crate::state::DEFAULT_MAX_RECORDS)
        ),
    }
}

fn validate(args: &CatalogArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(args, env)?;
    for warning in settings.warnings() {
        eprintln!("warning: {warning}");
    }
    let (catalog, problems) = inspect(&settings, env)?;
    let cautions: Vec<&Problem> = problems.iter().filter(|p| p.severity == Severity::Caution).collect();
    if args.strict && !cautions.is_empty() {
        // Said as warnings above; under `validate --strict`, a finding fails.
        exiting(catalog);
        anyhow::bail!(
            "{} finding{} about federated tools (hidden instructions, tools changed since pinned): an error under \
             validate --strict",
            cautions.len(),
            if cautions.len() == 1 { "" } else { "s" },
        );
    }
    // Notes are no warnings.
    let warnings = problems.iter().filter(|p| p.severity != Severity::Note).count();
    emit(&format!(
        "catalogue ok: {} tools, {} toolsets, {} warning{}{}",
        catalog.tools().len(),
        catalog.toolsets().len(),
        warnings,
        if warnings == 1 { "" } else { "s" },
        if settings.load.strict { " (strict)" } else { "" }
    ))?;
    exiting(catalog);
    Ok(ExitCode::SUCCESS)
}

/// `toolgate mcp pins`: each federated tool against its pin; `--write`
/// pins every tool as listed now.
fn pins(args: &PinsArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(&args.catalog, env)?;
    let (catalog, _) = inspect(&settings, env)?;
    let mut lines: Vec<String> = catalog
        .pins()
        .iter()
        .map(|state| {
            let digest = state.listed.as_ref().or(state.pinned.as_ref()).map(String::as_str).unwrap_or_default();
            format!("{} {digest} {}", state.key(), state.status())
        })
        .collect();
    lines.sort();
    emit(&lines.join("\n"))?;
    if args.write {
        let listed = catalog.pins().iter().filter(|state| state.listed.is_some());
        let gone: Vec<&crate::catalog::PinState> = catalog.pins().iter().filter(|s| s.listed.is_none()).collect();
        write_pins(listed, &gone)?;
    }
    exiting(catalog);
    Ok(ExitCode::SUCCESS)
}

/// `toolgate mcp approve SERVER [TOOL]`: pins those tools as listed now,
/// leaving every other pin as it is: into the pins file of the server's
/// catalogue file, when it names one, and as their first-sight records in
/// the state store (which replicas sharing it compare with).
fn approve(args: &ApproveArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(&args.catalog, env)?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    runtime.block_on(async {
        let host =
            Host { env: env.clone(), observer: crate::telemetry::Observer::disabled(), supervisor: supervisor() };
        let (app, _) = start(&settings, host, Report::Plain).await?;
        let catalog = app.catalog();
        let approved = approve_in(&app, &catalog, args, settings.state.redis.is_some()).await;
        app.shutdown().await;
        exiting(catalog);
        approved
    })
}

async fn approve_in(
    app: &App,
    catalog: &crate::catalog::Catalog,
    args: &ApproveArgs,
    shared_store: bool,
) -> anyhow::Result<ExitCode> {
    let chosen: Vec<&crate::catalog::PinState> = catalog
        .pins()
        .iter()
        .filter(|s| s.server == args.server && s.listed.is_some())
        .filter(|s| args.tool.as_ref().is_none_or(|tool| *tool == s.tool))
        .collect();
    if chosen.is_empty() {
        let what = match &args.tool {
            Some(tool) => format!("MCP server '{}' lists no tool '{tool}'", args.server),
            None => format!("MCP server '{}' lists no tools (is it named under mcp_servers, and up?)", args.server),
        };
        bail!(what);
    }
    if !shared_store && chosen.iter().any(|state| state.file.is_none()) {
        bail!(
            "the catalogue file of MCP server '{}' names no pins file and the state store is in memory: an approval \
             would not outlast this command; add `mcp_pins: pins.json` beside its mcp_servers, or set state.redis",
            args.server
        );
    }
    app.approve_first_sight(&args.server, args.tool.as_deref())
        .await
        .map_err(|why| anyhow::anyhow!("the first-sight records were not written: {why}"))?;
    write_pins(chosen.iter().copied().filter(|state| state.file.is_some()), &[])?;
    for state in &chosen {
        emit(&format!("{} {} approved", state.key(), state.listed.as_deref().unwrap_or_default()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the pins files of `set`: each file as it was read, with the tools
/// of `set` pinned as listed now and those of `gone` dropped.
fn write_pins<'s>(
    set: impl Iterator<Item = &'s crate::catalog::PinState>,
    gone: &[&crate::catalog::PinState],
) -> anyhow::Result<()> {
    type Tools = std::collections::BTreeMap<String, String>;
    let mut files: std::collections::BTreeMap<PathBuf, Tools> = Default::default();
    for state in set {
        let Some(file) = &state.file else {
            bail!(
                "the catalogue file of MCP server '{}' names no pins file: add `mcp_pins: pins.json` beside its \
                 mcp_servers",
                state.server
            );
        };
        let tools = files.entry(file.path.clone()).or_insert_with(|| file.tools().clone());
        tools.insert(state.key(), state.listed.clone().unwrap_or_default());
    }
    for state in gone {
        if let Some(file) = &state.file {
            files.entry(file.path.clone()).or_insert_with(|| file.tools().clone()).remove(&state.key());
        }
    }
    for (path, tools) in files {
        let count = tools.len();
        crate::catalog::Pins::write(&path, tools).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {} ({count} tool{})", path.display(), if count == 1 { "" } else { "s" });
    }
    Ok(())
}

/// The command ends and the process with it: the catalogue is left to the
/// system rather than freed piece by piece (freeing 10,000 tools' validators
/// took a fifth of `validate`'s time).
fn exiting(catalog: std::sync::Arc<crate::catalog::Catalog>) {
    std::mem::forget(catalog);
}

fn list(args: &ListArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(&args.catalog, env)?;
    let (catalog, _) = inspect(&settings, env)?;
    let tools = catalog.tools().iter().map(AsRef::as_ref);
    let text = match args.format {
        ListFormat::Table => table(tools),
        ListFormat::Json => render(tools, ToolFormat::Native),
        ListFormat::Openai => render(tools, ToolFormat::OpenAi),
        ListFormat::Anthropic => render(tools, ToolFormat::Anthropic),
        ListFormat::Mcp => render(tools, ToolFormat::Mcp),
    };
    emit(&text)?;
    exiting(catalog);
    Ok(ExitCode::SUCCESS)
}

fn resolve_names(args: &ResolveArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(&args.catalog, env)?;
    resolve::check_names("names", &args.names)?;
    let (catalog, _) = inspect(&settings, env)?;
    let catalog: &Catalog = &catalog;
    let resolution = resolve::resolve(catalog, &args.names);
    let message = resolution.message();
    if settings.policy.strict && !resolution.unknown.is_empty() {
        eprintln!("{message}");
        return Ok(ExitCode::FAILURE);
    }
    let tools: Vec<&Tool> = resolution.tools.iter().map(|&id| catalog.tool(id)).collect();
    emit(&table(tools.iter().copied()))?;
    if !message.is_empty() {
        eprintln!("warning: {message}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `toolgate mcp-stdio`: the gateway started as `serve` starts it, serving
/// MCP on stdio for one caller until the client closes it.
fn mcp_stdio(args: &McpStdioArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(&args.catalog.anchored()?, env)?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    runtime.block_on(async {
        let host =
            Host { env: env.clone(), observer: crate::telemetry::Observer::disabled(), supervisor: supervisor() };
        let (app, _) = start(&settings, host, Report::Log).await?;
        let served = app.serve_mcp_stdio(args.principal.as_deref(), env.get(USER_TOKEN_ENV), args.search).await;
        app.shutdown().await;
        served?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The environment variable that carries a user token (`mcp-stdio`, `call`).
const USER_TOKEN_ENV: &str = "TOOLGATE_USER_TOKEN";

/// The URL a client command dials: a URL as given, `host:port` as
/// `http://host:port`, or `https://` when `tls`.
fn dial_url(addr: &str, tls: bool) -> String {
    match (addr.contains("://"), tls) {
        (true, _) => addr.to_owned(),
        (false, true) => format!("https://{addr}"),
        (false, false) => format!("http://{addr}"),
    }
}

/// `toolgate health`: SERVING exits 0; anything else, or no answer, says
/// what it got on stderr and exits 1.
fn health(args: &HealthArgs) -> anyhow::Result<ExitCode> {
    use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};

    let addr = dial_url(&args.addr, false);
    if addr.starts_with("https://") {
        bail!("toolgate health speaks plaintext: give the health_listen port (http://HOST:PORT)");
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let asked = runtime.block_on(async {
        let endpoint = tonic::transport::Endpoint::from_shared(addr.clone())
            .with_context(|| format!("not an address: {addr}"))?
            .connect_timeout(args.timeout)
            .timeout(args.timeout);
        let channel = endpoint.connect().await.with_context(|| format!("cannot reach {addr}"))?;
        let request = HealthCheckRequest { service: args.service.clone() };
        let response = HealthClient::new(channel)
            .check(request)
            .await
            .map_err(|status| anyhow!("{addr} answered {:?}: {}", status.code(), status.message()))?;
        anyhow::Ok(response.into_inner().status)
    });
    let status = match asked {
        Ok(status) => status,
        Err(err) => {
            eprintln!("not serving: {err:#}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let name = ServingStatus::try_from(status).map(|s| s.as_str_name()).unwrap_or("an unknown status");
    if status == ServingStatus::Serving as i32 {
        emit(name)?;
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("not serving: {addr} is {name}");
        Ok(ExitCode::FAILURE)
    }
}
