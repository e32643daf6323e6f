//! MCP servers for the tests: the Python reference SDK (`mcp`, installed into
//! `.venv` by `scripts/test`) running the servers in `tests/mcp/`, and a
//! gateway that federates them.

use std::{path::PathBuf, sync::OnceLock};

use toolgate::app::StartError;

use super::{test_env, CatalogDir, TestGateway};

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

/// YAML for a stdio server running `script` with `args`. Unless `extra`
/// sets it, the server has 60 s to start and list its tools (a Python
/// server on a loaded machine can take more than the default 10 s; a test
/// waits for the event, not for a time).
pub fn stdio_server(name: &str, script_name: &str, args: &[&str], extra: &str) -> String {
    let mut argv = vec![python().display().to_string(), script(script_name)];
    argv.extend(args.iter().map(|a| a.to_string()));
    let argv: Vec<String> = argv.iter().map(|a| format!("\"{a}\"")).collect();
    let startup = match extra.contains("startup_timeout:") {
        true => "",
        false => "    startup_timeout: 60s\n",
    };
    format!("  {name}:\n    command: [{}]\n{startup}{extra}", argv.join(", "))
}

/// A gateway serving the catalogue of `dir`, its MCP servers connected;
/// `env` adds to what `${VAR}` reads and children inherit.
pub struct McpGateway;

impl McpGateway {
    pub async fn start(dir: &CatalogDir, env: &[(&str, &str)], strict: bool) -> Result<TestGateway, StartError> {
        TestGateway::dir(dir).env(test_env(env)).strict(strict).try_start().await
    }
}

/// `tests/mcp/js/node_modules/.bin`: Node 22, the TypeScript SDK and the
/// MCP conformance suite (installed by `scripts/test`). The tests fail,
/// never skip, without them.
pub fn node_bin() -> PathBuf {
    let bin = super::repo().join("tests/mcp/js/node_modules/.bin");
    assert!(
        bin.join("node").exists() && bin.join("conformance").exists(),
        "the MCP client tests need tests/mcp/js/node_modules: run scripts/test, which runs npm ci there"
    );
    bin
}

/// A command run with [`node_bin`] first on `PATH` (the suite's scripts
/// start with `#!/usr/bin/env node`).
pub fn node_command(program: &str) -> std::process::Command {
    let bin = node_bin();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let mut command = std::process::Command::new(bin.join(program));
    command.env("PATH", std::env::join_paths(paths).expect("valid PATH"));
    command
}
