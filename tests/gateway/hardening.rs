//! What an outside attack on the gateway found, each fixed: through the real
//! binary or a real client.

use std::{
    os::unix::fs::PermissionsExt,
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use toolgate::{
    proto::v1::{ErrorKind, ExecuteRequest},
    server::ConnectionSettings,
};

use crate::common::{error, execute, kind, run, stderr, stdout, toolgate, CatalogDir, TestGateway};

/// An executable shell script at `path` printing `output`.
fn shell_tool(path: &Path, output: &str) {
    std::fs::write(path, format!("#!/bin/sh\ncat >/dev/null\necho '{output}'\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_relative_catalogue_runs_programs_named_by_a_relative_path() {
    let dir = CatalogDir::new();
    shell_tool(&dir.registry().join("t.sh"), r#"{"ok": true, "result": "ran"}"#);
    std::fs::create_dir_all(dir.registry().join("bin")).unwrap();
    shell_tool(&dir.registry().join("bin/u.sh"), r#"{"ok": true, "result": "ran too"}"#);
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: t\n    description: x\n    backend: {command: {argv: [./t.sh]}}\n  \
         - name: u\n    description: x\n    backend: {command: {argv: [bin/u.sh], cwd: bin}}\n",
    );
    let (mut child, _lines, listening) = crate::common::serve_registry(dir.dir.path(), &[]);
    let addr = format!("http://{}", listening.split(' ').next().unwrap());
    for (tool, result) in [("t", "\"ran\""), ("u", "\"ran too\"")] {
        let out = toolgate().args(["call", tool, "{}", "--addr", &addr]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).contains(&format!("result: {result}")), "{}", stdout(&out));
    }
    child.kill().unwrap();
}

#[test]
fn validate_names_a_program_that_is_missing_or_not_executable() {
    let dir = CatalogDir::new();
    dir.file("registry/not-exec.sh", "#!/bin/sh\n");
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: gone\n    description: x\n    backend: {command: {argv: [./gone.sh]}}\n  \
         - name: plain\n    description: x\n    backend: {command: {argv: [./not-exec.sh]}}\n  \
         - name: nowhere\n    description: x\n    backend: {command: {argv: [no-such-program-anywhere]}}\n",
    );
    let out = run(dir.dir.path(), &["validate", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    let abs = std::path::absolute(dir.registry()).unwrap();
    for expected in [
        format!(
            "registry/tools.yaml: tools[0] (gone).backend.command.argv[0]: cannot run '{}/./gone.sh': the file does not exist",
            abs.display()
        ),
        format!(
            "registry/tools.yaml: tools[1] (plain).backend.command.argv[0]: cannot run '{}/./not-exec.sh': the file is not executable",
            abs.display()
        ),
        "registry/tools.yaml: tools[2] (nowhere).backend.command.argv[0]: cannot run 'no-such-program-anywhere': \
         no executable of that name on the PATH children inherit"
            .to_owned(),
    ] {
        assert!(text.contains(&expected), "{expected}\nnot in:\n{text}");
    }
}

/// A registry of `n` tools on the built-in `echo`.
fn many_tools(n: usize) -> String {
    let mut yaml = String::from("tools:\n");
    for i in 0..n {
        yaml.push_str(&format!(
            "  - name: service_{i}_action_{}\n    description: x\n    backend: {{builtin: echo}}\n",
            i * 7
        ));
    }
    yaml
}

/// The bytes a status message takes in `grpc-message` (percent-encoded).
fn encoded_size(message: &str) -> usize {
    message.bytes().map(|b| if (0x20..0x7f).contains(&b) && b != b'%' { 1 } else { 3 }).sum()
}

#[tokio::test]
async fn a_strict_execute_naming_long_unknown_tools_keeps_its_status_small() {
    let mut gw = TestGateway::registry(crate::common::SEARCH_REGISTRY).start().await;
    let tools: Vec<String> = (0..20).map(|i| format!("{i}{}", "工具名称".repeat(60))).collect();
    let request = ExecuteRequest { tool: "web_search".into(), tools, strict: Some(true), ..Default::default() };
    let status = gw.client.execute(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().starts_with("Unknown tool '0工具名称"), "{}", status.message());
    // C-core clients accept 8 KiB of metadata in all.
    assert!(encoded_size(status.message()) <= 6 * 1024, "{} bytes", encoded_size(status.message()));
    assert!(status.message().ends_with("more unknown names."), "{}", status.message());
}

#[tokio::test]
async fn an_execute_naming_thousands_of_unknown_tools_does_not_stall_other_calls() {
    let gw = TestGateway::registry(&many_tools(2_000)).start().await;
    let heavy: Vec<String> = (0..3_900).map(|i| format!("{i}_{}", "unknown_tool_".repeat(78))).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let mut loads = Vec::new();
    for _ in 0..4 {
        let (mut client, heavy, stop) = (gw.client.clone(), heavy.clone(), stop.clone());
        loads.push(tokio::spawn(async move {
            let mut took = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let request = ExecuteRequest { tool: "echo".into(), tools: heavy.clone(), ..Default::default() };
                let response = client.execute(request).await.unwrap().into_inner();
                assert!(!response.ok, "echo is not in the set");
                took.push(started.elapsed());
            }
            took
        }));
    }
    let mut waits = Vec::new();
    let mut client = gw.client.clone();
    for _ in 0..20 {
        let started = Instant::now();
        assert!(execute(&mut client, "echo", r#"{"x": 1}"#).await.ok);
        waits.push(started.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let mut heavy_took = Vec::new();
    for load in loads {
        heavy_took.extend(load.await.unwrap());
    }
    waits.sort();
    heavy_took.sort();
    assert!(!heavy_took.is_empty(), "the heavy calls ran");
    // Before, each heavy call searched suggestions for 3,900 names on the
    // runtime's workers, and an unrelated call waited behind it (as long as
    // a heavy call, or longer). Measured against the heavy calls of the same
    // run, not a clock: a loaded machine slows both alike.
    let (echo, heavy) = (waits[waits.len() / 2], heavy_took[heavy_took.len() / 2]);
    assert!(echo * 4 < heavy, "echo p50 {echo:?} beside heavy calls of p50 {heavy:?}");
}

const CODE_REGISTRY: &str = r#"
tools:
  - name: fetch_code
    description: x
    parameters:
      type: object
      properties:
        code: {type: string, pattern: "^PK-[0-9]+$"}
        items: {type: array, items: {type: object}}
      required: [code]
    backend: {builtin: echo}
"#;

#[tokio::test]
async fn a_key_given_twice_is_refused_at_any_depth() {
    let mut gw = TestGateway::registry(CODE_REGISTRY).start().await;
    for (arguments, message) in [
        (r#"{"code": "../../etc", "code": "PK-1234"}"#, "duplicate argument 'code'"),
        (
            r#"{"code": "PK-1", "items": [{"name": "a"}, {"name": "a", "name": "b"}]}"#,
            "duplicate argument 'items/1/name'",
        ),
        // Inside a JSON string (a repair), the same.
        (r#""{\"code\": \"x\", \"code\": \"PK-1\"}""#, "duplicate argument 'code'"),
    ] {
        let response = execute(&mut gw.client, "fetch_code", arguments).await;
        assert_eq!(kind(&response), ErrorKind::InvalidArguments, "{arguments}");
        assert_eq!(error(&response).message, message, "{arguments}");
    }
    assert!(execute(&mut gw.client, "fetch_code", r#"{"code": "PK-1", "items": [{"name": "a"}]}"#).await.ok);
}

#[tokio::test]
async fn another_spelling_of_a_given_parameter_is_refused() {
    let mut gw = TestGateway::registry(CODE_REGISTRY).start().await;
    let response = execute(&mut gw.client, "fetch_code", r#"{"code": "PK-1234", "Code": "../../etc"}"#).await;
    assert_eq!(kind(&response), ErrorKind::InvalidArguments);
    assert_eq!(
        error(&response).message,
        "argument 'Code' is another spelling of 'code', which is also given. \
         Expected parameters for 'fetch_code' — required: ['code'], optional: ['items']."
    );
    // Alone, the other spelling is still repaired to the parameter.
    let response = execute(&mut gw.client, "fetch_code", r#"{"Code": "PK-1234"}"#).await;
    assert!(response.ok, "{response:?}");
    assert_eq!(response.arguments_json, r#"{"code":"PK-1234"}"#);
}

#[tokio::test]
async fn the_depth_limit_holds_inside_a_json_string() {
    let mut gw = TestGateway::registry(CODE_REGISTRY).start().await;
    let deep = format!("{}1{}", "[".repeat(120), "]".repeat(120));
    let inner = format!(r#"{{"code": "PK-1", "items": [{{"x": {deep}}}]}}"#);
    let arguments = serde_json::to_string(&inner).unwrap();
    let response = execute(&mut gw.client, "fetch_code", &arguments).await;
    assert_eq!(kind(&response), ErrorKind::InvalidArguments);
    assert_eq!(error(&response).message, "arguments are nested deeper than 64 levels");
}

/// Runs `toolgate validate --catalog <path>` in `dir`, failing the test if it
/// takes more than 20 s (a hang), and returns its exit code and stderr.
fn validate_within(dir: &Path, path: &str) -> (Option<i32>, String) {
    let mut child = toolgate()
        .current_dir(dir)
        .args(["validate", "--catalog", path])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("validate --catalog {path} did not end");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), stderr(&out))
}

#[test]
fn deeply_nested_brackets_are_refused_before_the_yaml_parser() {
    let dir = CatalogDir::new();
    let deep = format!("tools: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    dir.file("deep.yaml", &deep);
    let started = Instant::now();
    let (code, text) = validate_within(dir.dir.path(), "deep.yaml");
    assert_eq!(code, Some(1));
    assert!(text.contains("deep.yaml: line 1: nested deeper than 128 levels of brackets"), "{text}");
    // Today's scanner took 36 s of CPU on this; the scan takes milliseconds.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    // Brackets in text, quoted strings, comments and block scalars do not count.
    let brackets = "[".repeat(200);
    dir.file(
        "ok.yaml",
        &format!(
            "# {brackets}\ntools:\n  - name: t\n    description: \"{brackets}\"\n    aliases: ['{brackets}x']\n    \
             backend: {{builtin: echo}}\n  - name: u\n    description: |\n      a{brackets}\n    backend: {{builtin: echo}}\n"
        ),
    );
    let (code, text) = validate_within(dir.dir.path(), "ok.yaml");
    assert!(!text.contains("nested deeper"), "{text}");
    assert_eq!(code, Some(1), "the alias is not a valid name: {text}");
}

#[test]
fn only_regular_files_are_read() {
    let dir = CatalogDir::new();
    let fifo = dir.dir.path().join("fifo.yaml");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (code, text) = validate_within(dir.dir.path(), "fifo.yaml");
    assert_eq!(code, Some(1));
    assert!(text.contains("fifo.yaml: is a named pipe (FIFO); only regular files are read"), "{text}");
    let (code, text) = validate_within(dir.dir.path(), "/dev/zero");
    assert_eq!(code, Some(1));
    assert!(text.contains("/dev/zero: is a device; only regular files are read"), "{text}");
    // A file over the cap (sparse: nothing is written).
    let big = std::fs::File::create(dir.dir.path().join("big.yaml")).unwrap();
    big.set_len(toolgate::catalog::MAX_FILE_BYTES + 1).unwrap();
    let (code, text) = validate_within(dir.dir.path(), "big.yaml");
    assert_eq!(code, Some(1));
    assert!(text.contains("big.yaml: is larger than 64 MiB"), "{text}");
    // A symbolic link to a regular file is read (ConfigMap mounts).
    dir.file("real.yaml", "tools:\n  - name: t\n    description: x\n    backend: {builtin: echo}\n");
    std::os::unix::fs::symlink(dir.dir.path().join("real.yaml"), dir.dir.path().join("link.yaml")).unwrap();
    let (code, text) = validate_within(dir.dir.path(), "link.yaml");
    assert_eq!(code, Some(0), "{text}");
    // So is a configuration file given as a FIFO refused, not waited on.
    let out = toolgate().current_dir(dir.dir.path()).args(["validate", "--config", "fifo.yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("named pipe"), "{}", stderr(&out));
}

/// A TLS server on 127.0.0.1 with a self-signed certificate: it completes
/// handshakes that accept it and answers `{}`; its address.
/// An HTTPS server answering `{}` under a self-signed certificate for
/// 127.0.0.1; its address and the certificate (PEM).
async fn self_signed_https_server() -> (std::net::SocketAddr, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let mut buffer = [0u8; 4096];
                let _ = tls.read(&mut buffer).await;
                let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                let _ = tls.write_all(reply.as_bytes()).await;
            });
        }
    });
    (addr, cert.cert.pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_starts_without_ca_certificates_and_still_verifies_servers() {
    let (https, _) = self_signed_https_server().await;
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        &format!(
            "tools:\n  - name: t\n    description: x\n    backend: {{builtin: echo}}\n  \
             - name: self_signed\n    description: x\n    backend: {{http: {{url: \"https://127.0.0.1:{}/x\"}}}}\n",
            https.port()
        ),
    );
    let empty = [("SSL_CERT_FILE", "/dev/null"), ("SSL_CERT_DIR", "/nonexistent")];
    let (mut child, _lines, listening) = crate::common::serve_registry(dir.dir.path(), &empty);
    let addr = format!("http://{}", listening.split(' ').next().unwrap());
    let call = |tool: &str| toolgate().args(["call", tool, "{}", "--addr", &addr]).output().unwrap();
    let ok = call("t");
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    // Verification stays on: the self-signed server is refused.
    let refused = call("self_signed");
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    assert!(stdout(&refused).starts_with("error: UNAVAILABLE"), "{}", stdout(&refused));
    child.kill().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_backends_are_verified_against_the_certificates_the_system_trusts() {
    let (https, cert) = self_signed_https_server().await;
    let dir = CatalogDir::new();
    let trusted = dir.file("trusted.pem", &cert);
    dir.file(
        "registry/tools.yaml",
        &format!(
            "tools:\n  - name: trusted\n    description: x\n    backend: {{http: {{url: \"https://127.0.0.1:{}/x\"}}}}\n",
            https.port()
        ),
    );
    let system = [("SSL_CERT_FILE", trusted.to_str().unwrap()), ("SSL_CERT_DIR", "/nonexistent")];
    let (mut child, _lines, listening) = crate::common::serve_registry(dir.dir.path(), &system);
    let addr = format!("http://{}", listening.split(' ').next().unwrap());
    // Twice: every HTTP backend client trusts what the system trusts.
    for _ in 0..2 {
        let called = toolgate().args(["call", "trusted", "{}", "--addr", &addr]).output().unwrap();
        assert_eq!(called.status.code(), Some(0), "{}{}", stdout(&called), stderr(&called));
    }
    child.kill().unwrap();
}

/// The HTTP/2 client preface and an empty SETTINGS frame: what a client
/// sends first.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// Reads from `stream` until the server closes it (or 10 s pass: a panic);
/// how long that took.
async fn closed_after(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Duration {
    use tokio::io::AsyncReadExt;
    let started = Instant::now();
    let mut buffer = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("the connection stayed open"),
        }
    }
}

fn settings(idle: u64, handshake: u64, keepalive: u64) -> ConnectionSettings {
    let mut settings = ConnectionSettings::default();
    settings.max_connections = 100;
    settings.handshake_timeout = Duration::from_millis(handshake);
    settings.idle_timeout = Duration::from_millis(idle);
    settings.keepalive_interval = Duration::from_millis(keepalive);
    settings.keepalive_timeout = Duration::from_millis(keepalive);
    settings
}

#[tokio::test]
async fn silent_idle_and_vanished_connections_are_closed() {
    use tokio::io::AsyncWriteExt;
    // Nothing sent: closed after the handshake timeout.
    let gw = TestGateway::registry(CODE_REGISTRY).connections(settings(60_000, 300, 60_000)).start().await;
    let mut silent = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let took = closed_after(&mut silent).await;
    assert!(took >= Duration::from_millis(250), "{took:?}");

    // A preface, then nothing: open while it is young, closed once idle.
    let gw = TestGateway::registry(CODE_REGISTRY).connections(settings(600, 300, 60_000)).start().await;
    let mut idle = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    idle.write_all(PREFACE).await.unwrap();
    let took = closed_after(&mut idle).await;
    assert!(took >= Duration::from_millis(500), "closed before it was idle: {took:?}");
    // A peer that vanished is the kernel's to find (keepalive probes and
    // TCP_USER_TIMEOUT, checked on the socket in `server::tests`): loopback
    // always answers.
}

#[tokio::test]
async fn a_connection_with_a_call_in_flight_is_not_idle() {
    let dir = CatalogDir::new();
    dir.file("registry/slow.py", "import json, sys, time\njson.load(sys.stdin)\ntime.sleep(1.5)\nprint(json.dumps({'ok': True, 'result': 'done'}))\n");
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: slow\n    description: x\n    backend: {command: {argv: [python3, slow.py]}}\n",
    );
    let mut gw = TestGateway::dir(&dir).connections(settings(400, 5_000, 60_000)).start().await;
    let response = execute(&mut gw.client, "slow", "{}").await;
    assert!(response.ok, "{response:?}");
    assert_eq!(response.result_json, "\"done\"");
}

#[tokio::test]
async fn connections_past_the_cap_wait_until_one_closes() {
    use tokio::io::AsyncWriteExt;
    let mut capped = settings(60_000, 60_000, 60_000);
    capped.max_connections = 2;
    let gw = TestGateway::registry(CODE_REGISTRY).connections(capped).start().await;
    // The test client holds one connection; one more fills the cap.
    let mut second = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    second.write_all(PREFACE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = toolgate::proto::v1::tool_gateway_service_client::ToolGatewayServiceClient::new(gw.channel().await);
    let call = tokio::spawn(async move { execute(&mut third, "echo", "{}").await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!call.is_finished(), "a third connection was served past the cap of 2");
    drop(second);
    let response = tokio::time::timeout(Duration::from_secs(10), call).await.expect("served once one closed").unwrap();
    assert!(response.ok);
}

/// CPU seconds (user + system) the process `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

#[test]
fn running_out_of_descriptors_does_not_spin_and_the_gateway_recovers() {
    use std::io::{BufRead, Write};
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", "tools:\n  - name: t\n    description: x\n    backend: {builtin: echo}\n");
    let binary = env!("CARGO_BIN_EXE_toolgate");
    let mut command = std::process::Command::new("sh");
    command
        .current_dir(dir.dir.path())
        .args(["-c", &format!("ulimit -n 48 && exec {binary} serve --catalog registry --listen 127.0.0.1:0")])
        .env_remove("TOOLGATE_STRICT_TOOLS")
        .env("RUST_LOG", "info");
    let mut child = crate::common::Reaped::spawn(&mut command);
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("serve ended early").unwrap();
        if let Some(at) = line.find("toolgate listening on ") {
            break line[at + "toolgate listening on ".len()..].split(' ').next().unwrap().to_owned();
        }
    };
    let log = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<String>>());
    // Far more connections than descriptors.
    let mut held = Vec::new();
    for _ in 0..80 {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream.write_all(PREFACE).unwrap();
        held.push(stream);
    }
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_seconds(child.id());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds(child.id()) - before;
    assert!(used < 0.5, "the gateway used {used:.2} s of CPU in 2 s while out of descriptors");
    // Once they close, a new client is served.
    drop(held);
    let out = toolgate().args(["call", "t", "{}", "--addr", &format!("http://{addr}")]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    child.kill().unwrap();
    let _ = child.wait();
    let log = log.join().unwrap().join("\n");
    assert!(
        log.contains("connection limit reached") || log.contains("pausing the accept loop"),
        "the log says why connections wait: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_doors_share_one_connection_budget_and_tools_keep_their_descriptors() {
    use std::io::{BufRead, Write};
    let dir = CatalogDir::new();
    shell_tool(&dir.registry().join("t.sh"), r#"{"ok": true, "result": "ran"}"#);
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: t\n    description: x\n    backend: {command: {argv: [./t.sh]}}\n",
    );
    let binary = env!("CARGO_BIN_EXE_toolgate");
    let mut command = std::process::Command::new("sh");
    command
        .current_dir(dir.dir.path())
        .args([
            "-c",
            &format!(
                "ulimit -n 64 && exec {binary} serve --catalog registry --listen 127.0.0.1:0 --mcp-listen 127.0.0.1:0"
            ),
        ])
        .env_remove("TOOLGATE_STRICT_TOOLS")
        .env("RUST_LOG", "info");
    let mut child = crate::common::Reaped::spawn(&mut command);
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut mcp = None;
    let grpc = loop {
        let line = lines.next().expect("serve ended early").unwrap();
        if let Some(at) = line.find("MCP (streamable HTTP) on http://") {
            let url = &line[at + "MCP (streamable HTTP) on http://".len()..];
            mcp = Some(url.split('/').next().unwrap().to_owned());
        }
        if let Some(at) = line.find("toolgate listening on ") {
            break line[at + "toolgate listening on ".len()..].split(' ').next().unwrap().to_owned();
        }
    };
    let mcp = mcp.expect("the MCP listener is logged");
    let log = crate::common::LogLines::follow(lines);
    let mut client =
        toolgate::proto::v1::tool_gateway_service_client::ToolGatewayServiceClient::connect(format!("http://{grpc}"))
            .await
            .unwrap();
    // Anonymous connections to both doors, more than the descriptors allow.
    let mut held = Vec::new();
    for addr in [&grpc, &mcp] {
        for _ in 0..60 {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream.write_all(PREFACE).unwrap();
            held.push(stream);
        }
    }
    log.wait_for("connection limit reached", 1).await;
    // The budget is spent over both doors, and a command tool still starts.
    let response = execute(&mut client, "t", "{}").await;
    assert!(response.ok, "{response:?}");
    assert_eq!(response.result_json, "\"ran\"");
    assert_eq!(log.count("cannot accept a connection"), 0, "no door ran out of descriptors:\n{}", log.text());
    drop(held);
    child.kill().unwrap();
}

#[tokio::test]
async fn a_tools_words_reach_the_model_without_terminal_or_bidi_controls_and_redirects_send_no_referer() {
    let http = crate::common::backend::start().await;
    let registry = format!(
        "tools:\n  - name: ansi\n    description: x\n    backend: {{http: {{url: \"{}\"}}}}\n  \
         - name: moved\n    description: x\n    backend: {{http: {{url: \"{}\", follow_redirects: true}}}}\n",
        http.url("/ansi"),
        http.url("/redirect")
    );
    let mut gw = TestGateway::registry(&registry).start().await;
    let response = execute(&mut gw.client, "ansi", "{}").await;
    assert_eq!(kind(&response), ErrorKind::NotFound);
    assert_eq!(error(&response).message, "no such order 42 in this shop");
    let response = execute(&mut gw.client, "moved", r#"{"a": 1}"#).await;
    assert!(response.ok, "{response:?}");
    assert_eq!(http.seen.last_body().as_deref(), Some(r#"{"a": 1}"#), "the redirect reached /echo");
    assert_eq!(http.seen.last_header("referer"), None);
}

#[test]
fn a_second_signal_ends_the_drain_at_once() {
    let dir = CatalogDir::new();
    dir.file("registry/slow.py", "import json, sys, time\njson.load(sys.stdin)\ntime.sleep(30)\n");
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: slow\n    description: x\n    timeout: 60s\n    backend: {command: {argv: [python3, slow.py]}}\n",
    );
    let (mut child, _lines, addr) = crate::common::serve_args(dir.dir.path(), &["--drain-timeout", "60s"]);
    let mut call = toolgate()
        .args(["call", "slow", "{}", "--addr", &format!("http://{addr}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "the first signal drains: the call is in flight");
    let started = Instant::now();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "a second signal did not end the drain");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success() || status.code().is_some(), "{status:?}");
    let _ = call.kill();
    let _ = call.wait();
}

/// Whether the process `pid` still runs (a zombie counts as ended).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()), Some("Z")),
        Err(_) => false,
    }
}

/// Waits for `pid` to end (bounded at 30 s: a leak fails, never hangs).
fn ends(pid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_command_tool_started_outlives_its_call() {
    let dir = CatalogDir::new();
    // Starts a process in a session of its own (it leaves the process group)
    // holding the tool's stdout, records its pid, answers, and exits.
    let escape = "import json, subprocess, sys, time\njson.load(sys.stdin)\n\
                  p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n\
                  open(sys.argv[1], 'w').write(str(p.pid))\n\
                  print(json.dumps({'ok': True, 'result': 'answered'}))\nsys.stdout.flush()\n\
                  time.sleep(float(sys.argv[2]))\n";
    dir.file("registry/escape.py", escape);
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: escape\n    description: x\n    backend: {command: {argv: [python3, escape.py, quick.pid, '0']}}\n  \
         - name: escape_and_hang\n    description: x\n    timeout: 1s\n    \
         backend: {command: {argv: [python3, escape.py, hang.pid, '300']}}\n",
    );
    let mut gw = TestGateway::dir(&dir).start().await;
    let response = execute(&mut gw.client, "escape", "{}").await;
    // The call ended when the tool exited, not when the process holding its
    // stdout would have (300 s): waiting for that, it would have timed out.
    assert!(response.ok, "{response:?}");
    assert_eq!(response.result_json, "\"answered\"");
    let pid: i32 = std::fs::read_to_string(dir.registry().join("quick.pid")).unwrap().parse().unwrap();
    assert!(ends(pid), "the setsid child {pid} outlived the call");

    let response = execute(&mut gw.client, "escape_and_hang", "{}").await;
    assert_eq!(kind(&response), ErrorKind::Timeout);
    // The tool and whatever it started by then (on a loaded machine, maybe
    // nothing yet) end: nothing runs in its folder any more.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !crate::common::running_in(&dir.registry()).is_empty() {
        assert!(Instant::now() < deadline, "the tool or its setsid child outlived the timed-out call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn the_binary_runs_command_tools_under_its_supervisor() {
    let dir = CatalogDir::new();
    let escape = "import json, subprocess, sys\njson.load(sys.stdin)\n\
                  p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n\
                  open('escaped.pid', 'w').write(str(p.pid))\nprint(json.dumps({'ok': True, 'result': 1}))\n";
    dir.file("registry/escape.py", escape);
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: escape\n    description: x\n    backend: {command: {argv: [python3, escape.py]}}\n",
    );
    let (mut child, _lines, listening) = crate::common::serve_registry(dir.dir.path(), &[]);
    let addr = format!("http://{}", listening.split(' ').next().unwrap());
    let out = toolgate().args(["call", "escape", "{}", "--addr", &addr]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pid: i32 = std::fs::read_to_string(dir.registry().join("escaped.pid")).unwrap().parse().unwrap();
    assert!(ends(pid), "the setsid child {pid} outlived the call");
    child.kill().unwrap();
}

/// A registry whose `slow` tool writes its pid to `slow.pid`, sleeps
/// `seconds`, then answers.
fn slow_tool(dir: &CatalogDir, seconds: u32) {
    dir.file(
        "registry/slow.py",
        &format!(
            "import json, os, sys, time\njson.load(sys.stdin)\nopen('slow.pid', 'w').write(str(os.getpid()))\n\
             time.sleep({seconds})\nprint(json.dumps({{'ok': True, 'result': 'slept'}}))\n"
        ),
    );
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: slow\n    description: x\n    timeout: 60s\n    backend: {command: {argv: [python3, slow.py]}}\n",
    );
}

/// The pids `pgrep` lists for these arguments.
fn pgrep(args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new("pgrep").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_owned).collect()
}

#[test]
fn a_signal_meant_for_the_gateway_never_ends_a_call() {
    let dir = CatalogDir::new();
    slow_tool(&dir, 2);
    let (mut child, _lines, addr) = crate::common::serve_args(dir.dir.path(), &[]);
    let call = toolgate()
        .args(["call", "slow", "{}", "--addr", &format!("http://{addr}")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid_file = dir.registry().join("slow.pid");
    let until = Instant::now() + Duration::from_secs(10);
    while !pid_file.exists() {
        assert!(Instant::now() < until, "the tool never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The gateway alone goes by its name; its calls' supervisors by another.
    let gateway = child.id().to_string();
    let supervisors = pgrep(&["-x", "toolgate-call"]);
    assert!(!supervisors.is_empty(), "a supervisor runs the call");
    assert!(pgrep(&["-x", "toolgate"]).contains(&gateway));
    assert!(!pgrep(&["-x", "toolgate"]).iter().any(|p| supervisors.contains(p)));
    // The docs' recipe at its bluntest: SIGHUP to everything whose name
    // holds "toolgate", supervisors included; then the other signals that end
    // a process by default.
    for signal in ["-HUP", "-INT", "-QUIT", "-USR1", "-USR2", "-ALRM"] {
        for pid in &supervisors {
            let _ = std::process::Command::new("kill").args([signal, pid]).status();
        }
    }
    let _ = std::process::Command::new("kill").args(["-HUP", &gateway]).status();
    let out = call.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the call survived: {}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("slept"), "{}", stdout(&out));
    child.kill().unwrap();
}

#[test]
fn a_gateway_killed_outright_takes_its_calls_along() {
    let dir = CatalogDir::new();
    slow_tool(&dir, 300);
    let (mut child, _lines, addr) = crate::common::serve_args(dir.dir.path(), &[]);
    let mut call = toolgate()
        .args(["call", "slow", "{}", "--addr", &format!("http://{addr}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = dir.registry().join("slow.pid");
    let until = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&pid_file).map_or(true, |p| p.is_empty()) {
        assert!(Instant::now() < until, "the tool never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let tool: i32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    assert!(ends(tool), "the tool {tool} outlived a SIGKILLed gateway");
    let _ = call.kill();
    let _ = call.wait();
}

#[tokio::test]
async fn the_handshake_deadline_holds_until_the_whole_preface_and_settings() {
    use tokio::io::AsyncWriteExt;
    // Plaintext: one byte, or the magic without a SETTINGS frame, is no preface.
    let gw = TestGateway::registry(CODE_REGISTRY).connections(settings(60_000, 300, 60_000)).start().await;
    for sent in [&b"P"[..], &PREFACE[..24], &PREFACE[..PREFACE.len() - 1]] {
        let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        stream.write_all(sent).await.unwrap();
        let took = closed_after(&mut stream).await;
        assert!(took < Duration::from_secs(5), "{} bytes held a connection {took:?}", sent.len());
    }
    // The whole preface: open until idle.
    let gw = TestGateway::registry(CODE_REGISTRY).connections(settings(1_500, 300, 60_000)).start().await;
    let mut prefaced = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    prefaced.write_all(PREFACE).await.unwrap();
    let took = closed_after(&mut prefaced).await;
    assert!(took >= Duration::from_millis(1_300), "closed before it was idle: {took:?}");
}

#[tokio::test]
async fn under_tls_the_preface_deadline_starts_after_the_handshake() {
    use tokio::io::AsyncWriteExt;
    let ca = crate::common::pki::Ca::new("preface test CA");
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", CODE_REGISTRY);
    let server = ca.issue("toolgate", &["localhost"]);
    let cert = dir.file("certs/server.pem", &server.cert);
    let key = dir.file("certs/server.key", &server.key);
    let tls = format!("tls: {{cert: \"{}\", key: \"{}\"}}", cert.display(), key.display());
    let connections = |idle| settings(idle, 400, 60_000);
    let connect = |addr: std::net::SocketAddr| {
        let ca = ca.pem();
        async move {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut roots = rustls::RootCertStore::empty();
            let der = rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).unwrap();
            roots.add(der).unwrap();
            let mut config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec()];
            let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            connector.connect(name, tcp).await.expect("the TLS handshake completes")
        }
    };
    use rustls::pki_types::pem::PemObject;
    // A finished handshake and nothing more (or one byte of plaintext): closed.
    let gw = TestGateway::dir(&dir).config(&tls).connections(connections(60_000)).start().await;
    for sent in [&b""[..], &b"P"[..]] {
        let mut stream = connect(gw.addr).await;
        stream.write_all(sent).await.unwrap();
        stream.flush().await.unwrap();
        let took = closed_after(&mut stream).await;
        assert!(took < Duration::from_secs(5), "{} bytes over TLS held a connection {took:?}", sent.len());
    }
    // The whole preface over TLS: open until idle.
    let gw = TestGateway::dir(&dir).config(&tls).connections(connections(1_500)).start().await;
    let mut stream = connect(gw.addr).await;
    stream.write_all(PREFACE).await.unwrap();
    stream.flush().await.unwrap();
    let took = closed_after(&mut stream).await;
    assert!(took >= Duration::from_millis(1_300), "closed before it was idle: {took:?}");
}

#[test]
fn silent_connections_to_the_probe_port_take_nothing_from_the_gateway() {
    use std::io::BufRead;
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", "tools:\n  - name: t\n    description: x\n    backend: {builtin: echo}\n");
    dir.file("toolgate.yaml", "health_listen: 127.0.0.1:0\n");
    let binary = env!("CARGO_BIN_EXE_toolgate");
    let mut command = std::process::Command::new("sh");
    command.current_dir(dir.dir.path()).env_remove("TOOLGATE_STRICT_TOOLS").env("RUST_LOG", "info").args([
        "-c",
        &format!("ulimit -n 48 && exec {binary} serve --config toolgate.yaml --catalog registry --listen 127.0.0.1:0"),
    ]);
    let mut child = crate::common::Reaped::spawn(&mut command);
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut health = None;
    let addr = loop {
        let line = lines.next().expect("serve ended early").unwrap();
        if let Some(at) = line.find("plaintext) on ") {
            health = Some(line[at + "plaintext) on ".len()..].trim().to_owned());
        }
        if let Some(at) = line.find("toolgate listening on ") {
            break line[at + "toolgate listening on ".len()..].split(' ').next().unwrap().to_owned();
        }
    };
    let health = health.expect("the health listener is logged");
    let _log = std::thread::spawn(move || lines.map_while(Result::ok).count());
    // More silent connections to the probe port than the process has
    // descriptors: each says nothing.
    let silent: Vec<std::net::TcpStream> = (0..50).map(|_| std::net::TcpStream::connect(&health).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    // The gateway's own port still serves at once.
    let mut call = toolgate()
        .args(["call", "t", "{}", "--addr", &format!("http://{addr}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = call.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < until, "the gateway's port did not answer while its probe port was flooded");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    // And the probe is answered once the silent ones are closed (2 s each,
    // 16 at a time), though they are still open on the client's side.
    let out = toolgate().args(["health", "--addr", &format!("http://{health}"), "--timeout", "20s"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    drop(silent);
    child.kill().unwrap();
}

#[tokio::test]
async fn keys_that_a_decoder_would_read_as_a_parameter_never_reach_the_tool() {
    let http = crate::common::backend::start().await;
    let registry = format!(
        "tools:\n  - name: lookup_sku\n    description: x\n    \
         parameters: {{type: object, properties: {{sku: {{type: string, pattern: \"^SKU-[0-9]+$\"}}}}, required: [sku]}}\n    \
         backend: {{http: {{url: \"{}\"}}}}\n  \
         - name: orders\n    description: x\n    \
         parameters: {{type: object, properties: {{q: {{type: string}}, customer_id: {{type: string}}}}}}\n    \
         bind: {{customer_id: principal}}\n    backend: {{http: {{url: \"{}\"}}}}\n",
        http.url("/echo"),
        http.url("/echo")
    );
    let principal =
        format!("principals: [{{name: shop, api_key_sha256: {}, tools: [\"*\"]}}]", toolgate::identity::hash_key("k"));
    let gw = TestGateway::registry(&registry).config(&principal).start().await;
    let mut client = gw.client.clone();
    let call = |tool: &str, arguments: &str, strict: Option<bool>| {
        let mut request = tonic::Request::new(ExecuteRequest {
            tool: tool.into(),
            arguments_json: arguments.into(),
            strict,
            ..Default::default()
        });
        request.metadata_mut().insert("authorization", "Bearer k".parse().unwrap());
        request
    };
    for (arguments, strict) in [
        ("{\"sku\": \"SKU-1\", \"\u{17f}ku\": \"../../etc\"}", None),
        ("{\"\u{17f}ku\": \"../../etc\"}", None),
        ("{\"sku\": \"SKU-1\", \"S\u{212a}U\": \"../../etc\"}", None),
        ("{\"SKU\": \"../../etc\"}", Some(true)),
        ("{\"sku\": \"SKU-1\", \"Sku\": \"../../etc\"}", Some(true)),
    ] {
        let response = client.execute(call("lookup_sku", arguments, strict)).await.unwrap().into_inner();
        assert_eq!(kind(&response), ErrorKind::InvalidArguments, "{arguments}: {response:?}");
        assert!(error(&response).message.contains("is another spelling of 'sku'"), "{}", error(&response).message);
    }
    // A look-alike of the parameter filled from who calls.
    for key in ["Customer_ID", "customerId", "customer-id"] {
        let arguments = format!("{{\"q\": \"x\", \"{key}\": \"mallory\"}}");
        let response = client.execute(call("orders", &arguments, None)).await.unwrap().into_inner();
        assert_eq!(kind(&response), ErrorKind::InvalidArguments, "{key}: {response:?}");
    }
    assert_eq!(http.seen.calls(), 0, "nothing reached the tool");
    // Plain case drift is still repaired, and validated under its own name.
    let response = client.execute(call("lookup_sku", r#"{"SKU": "SKU-2"}"#, None)).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    assert_eq!(http.seen.last_body().as_deref(), Some(r#"{"sku":"SKU-2"}"#));
    let response = client.execute(call("orders", r#"{"q": "x"}"#, None)).await.unwrap().into_inner();
    assert!(response.ok, "{response:?}");
    assert_eq!(http.seen.last_body().as_deref(), Some(r#"{"q":"x","customer_id":"shop"}"#));
}
