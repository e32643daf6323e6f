//! Start-up of the commands that only read the catalogue (`validate`,
//! `tools list`, `resolve`): the gateway started as `serve` starts it, its
//! catalogue taken, its MCP servers ended; and how catalogue problems reach
//! a person, one line each.

use std::sync::Arc;

use anyhow::{anyhow, Context};

use crate::{
    app::{self, App, Host, StartError},
    catalog::{Catalog, Problem, Severity},
    config::Settings,
    env::Env,
    telemetry::Observer,
};

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
        return app::log_problems(problems, strict);
    }
    for problem in problems {
        match problem.severity {
            Severity::Error => eprintln!("error: {problem}"),
            Severity::Warning if strict => eprintln!("warning: {problem} (an error under strict validation)"),
            Severity::Warning => eprintln!("warning: {problem}"),
        }
    }
}

/// Starts the gateway `settings` describe (reporting every problem as
/// `report` says); its app and how many warnings the catalogue had.
pub(super) async fn start(settings: &Settings, host: Host, report: Report) -> anyhow::Result<(App, usize)> {
    let strict = settings.load.strict;
    match App::start(settings, host).await {
        Ok((app, warnings)) => {
            report_problems(&warnings, strict, report);
            Ok((app, warnings.len()))
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
pub(super) fn inspect(settings: &Settings, env: &Env) -> anyhow::Result<(Arc<Catalog>, usize)> {
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
