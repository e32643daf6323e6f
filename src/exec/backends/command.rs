//! Command backends: argv executed directly (never through a shell), the
//! arguments object on stdin, one protocol object on stdout:
//! `{"ok": true, "result": …}` or `{"ok": false, "error": "not_found" |
//! "refused" | "invalid_arguments", "detail": "…"}`. Anything else, or a
//! non-zero exit without that, is a crash. stderr goes to the gateway's log,
//! never to the model. The tool runs in a process group of its own, killed
//! when the call ends, times out or its caller goes away, so nothing it
//! started outlives the call.
//!
//! The child gets a clean environment: `PATH`, `HOME`, `LANG`, `LC_ALL`, `TZ`,
//! `TMPDIR` from the gateway, then the tool's own `env`. The gateway's other
//! variables (often secrets meant for other tools) are not passed on.

use process_wrap::tokio::ChildWrapper;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{tool_error_kind, Failure, Request};
use crate::{catalog::CommandBackend, exec::outcome::tool_text, process};

/// At most this much of a tool's stderr is logged per call.
const MAX_LOGGED_STDERR: usize = 16 * 1024;

/// The tool's process group. Dropping it (the call ended, timed out, or its
/// caller went away) kills the whole group, so nothing the tool started
/// outlives its call.
struct Group(Box<dyn ChildWrapper>);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

#[derive(Deserialize)]
struct Reply<'a> {
    ok: bool,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error: Option<String>,
    #[serde(default)]
    detail: String,
}

pub async fn run(backend: &CommandBackend, request: &Request<'_>) -> Result<String, Failure> {
    let tool = &request.tool.name;
    let env = backend.env.iter().map(|(k, v)| (k.as_str(), v.expose()));
    let mut child = match process::spawn(&backend.program, &backend.args, &backend.cwd, request.inherited, env) {
        Ok(child) => Group(child),
        Err(err) => {
            tracing::warn!(tool = %tool, error = %err, "command backend cannot start");
            return Err(Failure::Unavailable);
        }
    };

    let mut stdin = child.0.stdin().take().expect("stdin is piped");
    let arguments = request.arguments_json.as_bytes().to_vec();
    let write = async move {
        // A tool that exits without reading its input is judged by its output.
        let _ = stdin.write_all(&arguments).await;
        let _ = stdin.shutdown().await;
    };
    let stderr = child.0.stderr().take().expect("stderr is piped");
    let log = process::log_lines(stderr, MAX_LOGGED_STDERR, |line| tracing::warn!(tool = %tool, "stderr: {line}"));
    let stdout = child.0.stdout().take().expect("stdout is piped");
    let limit = request.max_result_bytes as u64 * 2 + 1024;
    let read = async move {
        let mut out = Vec::new();
        let read = stdout.take(limit + 1).read_to_end(&mut out).await;
        read.map(|_| out)
    };
    let ((), (), out) = tokio::join!(write, log, read);
    let status = child.0.wait().await;
    let out = out.unwrap_or_default();
    if out.len() as u64 > limit {
        return Err(Failure::TooLarge);
    }
    let status = match status {
        Ok(status) => status,
        Err(err) => {
            tracing::warn!(tool = %tool, error = %err, "command backend could not be waited for");
            return Err(Failure::Crashed(format!("the tool '{tool}' failed")));
        }
    };
    match serde_json::from_slice::<Reply<'_>>(&out) {
        Ok(Reply { ok: true, result: Some(result), .. }) => {
            if result.get().len() > request.max_result_bytes {
                return Err(Failure::TooLarge);
            }
            Ok(result.get().to_owned())
        }
        Ok(Reply { ok: false, error: Some(kind), detail, .. }) if tool_error_kind(&kind).is_some() => {
            let kind = tool_error_kind(&kind).expect("checked");
            Err(Failure::Tool { kind, message: tool_text(&detail) })
        }
        _ => {
            let why = match status.code() {
                Some(0) => "it answered something that is not the tool protocol".to_owned(),
                Some(code) => format!("it exited with code {code} without an answer"),
                None => "it was killed before it answered".to_owned(),
            };
            tracing::warn!(tool = %tool, exit = ?status.code(), stdout_bytes = out.len(), "command backend crashed");
            Err(Failure::Crashed(format!("the tool '{tool}' failed: {why}")))
        }
    }
}
