//! A running gateway, as the commands that talk to one reach it (`call`,
//! `search`): its address and every credential a caller has (an API key, a
//! user token, TLS with a client certificate).

use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::Args;
use tonic::{
    metadata::MetadataValue,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity},
};

use super::{dial_url, USER_TOKEN_ENV};
use crate::env::Env;

/// Where `--addr` is read from when the flag is not given (as the examples do).
const ADDR_ENV: &str = "TOOLGATE_ADDR";
/// The address without flag or environment.
const DEFAULT_ADDR: &str = "127.0.0.1:50051";
/// Where `--api-key` is read from when the flag is not given.
const API_KEY_ENV: &str = "TOOLGATE_API_KEY";

#[derive(Args, Debug)]
pub(super) struct GatewayArgs {
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
}

impl GatewayArgs {
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

    /// A connection to the gateway.
    pub(super) async fn connect(&self, env: &Env) -> anyhow::Result<Channel> {
        let addr = given(&self.addr, ADDR_ENV, env).unwrap_or(DEFAULT_ADDR.to_owned());
        // With a CA or a client certificate, `host:port` is reached over TLS.
        let url = dial_url(&addr, self.cacert.is_some() || self.cert.is_some());
        let tls = self.tls(&url)?;
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|_| anyhow!("not an address: {addr} (give host:port or a URL)"))?;
        if let Some(tls) = tls {
            if url.starts_with("http://") {
                anyhow::bail!("--cacert and --cert need TLS: give https://… or host:port, not {addr}");
            }
            endpoint = endpoint.tls_config(tls).context("the TLS settings")?;
        }
        endpoint.connect().await.with_context(|| format!("cannot reach the gateway at {url}"))
    }

    /// `request` with the caller's credentials.
    pub(super) fn credentials<T>(&self, request: &mut tonic::Request<T>, env: &Env) -> anyhow::Result<()> {
        let api_key = given(&self.api_key, API_KEY_ENV, env).filter(|k| !k.is_empty());
        let user_token = given(&self.user_token, USER_TOKEN_ENV, env).filter(|t| !t.is_empty());
        if let Some(key) = api_key {
            let value = MetadataValue::try_from(format!("Bearer {key}")).context("the API key is not header text")?;
            request.metadata_mut().insert("authorization", value);
        }
        if let Some(token) = user_token {
            let name = tonic::metadata::MetadataKey::from_bytes(self.user_header.as_bytes())
                .with_context(|| format!("not a header name: {}", self.user_header))?;
            let value = MetadataValue::try_from(token).context("the user token is not header text")?;
            request.metadata_mut().insert(name, value);
        }
        Ok(())
    }
}

/// A flag, else its environment variable.
fn given(flag: &Option<String>, name: &str, env: &Env) -> Option<String> {
    flag.clone().or_else(|| env.get(name).map(str::to_owned))
}
