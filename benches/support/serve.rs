//! `toolgate serve`, the real binary, started for a benchmark.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
};

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
    start_binary(Path::new(env!("CARGO_BIN_EXE_toolgate")), catalog, env, args)
}

/// [`start_with`], running `binary` (another build, to compare).
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
