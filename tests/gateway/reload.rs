//! Reload without restart: the real binary, files edited on disk (as an
//! editor and as a Kubernetes ConfigMap volume change them), real signals,
//! calls in flight across a swap, and every kind of bad reload rejected
//! with the old snapshot serving on. In process: MCP servers kept, added and
//! ended, and the reload metric.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use toolgate::{
    app::ReloadError,
    config::{FileConfig, Settings},
    proto::v1::{ErrorKind, ExecuteRequest, ListToolsRequest},
};

use crate::common::{
    execute, kind,
    mcp::{stdio_server, McpGateway},
    serve_args, serve_config,
    telemetry::Recorded,
    CatalogDir, Client, LogLines as Log, TestGateway,
};

fn tool(name: &str) -> String {
    format!("  - name: {name}\n    description: The {name} tool.\n    backend: {{builtin: echo}}\n")
}

fn registry(names: &[&str]) -> String {
    format!("tools:\n{}", names.iter().map(|n| tool(n)).collect::<String>())
}

/// Replaces `path` as an editor does: a new file renamed over the old one.
fn replace(path: &Path, text: &str) {
    let temporary = path.with_extension("swp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

async fn connect(addr: &str) -> Client {
    Client::connect(format!("http://{addr}")).await.unwrap()
}

/// The tool names and the catalogue version the gateway serves.
async fn listing(client: &mut Client) -> (Vec<String>, String) {
    let response = client.list_tools(ListToolsRequest::default()).await.unwrap().into_inner();
    (response.tools.into_iter().map(|t| t.name).collect(), response.catalog_version)
}

/// Waits until the gateway serves `name`.
async fn wait_for_tool(client: &mut Client, name: &str, log: &Log) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (names, version) = listing(client).await;
        if names.iter().any(|n| n == name) {
            return version;
        }
        assert!(Instant::now() < deadline, "'{name}' never served:\n{}", log.text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const RELOADED: &str = "catalogue and configuration reloaded";
const REJECTED: &str = "reload rejected";

#[tokio::test]
async fn an_edited_catalogue_is_swapped_in_and_a_bad_one_rejected_whole() {
    let dir = CatalogDir::new();
    let file = dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let (_child, stderr, addr) = serve_args(dir.dir.path(), &[]);
    let log = Log::follow(stderr);
    let mut client = connect(&addr).await;
    let (_, first) = listing(&mut client).await;

    replace(&file, &registry(&["alpha", "beta"]));
    let second = wait_for_tool(&mut client, "beta", &log).await;
    assert_ne!(first, second, "the version changes with the catalogue");
    log.wait_for(RELOADED, 1).await;
    assert!(log.text().contains(&format!("catalog_version=\"{second}\"")), "{}", log.text());

    // Each of these is rejected whole; the last good snapshot serves on.
    let bad = [
        "tools:\n  - name: [unclosed\n".to_owned(),
        format!("{}  - name: gamma\n    descripton: typo\n    backend: {{builtin: echo}}\n", registry(&["alpha"])),
        format!(
            "{}  - name: gamma\n    description: x\n    backend: {{http: {{url: \"${{RELOAD_TEST_UNSET}}\"}}}}\n",
            registry(&["alpha"])
        ),
        registry(&["alpha", "alpha"]),
    ];
    for (i, text) in bad.iter().enumerate() {
        replace(&file, text);
        log.wait_for(REJECTED, i + 1).await;
        let (names, version) = listing(&mut client).await;
        assert_eq!(version, second);
        assert!(names.contains(&"beta".to_owned()) && !names.contains(&"gamma".to_owned()), "{names:?}");
    }
    let text = log.text();
    for problem in ["invalid YAML", "unknown field 'descripton'", "RELOAD_TEST_UNSET", "duplicate"] {
        assert!(text.contains(problem), "every problem is logged ({problem}):\n{text}");
    }
    // A file deleted (an empty registry folder is a warning, as at start)
    // and created again is still watched.
    std::fs::remove_file(&file).unwrap();
    log.wait_for(RELOADED, 2).await;
    assert!(log.text().contains("the folder holds no *.yaml files"));
    std::fs::write(&file, registry(&["alpha", "delta"])).unwrap();
    wait_for_tool(&mut client, "delta", &log).await;
    assert!(execute(&mut client, "delta", "{}").await.ok);
}

/// A log or a note written next to the catalogue is not a reason to reload
/// (a log there made each reload's own lines trigger the next, forever).
#[tokio::test]
async fn files_beside_the_catalogue_that_it_does_not_read_do_not_reload_it() {
    let dir = CatalogDir::new();
    let file = dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let (_child, stderr, addr) = serve_args(dir.dir.path(), &[]);
    let log = Log::follow(stderr);
    let mut client = connect(&addr).await;
    let beside = file.with_file_name("toolgate.log");
    for i in 0..15 {
        std::fs::write(&beside, format!("line {i}\n")).unwrap();
        std::fs::write(file.with_file_name("notes.txt"), "n").unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Longer than the watcher's quiet time: a reload would have happened.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!log.text().contains("reloading"), "{}", log.text());
    replace(&file, &registry(&["alpha", "beta"]));
    wait_for_tool(&mut client, "beta", &log).await;
    log.wait_for(RELOADED, 1).await;
}

#[tokio::test]
async fn a_configmap_volume_swapping_its_data_symlink_is_followed() {
    // The layout the kubelet writes: files are symlinks through `..data`,
    // itself a symlink to a timestamped folder, swapped atomically.
    let dir = CatalogDir::new();
    let volume = dir.dir.path().join("catalog");
    std::fs::create_dir(&volume).unwrap();
    let write_version = |stamp: &str, text: &str| {
        let folder = volume.join(stamp);
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("registry.yaml"), text).unwrap();
    };
    write_version("..2026_12_01_10_00_00.1", &registry(&["alpha"]));
    std::os::unix::fs::symlink("..2026_12_01_10_00_00.1", volume.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/registry.yaml", volume.join("registry.yaml")).unwrap();
    let (_child, stderr, addr) = serve_args(dir.dir.path(), &["--catalog", "catalog"]);
    let log = Log::follow(stderr);
    let mut client = connect(&addr).await;
    assert_eq!(listing(&mut client).await.0.iter().filter(|n| *n == "alpha").count(), 1);

    write_version("..2026_12_01_10_05_00.2", &registry(&["alpha", "beta"]));
    std::os::unix::fs::symlink("..2026_12_01_10_05_00.2", volume.join("..data_tmp")).unwrap();
    std::fs::rename(volume.join("..data_tmp"), volume.join("..data")).unwrap();
    std::fs::remove_dir_all(volume.join("..2026_12_01_10_00_00.1")).unwrap();
    wait_for_tool(&mut client, "beta", &log).await;
}

#[tokio::test]
async fn sighup_reloads_and_calls_in_flight_finish_on_their_snapshot() {
    let dir = CatalogDir::new();
    let slow = "  - name: slow\n    description: Takes a second.\n    timeout: 10s\n    backend: {command: {argv: \
                [sh, -c, \"sleep 1; echo '{\\\"ok\\\": true, \\\"result\\\": \\\"done\\\"}'\"]}}\n";
    let file = dir.file("registry/tools.yaml", &format!("{}{slow}", registry(&["alpha"])));
    let (child, stderr, addr) = serve_args(dir.dir.path(), &[]);
    let log = Log::follow(stderr);
    let mut client = connect(&addr).await;

    let mut in_flight = client.clone();
    let call = tokio::spawn(async move { execute(&mut in_flight, "slow", "{}").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    replace(&file, &registry(&["alpha", "beta"]));
    wait_for_tool(&mut client, "beta", &log).await;
    let finished = call.await.unwrap();
    assert!(finished.ok, "the call in flight finished on its snapshot: {finished:?}");
    assert_eq!(finished.result_json, "\"done\"");
    assert_eq!(kind(&execute(&mut client, "slow", "{}").await), ErrorKind::UnknownTool);

    // SIGHUP alone reloads; a hundred in a second make a few reloads.
    let reloads = log.count(RELOADED);
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    log.wait_for("SIGHUP: reloading", 1).await;
    log.wait_for(RELOADED, reloads + 1).await;
    let before = log.count(RELOADED);
    for _ in 0..100 {
        assert!(std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let made = log.count(RELOADED) - before;
    println!("{made} reloads for 100 SIGHUPs in a second");
    assert!((1..=3).contains(&made), "{made} reloads for 100 SIGHUPs:\n{}", log.text());
    assert!(execute(&mut client, "beta", "{}").await.ok, "still serving");
}

#[tokio::test]
async fn principals_and_policy_reload_and_restart_settings_are_named() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let config = |key: &str, extra: &str| {
        format!(
            "principals:\n  - name: bot\n    api_key_sha256: {}\n    tools: ['*']\n{extra}",
            toolgate::identity::hash_key(key)
        )
    };
    let config_file = dir.file("toolgate.yaml", &config("old-key", ""));
    let (_child, stderr, addr) = serve_config(dir.dir.path(), &[]);
    let log = Log::follow(stderr);
    let mut client = connect(&addr).await;
    let call = |key: &'static str| {
        let mut request = tonic::Request::new(ExecuteRequest {
            tool: "Alpha".into(),
            arguments_json: "{}".into(),
            ..Default::default()
        });
        request.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
        request
    };
    assert!(client.execute(call("old-key")).await.unwrap().into_inner().ok);

    // The key is rotated and the policy made strict: the old key is refused,
    // the drifted name no longer repaired.
    replace(&config_file, &config("new-key", "policy: {strict: true}\n"));
    log.wait_for(RELOADED, 1).await;
    let refused = client.execute(call("old-key")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let strict = client.execute(call("new-key")).await.unwrap().into_inner();
    assert_eq!(kind(&strict), ErrorKind::UnknownTool);

    // What needs a restart is named, and the rest still reloads.
    replace(&config_file, &config("new-key", "health_listen: 127.0.0.1:0\npacks: []\n"));
    log.wait_for(RELOADED, 2).await;
    assert!(log.text().contains("the configuration changes health_listen, which take effect only after a restart"));
    assert!(client.execute(call("new-key")).await.unwrap().into_inner().ok, "strict is off again");

    // A pack that does not exist, or a broken configuration file: rejected.
    replace(&config_file, &config("other-key", "packs_dir: packs\npacks: [nope]\n"));
    log.wait_for(REJECTED, 1).await;
    replace(&config_file, "principals: [\n");
    log.wait_for(REJECTED, 2).await;
    assert!(client.execute(call("new-key")).await.unwrap().into_inner().ok, "the last good configuration serves");
    assert!(log.text().contains("pack 'nope'"), "{}", log.text());
}

fn pid_of(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

#[tokio::test]
async fn mcp_servers_are_kept_added_and_ended_by_a_reload() {
    let dir = CatalogDir::new();
    let pids = tempfile::tempdir().unwrap();
    let kept_pid = pids.path().join("kept.pid");
    let gone_pid = pids.path().join("gone.pid");
    let server = |name: &str, prefix: &str, pid: &Path| {
        let extra = format!("    prefix: {prefix}\n    include: [list_notes, nap]\n");
        stdio_server(name, "notes_server.py", &["--pid-file", &pid.display().to_string()], &extra)
    };
    let write = |servers: &[String]| dir.file("registry/tools.yaml", &format!("mcp_servers:\n{}", servers.concat()));
    write(&[server("kept", "kept_", &kept_pid), server("gone", "gone_", &gone_pid)]);
    let mut mcp = McpGateway::start(&dir, &[], false).await.unwrap();
    let app = mcp.app.clone();
    let (kept, gone) = (pid_of(&kept_pid).unwrap(), pid_of(&gone_pid).unwrap());

    // A call in flight on the server the reload removes finishes.
    let mut in_flight = mcp.client.clone();
    let call = tokio::spawn(async move { execute(&mut in_flight, "gone_nap", r#"{"seconds": 1}"#).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let added_pid = pids.path().join("added.pid");
    write(&[server("kept", "kept_", &kept_pid), server("added", "added_", &added_pid)]);
    let reloaded = app.reload(&settings(&dir, false)).await.expect("a valid reload");
    assert_eq!(reloaded.connected, ["added"]);
    assert_eq!(reloaded.ended, ["gone"]);
    let (names, _) = listing(&mut mcp.client).await;
    assert!(names.contains(&"added_list_notes".to_owned()) && !names.contains(&"gone_list_notes".to_owned()));
    assert!(call.await.unwrap().ok, "the call in flight on the removed server finished");
    assert_eq!(pid_of(&kept_pid), Some(kept), "the unchanged server kept its process");
    assert!(alive(kept));
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(gone) {
        assert!(Instant::now() < deadline, "the removed server's process ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(execute(&mut mcp.client, "kept_list_notes", "{}").await.ok);

    // Strict: a new server that does not answer rejects the reload; the
    // snapshot and the servers stay.
    let silent = "  silent:\n    command: [sleep, \"30\"]\n    startup_timeout: 1s\n".to_owned();
    write(&[server("kept", "kept_", &kept_pid), server("added", "added_", &added_pid), silent.clone()]);
    let Err(ReloadError::Catalogue(problems)) = app.reload(&settings(&dir, true)).await else {
        panic!("rejected under strict")
    };
    assert!(problems.iter().any(|p| p.to_string().contains("silent")), "{problems:?}");
    assert!(execute(&mut mcp.client, "added_list_notes", "{}").await.ok);
    // Non-strict: accepted with the server left out (retried later).
    let reloaded = app.reload(&settings(&dir, false)).await.expect("accepted when not strict");
    assert!(reloaded.warnings.iter().any(|p| p.to_string().contains("silent")), "{:?}", reloaded.warnings);
    mcp.shutdown().await;
}

/// A catalogue a reload replaced is freed once no call uses it: nothing the
/// gateway keeps (its connections, the live catalogue) holds on to it, so
/// a long-running gateway holds one catalogue, not one per reload.
#[tokio::test]
async fn a_reload_lets_the_catalogue_it_replaced_go() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let mut gw = TestGateway::dir(&dir).start().await;
    let first = std::sync::Arc::downgrade(&gw.app.catalog());
    assert!(execute(&mut gw.client, "alpha", "{}").await.error.is_none());
    dir.file("registry/tools.yaml", &registry(&["alpha", "beta"]));
    gw.app.reload(&settings(&dir, false)).await.expect("a valid reload");
    assert!(execute(&mut gw.client, "beta", "{}").await.error.is_none());
    assert!(first.upgrade().is_none(), "the replaced catalogue is still held");
    let second = std::sync::Arc::downgrade(&gw.app.catalog());
    dir.file("registry/tools.yaml", &registry(&["alpha"]));
    gw.app.reload(&settings(&dir, false)).await.expect("a valid reload");
    assert!(second.upgrade().is_none(), "the replaced catalogue is still held");
    gw.shutdown().await;
}

#[tokio::test]
async fn reloads_are_counted_by_result() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let (recorded, observer) = Recorded::start(false);
    let gw = TestGateway::dir(&dir).observer(observer).start().await;
    dir.file("registry/tools.yaml", &registry(&["alpha", "beta"]));
    gw.app.reload(&settings(&dir, false)).await.unwrap();
    dir.file("registry/tools.yaml", &registry(&["alpha", "alpha"]));
    gw.app.reload(&settings(&dir, false)).await.unwrap_err();
    assert_eq!(gw.app.catalog().tools().len(), 2 + toolgate::catalog::BuiltinTool::ALL.len());
    let points = recorded.points();
    let count = |result: &str| {
        points
            .iter()
            .filter(|p| {
                p.name == "toolgate.catalog.reloads" && p.attributes.get("result").map(String::as_str) == Some(result)
            })
            .map(|p| p.value)
            .sum::<f64>()
    };
    assert_eq!((count("ok"), count("rejected")), (1.0, 1.0), "{points:?}");
    gw.shutdown().await;
}

#[tokio::test]
async fn under_strict_a_reload_is_checked_against_the_settings_as_a_start_is() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let gw = TestGateway::dir(&dir).start().await;
    // A tool bound to the user, and no users.jwt to verify one: a warning
    // without strict, and under strict a rejection before anything is
    // swapped in (a strict start refuses the same files).
    let bound =
        "  - name: my_orders\n    description: The caller's orders.\n    parameters:\n      type: object\n      \
                 properties: {customer: {type: string}}\n      required: [customer]\n    bind: {customer: user}\n    \
                 backend: {builtin: echo}\n";
    dir.file("registry/tools.yaml", &format!("{}{bound}", registry(&["alpha"])));
    let Err(ReloadError::Catalogue(problems)) = gw.app.reload(&settings(&dir, true)).await else {
        panic!("rejected under strict")
    };
    assert!(problems.iter().any(|p| p.to_string().contains("no users.jwt is configured")), "{problems:?}");
    assert!(gw.app.catalog().lookup("my_orders").is_none(), "the running catalogue stays");
    let reloaded = gw.app.reload(&settings(&dir, false)).await.expect("accepted when not strict");
    assert!(reloaded.warnings.iter().any(|p| p.to_string().contains("no users.jwt")), "{:?}", reloaded.warnings);
    assert!(gw.app.catalog().lookup("my_orders").is_some());
    gw.shutdown().await;
}

/// The settings `serve --catalog registry --packs-dir packs` would read from
/// `dir`, strict or not.
fn settings(dir: &CatalogDir, strict: bool) -> Settings {
    let flags = toolgate::config::Flags { strict, ..dir.flags() };
    Settings::build(flags, FileConfig::default(), &crate::common::test_env(&[])).unwrap()
}

/// `principals:` with one principal whose key is `key`, granted every tool.
fn one_principal(key: &str) -> String {
    format!("principals:\n  - name: bot\n    api_key_sha256: {}\n    tools: ['*']\n", toolgate::identity::hash_key(key))
}

#[tokio::test]
async fn a_reload_without_principals_is_refused_off_loopback_and_named_on_it() {
    use tonic::transport::{Certificate, Channel, ClientTlsConfig};

    let ca = crate::common::pki::Ca::new("reload test CA");
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let server = ca.issue("toolgate", &["127.0.0.1", "localhost"]);
    dir.file("certs/server.pem", &server.cert);
    dir.file("certs/server.key", &server.key);
    let tls = "tls: {cert: certs/server.pem, key: certs/server.key}\n";
    let config_file = dir.file("toolgate.yaml", &format!("{}{tls}", one_principal("k")));

    // Off loopback, with principals and TLS, as `serve` allows.
    let mut command = crate::common::toolgate();
    command.current_dir(dir.dir.path()).args([
        "serve",
        "--config",
        "toolgate.yaml",
        "--catalog",
        "registry",
        "--listen",
        "0.0.0.0:0",
    ]);
    let mut child = crate::common::Reaped::spawn(&mut command);
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let port = loop {
        let line = lines.next().expect("serve ended early").unwrap();
        if let Some(at) = line.find("toolgate listening on 0.0.0.0:") {
            let rest = &line[at + "toolgate listening on 0.0.0.0:".len()..];
            break rest.split(' ').next().unwrap().to_owned();
        }
    };
    let log = Log::follow(lines);
    let tls_config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca.pem())).domain_name("localhost");
    let endpoint = Channel::from_shared(format!("https://127.0.0.1:{port}")).unwrap().tls_config(tls_config).unwrap();
    let mut client = Client::new(endpoint.connect().await.unwrap());
    let anonymous = || ExecuteRequest { tool: "alpha".into(), ..Default::default() };
    assert_eq!(client.execute(anonymous()).await.unwrap_err().code(), tonic::Code::Unauthenticated);

    // The principals section goes missing: rejected, and the key is still needed.
    replace(&config_file, tls);
    log.wait_for(REJECTED, 1).await;
    assert!(log.text().contains("refusing to listen on 0.0.0.0:"), "{}", log.text());
    assert_eq!(log.count(RELOADED), 0, "{}", log.text());
    assert_eq!(client.execute(anonymous()).await.unwrap_err().code(), tonic::Code::Unauthenticated);
    drop(child);

    // On loopback the same reload is taken, and said loudly.
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let config_file = dir.file("toolgate.yaml", &one_principal("k"));
    let (_child, stderr, addr) = serve_config(dir.dir.path(), &[]);
    let log = Log::follow(stderr);
    let mut client = connect(&addr).await;
    assert_eq!(client.execute(anonymous()).await.unwrap_err().code(), tonic::Code::Unauthenticated);
    replace(&config_file, "policy: {strict: false}\n");
    log.wait_for(RELOADED, 1).await;
    assert!(log.text().contains("WARN") && log.text().contains("the reload removes authentication"), "{}", log.text());
    assert!(client.execute(anonymous()).await.unwrap().into_inner().ok);
}

/// The reload guard covers every door of the list, the model door too:
/// with the gateway on loopback and the model door beyond it (TLS, a
/// principal), a reload that removes the principals is refused, and the
/// door still asks for a key.
#[tokio::test]
async fn a_reload_without_principals_is_refused_while_the_model_door_listens_off_loopback() {
    let ca = crate::common::pki::Ca::new("reload test CA");
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", &registry(&["alpha"]));
    let server = ca.issue("toolgate", &["127.0.0.1", "localhost"]);
    dir.file("certs/server.pem", &server.cert);
    dir.file("certs/server.key", &server.key);
    let rest = "tls: {cert: certs/server.pem, key: certs/server.key}\n\
                model_door: {upstreams: [{name: local, base_url: 'http://127.0.0.1:9/v1'}]}\n";
    let config_file = dir.file("toolgate.yaml", &format!("{}{rest}", one_principal("k")));
    let mut command = crate::common::toolgate();
    command.current_dir(dir.dir.path()).args(["serve", "--config", "toolgate.yaml", "--catalog", "registry"]);
    command.args(["--listen", "127.0.0.1:0", "--model-listen", "0.0.0.0:0"]);
    let mut child = crate::common::Reaped::spawn(&mut command);
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let port = loop {
        let line = lines.next().expect("serve ended early").unwrap();
        if let Some(at) = line.find("model door (OpenAI-compatible) on https://0.0.0.0:") {
            let rest = &line[at + "model door (OpenAI-compatible) on https://0.0.0.0:".len()..];
            break rest.split('/').next().unwrap().to_owned();
        }
    };
    let log = Log::follow(lines);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .build()
        .unwrap();
    let models = || client.get(format!("https://localhost:{port}/v1/models")).send();
    assert_eq!(models().await.unwrap().status(), 401);

    replace(&config_file, rest);
    log.wait_for(REJECTED, 1).await;
    assert!(log.text().contains("refusing to listen on 0.0.0.0:"), "{}", log.text());
    assert_eq!(log.count(RELOADED), 0, "{}", log.text());
    assert_eq!(models().await.unwrap().status(), 401, "the door still asks for a key");
}
