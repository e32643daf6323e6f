//! `toolgate call`: one tool call to a running gateway, as a model would
//! emit it, with every credential and option a caller has: an API key, a
//! user token, TLS (with a client certificate), a session and an
//! idempotency key.

use std::{path::PathBuf, process::ExitCode};

use anyhow::{anyhow, Context};
use clap::Args;
use tonic::{
    metadata::MetadataValue,
    transport::{Certificate, ClientTlsConfig, Endpoint, Identity},
};

use super::{
    dial_url,
    output::{describe_outcome, emit},
    USER_TOKEN_ENV,
};
use crate::{
    env::Env,
    proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, ExecuteRequest},
};

/// Where `--addr` is read from when the flag is not given (as the examples do).
const ADDR_ENV: &str = "TOOLGATE_ADDR";
/// The address without flag or environment.
const DEFAULT_ADDR: &str = "127.0.0.1:50051";
/// Where `--api-key` is read from when the flag is not given.
const API_KEY_ENV: &str = "TOOLGATE_API_KEY";

#[derive(Args, Debug)]
pub(super) struct CallArgs {
    /// The tool name, as a model emitted it.
    tool: String,
    /// The arguments, as a model emitted them (JSON; empty means {}).
    #[arg(default_value = "")]
    arguments: String,
    /// The gateway: host:port, or a URL (http://… or https://…). With
    /// --cacert or --cert a host:port is reached over TLS. Default:
    /// TOOLGATE_ADDR, else 127.0.0.1:50051.
    #[arg(long, value_name = "ADDR")]
    addr: Option<String>,
    /// The caller's API key (sent as `authorization: Bearer KEY`). Default:
    /// TOOLGATE_API_KEY.
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// The end user's token (JWT), sent in `x-toolgate-user-token`. Default:
    /// TOOLGATE_USER_TOKEN.
    #[arg(long, value_name = "JWT")]
    user_token: Option<String>,
    /// The metadata header the gateway reads the user token from
    /// (`users.jwt.header`).
    #[arg(long, value_name = "NAME", default_value = "x-toolgate-user-token")]
    user_header: String,
    /// The CA certificate (PEM) that signed the gateway's certificate.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// A client certificate (PEM) for mutual TLS; needs --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
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

impl CallArgs {
    /// The TLS settings: `--cacert`, else the system's roots; with
    /// `--cert`/`--key` a client certificate. None over plaintext.
    fn tls(&self, url: &str) -> anyhow::Result<Option<ClientTlsConfig>> {
        if !url.starts_with("https://") && self.cacert.is_none() && self.cert.is_none() {
            return Ok(None);
        }
        let read = |path: &PathBuf| std::fs::read(path).with_context(|| format!("cannot read {}", path.display()));
        let mut tls = ClientTlsConfig::new();
        tls = match &self.cacert {
            Some(ca) => tls.ca_certificate(Certificate::from_pem(read(ca)?)),
            // A gateway whose certificate a public or company CA signed.
            None => tls.with_native_roots(),
        };
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        Ok(Some(tls))
    }
}

pub(super) fn call(args: CallArgs, env: &Env) -> anyhow::Result<ExitCode> {
    // A flag, else its environment variable.
    let given = |flag: &Option<String>, name: &str| flag.clone().or_else(|| env.get(name).map(str::to_owned));
    let addr = given(&args.addr, ADDR_ENV).unwrap_or(DEFAULT_ADDR.to_owned());
    // With a CA or a client certificate, `host:port` is reached over TLS.
    let url = dial_url(&addr, args.cacert.is_some() || args.cert.is_some());
    let api_key = given(&args.api_key, API_KEY_ENV).filter(|k| !k.is_empty());
    let user_token = given(&args.user_token, USER_TOKEN_ENV).filter(|t| !t.is_empty());
    let tls = args.tls(&url)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let response = runtime.block_on(async {
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|_| anyhow!("not an address: {addr} (give host:port or a URL)"))?;
        if let Some(tls) = tls {
            if url.starts_with("http://") {
                anyhow::bail!("--cacert and --cert need TLS: give https://… or host:port, not {addr}");
            }
            endpoint = endpoint.tls_config(tls).context("the TLS settings")?;
        }
        let channel = endpoint.connect().await.with_context(|| format!("cannot reach the gateway at {url}"))?;
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
        if let Some(key) = api_key {
            let value = MetadataValue::try_from(format!("Bearer {key}")).context("the API key is not header text")?;
            request.metadata_mut().insert("authorization", value);
        }
        if let Some(token) = user_token {
            let name = tonic::metadata::MetadataKey::from_bytes(args.user_header.as_bytes())
                .with_context(|| format!("not a header name: {}", args.user_header))?;
            let value = MetadataValue::try_from(token).context("the user token is not header text")?;
            request.metadata_mut().insert(name, value);
        }
        let response = ToolGatewayServiceClient::new(channel)
            .execute(request)
            .await
            .map_err(|status| anyhow!("the gateway refused the call ({:?}): {}", status.code(), status.message()))?;
        anyhow::Ok(response.into_inner())
    })?;
    emit(&describe_outcome(&response))?;
    Ok(if response.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
