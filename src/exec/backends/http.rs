//! HTTP backends: POST the arguments as JSON; 2xx JSON is the result; a 4xx
//! names the tool's own error; 5xx is a crash; no connection is UNAVAILABLE.
//! Redirects are not followed and proxy variables ignored unless the tool's
//! entry asks for them. Header values (often secrets) are never logged. The
//! caller's W3C `traceparent` is passed on.

use reqwest::{header, redirect, Client, StatusCode};
use serde::Deserialize;

use super::{is_json, tool_error_kind, Failure, Request, PRINCIPAL_HEADER, USER_HEADER, USER_ISSUER_HEADER};
use crate::{
    catalog::HttpBackend,
    exec::outcome::{tool_text, ErrorKind},
};

/// One client per combination of the two settings, built once.
pub(crate) struct HttpClients {
    clients: [Client; 4],
}

impl HttpClients {
    /// Needs the process-wide crypto provider ([`crate::tls::install_crypto_provider`]).
    /// A redirect (for tools that follow them) is followed only within the
    /// origin, at most 5 times: calls may carry identity headers, which must
    /// never reach another origin.
    pub(crate) fn new() -> Result<Self, reqwest::Error> {
        let build = |follow: bool, proxy: bool| {
            let policy = match follow {
                false => redirect::Policy::none(),
                true => redirect::Policy::custom(|attempt| {
                    let same = attempt.previous().first().is_some_and(|first| first.origin() == attempt.url().origin());
                    match (same, attempt.previous().len() > 5) {
                        (true, false) => attempt.follow(),
                        _ => attempt.stop(),
                    }
                }),
            };
            let mut builder = crate::tls::client_builder()
                .redirect(policy)
                // A followed redirect does not tell the next host where it came from.
                .referer(false)
                .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")));
            if !proxy {
                builder = builder.no_proxy();
            }
            builder.build()
        };
        Ok(Self { clients: [build(false, false)?, build(false, true)?, build(true, false)?, build(true, true)?] })
    }

    fn client(&self, backend: &HttpBackend) -> &Client {
        &self.clients[usize::from(backend.follow_redirects) * 2 + usize::from(backend.use_env_proxy)]
    }
}

/// `{"error": {"kind": "not_found", "message": "…"}}`
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    kind: String,
    #[serde(default)]
    message: String,
}

pub(crate) async fn run(backend: &HttpBackend, request: &Request<'_>) -> Result<String, Failure> {
    let tool = &request.tool.name;
    let mut call = request
        .http
        .client(backend)
        .post(backend.url.clone())
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json")
        .body(request.arguments_json.to_owned());
    if let Some(traceparent) = request.traceparent {
        call = call.header("traceparent", traceparent);
    }
    for (name, value) in &backend.headers {
        call = call.header(name.as_str(), value.expose());
    }
    // Who calls, set last: no configured header of the same name remains.
    let mut identity = header::HeaderMap::new();
    let (principal, user) = request.caller.identity();
    let issuer = request.caller.user_issuer();
    for (name, value) in [(PRINCIPAL_HEADER, principal), (USER_HEADER, user), (USER_ISSUER_HEADER, issuer)] {
        let Some(value) = value else { continue };
        // Verified subjects and principal names hold no control character,
        // so this always encodes (UTF-8 beyond ASCII as it is); a value that
        // did not would fail the call rather than reach the tool as no one.
        match header::HeaderValue::from_bytes(value.as_bytes()) {
            Ok(value) => {
                identity.insert(name, value);
            }
            Err(_) => {
                tracing::warn!(tool = %request.tool.name, "who calls cannot be sent as the {name} header");
                return Err(Failure::Unavailable);
            }
        }
    }
    // A user proven by an access token for the gateway itself carries none.
    if let (true, Some(user)) =
        (backend.forward_user_token, request.caller.user.as_ref().filter(|u| !u.token.is_empty()))
    {
        if let Ok(mut value) = header::HeaderValue::from_str(&format!("Bearer {}", user.token)) {
            value.set_sensitive(true);
            identity.insert(header::AUTHORIZATION, value);
        }
    }
    if !identity.is_empty() {
        call = call.headers(identity);
    }
    let mut response = match call.send().await {
        Ok(response) => response,
        Err(err) if err.is_connect() => {
            tracing::warn!(tool = %tool, error = %err.without_url(), "http backend unreachable");
            return Err(Failure::Unavailable);
        }
        Err(err) => {
            tracing::warn!(tool = %tool, error = %err.without_url(), "http backend request failed");
            return Err(Failure::Crashed(format!("the tool '{tool}' failed before it answered")));
        }
    };
    let status = response.status();
    let mut body: Vec<u8> = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > request.max_result_bytes {
                    return Err(Failure::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(err) => {
                tracing::warn!(tool = %tool, error = %err.without_url(), "http backend broke while answering");
                return Err(Failure::Crashed(format!("the tool '{tool}' broke off its answer")));
            }
        }
    }
    answer(tool, status, body)
}

fn answer(tool: &str, status: StatusCode, body: Vec<u8>) -> Result<String, Failure> {
    if status.is_success() {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(Failure::Crashed(format!("the tool '{tool}' answered with an empty body instead of JSON")));
        }
        return match String::from_utf8(body) {
            Ok(text) if is_json(text.as_bytes()) => Ok(text),
            _ => Err(Failure::Crashed(format!("the tool '{tool}' answered with something that is not JSON"))),
        };
    }
    if status.is_client_error() {
        let text = String::from_utf8_lossy(&body);
        if let Ok(ErrorBody { error }) = serde_json::from_slice::<ErrorBody>(&body) {
            if let Some(kind) = tool_error_kind(&error.kind) {
                return Err(Failure::Tool { kind, message: tool_text(&error.message), sent: None });
            }
        }
        let kind = if status == StatusCode::NOT_FOUND { ErrorKind::NotFound } else { ErrorKind::Refused };
        let message = match tool_text(&text) {
            empty if empty.is_empty() => {
                format!("the tool '{tool}' answered HTTP {} with no explanation", status.as_u16())
            }
            text => text,
        };
        return Err(Failure::Tool { kind, message, sent: None });
    }
    if status.is_server_error() {
        tracing::warn!(tool = %tool, status = status.as_u16(), "http backend failed");
        return Err(Failure::Crashed(format!("the tool '{tool}' failed (HTTP {})", status.as_u16())));
    }
    tracing::warn!(tool = %tool, status = status.as_u16(), "http backend answered with an unexpected status");
    Err(Failure::Crashed(format!("the tool '{tool}' answered HTTP {}, which is not an answer", status.as_u16())))
}
