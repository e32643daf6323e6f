//! The `toolgate` command line (DESIGN section 8). The only module that uses
//! anyhow: every error here ends as a message to a person.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc, time::Duration};

use anyhow::{anyhow, bail, Context};
use clap::{Args, Parser, Subcommand, ValueEnum};
use tokio::net::TcpListener;

use crate::{
    catalog::{self, render, Catalog, Severity, Tool, ToolFormat},
    config::{FileConfig, Flags, Settings},
    env::Env,
    federation::{Federation, StartError},
    resolve, server,
    service::Gateway,
    telemetry::{Observer, Telemetry},
};

#[derive(Parser, Debug)]
#[command(name = "toolgate", version, about = "A gRPC tool gateway for LLM agent backends")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load the catalogue and serve the gateway over gRPC.
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
}

#[derive(Subcommand, Debug)]
enum ToolsCommand {
    /// List every tool of the catalogue.
    List(ListArgs),
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
    /// Address to listen on; port 0 picks a free port. Default: 127.0.0.1:50051
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Allow a listen address other than loopback (every caller is trusted).
    #[arg(long)]
    allow_remote: bool,
    /// How long shutdown waits for calls in flight (e.g. 10s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s")]
    drain_timeout: Duration,
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

#[derive(Args, Debug)]
struct CallArgs {
    /// The tool name, as a model emitted it.
    tool: String,
    /// The arguments, as a model emitted them (JSON; empty means {}).
    #[arg(default_value = "")]
    arguments: String,
    /// The gateway's address.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:50051")]
    addr: String,
    /// Resolve, repair and validate only; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Strict policy for this call (no repairs).
    #[arg(long)]
    strict: bool,
    /// The agent's tool set (tool, alias or toolset names); repeatable. Default: every tool.
    #[arg(long = "tool-set", value_name = "NAME")]
    tool_set: Vec<String>,
}

/// Parses the command line and runs the command.
pub fn run() -> anyhow::Result<ExitCode> {
    // A bug must not show a user a backtrace: one line, then the exit code.
    std::panic::set_hook(Box::new(|info| eprintln!("toolgate: internal error: {info}")));
    let cli = Cli::parse();
    let env = Env::from_process();
    if !matches!(cli.command, Command::Serve(_)) {
        Telemetry::logs_only(&env);
    }
    match cli.command {
        Command::Serve(args) => serve(args, &env),
        Command::Validate(args) => validate(&args, &env),
        Command::Tools(ToolsCommand::List(args)) => list(&args, &env),
        Command::Resolve(args) => resolve_names(&args, &env),
        Command::Call(args) => call(args),
    }
}

fn settings(args: &CatalogArgs, listen: Option<String>, env: &Env) -> anyhow::Result<Settings> {
    let file = match &args.config {
        Some(path) => FileConfig::read(path)?,
        None => FileConfig::default(),
    };
    let flags = Flags {
        catalog: args.catalog.clone(),
        packs_dir: args.packs_dir.clone(),
        packs: args.pack.clone(),
        strict: args.strict,
        listen,
    };
    Ok(Settings::build(flags, file, env)?)
}

/// How catalogue problems reach the operator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Report {
    /// One log line each (serve).
    Log,
    /// One plain line each on stderr (the other commands).
    Plain,
}

/// Reads the files, connects the MCP servers they name and assembles the
/// catalogue (the same path for every command); reports every problem, one
/// line each.
async fn start(
    settings: &Settings,
    env: &Env,
    report: Report,
    observer: Observer,
) -> anyhow::Result<(Arc<Federation>, usize)> {
    let files = catalog::read(&settings.load, env);
    let (started, problems) = match Federation::start(files, settings.limits, observer).await {
        Ok((federation, warnings)) => {
            let count = warnings.len();
            (Ok((federation, count)), warnings)
        }
        Err(StartError::Catalogue(err)) => {
            let problems = err.problems.clone();
            (Err(anyhow!(err)), problems)
        }
        Err(other) => return Err(other.into()),
    };
    for problem in &problems {
        // Under strict validation a warning fails the load: say so.
        let fatal = problem.severity == Severity::Error || settings.load.strict;
        let suffix = if problem.severity == Severity::Warning && settings.load.strict {
            " (an error under strict validation)"
        } else {
            ""
        };
        match (report, fatal) {
            (Report::Log, true) => tracing::error!("{problem}{suffix}"),
            (Report::Log, false) => tracing::warn!("{problem}"),
            (Report::Plain, _) if problem.severity == Severity::Error => eprintln!("error: {problem}"),
            (Report::Plain, _) => eprintln!("warning: {problem}{suffix}"),
        }
    }
    started
}

/// Loads the catalogue for a command that only reads it: MCP servers are
/// connected, listed and ended again.
fn inspect(settings: &Settings, env: &Env) -> anyhow::Result<(Arc<Catalog>, usize)> {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    runtime.block_on(async {
        let (federation, warnings) = start(settings, env, Report::Plain, Observer::disabled()).await?;
        let catalog = federation.current().load().catalog().clone();
        federation.shutdown().await;
        Ok((catalog, warnings))
    })
}

fn serve(args: ServeArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(&args.catalog, args.listen.clone(), env)?;
    if !settings.listen.ip().is_loopback() && !args.allow_remote {
        bail!(
            "refusing to listen on {}: not a loopback address, and toolgate has no authentication yet; \
             pass --allow-remote to accept every caller on the network",
            settings.listen
        );
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    runtime.block_on(async move {
        let telemetry = Telemetry::start(env);
        let served = serve_with(&args, &settings, env, telemetry.observer()).await;
        // Flushing waits on the exporters' threads.
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
        served
    })
}

/// Starts the catalogue, serves until a signal, ends the MCP servers.
async fn serve_with(args: &ServeArgs, settings: &Settings, env: &Env, observer: Observer) -> anyhow::Result<ExitCode> {
    let mut shutdown = Box::pin(shutdown_signal()?);
    let (federation, _) = tokio::select! {
        started = start(settings, env, Report::Log, observer) => started?,
        () = &mut shutdown => {
            tracing::info!("stopped before the catalogue was ready");
            return Ok(ExitCode::FAILURE);
        }
    };
    let listener = match TcpListener::bind(settings.listen).await {
        Ok(listener) => listener,
        Err(err) => {
            federation.shutdown().await;
            return Err(err).with_context(|| format!("cannot listen on {}", settings.listen));
        }
    };
    let addr: SocketAddr = listener.local_addr()?;
    let catalog = federation.current().load().catalog().clone();
    tracing::warn!("no authentication: every caller that can reach {addr} may resolve and run every tool");
    tracing::info!(strict = settings.policy.strict, version = catalog.version(), "catalogue loaded");
    tracing::info!("toolgate listening on {addr} ({} tools)", catalog.tools().len());
    let gateway = Gateway::new(federation.current(), settings.policy);
    let served = server::serve(listener, gateway, shutdown, args.drain_timeout).await;
    federation.shutdown().await;
    served?;
    tracing::info!("toolgate stopped");
    Ok(ExitCode::SUCCESS)
}

/// Completes on Ctrl-C or SIGTERM. The handlers are installed before this
/// returns, so a signal that arrives once the gateway says it is listening
/// always ends it gracefully.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {},
            _ = terminate.recv() => {},
        }
    })
}

fn validate(args: &CatalogArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(args, None, env)?;
    let (catalog, warnings) = inspect(&settings, env)?;
    emit(&format!(
        "catalogue ok: {} tools, {} toolsets, {} warnings{}",
        catalog.tools().len(),
        catalog.toolsets().len(),
        warnings,
        if settings.load.strict { " (strict)" } else { "" }
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn list(args: &ListArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(&args.catalog, None, env)?;
    let (catalog, _) = inspect(&settings, env)?;
    let tools = catalog.tools();
    let text = match args.format {
        ListFormat::Table => table(tools),
        ListFormat::Json => native_json(tools),
        ListFormat::Openai => render(tools, ToolFormat::OpenAi),
        ListFormat::Anthropic => render(tools, ToolFormat::Anthropic),
        ListFormat::Mcp => render(tools, ToolFormat::Mcp),
    };
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn resolve_names(args: &ResolveArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let settings = settings(&args.catalog, None, env)?;
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

fn call(args: CallArgs) -> anyhow::Result<ExitCode> {
    use crate::proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ExecuteRequest};

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let response = runtime.block_on(async {
        let mut client = ToolGatewayServiceClient::connect(args.addr.clone())
            .await
            .with_context(|| format!("cannot reach the gateway at {}", args.addr))?;
        let request = ExecuteRequest {
            tool: args.tool,
            arguments_json: args.arguments,
            tools: args.tool_set,
            strict: args.strict.then_some(true),
            dry_run: args.dry_run,
            ..Default::default()
        };
        let response = client
            .execute(request)
            .await
            .map_err(|status| anyhow!("the gateway refused the call ({:?}): {}", status.code(), status.message()))?;
        anyhow::Ok(response.into_inner())
    })?;
    emit(&describe_outcome(&response))?;
    Ok(if response.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// An Execute answer for a person: the outcome first, then repairs and detail.
fn describe_outcome(response: &crate::proto::v1::ExecuteResponse) -> String {
    use crate::proto::v1::{ErrorKind, RepairKind};

    let mut out = String::new();
    match (&response.error, response.ok) {
        (_, true) => out.push_str(&format!("ok: {}\n", response.tool)),
        (Some(error), false) => {
            let kind = ErrorKind::try_from(error.kind).map(|k| k.as_str_name()).unwrap_or("ERROR_KIND_UNSPECIFIED");
            let kind = kind.trim_start_matches("ERROR_KIND_");
            let retry = if error.retryable { "retryable" } else { "not retryable" };
            out.push_str(&format!("error: {kind} ({retry})\n{}\n", error.message));
        }
        (None, false) => out.push_str("error: the gateway answered without an error\n"),
    }
    for repair in &response.repairs {
        let what = match RepairKind::try_from(repair.kind) {
            Ok(RepairKind::ToolName) => "tool name",
            Ok(RepairKind::ArgumentName) => "argument name",
            Ok(RepairKind::ArgumentsJson) => "arguments JSON",
            _ => "something",
        };
        out.push_str(&format!("repaired {what}: {:?} -> {:?}\n", repair.original, repair.repaired));
    }
    if response.ok && !response.arguments_json.is_empty() {
        out.push_str(&format!("arguments: {}\n", response.arguments_json));
    }
    if response.ok && !response.result_json.is_empty() {
        let pretty = serde_json::from_str::<serde_json::Value>(&response.result_json)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| response.result_json.clone());
        out.push_str(&format!("result: {pretty}\n"));
    }
    out
}

/// Writes `text` and a final newline to stdout. A reader that went away
/// (`toolgate tools list | head`) is not an error.
fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    match out.write_all(text.as_bytes()).and_then(|()| out.write_all(newline.as_bytes())).and_then(|()| out.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err).context("cannot write to stdout"),
        _ => Ok(()),
    }
}

fn table<'a>(tools: impl IntoIterator<Item = &'a Tool>) -> String {
    let rows: Vec<[String; 4]> = tools
        .into_iter()
        .map(|t| {
            let mut description: String = t.description.chars().take(60).collect();
            if t.description.chars().count() > 60 {
                description.push('…');
            }
            [t.name.clone(), t.source.to_string(), t.aliases.join(", "), description]
        })
        .collect();
    let header = ["NAME", "SOURCE", "ALIASES", "DESCRIPTION"].map(str::to_owned);
    let widths: Vec<usize> =
        (0..3).map(|i| rows.iter().chain([&header]).map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in [&header].into_iter().chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn native_json(tools: &[Tool]) -> String {
    let list: Vec<serde_json::Value> = tools
        .iter()
        .map(|t| {
            serde_json::json!({
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters.json(),
                "aliases": t.aliases,
                "source": t.source.to_string(),
                "idempotent": t.idempotent,
            })
        })
        .collect();
    serde_json::to_string_pretty(&list).expect("JSON values serialise")
}
