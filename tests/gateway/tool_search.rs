//! Tool search (`SearchTools`, `toolgate search`) through the real binary:
//! the caller's tools ranked for a task, inside its grants and toolset,
//! bad input answered, and a reload's new tool found.

use std::time::Duration;

use tonic::{metadata::MetadataValue, transport::Channel, Code, Request};
use toolgate::proto::v1::{tool_gateway_service_client::ToolGatewayServiceClient, SearchToolsRequest};

use crate::common::{run, serve_config, stdout, CatalogDir};

const KEY_ADMIN: &str = "tg_admin_key_9876543210";
const KEY_TRACKER: &str = "tg_tracker_key_0123456789";

const TOOLS: &str = r#"tools:
  - name: create_issue
    description: Create a new issue in a repository.
    parameters: {type: object, properties: {title: {type: string, description: "The issue's title"}}}
    backend: {builtin: echo}
  - name: list_issues
    description: List the open issues of a repository.
    backend: {builtin: echo}
  - name: delete_repository
    description: Delete a repository and everything in it.
    backend: {builtin: echo}
  - name: send_message
    description: Post a message to a chat channel.
    backend: {builtin: echo}
  - name: get_weather
    description: The weather forecast for a city.
    backend: {builtin: echo}
toolsets:
  tracker: [create_issue, list_issues]
  trackers_view: [tracker, get_weather]
"#;

fn catalogue(dir: &CatalogDir) {
    dir.file("registry/tools.yaml", TOOLS);
    let config = format!(
        "principals:\n  - name: admin\n    api_key_sha256: {}\n    tools: [\"*\"]\n  \
         - name: tracker-bot\n    api_key_sha256: {}\n    tools: [tracker, get_weather]\n",
        toolgate::identity::hash_key(KEY_ADMIN),
        toolgate::identity::hash_key(KEY_TRACKER),
    );
    dir.file("toolgate.yaml", &config);
}

type Client = ToolGatewayServiceClient<Channel>;

async fn search(
    client: &mut Client,
    key: &str,
    query: &str,
    limit: u32,
    toolset: &str,
) -> Result<Vec<(String, f32)>, tonic::Status> {
    let mut request = Request::new(SearchToolsRequest { query: query.into(), limit, toolset: toolset.into() });
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {key}")).unwrap());
    let found = client.search_tools(request).await?.into_inner();
    assert_eq!(found.tools.len(), found.scores.len());
    Ok(found.tools.into_iter().map(|t| t.name).zip(found.scores).collect())
}

fn names(found: &[(String, f32)]) -> Vec<&str> {
    found.iter().map(|(name, _)| name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_finds_its_own_tools_for_a_task_and_no_others() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_child, _log, addr) = serve_config(dir.dir.path(), &[]);
    let mut client = Client::connect(format!("http://{addr}")).await.unwrap();

    let found = search(&mut client, KEY_ADMIN, "file a new issue about the login bug", 0, "").await.unwrap();
    assert_eq!(found[0].0, "create_issue", "{found:?}");
    assert!(found.windows(2).all(|pair| pair[0].1 >= pair[1].1), "best first: {found:?}");
    assert_eq!(
        names(&search(&mut client, KEY_ADMIN, "weather forecast in Lyon", 3, "").await.unwrap())[0],
        "get_weather"
    );
    // A parameter's description is read too.
    assert_eq!(names(&search(&mut client, KEY_ADMIN, "title", 1, "").await.unwrap()), ["create_issue"]);

    // The grant bounds the search: whatever the query, only granted tools.
    for query in ["delete the repository", "post a message to the channel", "issues", "calculator echo time"] {
        let found = search(&mut client, KEY_TRACKER, query, 50, "").await.unwrap();
        for (name, _) in &found {
            assert!(["create_issue", "list_issues", "get_weather"].contains(&name.as_str()), "{query}: {found:?}");
        }
    }
    assert!(search(&mut client, KEY_TRACKER, "delete the repository", 8, "")
        .await
        .unwrap()
        .iter()
        .all(|(n, _)| n != "delete_repository"));
    // Scores are taken over the caller's tools alone: the bot's are those
    // of everything searched within a toolset of just the bot's tools, so
    // the tools it may not use change nothing it sees.
    for query in ["delete the repository issues", "weather for the new issue", "list the open issues"] {
        let bot = search(&mut client, KEY_TRACKER, query, 50, "").await.unwrap();
        let same = search(&mut client, KEY_ADMIN, query, 50, "trackers_view").await.unwrap();
        assert_eq!(bot, same, "{query}");
        assert!(!bot.is_empty());
    }
    // Within a toolset.
    let found = search(&mut client, KEY_ADMIN, "weather issues", 8, "tracker").await.unwrap();
    assert!(
        !found.is_empty() && names(&found).iter().all(|n| n.ends_with("issue") || n.ends_with("issues")),
        "{found:?}"
    );
    // Nothing fits: an empty answer, not an error.
    assert!(search(&mut client, KEY_ADMIN, "quantum chromodynamics", 8, "").await.unwrap().is_empty());

    // Bad input.
    for (query, limit, toolset, code, says) in [
        ("", 8, "", Code::InvalidArgument, "the query is empty"),
        ("  \n ", 8, "", Code::InvalidArgument, "the query is empty"),
        ("issues", 51, "", Code::InvalidArgument, "limit 51 is above 50"),
        ("issues", 8, "trackr", Code::NotFound, "unknown toolset 'trackr', did you mean 'tracker'?"),
    ] {
        let status = search(&mut client, KEY_ADMIN, query, limit, toolset).await.unwrap_err();
        assert_eq!(status.code(), code, "{query:?} {limit} {toolset}: {status:?}");
        assert!(status.message().contains(says), "{}", status.message());
    }
    let long = "issue ".repeat(1000);
    assert_eq!(search(&mut client, KEY_ADMIN, &long, 8, "").await.unwrap_err().code(), Code::InvalidArgument);
    // Limit 0 means 8; a limit is kept.
    let many = "issue repository message weather forecast channel calculator time echo";
    assert_eq!(search(&mut client, KEY_ADMIN, many, 0, "").await.unwrap().len(), 8);
    assert_eq!(search(&mut client, KEY_ADMIN, many, 2, "").await.unwrap().len(), 2);
    // A toolset outside the grants is as unknown as one that does not exist.
    let hidden = search(&mut client, KEY_TRACKER, "issues", 8, "nonexistent").await.unwrap_err();
    assert_eq!(hidden.code(), Code::NotFound);
    assert!(hidden.message().starts_with("unknown toolset 'nonexistent'"), "{}", hidden.message());
    // The typed details name it, as ListTools's do.
    let details = tonic_types::StatusExt::get_error_details(&hidden);
    assert_eq!(details.error_info().map(|info| info.reason.as_str()), Some("TOOL_NOT_FOUND"), "{details:?}");

    // A reload's new tool is found; a new tool the bot may not use, full of
    // the words it searches with, changes none of its scores.
    let before = search(&mut client, KEY_TRACKER, "list the open issues", 50, "").await.unwrap();
    let added = TOOLS.replace(
        "toolsets:",
        "  - name: translate_text\n    description: Translate a text into another language.\n    backend: {builtin: echo}\n  \
         - name: archive_issues\n    description: Archive the open issues, list them first.\n    backend: {builtin: echo}\ntoolsets:",
    );
    dir.file("registry/tools.yaml", &added);
    let mut found = Vec::new();
    for _ in 0..600 {
        found = search(&mut client, KEY_ADMIN, "translate this sentence into French", 1, "").await.unwrap();
        if !found.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(names(&found), ["translate_text"], "the reloaded catalogue is searched");
    let admin = search(&mut client, KEY_ADMIN, "list the open issues", 50, "").await.unwrap();
    assert!(names(&admin).contains(&"archive_issues"), "{admin:?}");
    assert_eq!(search(&mut client, KEY_TRACKER, "list the open issues", 50, "").await.unwrap(), before);
}

#[test]
fn toolgate_search_prints_the_callers_tools_best_first() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_child, _log, addr) = serve_config(dir.dir.path(), &[]);
    let here = dir.dir.path();
    let out = run(here, &["search", "file a new issue", "--addr", &addr, "--api-key", KEY_ADMIN, "--limit", "2"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains("create_issue") && lines[0].contains("Create a new issue in a repository."), "{text}");
    let nothing = run(here, &["search", "quantum chromodynamics", "--addr", &addr, "--api-key", KEY_ADMIN]);
    assert_eq!(nothing.status.code(), Some(1));
    assert_eq!(stdout(&nothing).trim(), "no tool of yours fits: quantum chromodynamics");
    let refused = run(here, &["search", "", "--addr", &addr, "--api-key", KEY_ADMIN]);
    assert!(!refused.status.success());
    assert!(crate::common::stderr(&refused).contains("the query is empty"), "{refused:?}");
}

#[test]
fn mcp_clients_find_tools_then_call_one_on_mcp_search() {
    use crate::mcp_front_door::{answer, names, sdk, serve};
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let search = url.replace("/mcp", "/mcp/search");
    let key = format!("Authorization=Bearer {KEY_TRACKER}");
    for era in ["initialize", "discover"] {
        let lines = sdk(&[
            "--url",
            &search,
            "--era",
            era,
            "--header",
            &key,
            r#"find_tools={"query": "file a new issue about the login bug", "limit": 2}"#,
            r#"call_tool={"name": "CreateIssue", "arguments": {"title": "login bug"}}"#,
            r#"call_tool={"name": "delete_repository", "arguments": {}}"#,
            r#"find_tool={"query": "issues"}"#,
        ]);
        assert_eq!(names(&lines), ["find_tools", "call_tool"], "{era}");
        let found = &answer(&lines, "find_tools")["result"];
        let tools = found["structuredContent"]["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 2, "{found}");
        assert_eq!(tools[0]["name"], "create_issue", "{found}");
        assert_eq!(tools[0]["inputSchema"]["properties"]["title"]["type"], "string");
        assert!(tools.iter().all(|t| t["name"] != "delete_repository"));
        assert!(found["content"][0]["text"].as_str().unwrap().starts_with("create_issue ("), "{found}");
        // A call through the usual stages: the name repaired, within grants.
        let calls: Vec<&serde_json::Value> = lines.iter().filter(|l| l["call"] == "call_tool").collect();
        let called = &calls[0]["result"];
        assert!(calls[0].get("error").is_none(), "{:?}", calls[0]);
        assert_eq!(called["structuredContent"], serde_json::json!({"title": "login bug"}), "{called}");
        assert_eq!(called["_meta"]["dev.toolgate/repairs"][0]["kind"], "TOOL_NAME");
        let hidden = &calls[1]["error"];
        assert_eq!(hidden["code"], -32602, "{hidden}");
        assert!(!hidden["message"].as_str().unwrap().contains("'delete_repository'?"), "{hidden}");
        let misspelt = &answer(&lines, "find_tool")["error"];
        assert!(misspelt["message"].as_str().unwrap().contains("Did you mean 'find_tools'?"), "{misspelt}");
    }
    // What cannot be searched is the tool's error, for the model to read.
    let lines = sdk(&["--url", &search, "--header", &key, r#"find_tools={"query": "", "limit": 3}"#]);
    let empty = &answer(&lines, "find_tools")["result"];
    assert_eq!(empty["isError"], true, "{empty}");
    assert!(empty["content"][0]["text"].as_str().unwrap().contains("the query is empty"), "{empty}");
    let lines = sdk(&["--url", &search, "--header", &key, r#"find_tools={"query": "issues", "limit": 51}"#]);
    assert_eq!(answer(&lines, "find_tools")["result"]["isError"], true);
}

/// `/mcp/toolsets/NAME/search`: `find_tools` ranks only the toolset's tools
/// (within the caller's grants) and `call_tool` runs only them; an unknown
/// toolset is not found.
#[test]
fn mcp_clients_search_one_toolset_on_its_search_endpoint() {
    use crate::mcp_front_door::{answer, post, sdk, serve};
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_child, url, _log) = serve(dir.dir.path(), &["--config", "toolgate.yaml"]);
    let search = url.replace("/mcp", "/mcp/toolsets/tracker/search");
    let key = format!("Authorization=Bearer {KEY_ADMIN}");
    let lines = sdk(&[
        "--url",
        &search,
        "--header",
        &key,
        r#"find_tools={"query": "the weather forecast for a city and issues", "limit": 5}"#,
        r#"call_tool={"name": "get_weather", "arguments": {}}"#,
        r#"call_tool={"name": "list_issues", "arguments": {}}"#,
    ]);
    let found = &answer(&lines, "find_tools")["result"];
    let names: Vec<&str> =
        found["structuredContent"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(!names.is_empty() && names.iter().all(|n| ["create_issue", "list_issues"].contains(n)), "{found}");
    let calls: Vec<&serde_json::Value> = lines.iter().filter(|l| l["call"] == "call_tool").collect();
    assert!(calls[0].get("error").is_some() || calls[0]["result"]["isError"] == true, "{:?}", calls[0]);
    assert!(calls[1].get("error").is_none() && calls[1]["result"]["isError"] != true, "{:?}", calls[1]);
    let unknown = url.replace("/mcp", "/mcp/toolsets/trackr/search");
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let bearer = format!("Bearer {KEY_ADMIN}");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (status, _, body) = runtime.block_on(post(&unknown, &[("authorization", &bearer)], list));
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("unknown toolset 'trackr', did you mean 'tracker'?"), "{body}");
}

/// `toolgate mcp-stdio --search`, as a desktop client launches it: the
/// two tools instead of the caller's, within the principal's grants.
#[test]
fn mcp_stdio_with_search_offers_find_tools_and_call_tool() {
    use crate::mcp_front_door::{answer, mcp_stdio_argv, names, sdk};
    let dir = CatalogDir::new();
    catalogue(&dir);
    let argv = mcp_stdio_argv("tracker-bot", &["--search"]);
    let root = dir.dir.path().display().to_string();
    let lines = sdk(&[
        "--stdio",
        &argv,
        "--cwd",
        &root,
        "--era",
        "initialize",
        r#"find_tools={"query": "delete the repository or file a new issue", "limit": 5}"#,
        r#"call_tool={"name": "create_issue", "arguments": {"title": "login bug"}}"#,
    ]);
    assert_eq!(names(&lines), ["find_tools", "call_tool"]);
    let found = &answer(&lines, "find_tools")["result"];
    let tools = found["structuredContent"]["tools"].as_array().unwrap();
    assert_eq!(tools[0]["name"], "create_issue", "{found}");
    assert!(tools.iter().all(|t| t["name"] != "delete_repository"), "{found}");
    let called = &answer(&lines, "call_tool")["result"];
    assert_eq!(called["structuredContent"], serde_json::json!({"title": "login bug"}), "{called}");
    // Without --search, the caller's own tools.
    let argv = mcp_stdio_argv("tracker-bot", &[]);
    let lines = sdk(&["--stdio", &argv, "--cwd", &root, "--era", "initialize"]);
    assert!(names(&lines).contains(&"create_issue".to_owned()), "{lines:?}");
}
