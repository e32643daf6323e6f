//! `toolgate serve`, the real binary as it ships, started for a
//! benchmark; and the plain tonic echo it is measured against.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
};

/// What a build with the dev-dependencies' features holds (Tokio's
/// test-util, whose clock takes a mutex on every read).
const TEST_UTIL: &[u8] = b"time is already frozen";

/// This bench's own binary started with `args` (a mode of its own: a model
/// server, a plain proxy, a bare MCP server), and the address it prints as
/// its first line once it listens.
#[allow(dead_code)] // each bench uses a part of this module
pub fn this_binary(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    (child, line.trim().to_owned())
}

/// The gateway as it ships: `TOOLGATE_BIN`, else built by `cargo build
/// --release --locked` into `target/shipped`, a folder `cargo bench` never
/// writes. Not `CARGO_BIN_EXE_toolgate`: `cargo bench` builds that with the
/// dev-dependencies' features, and it measured up to a tenth slower
/// (docs/benchmarks.md, "One method for both sides"). A binary with them
/// is refused.
#[allow(dead_code)] // each bench uses a part of this module
pub fn shipped() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let binary = match std::env::var_os("TOOLGATE_BIN") {
                Some(binary) => PathBuf::from(binary),
                None => built("the gateway", Path::new(env!("CARGO_MANIFEST_DIR")), "shipped", &["--bin", "toolgate"])
                    .join("toolgate"),
            };
            let bytes = std::fs::read(&binary).unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
            assert!(
                !bytes.windows(TEST_UTIL.len()).any(|w| w == TEST_UTIL),
                "{} was built with the dev-dependencies' features (cargo bench's build); \
                 build it with cargo build --release",
                binary.display()
            );
            binary
        })
        .clone()
}

/// The plain tonic echo of `benches/bare-echo` (a crate of its own: no
/// code of the gateway's, no dev-dependency features), built into
/// `target/bare-echo`.
#[allow(dead_code)] // each bench uses a part of this module
pub fn bare_echo() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/bare-echo");
    BUILT.get_or_init(|| built("the plain tonic echo", &crate_dir, "bare-echo", &[]).join("bare-echo")).clone()
}

/// Runs `cargo build --release --locked ARGS` in `dir` into
/// `target/FOLDER`; the folder of the binaries.
fn built(what: &str, dir: &Path, folder: &str, args: &[&str]) -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join(folder);
    eprintln!("building {what} into {} (cargo build --release --locked)", target.display());
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--locked", "--quiet"])
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cannot build {what}");
    target.join("release")
}

/// Starts `toolgate serve --listen 127.0.0.1:0 --catalog <catalog>` with
/// `env` added to its environment (and no OTLP endpoint inherited); returns
/// it once it logs that it listens, with its port. Its log goes on being
/// read, so that it never blocks on a full pipe.
#[allow(dead_code)] // each bench uses a part of this module
pub fn start(catalog: &Path, env: &[(&str, &str)]) -> (Child, u16) {
    start_with(catalog, env, &[])
}

/// [`start`], with more arguments to `serve` (`--tls-cert`, …).
#[allow(dead_code)] // each bench uses a part of this module
pub fn start_with(catalog: &Path, env: &[(&str, &str)], args: &[&str]) -> (Child, u16) {
    start_binary(&shipped(), catalog, env, args)
}

/// [`start_with`], running `binary` (another build, to compare).
#[allow(dead_code)] // each bench uses a part of this module
pub fn start_binary(binary: &Path, catalog: &Path, env: &[(&str, &str)], args: &[&str]) -> (Child, u16) {
    let mut child = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--catalog"])
        .arg(catalog)
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let port = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "toolgate serve ended before listening");
        if let Some(at) = line.find("toolgate listening on 127.0.0.1:") {
            let rest = &line[at + "toolgate listening on 127.0.0.1:".len()..];
            break rest.split(' ').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in stderr.lines().map_while(Result::ok) {});
    (child, port)
}
