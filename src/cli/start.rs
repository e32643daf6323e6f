//! Start-up of every command: read the files, connect the MCP servers they
//! name, assemble the catalogue (one code path for `serve`, `validate`,
//! `tools list` and `resolve`), and report every problem, one line each.

use std::sync::Arc;

use anyhow::{anyhow, Context};

use crate::{
    catalog::{self, Catalog, Problem, Severity},
    config::Settings,
    env::Env,
    live::{LiveCatalog, Sources, StartError},
    process::Inherited,
    telemetry::Observer,
};

/// How catalogue problems reach the operator.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// One log line each (serve).
    Log,
    /// One plain line each on stderr (the other commands).
    Plain,
}

/// What a snapshot is built from: the files read (with the principals'
/// grants to check), and the configuration's limits, policy and principals.
pub fn sources(settings: &Settings, env: &Env) -> Sources {
    let mut files = catalog::read(&settings.load, env);
    files.add_grants(settings.principals.grant_decls());
    Sources {
        files,
        limits: settings.limits,
        grants: settings.principals.grants(),
        policy: settings.policy,
        principals: Arc::clone(&settings.principals),
    }
}

/// Reads the files, connects the MCP servers they name and assembles the
/// catalogue (the same path for every command); reports every problem, one
/// line each.
pub async fn start(
    settings: &Settings,
    env: &Env,
    report: Report,
    observer: Observer,
) -> anyhow::Result<(Arc<LiveCatalog>, usize)> {
    let sources = sources(settings, env);
    // Command tools run under this same binary's `supervise` (when it can be
    // found), so that nothing they start outlives their call.
    let inherited = match std::env::current_exe() {
        Ok(binary) => Inherited::from_env(env).supervised_by(binary),
        Err(err) => {
            tracing::warn!("command tools run without a supervisor (cannot find this program: {err})");
            Inherited::from_env(env)
        }
    };
    let state = settings.calls.clone();
    let (started, problems) = match LiveCatalog::start(sources, inherited, state, observer).await {
        Ok((live, warnings)) => {
            let count = warnings.len();
            (Ok((live, count)), warnings)
        }
        Err(StartError::Catalogue(err)) => {
            let problems = err.problems.clone();
            (Err(anyhow!(err)), problems)
        }
        Err(other) => return Err(other.into()),
    };
    report_problems(&problems, settings.load.strict, report);
    started
}

/// Every problem, one line each; under strict validation a warning is said
/// to be an error.
pub fn report_problems(problems: &[Problem], strict: bool, report: Report) {
    for problem in problems {
        let fatal = problem.severity == Severity::Error || strict;
        let suffix =
            if problem.severity == Severity::Warning && strict { " (an error under strict validation)" } else { "" };
        match (report, fatal) {
            (Report::Log, true) => tracing::error!("{problem}{suffix}"),
            (Report::Log, false) => tracing::warn!("{problem}"),
            (Report::Plain, _) if problem.severity == Severity::Error => eprintln!("error: {problem}"),
            (Report::Plain, _) => eprintln!("warning: {problem}{suffix}"),
        }
    }
}

/// Loads the catalogue for a command that only reads it: MCP servers are
/// connected, listed and ended again.
pub fn inspect(settings: &Settings, env: &Env) -> anyhow::Result<(Arc<Catalog>, usize)> {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    runtime.block_on(async {
        let (live, warnings) = start(settings, env, Report::Plain, Observer::disabled()).await?;
        let catalog = live.current().load().executor.catalog().clone();
        live.shutdown().await;
        Ok((catalog, warnings))
    })
}
