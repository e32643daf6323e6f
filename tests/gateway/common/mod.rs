//! Test support: catalogues written to temporary folders, a gateway served
//! on 127.0.0.1:0, and the `toolgate` binary.

pub mod backend;
pub mod jwt;
pub mod mcp;
pub mod model_server;
pub mod otlp;
pub mod pki;
pub mod proxy;
pub mod redis;
pub mod telemetry;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{Arc, Mutex},
    time::Duration,
    time::Instant,
};

use tempfile::TempDir;
use tokio::{sync::oneshot, task::JoinHandle};
use tonic::transport::Channel;
use toolgate::{
    app::{App, Host, Listeners, ServeError, Serving, StartError},
    catalog::{self, LoadError, LoadOptions, Loaded, Problem},
    config::{FileConfig, Flags, Settings},
    env::Env,
    proto::v1::{
        tool_gateway_service_client::ToolGatewayServiceClient, ErrorKind, ExecuteRequest, ExecuteResponse, ToolError,
    },
    server::{ConnectionSettings, Stop},
    telemetry::Observer,
};

pub type Client = ToolGatewayServiceClient<Channel>;

/// A folder of catalogue files: `registry/*.yaml` and `packs/*.yaml`.
pub struct CatalogDir {
    pub dir: TempDir,
}

impl CatalogDir {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("registry")).unwrap();
        std::fs::create_dir(dir.path().join("packs")).unwrap();
        Self { dir }
    }

    /// Writes `registry/<name>` (or any relative path) and returns its path.
    pub fn file(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn registry(&self) -> PathBuf {
        self.dir.path().join("registry")
    }

    pub fn packs(&self) -> PathBuf {
        self.dir.path().join("packs")
    }

    pub fn options(&self) -> LoadOptions {
        LoadOptions { registry: vec![self.registry()], packs_dir: self.packs(), packs: vec![], strict: false }
    }

    /// `--catalog registry --packs-dir packs`, as `serve` takes them.
    pub fn flags(&self) -> Flags {
        Flags { catalog: vec![self.registry()], packs_dir: Some(self.packs()), ..Flags::default() }
    }

    pub fn load(&self, options: &LoadOptions) -> Result<Loaded, LoadError> {
        catalog::load(options, &test_env(&[]))
    }
}

/// A gateway started as `serve` starts it ([`App::start`]) and served on
/// 127.0.0.1:0 until dropped.
pub struct TestGateway {
    pub addr: SocketAddr,
    /// The MCP door's URL (`http://127.0.0.1:PORT/mcp`), served in process.
    pub mcp_url: String,
    pub client: Client,
    /// The running gateway (for reloads).
    pub app: App,
    /// The catalogue's warnings at start.
    pub warnings: Vec<Problem>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
    /// The folder of a catalogue written for this gateway.
    _dir: Option<CatalogDir>,
}

/// Where a test gateway's catalogue comes from.
enum Source<'a> {
    /// The text of one registry file.
    Registry(String),
    /// A folder of catalogue files.
    Dir(&'a CatalogDir),
    /// Catalogue flags as `serve` takes them.
    Flags(Flags),
}

/// How to start a [`TestGateway`]: a catalogue source, then (optionally) the
/// configuration file, the environment for `${VAR}`, what records telemetry
/// and what each connection is allowed.
#[must_use = "a builder does nothing until started"]
pub struct GatewayBuilder<'a> {
    source: Source<'a>,
    env: Env,
    /// The configuration file's YAML, one key per entry.
    config: Vec<String>,
    observer: Observer,
    connections: ConnectionSettings,
}

impl<'a> GatewayBuilder<'a> {
    fn new(source: Source<'a>) -> Self {
        let (config, observer, connections) = (Vec::new(), Observer::disabled(), ConnectionSettings::default());
        Self { source, env: test_env(&[]), config, observer, connections }
    }

    /// What the server allows each connection (caps, timeouts, keepalive).
    pub fn connections(mut self, connections: ConnectionSettings) -> Self {
        self.connections = connections;
        self
    }

    /// The environment `${VAR}` reads from and children inherit (default:
    /// [`test_env`] with nothing added).
    pub fn env(mut self, env: Env) -> Self {
        self.env = env;
        self
    }

    /// `policy: {strict: …}` in the configuration file.
    pub fn strict(self, strict: bool) -> Self {
        self.config(&format!("policy: {{strict: {strict}}}"))
    }

    /// A top-level key of the configuration file, as YAML
    /// (`limits: {inventory_cap: 3}`).
    pub fn config(mut self, yaml: &str) -> Self {
        self.config.push(yaml.to_owned());
        self
    }

    /// What records the gateway's spans and metrics.
    pub fn observer(mut self, observer: Observer) -> Self {
        self.observer = observer;
        self
    }

    /// Starts the gateway as `serve` would with these flags and this
    /// configuration file; its problems, if it cannot start.
    pub async fn try_start(self) -> Result<TestGateway, StartError> {
        let (flags, dir) = match self.source {
            Source::Registry(text) => {
                let dir = CatalogDir::new();
                dir.file("registry/tools.yaml", &text);
                (dir.flags(), Some(dir))
            }
            Source::Dir(dir) => (dir.flags(), None),
            Source::Flags(flags) => (flags, None),
        };
        let file = match self.config.is_empty() {
            true => FileConfig::default(),
            false => {
                let config = tempfile::NamedTempFile::new().unwrap();
                std::fs::write(config.path(), self.config.join("\n")).unwrap();
                FileConfig::read(config.path()).unwrap_or_else(|e| panic!("configuration: {e}"))
            }
        };
        let settings = Settings::build(flags, file, &self.env).unwrap_or_else(|e| panic!("settings: {e}"));
        let supervisor = Some(std::path::PathBuf::from(env!("CARGO_BIN_EXE_toolgate")));
        let host = Host { env: self.env, observer: self.observer, supervisor };
        let (app, warnings) = App::start(&settings, host).await?;
        let serving = Serving::new(&settings, self.connections).expect("TLS");
        // Both doors on a free port (the settings' own addresses are the
        // binary's); the probe port where the settings put it.
        let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listeners = Listeners::bind_at(&settings, local, &[("mcp", local)]).await.expect("the listeners");
        let mut gateway = TestGateway::serve(app, serving, listeners).await;
        gateway.warnings = warnings;
        gateway._dir = dir;
        Ok(gateway)
    }

    /// [`GatewayBuilder::try_start`], panicking with every problem if the
    /// gateway cannot start.
    pub async fn start(self) -> TestGateway {
        match self.try_start().await {
            Ok(gateway) => gateway,
            Err(StartError::Catalogue(err)) => panic!("catalogue: {:#?}", err.problems),
            Err(err) => panic!("start: {err}"),
        }
    }
}

impl TestGateway {
    /// A gateway on one registry file of this text.
    pub fn registry(text: &str) -> GatewayBuilder<'static> {
        GatewayBuilder::new(Source::Registry(text.to_owned()))
    }

    /// A gateway on the catalogue files of `dir`.
    pub fn dir(dir: &CatalogDir) -> GatewayBuilder<'_> {
        GatewayBuilder::new(Source::Dir(dir))
    }

    /// A gateway on the catalogue these flags name.
    pub fn flags(flags: Flags) -> GatewayBuilder<'static> {
        GatewayBuilder::new(Source::Flags(flags))
    }

    /// Serves `app` as `serve` does ([`App::serve`]: every door), until
    /// shut down.
    async fn serve(app: App, serving: Serving, listeners: Listeners) -> Self {
        let addr = listeners.grpc_address().unwrap().expect("a gRPC listener");
        let mcp = listeners.address("mcp").unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async {
            let _ = stopped.await;
        };
        let stop_when = Stop { shutdown, drain: Duration::from_secs(5), now: std::future::pending() };
        let served = app.clone();
        let task = tokio::spawn(async move { served.serve(listeners, serving, None, stop_when).await });
        let client = ToolGatewayServiceClient::connect(format!("http://{addr}")).await.unwrap();
        let mcp_url = format!("http://{mcp}/mcp");
        Self { addr, mcp_url, client, app, warnings: Vec::new(), stop: Some(stop), task: Some(task), _dir: None }
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr)).unwrap().connect().await.unwrap()
    }

    /// The catalogue's warnings at start, as text.
    pub fn warning_text(&self) -> String {
        self.warnings.iter().map(|w| format!("{w}\n")).collect()
    }

    /// Triggers a graceful shutdown, waits for the server to end, and ends
    /// the gateway's MCP servers.
    pub async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
        self.app.shutdown().await;
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// An environment of the variables children inherit (`PATH`, `HOME`, …)
/// as the test process has them, and `extra`: what a gateway started here
/// would read, without the rest of the test machine's variables.
pub fn test_env(extra: &[(&str, &str)]) -> Env {
    let passed = toolgate::process::PASSED_ENV.iter().filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)));
    Env::from_pairs(passed.chain(extra.iter().map(|(k, v)| (k.to_string(), v.to_string()))))
}

/// The `toolgate` binary.
pub fn toolgate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.env_remove("TOOLGATE_STRICT_TOOLS").env_remove("RUST_LOG").env_remove("TOOLGATE_LOG");
    cmd
}

/// The lines a gateway logs, collected as they come.
#[derive(Clone)]
pub struct LogLines(Arc<Mutex<Vec<String>>>);

impl LogLines {
    pub fn follow(stderr: Stderr) -> Self {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in stderr.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self(lines)
    }

    pub fn count(&self, needle: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|l| l.contains(needle)).count()
    }

    pub fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }

    /// Waits until `needle` has been logged `times` times.
    pub async fn wait_for(&self, needle: &str, times: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.count(needle) < times {
            assert!(Instant::now() < deadline, "'{needle}' not logged {times} times:\n{}", self.text());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The stderr of a child, line by line.
pub type Stderr = std::io::Lines<std::io::BufReader<std::process::ChildStderr>>;

/// `toolgate serve --catalog registry --listen 127.0.0.1:0` in `dir`, with
/// `env`; once it listens, its stderr and what its listening line says after
/// "toolgate listening on " (the address and the tool count).
pub fn serve_registry(dir: &Path, env: &[(&str, &str)]) -> (Reaped, Stderr, String) {
    serve_in(dir, &[], env)
}

/// `toolgate serve --config toolgate.yaml --catalog registry --listen
/// 127.0.0.1:0` in `dir`, with `args`; its stderr and its address, once it
/// listens (a start that fails panics with what it logged).
pub fn serve_config(dir: &Path, args: &[&str]) -> (Reaped, Stderr, String) {
    let mut all = vec!["--config", "toolgate.yaml"];
    all.extend_from_slice(args);
    serve_args(dir, &all)
}

/// `toolgate serve --catalog registry --listen 127.0.0.1:0` in `dir` with
/// more `args`; its stderr and its address, once it listens.
pub fn serve_args(dir: &Path, args: &[&str]) -> (Reaped, Stderr, String) {
    let (child, lines, listening) = serve_in(dir, args, &[]);
    let addr = listening.split(' ').next().unwrap().to_owned();
    (child, lines, addr)
}

fn serve_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Reaped, Stderr, String) {
    let mut command = toolgate();
    command
        .current_dir(dir)
        .args(["serve", "--catalog", "registry", "--listen", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied());
    listening(&mut command)
}

/// Starts `command` (a `toolgate serve`); once it listens, its stderr and
/// what its listening line says after "toolgate listening on " (the address
/// and the tool count). A start that fails panics with what it logged.
pub fn listening(command: &mut Command) -> (Reaped, Stderr, String) {
    let (child, lines, listening, _) = listening_after(command);
    (child, lines, listening)
}

/// [`listening`], and the lines logged before.
pub fn listening_after(command: &mut Command) -> (Reaped, Stderr, String, Vec<String>) {
    use std::io::BufRead;
    let mut child = Reaped::spawn(command);
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        let Some(Ok(line)) = lines.next() else { panic!("serve ended early: {}", seen.join("\n")) };
        if let Some(at) = line.find("toolgate listening on ") {
            let listening = line[at + "toolgate listening on ".len()..].to_owned();
            return (child, lines, listening, seen);
        }
        seen.push(line);
    }
}

/// The text of `path` once a process has written it (polled every 20 ms,
/// for at most 60 s: the event, not a time, is what the test waits for).
pub fn wait_for_file(path: &Path) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.is_empty() {
                return text;
            }
        }
        assert!(std::time::Instant::now() < deadline, "{} was never written", path.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What a line of `lines` says after `marker` (an address a door logs as
/// it starts); panics with the lines when none does.
pub fn logged_after(lines: &[String], marker: &str) -> String {
    let found = lines.iter().find_map(|line| Some(line[line.find(marker)? + marker.len()..].trim().to_owned()));
    found.unwrap_or_else(|| panic!("no line says {marker:?}: {}", lines.join("\n")))
}

/// A field of `/proc/PID/status`, in KiB (`VmRSS`, `VmHWM`: the peak).
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The CPU time a process has used so far, in clock ticks (user and
/// system, from `/proc/PID/stat`).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's name, which ends at the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// `script` run by bash in `dir` (`-euo pipefail` when `strict`: the first
/// failing command ends it), with `env` and this build's `toolgate` first
/// on the PATH, as the docs' commands expect.
pub fn bash(script: &str, dir: &Path, strict: bool, env: &[(&str, &str)]) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_toolgate")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let flags: &[&str] = if strict { &["-euo", "pipefail", "-c"] } else { &["-uc"] };
    Command::new("bash")
        .args(flags)
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .envs(env.iter().copied())
        .output()
        .expect("bash runs")
}

/// Runs `toolgate` in `dir` with `args`.
pub fn run(dir: &Path, args: &[&str]) -> Output {
    toolgate().current_dir(dir).args(args).output().expect("run toolgate")
}

/// `command`'s output, run in a process group of its own that is killed
/// after `seconds` (an agent CLI that retries an unreachable server
/// forever, with whatever it started); stdout and stderr together.
pub fn said_within(command: &mut Command, seconds: u64) -> String {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    std::os::unix::process::CommandExt::process_group(command, 0);
    let child = command.spawn().unwrap_or_else(|err| panic!("{command:?}: {err} (run scripts/test)"));
    let pid = child.id();
    let (done, waited) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if waited.recv_timeout(std::time::Duration::from_secs(seconds)).is_err() {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
        }
    });
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The repository root (for the shipped catalogue).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A registry with the tools the Resolve tests use.
pub const SEARCH_REGISTRY: &str = r#"
tools:
  - name: web_search
    description: Search the web.
    aliases: [search_the_web]
    parameters:
      type: object
      properties:
        query: {type: string}
        limit: {type: integer, minimum: 1, maximum: 20}
      required: [query]
    backend: {builtin: echo}
  - name: web_fetch
    description: Fetch a web page.
    parameters: {type: object, properties: {url: {type: string}}, required: [url]}
    backend: {builtin: echo}
  - name: exa_search
    description: Search with Exa.
    parameters: {type: object, properties: {query: {type: string}}, required: [query]}
    backend: {builtin: echo}
  - name: track_parcel
    description: Track a parcel.
    backend: {builtin: echo}
  - name: reschedule_delivery
    description: Reschedule a delivery.
    aliases: [move_delivery]
    backend: {builtin: echo}
toolsets:
  courier: [track_parcel, reschedule_delivery]
  research: [web_search, exa_search, web_fetch]
"#;

/// Executes one call as a model emitted it.
pub async fn execute(client: &mut Client, tool: &str, arguments: &str) -> ExecuteResponse {
    let request = ExecuteRequest { tool: tool.into(), arguments_json: arguments.into(), ..Default::default() };
    client.execute(request).await.expect("Execute answers in-band").into_inner()
}

/// The error of a failed call, checked to be one.
pub fn error(response: &ExecuteResponse) -> &ToolError {
    assert!(!response.ok, "expected a failure: {response:?}");
    response.error.as_ref().expect("a ToolError")
}

pub fn kind(response: &ExecuteResponse) -> ErrorKind {
    ErrorKind::try_from(error(response).kind).unwrap()
}

/// A child process that is killed and reaped if the test ends early, so a
/// failing test leaves nothing running. Its stdout and stderr are piped.
pub struct Reaped(Option<std::process::Child>);

impl Reaped {
    pub fn spawn(command: &mut Command) -> Self {
        let child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        Self(Some(child))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// Waits for the process to exit on its own.
    pub fn wait(mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.take().expect("running").wait()
    }
}

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("running")
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.as_mut().expect("running")
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The processes running in `dir` (their working directory): a command
/// tool and what it started. A zombie (ended, not yet reaped) has none.
pub fn running_in(dir: &Path) -> Vec<u32> {
    let dir = dir.canonicalize().unwrap();
    let entries = std::fs::read_dir("/proc").unwrap().filter_map(Result::ok);
    let pids = entries.filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok());
    pids.filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir)).collect()
}
