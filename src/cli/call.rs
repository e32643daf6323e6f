//! `toolgate call`: one tool call to a running gateway, as a model would
//! emit it, with every credential and option a caller has (see
//! [`GatewayArgs`]), a session and an idempotency key.

use std::process::ExitCode;

use anyhow::anyhow;
use clap::Args;

use super::{
    gateway::GatewayArgs,
    output::{describe_outcome, emit},
};
use crate::{
    env::Env,
    proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ExecuteRequest},
};

#[derive(Args, Debug)]
pub(super) struct CallArgs {
    /// The tool name, as a model emitted it.
    tool: String,
    /// The arguments, as a model emitted them (JSON; empty means {}).
    #[arg(default_value = "")]
    arguments: String,
    #[command(flatten)]
    gateway: GatewayArgs,
    /// The conversation: retry budgets count per session.
    #[arg(long, value_name = "ID")]
    session_id: Option<String>,
    /// Runs the call once: the same key again gets the first answer.
    #[arg(long, value_name = "KEY")]
    idempotency_key: Option<String>,
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

pub(super) fn call(args: CallArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let response = runtime.block_on(async {
        let channel = args.gateway.connect(env).await?;
        let mut request = tonic::Request::new(ExecuteRequest {
            tool: args.tool,
            arguments_json: args.arguments,
            tools: args.tool_set,
            strict: args.strict.then_some(true),
            dry_run: args.dry_run,
            idempotency_key: args.idempotency_key.unwrap_or_default(),
            session_id: args.session_id.unwrap_or_default(),
            ..Default::default()
        });
        args.gateway.credentials(&mut request, env)?;
        let response = ToolGatewayServiceClient::new(channel)
            .execute(request)
            .await
            .map_err(|status| anyhow!("the gateway refused the call ({:?}): {}", status.code(), status.message()))?;
        anyhow::Ok(response.into_inner())
    })?;
    emit(&describe_outcome(&response))?;
    Ok(if response.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
