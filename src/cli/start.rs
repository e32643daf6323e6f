//! Start-up: of the commands that only read the catalogue (`validate`,
//! `tools list`, `resolve`), the gateway started as `serve` starts it, its
//! catalogue taken, its MCP servers ended; how catalogue problems reach a
//! person, one line each; and what `serve` says it serves.

use std::sync::Arc;

use anyhow::{anyhow, Context};

use crate::{
    app::{App, Host, Listeners, Serving, StartError},
    catalog::{Catalog, Problem, Severity},
    config::{Settings, DOORS},
    env::Env,
    telemetry::Observer,
};

/// What `serve` logs before it serves: who may call, the catalogue, the
/// state store, TLS and every door's address, the gateway's last (its
/// line, `toolgate listening on`, is what scripts wait for).
pub(super) fn announce(settings: &Settings, app: &App, listeners: &Listeners, serving: &Serving) -> anyhow::Result<()> {
    let grpc = listeners.grpc_address()?;
    // The gRPC door's address, else (`listen: off`) the first other door's.
    let first = DOORS.iter().find_map(|door| listeners.address(door.name));
    let addr = grpc.or(first).map_or_else(|| "nothing".to_owned(), |addr| addr.to_string());
    // What the log says of the catalogue, not the catalogue: held here, it
    // would outlive every reload (at 10,000 tools, 18 MB kept for nothing).
    let (version, tools) = {
        let catalog = app.catalog();
        (catalog.version().to_owned(), catalog.tools().len())
    };
    match settings.principals.len() {
        0 => tracing::warn!("no authentication: every caller that can reach {addr} may resolve and run every tool"),
        n => tracing::info!("{n} principals configured: every call needs a credential"),
    }
    if let Some(health) = listeners.address("health") {
        tracing::info!("health (grpc.health.v1 only, plaintext) on {health}");
    }
    if let Some(metrics) = listeners.address("metrics") {
        tracing::info!("metrics (Prometheus text, plaintext) on http://{metrics}/metrics");
    }
    tracing::info!(strict = settings.policy.strict, catalog_version = version, "catalogue loaded");
    for warning in settings.warnings() {
        tracing::warn!("{warning}");
    }
    tracing::info!("{}", super::state_line(&settings.state));
    if serving.tls() {
        tracing::info!("TLS on {addr} (certificate, key and client CA re-read on every reload)");
    }
    let scheme = if serving.tls() { "https" } else { "http" };
    for door in DOORS {
        if let Some(at) = listeners.address(door.name) {
            tracing::info!("{} on {scheme}://{at}{}", door.serves, door.path);
        }
    }
    match grpc {
        Some(_) => tracing::info!("toolgate listening on {addr} ({tools} tools)"),
        None => tracing::info!("toolgate listening on {addr} (gRPC off: listen: off; {tools} tools)"),
    }
    Ok(())
}

/// How catalogue problems reach the operator.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Report {
    /// One log line each (serve).
    Log,
    /// One plain line each on stderr (the other commands).
    Plain,
}

/// Every problem, one line each; under strict validation a warning is said
/// to be an error.
pub(super) fn report_problems(problems: &[Problem], strict: bool, report: Report) {
    if report == Report::Log {
        return crate::catalog::log_problems(problems, strict);
    }
    for problem in problems {
        match problem.severity {
            Severity::Error => eprintln!("error: {problem}"),
            Severity::Warning if strict => eprintln!("warning: {problem} (an error under strict validation)"),
            Severity::Warning | Severity::Caution => eprintln!("warning: {problem}"),
            Severity::Note => eprintln!("note: {problem}"),
        }
    }
}

/// Starts the gateway `settings` describe (reporting every problem as
/// `report` says); its app and the catalogue's warnings and cautions.
pub(super) async fn start(settings: &Settings, host: Host, report: Report) -> anyhow::Result<(App, Vec<Problem>)> {
    let strict = settings.load.strict;
    match App::start(settings, host).await {
        Ok((app, warnings)) => {
            report_problems(&warnings, strict, report);
            Ok((app, warnings))
        }
        Err(StartError::Catalogue(err)) => {
            report_problems(&err.problems, strict, report);
            Err(anyhow!(err))
        }
        Err(other) => Err(other.into()),
    }
}

/// The catalogue, for a command that only reads it: the gateway started (MCP
/// servers connected and listed), its catalogue taken, then ended again.
pub(super) fn inspect(settings: &Settings, env: &Env) -> anyhow::Result<(Arc<Catalog>, Vec<Problem>)> {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    runtime.block_on(async {
        let host = Host { env: env.clone(), observer: Observer::disabled(), supervisor: supervisor() };
        let (app, warnings) = start(settings, host, Report::Plain).await?;
        let catalog = app.catalog();
        app.shutdown().await;
        Ok((catalog, warnings))
    })
}

/// This program, which runs each command tool under `toolgate supervise`
/// (when it can be found), so that nothing a tool starts outlives its call.
pub(super) fn supervisor() -> Option<std::path::PathBuf> {
    match std::env::current_exe() {
        Ok(binary) => Some(binary),
        Err(err) => {
            tracing::warn!("command tools run without a supervisor (cannot find this program: {err})");
            None
        }
    }
}
