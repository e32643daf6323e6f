//! Catalogues for benchmarks: realistic snake_case tool names,
//! `<service>_<verb>_<noun>`, spread over the whole space by a fixed
//! permutation so that the first 100 are as varied as the first 10,000
//! (`benches/difflib_baseline.py` builds the same list), loaded as a real
//! YAML registry, or served by a gateway started as `serve` starts one.

use toolgate::{
    app::{App, Host},
    catalog::{self, Catalog, LoadOptions},
    config::{FileConfig, Flags, Settings},
    env::Env,
    telemetry::Observer,
};

const SERVICES: [&str; 20] = [
    "github",
    "slack",
    "jira",
    "stripe",
    "notion",
    "linear",
    "gdrive",
    "gmail",
    "salesforce",
    "zendesk",
    "hubspot",
    "shopify",
    "asana",
    "trello",
    "dropbox",
    "twilio",
    "sentry",
    "datadog",
    "pagerduty",
    "confluence",
];
const VERBS: [&str; 25] = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "archive",
    "export",
    "import",
    "sync",
    "approve",
    "cancel",
    "schedule",
    "assign",
    "close",
    "reopen",
    "merge",
    "share",
    "tag",
    "move",
    "copy",
    "restore",
    "publish",
    "summarize",
    "count",
];
const NOUNS: [&str; 40] = [
    "invoice",
    "customer",
    "order",
    "ticket",
    "issue",
    "pull_request",
    "repository",
    "file",
    "folder",
    "calendar_event",
    "message",
    "channel",
    "user",
    "team",
    "project",
    "task",
    "comment",
    "attachment",
    "payment",
    "refund",
    "subscription",
    "product",
    "price",
    "contact",
    "deal",
    "lead",
    "incident",
    "alert",
    "dashboard",
    "monitor",
    "page",
    "database",
    "record",
    "report",
    "webhook",
    "label",
    "milestone",
    "release",
    "branch",
    "commit",
];

/// The first `n` names (n ≤ 20,000).
pub fn tool_names(n: usize) -> Vec<String> {
    let total = SERVICES.len() * VERBS.len() * NOUNS.len();
    assert!(n <= total);
    (0..n)
        .map(|i| {
            let j = (i * 7919) % total;
            let (s, rest) = (j % SERVICES.len(), j / SERVICES.len());
            let (v, noun) = (rest % VERBS.len(), rest / VERBS.len());
            format!("{}_{}_{}", SERVICES[s], VERBS[v], NOUNS[noun])
        })
        .collect()
}

/// A registry file (YAML text) of `names`, the `i`th tool taking
/// `parameters(i)` (a YAML flow mapping) and running on the built-in `echo`.
#[allow(dead_code)] // each bench uses a part of this module
pub fn registry(names: &[String], parameters: impl Fn(usize) -> String) -> String {
    let mut yaml = String::from("tools:\n");
    for (i, name) in names.iter().enumerate() {
        yaml.push_str(&format!(
            "  - name: {name}\n    description: x\n    parameters: {}\n    backend: {{builtin: echo}}\n",
            parameters(i)
        ));
    }
    yaml
}

/// A catalogue of the first `n` names, each tool taking `parameters` (a YAML
/// flow mapping) and running on the built-in `echo`.
#[allow(dead_code)] // each bench uses a part of this module
pub fn load(n: usize, parameters: &str) -> (Catalog, Vec<String>) {
    let names = tool_names(n);
    let yaml = registry(&names, |_| parameters.to_owned());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.yaml");
    std::fs::write(&path, yaml).unwrap();
    let options = LoadOptions { registry: vec![path], ..LoadOptions::default() };
    let catalog = catalog::load(&options, &Env::default()).unwrap_or_else(|e| panic!("{:?}", e.problems)).catalog;
    (catalog, names)
}

/// A gateway on the first `n` names (each tool taking `parameters`) with a
/// configuration file of `config` (YAML; empty: none), started as `serve`
/// starts one ([`App::start`]) on `runtime`. Its files stay for the
/// bench's life.
#[allow(dead_code)] // each bench uses a part of this module
pub fn start(
    runtime: &tokio::runtime::Runtime,
    n: usize,
    parameters: &str,
    config: &str,
    observer: Observer,
) -> (App, Vec<String>) {
    start_with(runtime, n, parameters, "", config, observer)
}

/// [`start`] with `more` (YAML: `toolsets:`, `aliases:`) after the tools.
#[allow(dead_code)] // each bench uses a part of this module
pub fn start_with(
    runtime: &tokio::runtime::Runtime,
    n: usize,
    parameters: &str,
    more: &str,
    config: &str,
    observer: Observer,
) -> (App, Vec<String>) {
    let names = tool_names(n);
    let dir = tempfile::tempdir().unwrap().keep();
    let registry_file = dir.join("registry.yaml");
    std::fs::write(&registry_file, registry(&names, |_| parameters.to_owned()) + more).unwrap();
    let file = match config.is_empty() {
        true => FileConfig::default(),
        false => {
            let path = dir.join("toolgate.yaml");
            std::fs::write(&path, config).unwrap();
            FileConfig::read(&path).unwrap()
        }
    };
    let flags = Flags { catalog: vec![registry_file], ..Flags::default() };
    let settings = Settings::build(flags, file, &Env::default()).unwrap();
    let host = Host { env: Env::default(), observer, supervisor: None };
    let (app, _) = runtime.block_on(App::start(&settings, host)).unwrap_or_else(|e| panic!("{e}"));
    (app, names)
}
