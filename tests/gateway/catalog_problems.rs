//! Bad catalogues: every problem of every file in one run, each with its file
//! and YAML path, did-you-mean where a name is near, and nothing loaded.

use toolgate::{
    catalog::{LoadOptions, Problem, Severity},
    env::Env,
};

use crate::common::CatalogDir;

/// Problems as `severity origin-relative: path: message` lines.
fn lines(dir: &CatalogDir, problems: &[Problem]) -> Vec<String> {
    let root = format!("{}/", dir.dir.path().display());
    problems
        .iter()
        .map(|p| {
            let level = if p.severity == Severity::Error { "error" } else { "warning" };
            format!("{level} {}: {}: {}", p.origin.replace(&root, ""), p.path, p.message)
        })
        .collect()
}

fn load_err(dir: &CatalogDir, options: &LoadOptions) -> Vec<String> {
    match dir.load(options) {
        Ok(_) => panic!("the catalogue loaded"),
        Err(err) => lines(dir, &err.problems),
    }
}

fn warnings(dir: &CatalogDir, options: &LoadOptions) -> Vec<String> {
    match dir.load(options) {
        Ok(loaded) => lines(dir, &loaded.warnings),
        Err(err) => panic!("{:#?}", err.problems),
    }
}

const MANY_PROBLEMS: &str = r#"
tools:
  - name: web_search
    descripton: Search the web.
    backend: {builtin: echo}
  - name: bad name!
    description: x
    backend: {builtin: echo}
  - name: no_description
    backend: {builtin: echo}
  - name: typed_wrong
    description: wrong types
    idempotent: "maybe"
    max_concurrency: -1
    timeout: 5 parsecs
    aliases: tw
    backend: {builtin: echo}
  - name: bad_schema
    description: x
    parameters: {type: object, properties: {day: {type: int}}}
    backend: {builtin: echo}
  - name: not_an_object
    description: x
    parameters: {type: string}
    backend: {builtin: echo}
  - name: unknown_builtin
    description: x
    backend: {builtin: calculater}
  - name: two_backends
    description: x
    backend: {builtin: echo, http: {url: "http://127.0.0.1:1/x"}}
  - name: secret_header
    description: x
    backend: {http: {url: "http://127.0.0.1:1/x", headers: {Authorization: "Bearer ${COURIER_TOKEN}"}}}
  - name: echo_twice
    description: first
    backend: {builtin: echo}
  - name: echo_twice
    description: second
    backend: {builtin: echo}
  - name: no_backend
    description: x
toolsets:
  courier: [track_parcel, web_serch]
aliases:
  find: web_searhc
unknown_top: 1
"#;

#[test]
fn every_problem_of_a_file_is_reported_with_its_path() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", MANY_PROBLEMS);
    let problems = load_err(&dir, &dir.options());
    let f = "registry/tools.yaml";
    let expected = [
        format!("error {f}: : unknown field 'unknown_top'; expected one of: tools, toolsets, aliases, mcp_servers"),
        format!("error {f}: tools[0] (web_search): unknown field 'descripton', did you mean 'description'?"),
        format!("error {f}: tools[0] (web_search): missing field 'description' (it is what the model reads)"),
        format!("error {f}: tools[3] (typed_wrong).aliases: invalid type: string \"tw\", expected a sequence"),
        format!("error {f}: tools[3] (typed_wrong).idempotent: invalid type: string \"maybe\", expected a boolean"),
        format!("error {f}: tools[3] (typed_wrong).max_concurrency: invalid value: integer `-1`, expected u32"),
        format!(
            "error {f}: tools[3] (typed_wrong).timeout: invalid duration '5 parsecs' (unknown time unit \"parsecs\""
        ),
        format!("error {f}: tools[7] (two_backends).backend: a backend has exactly one kind; this one has http and builtin"),
        format!("error {f}: tools[1] (bad name!).name: invalid tool name 'bad name!': a name has 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"),
        format!("error {f}: tools[2] (no_description): missing field 'description' (it is what the model reads)"),
        format!("error {f}: tools[4] (bad_schema).parameters: not a valid JSON Schema: "),
        format!("error {f}: tools[5] (not_an_object).parameters: must be an object schema (type: object): a tool takes an object of arguments"),
        format!("error {f}: tools[6] (unknown_builtin).backend.builtin: unknown built-in tool 'calculater', did you mean 'calculator'?"),
        format!("error {f}: tools[8] (secret_header).backend.http.headers.Authorization: environment variable 'COURIER_TOKEN' is not set"),
        format!("error {f}: tools[11] (no_backend): missing field 'backend' (one of: http, command, builtin)"),
        format!("error {f}: tools[10] (echo_twice): duplicate name 'echo_twice': tool here and tool at {}/{f}: tools[9] (echo_twice)", dir.dir.path().display()),
        format!("error {f}: aliases.find: alias 'find' names unknown tool 'web_searhc', did you mean 'web_search'?"),
        format!("error {f}: toolsets.courier[0]: toolset 'courier' names unknown tool 'track_parcel'"),
        format!("error {f}: toolsets.courier[1]: toolset 'courier' names unknown tool 'web_serch', did you mean 'web_search'?"),
    ];
    let mut got = problems.clone();
    for want in &expected {
        let at = got.iter().position(|p| p.starts_with(want.as_str()));
        assert!(at.is_some(), "missing problem:\n  {want}\nin:\n  {}", problems.join("\n  "));
        got.remove(at.unwrap());
    }
    assert!(got.is_empty(), "unexpected problems:\n  {}", got.join("\n  "));
}

#[test]
fn a_broken_schema_says_where() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", MANY_PROBLEMS);
    let problems = load_err(&dir, &dir.options());
    let schema = problems.iter().find(|p| p.contains("bad_schema")).unwrap();
    assert!(schema.contains("(at /properties/day/type)"), "{schema}");
}

#[test]
fn problems_of_all_files_come_together() {
    let dir = CatalogDir::new();
    dir.file("registry/a.yaml", "tools:\n  - name: one\n    description: x\n    backend: {builtin: echo}\n");
    dir.file("registry/b.yaml", "tools:\n  - name: one\n    description: y\n    backend: {builtin: echo}\n");
    dir.file("registry/c.yaml", "tools: [\n");
    dir.file("registry/d.yaml", "");
    dir.file("registry/e.yaml", "- just\n- a list\n");
    std::fs::write(dir.registry().join("f.yaml"), b"tools:\n  - name: caf\xe9\n").unwrap();
    dir.file("registry/g.yml", "toolsets:\n  loop_a: [loop_b]\n  loop_b: [loop_a]\n");
    dir.file("registry/ignored.txt", "not yaml: [");
    let problems = load_err(&dir, &dir.options());
    let root = dir.dir.path().display();
    let expected = [
        format!("error registry/b.yaml: tools[0] (one): duplicate name 'one': tool here and tool at {root}/registry/a.yaml: tools[0] (one)"),
        "error registry/c.yaml: line 2 column 1: invalid YAML: did not find expected node content".to_owned(),
        "error registry/d.yaml: : the file is empty; a catalogue file holds tools, toolsets, aliases or mcp_servers".to_owned(),
        "error registry/e.yaml: : expected a mapping at the top level, found a list".to_owned(),
        "error registry/f.yaml: : not valid UTF-8 (at byte 20); catalogue files are UTF-8 text".to_owned(),
        "error registry/g.yml: toolsets.loop_a: toolset 'loop_a' includes itself through loop_a -> loop_b".to_owned(),
    ];
    for want in &expected {
        assert!(
            problems.iter().any(|p| p.starts_with(want.as_str())),
            "missing:\n  {want}\nin:\n  {}",
            problems.join("\n  ")
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}

/// Tool entries are read as the YAML streams by, and a file that stops being
/// YAML after some of them is still one problem and no tools: the entries
/// before the fault neither report problems nor collide with other files.
#[test]
fn a_file_that_stops_being_yaml_halfway_is_one_problem_and_adds_no_tools() {
    let dir = CatalogDir::new();
    let good = "tools:\n  - name: one\n    description: x\n    backend: {builtin: echo}\n";
    dir.file("registry/a.yaml", good);
    dir.file(
        "registry/b.yaml",
        &format!("{good}  - name: two\n    descripton: x\n    backend: {{builtin: echo}}\n  - name: [\n"),
    );
    dir.file("registry/c.yaml", &format!("{good}tools: []\n"));
    dir.file(
        "registry/d.yaml",
        &format!("{good}  - {{name: three, description: x, backend: {{builtin: echo}}, name: four}}\n"),
    );
    let problems = load_err(&dir, &dir.options());
    assert_eq!(
        problems,
        [
            "error registry/b.yaml: line 9 column 1: invalid YAML: did not find expected node content",
            "error registry/c.yaml: line 1 column 1: invalid YAML: duplicate entry with key \"tools\"",
            "error registry/d.yaml: line 5 column 5: invalid YAML: tools[1]: duplicate entry with key \"name\"",
        ]
    );
    // Without the broken files, the same tool loads.
    for broken in ["b", "c", "d"] {
        std::fs::remove_file(dir.registry().join(format!("{broken}.yaml"))).unwrap();
    }
    assert!(dir.load(&dir.options()).is_ok());
}

#[test]
fn a_missing_path_is_an_error() {
    let dir = CatalogDir::new();
    let options = LoadOptions { registry: vec![dir.dir.path().join("nope.yaml")], ..dir.options() };
    assert_eq!(load_err(&dir, &options), ["error nope.yaml: : no such file or folder"]);
}

#[test]
fn shadowing_a_lower_layer_warns_and_fails_under_strict() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", "tools:\n  - name: echo\n    description: my echo\n    backend: {builtin: echo}\n");
    let w = warnings(&dir, &dir.options());
    assert_eq!(
        w,
        ["warning <builtin>: tools.echo: tool 'echo' is shadowed by the tool of that name at ".to_owned()
            + &format!("{}/registry/tools.yaml: tools[0] (echo)", dir.dir.path().display())]
    );
    let loaded = dir.load(&dir.options()).unwrap();
    let echo = loaded.catalog.tools().iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.description, "my echo", "the higher layer wins");
    let strict = LoadOptions { strict: true, ..dir.options() };
    assert_eq!(load_err(&dir, &strict).len(), 1);
}

#[test]
fn normalised_key_collisions_warn_and_fail_under_strict() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: GetOrder\n    description: x\n    backend: {builtin: echo}\n  \
         - name: get_order\n    description: y\n    backend: {builtin: echo}\n",
    );
    let w = warnings(&dir, &dir.options());
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("'get_order' and 'GetOrder'") && w[0].contains("same normalised key 'getorder'"), "{}", w[0]);
    let loaded = dir.load(&dir.options()).unwrap();
    assert_eq!(loaded.catalog.by_key("getorder").len(), 2, "both kept; repair is impossible for that key");
    assert_eq!(load_err(&dir, &LoadOptions { strict: true, ..dir.options() }).len(), 1);
}

#[test]
fn mcp_server_settings_are_checked_like_any_entry() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "mcp_servers:\n  files:\n    command: [python3, -m, server]\n    comand: x\n  \
         both:\n    command: [x]\n    url: http://127.0.0.1:1/mcp\n  neither:\n    prefix: n_\n  \
         remote:\n    url: \"ftp://example\"\n  secret:\n    url: \"http://127.0.0.1:9/mcp\"\n    headers: {Authorization: \"${NOPE}\"}\n",
    );
    let problems = load_err(&dir, &dir.options());
    assert_eq!(
        problems,
        [
            "error registry/tools.yaml: mcp_servers.files: unknown field 'comand', did you mean 'command'?",
            "error registry/tools.yaml: mcp_servers.both: an MCP server has either command (stdio) or url (streamable HTTP), not both",
            "error registry/tools.yaml: mcp_servers.neither: an MCP server needs either command (stdio) or url (streamable HTTP)",
            "error registry/tools.yaml: mcp_servers.remote.url: unsupported URL scheme 'ftp'; use http or https",
            "error registry/tools.yaml: mcp_servers.secret.headers.Authorization: environment variable 'NOPE' is not set",
        ]
    );
}

#[test]
fn a_catalogue_loaded_without_connecting_says_its_servers_are_absent() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", "mcp_servers:\n  files:\n    command: [python3, -m, server]\n");
    assert_eq!(
        warnings(&dir, &dir.options()),
        ["warning registry/tools.yaml: mcp_servers.files: MCP server 'files' was not connected; its tools are left out"]
    );
}

#[test]
fn packs_merge_by_name_and_an_unknown_pack_gets_a_did_you_mean() {
    let dir = CatalogDir::new();
    dir.file("registry/tools.yaml", "toolsets:\n  mine: [echo]\n");
    dir.file(
        "packs/courier.yaml",
        "tools:\n  - name: track_parcel\n    description: x\n    backend: {builtin: echo}\n",
    );
    dir.file("packs/search.yaml", "tools:\n  - name: track_parcel\n    description: y\n    backend: {builtin: echo}\n");
    let loaded = dir.load(&dir.options()).unwrap();
    assert!(loaded.catalog.lookup("track_parcel").is_none(), "packs are off unless enabled");

    let courier = LoadOptions { packs: vec!["courier".into()], ..dir.options() };
    let loaded = dir.load(&courier).unwrap();
    let tool = loaded.catalog.tools().iter().find(|t| t.name == "track_parcel").unwrap();
    assert_eq!(tool.source.to_string(), "pack:courier");

    let typo = LoadOptions { packs: vec!["couriers".into()], ..dir.options() };
    let problems = load_err(&dir, &typo);
    assert_eq!(problems, ["error packs: : unknown pack 'couriers', did you mean 'courier'?"]);

    let both = LoadOptions { packs: vec!["courier".into(), "search".into()], ..dir.options() };
    let problems = load_err(&dir, &both);
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].starts_with("error packs/search.yaml: tools[0] (track_parcel): duplicate name 'track_parcel'"),
        "{problems:?}"
    );
}

#[test]
fn variables_expand_from_the_given_environment_and_never_show() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: courier\n    description: x\n    backend:\n      http:\n        url: \"http://${HOST}/track\"\n        \
         headers: {Authorization: \"Bearer ${TOKEN}\"}\n",
    );
    let env = Env::from_pairs([("HOST", "127.0.0.1:9"), ("TOKEN", "hunter2")]);
    let loaded = toolgate::catalog::load(&dir.options(), &env).unwrap();
    let tool = &loaded.catalog.tools().iter().find(|t| t.name == "courier").unwrap();
    let toolgate::catalog::Backend::Http(http) = &tool.backend else { panic!("http backend") };
    assert_eq!(http.url.as_str(), "http://127.0.0.1:9/track");
    assert_eq!(http.headers[0].1.expose(), "Bearer hunter2");
    assert!(!format!("{tool:?}").contains("hunter2"), "secrets never reach Debug output");
}

#[test]
fn relative_command_paths_resolve_against_the_declaring_file() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: run\n    description: x\n    backend: {command: {argv: [python3, scripts/run.py], cwd: work}}\n  \
         - name: local\n    description: x\n    backend: {command: {argv: [./bin/tool]}}\n",
    );
    let tool = dir.file("registry/bin/tool", "#!/bin/sh\n");
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let loaded = dir.load(&dir.options()).unwrap();
    let command = |name: &str| match &loaded.catalog.tools().iter().find(|t| t.name == name).unwrap().backend {
        toolgate::catalog::Backend::Command(c) => c.clone(),
        _ => panic!("command backend"),
    };
    let run = command("run");
    assert_eq!(run.program, std::path::PathBuf::from("python3"), "a bare program is looked up on PATH");
    assert_eq!(run.args, ["scripts/run.py"]);
    assert_eq!(run.cwd, dir.registry().join("work"));
    let local = command("local");
    assert_eq!(local.program, dir.registry().join("./bin/tool"));
    assert_eq!(local.cwd, dir.registry());
}

#[test]
fn toolsets_nest_and_aliases_chain() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "toolsets:\n  all: [basics, echo, calc]\n  basics: [current_time, calculator]\naliases:\n  \
         say: echo\n  repeat: say\n",
    );
    let loaded = dir.load(&dir.options()).unwrap();
    let catalog = &loaded.catalog;
    let resolution = toolgate::resolve::resolve(catalog, &["all", "repeat"]);
    let names: Vec<&str> = resolution.tools.iter().map(|&id| catalog.tool(id).name.as_str()).collect();
    assert_eq!(names, ["current_time", "calculator", "echo"]);
    assert!(resolution.unknown.is_empty());
}

#[test]
fn tools_with_the_same_schema_share_one_compiled_schema() {
    let dir = CatalogDir::new();
    let same = "{type: object, properties: {id: {type: string, pattern: '^A-'}}, required: [id]}";
    dir.file(
        "registry/a.yaml",
        &format!(
            "tools:\n  - {{name: a, description: x, parameters: {same}, backend: {{builtin: echo}}}}\n  \
             - {{name: b, description: x, backend: {{builtin: echo}}}}\n  \
             - {{name: c, description: x, backend: {{http: {{url: 'http://127.0.0.1:9/c'}}}}}}\n  \
             - {{name: d, description: x, backend: {{http: {{url: 'http://127.0.0.1:9/d'}}}}}}\n"
        ),
    );
    dir.file(
        "registry/b.yaml",
        &format!("tools:\n  - {{name: e, description: x, parameters: {same}, backend: {{builtin: echo}}}}\n"),
    );
    let catalog = dir.load(&dir.options()).unwrap().catalog;
    let schema = |name: &str| {
        let Some(toolgate::catalog::Name::Tool(id)) = catalog.lookup(name) else { panic!("{name}") };
        catalog.tool(id).parameters.clone()
    };
    // The same schema in two files, and the default schema of two tools without one.
    assert!(std::sync::Arc::ptr_eq(&schema("a"), &schema("e")));
    assert!(std::sync::Arc::ptr_eq(&schema("c"), &schema("d")));
    // A tool on a built-in without parameters has the built-in's schema.
    assert!(!std::sync::Arc::ptr_eq(&schema("b"), &schema("c")));
    assert_eq!(schema("b").text(), r#"{"type":"object"}"#);
}

#[test]
fn the_names_that_say_who_calls_are_the_gateways() {
    let dir = CatalogDir::new();
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: a\n    description: x\n    backend: {http: {url: \"http://127.0.0.1:9/\", headers: {X-Toolgate-User: root}}}\n  \
         - name: b\n    description: x\n    backend: {command: {argv: [\"true\"], env: {TOOLGATE_PRINCIPAL: admin, TOOLGATE_USER_ISSUER: me}}}\n  \
         - name: c\n    description: x\n    backend: {http: {url: \"http://127.0.0.1:9/\", headers: {x-toolgate-anything: y, X-Other: z}}}\n\
         mcp_servers:\n  remote:\n    url: \"http://127.0.0.1:9/mcp\"\n    headers: {X-TOOLGATE-PRINCIPAL: admin}\n",
    );
    let problems = load_err(&dir, &dir.options());
    let reserved = |path: &str, name: &str| {
        format!("error registry/tools.yaml: {path}.{name}: '{name}' is the gateway's: it tells the tool who calls, and no tool may set it")
    };
    assert_eq!(
        problems,
        [
            reserved("tools[0] (a).backend.http.headers", "X-Toolgate-User"),
            reserved("tools[1] (b).backend.command.env", "TOOLGATE_PRINCIPAL"),
            reserved("tools[1] (b).backend.command.env", "TOOLGATE_USER_ISSUER"),
            reserved("tools[2] (c).backend.http.headers", "x-toolgate-anything"),
            reserved("mcp_servers.remote.headers", "X-TOOLGATE-PRINCIPAL"),
        ]
    );
}
