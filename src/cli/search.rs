//! `toolgate search QUERY`: the caller's tools that fit a task, best first,
//! as a running gateway's SearchTools ranks them (reached and proven as
//! `call` is, [`GatewayArgs`]). One line a tool: its score, its name and
//! the first line of its description; nothing found says so and exits 1.

use std::process::ExitCode;

use anyhow::anyhow;
use clap::Args;

use super::{gateway::GatewayArgs, output::emit};
use crate::{
    env::Env,
    proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, SearchToolsRequest, SearchToolsResponse},
};

#[derive(Args, Debug)]
pub(super) struct SearchArgs {
    /// The task, in words ("open a pull request for my branch").
    query: String,
    /// How many tools at most (0 means 8; at most 50).
    #[arg(long, default_value_t = 8)]
    limit: u32,
    /// Search only this toolset of the caller's tools.
    #[arg(long, value_name = "NAME")]
    toolset: Option<String>,
    #[command(flatten)]
    gateway: GatewayArgs,
}

pub(super) fn search(args: SearchArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let found = runtime.block_on(async {
        let channel = args.gateway.connect(env).await?;
        let mut request = tonic::Request::new(SearchToolsRequest {
            query: args.query.clone(),
            limit: args.limit,
            toolset: args.toolset.clone().unwrap_or_default(),
        });
        args.gateway.credentials(&mut request, env)?;
        let response = ToolGatewayServiceClient::new(channel)
            .search_tools(request)
            .await
            .map_err(|status| anyhow!("the gateway refused the search ({:?}): {}", status.code(), status.message()))?;
        anyhow::Ok(response.into_inner())
    })?;
    if found.tools.is_empty() {
        emit(&format!("no tool of yours fits: {}", args.query))?;
        return Ok(ExitCode::FAILURE);
    }
    emit(&describe(&found))?;
    Ok(ExitCode::SUCCESS)
}

/// One line a tool: score, name (padded to the longest), the description's
/// first line.
fn describe(found: &SearchToolsResponse) -> String {
    let width = found.tools.iter().map(|tool| tool.name.chars().count()).max().unwrap_or(0);
    let lines = found.tools.iter().zip(&found.scores).map(|(tool, score)| {
        let summary = tool.description.lines().find(|line| !line.trim().is_empty()).unwrap_or("").trim();
        format!("{score:>6.2}  {:<width$}  {summary}", tool.name)
    });
    lines.collect::<Vec<_>>().join("\n")
}
