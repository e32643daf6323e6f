//! MCP servers for the tests: the Python reference SDK (`mcp`, installed into
//! `.venv` by `scripts/test`) running the servers in `tests/mcp/`, and a
//! gateway that federates them.

use std::{
    path::PathBuf,
    sync::{Arc, OnceLock},
};

use toolgate::{
    catalog::{self, Problem},
    config::Policy,
    env::Env,
    exec::ExecLimits,
    live::{LiveCatalog, Sources, StartError},
    process::Inherited,
    telemetry::Observer,
};

use super::{CatalogDir, TestGateway};

/// The Python that has the MCP SDK. The tests fail, never skip, without it.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let path = std::env::var_os("TOOLGATE_TEST_PYTHON")
                .map(PathBuf::from)
                .unwrap_or_else(|| super::repo().join(".venv/bin/python"));
            let works =
                std::process::Command::new(&path).args(["-c", "import mcp"]).output().is_ok_and(|o| o.status.success());
            assert!(
                works,
                "the MCP tests need the Python MCP SDK at {}: run scripts/test, which installs \
                 tests/mcp/requirements.txt into .venv",
                path.display()
            );
            path
        })
        .clone()
}

/// `tests/mcp/<script>`.
pub fn script(name: &str) -> String {
    super::repo().join("tests/mcp").join(name).display().to_string()
}

/// YAML for a stdio server running `script` with `args`.
pub fn stdio_server(name: &str, script_name: &str, args: &[&str], extra: &str) -> String {
    let mut argv = vec![python().display().to_string(), script(script_name)];
    argv.extend(args.iter().map(|a| a.to_string()));
    let argv: Vec<String> = argv.iter().map(|a| format!("\"{a}\"")).collect();
    format!("  {name}:\n    command: [{}]\n{extra}", argv.join(", "))
}

/// A gateway serving the catalogue of `dir`, its MCP servers connected.
pub struct McpGateway {
    pub gw: TestGateway,
    pub live: Arc<LiveCatalog>,
    pub warnings: Vec<Problem>,
}

impl McpGateway {
    pub async fn start(dir: &CatalogDir, env: &Env, policy: Policy) -> Result<Self, StartError> {
        let mut options = dir.options();
        options.strict = policy.strict;
        let files = catalog::read(&options, env);
        toolgate::tls::install_crypto_provider();
        let inherited = Inherited::from_env(&Env::from_process());
        let sources = Sources {
            files,
            limits: ExecLimits::default(),
            grants: Default::default(),
            policy,
            principals: Default::default(),
        };
        let (live, warnings) = LiveCatalog::start(sources, inherited, Default::default(), Observer::disabled()).await?;
        let gw = TestGateway::serve(live.current()).await;
        Ok(Self { gw, live, warnings })
    }

    /// Warnings as text, for assertions.
    pub fn warning_text(&self) -> String {
        self.warnings.iter().map(|w| format!("{w}\n")).collect()
    }

    pub async fn shutdown(self) {
        self.gw.shutdown().await;
        self.live.shutdown().await;
    }
}
