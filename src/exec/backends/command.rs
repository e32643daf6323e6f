//! Command backends: argv executed directly (never through a shell), the
//! arguments object on stdin, one protocol object on stdout:
//! `{"ok": true, "result": …}` or `{"ok": false, "error": "not_found" |
//! "refused" | "invalid_arguments", "detail": "…"}`. Anything else, or a
//! non-zero exit without that, is a crash. stderr goes to the gateway's log,
//! never to the model. The tool runs in a process group of its own, under a
//! supervisor that is its subreaper (`process::supervise`): when the call
//! ends, times out or its caller goes away, the tool and everything it
//! started end with it, processes that left the group (`setsid`) included.
//! The call ends when the tool exits: a process it left behind holding its
//! stdout does not keep the call waiting.
//!
//! The child gets a clean environment: `PATH`, `HOME`, `LANG`, `LC_ALL`, `TZ`,
//! `TMPDIR` from the gateway, then the tool's own `env`. The gateway's other
//! variables (often secrets meant for other tools) are not passed on.

use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{tool_error_kind, Failure, Request};
use crate::{catalog::CommandBackend, exec::outcome::tool_text, process};

/// At most this much of a tool's stderr is logged per call.
const MAX_LOGGED_STDERR: usize = 16 * 1024;

/// Once the tool has exited, how long what it wrote may take to be read:
/// its answer is in the pipe by then, and a process it left behind may hold
/// the pipe open for ever.
const AFTER_EXIT: Duration = Duration::from_millis(200);

#[derive(Deserialize)]
struct Reply<'a> {
    ok: bool,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error: Option<String>,
    #[serde(default)]
    detail: String,
}

pub(crate) async fn run(backend: &CommandBackend, request: &Request<'_>) -> Result<String, Failure> {
    let tool = &request.tool.name;
    // Who calls comes last, so the tool's own `env` cannot set it.
    let (principal, user) = request.caller.identity();
    let issuer = request.caller.user_issuer();
    let identity = [(super::PRINCIPAL_ENV, principal), (super::USER_ENV, user), (super::USER_ISSUER_ENV, issuer)];
    let identity = identity.into_iter().filter_map(|(k, v)| Some((k, v?)));
    let env = backend.env.iter().map(|(k, v)| (k.as_str(), v.expose())).chain(identity);
    let mut child = match process::spawn_call(&backend.program, &backend.args, &backend.cwd, request.inherited, env) {
        Ok(child) => child,
        Err(err) => {
            tracing::warn!(tool = %tool, error = %err, "command backend cannot start");
            return Err(Failure::Unavailable);
        }
    };

    let mut stdin = child.child().stdin().take().expect("stdin is piped");
    let arguments = request.arguments_json.as_bytes().to_vec();
    let write = async move {
        // A tool that exits without reading its input is judged by its output.
        let _ = stdin.write_all(&arguments).await;
        let _ = stdin.shutdown().await;
    };
    let stderr = child.child().stderr().take().expect("stderr is piped");
    let log = process::log_lines(stderr, MAX_LOGGED_STDERR, |line| tracing::info!(tool = %tool, "stderr: {line}"));
    let mut stdout = child.child().stdout().take().expect("stdout is piped");
    let limit = request.max_result_bytes as u64 * 2 + 1024;
    let mut out = Vec::new();
    let status = {
        let read = async {
            let _ = (&mut stdout).take(limit + 1).read_to_end(&mut out).await;
        };
        let io = async { tokio::join!(write, log, read) };
        tokio::pin!(io);
        let child = child.child();
        tokio::select! {
            _ = &mut io => child.wait().await,
            status = child.wait() => {
                // Exited: read what it wrote, but not what a process it left
                // behind may write for ever.
                let _ = tokio::time::timeout(AFTER_EXIT, &mut io).await;
                status
            }
        }
    };
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
    answer(tool, &out, status, request.max_result_bytes)
}

/// The most of a tool's output quoted in its crash's message.
const QUOTED_OUTPUT: usize = 120;

/// What a tool printed, quoted (its first [`QUOTED_OUTPUT`] characters,
/// control characters escaped), or `nothing`.
fn printed(out: &[u8]) -> String {
    let text = String::from_utf8_lossy(out);
    let text = text.trim();
    if text.is_empty() {
        return "nothing".to_owned();
    }
    let cut: String = text.chars().take(QUOTED_OUTPUT).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{more}", serde_json::Value::String(cut))
}

/// What the tool's output `out` answers, by the tool protocol and its exit
/// `status`.
fn answer(
    tool: &str,
    out: &[u8],
    status: std::process::ExitStatus,
    max_result_bytes: usize,
) -> Result<String, Failure> {
    match serde_json::from_slice::<Reply<'_>>(out) {
        Ok(Reply { ok: true, result: Some(result), .. }) => {
            if result.get().len() > max_result_bytes {
                return Err(Failure::TooLarge);
            }
            Ok(result.get().to_owned())
        }
        Ok(Reply { ok: false, error: Some(kind), detail, .. }) if tool_error_kind(&kind).is_some() => {
            let kind = tool_error_kind(&kind).expect("checked");
            Err(Failure::Tool { kind, message: tool_text(&detail), sent: None })
        }
        // 127, the shell's "command not found", and no output: the program
        // (or the interpreter it names) could not be started, as the
        // supervisor reports a program it cannot start.
        _ if status.code() == Some(process::supervise::CANNOT_START.into()) && out.is_empty() => {
            tracing::warn!(tool = %tool, "command backend cannot start (exit code 127)");
            Err(Failure::Unavailable)
        }
        _ => {
            let why = match status.code() {
                Some(0) => "it answered something that is not the tool protocol".to_owned(),
                Some(code) => format!("it exited with code {code} without an answer"),
                None => "it was killed before it answered".to_owned(),
            };
            // What it printed is the operator's to read, never the model's
            // (it may name paths and hosts).
            tracing::warn!(
                tool = %tool,
                exit = ?status.code(),
                stdout_bytes = out.len(),
                "command backend crashed: it printed {}, not the tool protocol's {{\"ok\": true, \"result\": …}} \
                 or {{\"ok\": false, \"error\": \"not_found\" | \"refused\" | \"invalid_arguments\", \"detail\": …}}",
                printed(out)
            );
            Err(Failure::Crashed(format!("the tool '{tool}' failed: {why}")))
        }
    }
}
