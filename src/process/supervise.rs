//! `toolgate supervise -- PROGRAM [ARGS…]`: the per-call supervisor of a
//! command tool. It makes itself a child subreaper, runs the tool with its
//! own stdio, environment and folder, and when the tool exits (or the
//! supervisor is asked to stop) kills every process the tool left behind,
//! those that left its process group or session (`setsid`) included: an
//! orphaned descendant is re-parented to the nearest subreaper, this
//! process, and so cannot escape it. Then it exits as the tool did.
//!
//! One supervisor per call: a gateway-wide subreaper could not tell which
//! call an orphan belongs to, and reaping with `wait` (any child) there would
//! steal exit statuses from the runtime's child handles. Here nothing else
//! waits for children, so reaping any of them is safe.
//!
//! Only the gateway ends a call: SIGTERM (what it sends when a call ends,
//! times out or is cancelled), or the gateway's own death (the supervisor
//! asks the kernel for SIGTERM then). Every other signal that would end a
//! process by default (SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM) is
//! caught and ignored, so `kill -HUP` meant for the gateway never ends a
//! call; the tool itself starts with default handlers. The supervisor goes by
//! the name `toolgate-call`, so `pgrep -x toolgate` lists gateways only.

use std::{ffi::OsString, process::ExitCode, time::Duration};

use rustix::process::{
    getpid, getppid, kill_process, set_child_subreaper, set_parent_process_death_signal, wait, Pid, Signal,
    WaitOptions, WaitStatus,
};

/// The supervisor's process name.
const NAME: &std::ffi::CStr = c"toolgate-call";

/// The exit code when the tool could not be started (as a shell's "command
/// not found").
pub(crate) const CANNOT_START: u8 = 127;

/// Runs the tool `command` (program, then its arguments) under supervision;
/// `parent` is the gateway's pid, whose death ends the call.
pub(crate) fn run(command: &[OsString], parent: Option<u32>) -> ExitCode {
    let Some((program, args)) = command.split_first() else {
        return ExitCode::from(CANNOT_START);
    };
    let _ = rustix::thread::set_name(NAME);
    if let Some(parent) = parent {
        // The kernel sends SIGTERM when the gateway's thread that started
        // this process ends: a gateway killed outright takes its calls
        // along. If it died before this line, there is no one to answer.
        let _ = set_parent_process_death_signal(Some(Signal::TERM));
        if getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(parent) {
            return ExitCode::from(CANNOT_START);
        }
    }
    if let Err(err) = set_child_subreaper(Some(getpid())) {
        // Without it orphans go to init: the process group still holds the
        // rest, as without a supervisor.
        tracing::warn!("the supervisor cannot become a subreaper: {err}");
    }
    watch_signals();
    #[allow(clippy::disallowed_methods)] // the supervisor is part of starting processes
    let child = std::process::Command::new(program).args(args).spawn();
    let tool = match child {
        Ok(child) => Pid::from_child(&child),
        Err(err) => {
            tracing::warn!("cannot start {}: {err}", program.to_string_lossy());
            return ExitCode::from(CANNOT_START);
        }
    };
    let status = wait_for(tool);
    end_descendants();
    match status {
        Some(status) => exit_as(status),
        // Interrupted before the tool's end was seen (it cannot happen
        // otherwise): end as asked.
        None => ExitCode::from(CANNOT_START),
    }
}

/// Reaps children until `tool` exits; its status. Orphans re-parented here
/// meanwhile are reaped as they end.
fn wait_for(tool: Pid) -> Option<WaitStatus> {
    loop {
        match wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid == tool => return Some(status),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
}

/// On SIGTERM (the gateway ending the call): kill the tool and everything it
/// started; the main thread then sees the tool end and exits. The other
/// signals that would end this process by default are caught and ignored:
/// they are not the gateway's way to end a call.
fn watch_signals() {
    use signal_hook::consts::{SIGALRM, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
    let Ok(mut signals) =
        signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM])
    else {
        return;
    };
    std::thread::spawn(move || {
        if signals.forever().any(|signal| signal == SIGTERM) {
            end_descendants();
        }
    });
}

/// Kills every descendant: the children of this process (SIGKILL), whose
/// own children are then re-parented here, until none is left; reaps them.
fn end_descendants() {
    for _ in 0..10_000 {
        let children = children();
        if children.is_empty() {
            return;
        }
        for &child in &children {
            let _ = kill_process(child, Signal::KILL);
        }
        // Reap what died; a child not yet dead is waited for a moment.
        let mut reaped = false;
        while let Ok(Some(_)) = wait(WaitOptions::NOHANG) {
            reaped = true;
        }
        if !reaped {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The pids of this process's children, from `/proc/self/task/*/children`,
/// or, where the kernel has no such file, from every process's parent pid.
fn children() -> Vec<Pid> {
    let me = getpid();
    let mut found: Vec<Pid> = Vec::new();
    let mut listed = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                listed = true;
                found.extend(text.split_whitespace().filter_map(|p| p.parse().ok()).filter_map(Pid::from_raw));
            }
        }
    }
    if !listed {
        let Ok(all) = std::fs::read_dir("/proc") else { return found };
        for entry in all.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
            if parent == Some(me.as_raw_nonzero().get()) {
                found.extend(Pid::from_raw(pid));
            }
        }
    }
    found
}

/// Ends this process as the tool ended: the same exit code, or death by the
/// same signal.
fn exit_as(status: WaitStatus) -> ExitCode {
    if let Some(code) = status.exit_status() {
        return ExitCode::from(code as u8);
    }
    if let Some(signal) = status.terminating_signal() {
        let _ = signal_hook::low_level::emulate_default_handler(signal);
        return ExitCode::from(128u8.wrapping_add(signal as u8));
    }
    ExitCode::FAILURE
}
