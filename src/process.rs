//! Child processes of the gateway (command backends, MCP stdio servers):
//! started in a process group of their own with a clean environment, their
//! stderr to the gateway's log, never to a model.
//!
//! The only module that starts processes (a lint enforces it). A leaf: it
//! knows nothing of the catalogue or of tools.

use std::{path::Path, process::Stdio};

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::env::Env;

/// Variables passed from the gateway's environment to every child, before
/// its own `env`. The gateway's other variables (often secrets meant for
/// other tools) are not passed on.
pub const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

/// What every child inherits from the gateway's environment: the
/// [`PASSED_ENV`] variables that are set, read once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inherited(Vec<(String, String)>);

impl Inherited {
    pub fn from_env(env: &Env) -> Self {
        Self(PASSED_ENV.iter().filter_map(|k| Some(((*k).to_owned(), env.get(k)?.to_owned()))).collect())
    }
}

/// Starts `program` with its stdio piped, in a process group it leads (so the
/// group can be ended whole), killed if its handle is dropped. Its
/// environment is `inherited`, then `env`, and nothing else.
pub fn spawn<'a>(
    program: &Path,
    args: &[String],
    cwd: &Path,
    inherited: &Inherited,
    env: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> std::io::Result<Box<dyn ChildWrapper>> {
    #[allow(clippy::disallowed_methods)] // the one place that starts processes
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(inherited.0.iter().map(|(k, v)| (k, v)))
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    wrapped.spawn()
}

/// Longest line logged; the rest of a longer line is dropped.
const MAX_LINE: usize = 1024;

/// Reads `stderr` to its end and hands each line (cut to 1 KiB, lossily
/// decoded) to `log`, until `max_total` bytes were logged; the rest is read
/// and dropped, so the child never blocks on a full pipe.
pub async fn log_lines(mut stderr: impl AsyncRead + Unpin, max_total: usize, log: impl Fn(&str)) {
    let (mut buffer, mut line, mut logged) = ([0u8; 8192], Vec::with_capacity(MAX_LINE), 0usize);
    let mut flush = |line: &mut Vec<u8>| {
        if !line.is_empty() && logged < max_total {
            logged += line.len();
            log(String::from_utf8_lossy(line).trim_end());
        }
        line.clear();
    };
    while let Ok(read) = stderr.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        for &byte in &buffer[..read] {
            match byte {
                b'\n' => flush(&mut line),
                _ if line.len() < MAX_LINE => line.push(byte),
                _ => {}
            }
        }
    }
    flush(&mut line);
}
