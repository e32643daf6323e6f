//! Child processes of the gateway (command backends, MCP stdio servers):
//! started in a process group of their own with a clean environment, their
//! stderr to the gateway's log, never to a model.
//!
//! The only module that starts processes (a lint enforces it). A leaf: it
//! knows nothing of the catalogue or of tools.

pub(crate) mod supervise;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::env::Env;

/// Variables passed from the gateway's environment to every child, before
/// its own `env`. The gateway's other variables (often secrets meant for
/// other tools) are not passed on.
pub const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];

/// What every child inherits from the gateway: the [`PASSED_ENV`]
/// variables that are set, read once; and the supervisor that contains
/// command tools, if there is one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Inherited {
    vars: Vec<(String, String)>,
    /// The `toolgate` binary, run as `toolgate supervise -- PROGRAM …`
    /// around each command tool ([`supervise`]).
    supervisor: Option<PathBuf>,
}

impl Inherited {
    pub(crate) fn from_env(env: &Env) -> Self {
        let vars = PASSED_ENV.iter().filter_map(|k| Some(((*k).to_owned(), env.get(k)?.to_owned()))).collect();
        Self { vars, supervisor: None }
    }

    /// Command tools run under `binary supervise`, so that nothing they
    /// start outlives their call (see [`supervise`]). Without one, the
    /// process group is all that holds them.
    pub(crate) fn supervised_by(mut self, binary: PathBuf) -> Self {
        self.supervisor = Some(binary);
        self
    }
}

/// Starts `program` with its stdio piped, in a process group it leads (so the
/// group can be ended whole), killed if its handle is dropped. Its
/// environment is `inherited`, then `env`, and nothing else.
pub(crate) fn spawn<'a>(
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
        .envs(inherited.vars.iter().map(|(k, v)| (k, v)))
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    wrapped.spawn()
}

/// How long a supervisor asked to stop may take before its process group is
/// killed outright.
const SUPERVISOR_GRACE: Duration = Duration::from_secs(2);

/// A command tool's process for one call: the tool itself, or its
/// supervisor when there is one. Dropping it (the call ended, timed out, or
/// its caller went away) ends the tool and everything it started: the
/// supervisor is asked to (SIGTERM; it kills every descendant, those that
/// left the group included), and the process group is killed if it has not
/// ended within 2 s (`SUPERVISOR_GRACE`); without a supervisor the group is
/// killed at once.
pub(crate) struct CallProcess {
    child: Option<Box<dyn ChildWrapper>>,
    supervised: bool,
}

impl CallProcess {
    pub(crate) fn child(&mut self) -> &mut dyn ChildWrapper {
        self.child.as_deref_mut().expect("present until dropped")
    }
}

impl Drop for CallProcess {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        if !self.supervised {
            let _ = child.start_kill();
            return;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        let pid = child.id().and_then(|id| rustix::process::Pid::from_raw(id as i32));
        let asked = pid.is_some_and(|pid| rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_ok());
        match (asked, tokio::runtime::Handle::try_current()) {
            (true, Ok(runtime)) => {
                runtime.spawn(async move {
                    let ended = tokio::time::timeout(SUPERVISOR_GRACE, child.wait()).await;
                    if ended.is_err() {
                        let _ = child.start_kill();
                    }
                });
            }
            _ => {
                let _ = child.start_kill();
            }
        }
    }
}

/// Starts a command tool for one call: like [`spawn`], under the
/// supervisor when `inherited` names one.
pub(crate) fn spawn_call<'a>(
    program: &Path,
    args: &[String],
    cwd: &Path,
    inherited: &Inherited,
    env: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> std::io::Result<CallProcess> {
    let child = match &inherited.supervisor {
        Some(supervisor) => {
            let parent = std::process::id().to_string();
            let program = program.to_string_lossy().into_owned();
            let mut argv = vec!["supervise".to_owned(), "--parent".to_owned(), parent, "--".to_owned(), program];
            argv.extend(args.iter().cloned());
            spawn(supervisor, &argv, cwd, inherited, env)?
        }
        None => spawn(program, args, cwd, inherited, env)?,
    };
    Ok(CallProcess { child: Some(child), supervised: inherited.supervisor.is_some() })
}

/// Longest line logged; the rest of a longer line is dropped.
const MAX_LINE: usize = 1024;

/// Reads `stderr` to its end and hands each line (cut to 1 KiB, lossily
/// decoded) to `log`, until `max_total` bytes were logged; the rest is read
/// and dropped, so the child never blocks on a full pipe.
pub(crate) async fn log_lines(mut stderr: impl AsyncRead + Unpin, max_total: usize, log: impl Fn(&str)) {
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
