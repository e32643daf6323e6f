//! What a federated tool's result keeps through the MCP front door: every
//! content type (image, audio, embedded resource, resource link, several
//! at once), `structuredContent`, the server's `_meta` and `isError`, in
//! both protocol eras over streamable HTTP and over stdio, read by the
//! Python reference SDK.

use serde_json::{json, Value};

use crate::{
    common::{mcp::stdio_server, CatalogDir},
    mcp_front_door::{answer, sdk, serve},
};

const CALLS: [&str; 6] = ["picture={}", "sound={}", "document={}", "link={}", "mixed={}", "refusal={}"];

/// The types of a result's content blocks.
fn types(result: &Value) -> Vec<&str> {
    result["content"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect()
}

/// Every call's result as the media server sent it, whatever the path.
fn check(lines: &[Value], path: &str) {
    let result = |tool: &str| &answer(lines, tool)["result"];
    let picture = result("picture");
    assert_eq!(types(picture), ["image"], "{path}: {picture}");
    assert_eq!(picture["content"][0]["mimeType"], "image/png");
    assert!(picture["content"][0]["data"].as_str().unwrap().starts_with("iVBORw0KGgo"), "{path}: the PNG's bytes");
    let sound = result("sound");
    assert_eq!(types(sound), ["audio"], "{path}: {sound}");
    assert_eq!(sound["content"][0]["mimeType"], "audio/wav");
    let document = result("document");
    assert_eq!(types(document), ["resource"], "{path}: {document}");
    assert_eq!(document["content"][0]["resource"]["text"], "# Today\n");
    let link = result("link");
    assert_eq!(types(link), ["resource_link"], "{path}: {link}");
    assert_eq!(link["content"][0]["uri"], "file:///notes/today.md");
    let mixed = result("mixed");
    assert_eq!(types(mixed), ["text", "image", "resource_link"], "{path}: {mixed}");
    assert_eq!(mixed["structuredContent"], json!({"parts": 3}), "{path}");
    assert_eq!(mixed["_meta"]["dev.example/origin"], "media", "{path}: the server's _meta");
    assert_eq!(mixed["_meta"]["dev.toolgate/replayed"], false, "{path}: toolgate's _meta beside it");
    let refusal = result("refusal");
    assert_eq!(refusal["isError"], true, "{path}: {refusal}");
    assert_eq!(types(refusal), ["text", "image"], "{path}: {refusal}");
    assert_eq!(refusal["_meta"]["dev.toolgate/error_kind"], "REFUSED", "{path}: {refusal}");
}

fn catalogue(dir: &CatalogDir) {
    dir.file("registry/tools.yaml", &format!("mcp_servers:\n{}", stdio_server("media", "media_server.py", &[], "")));
}

#[test]
fn a_federated_tools_content_arrives_as_its_server_sent_it_in_both_eras() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_gateway, url, _log) = serve(dir.dir.path(), &[]);
    for era in ["discover", "initialize"] {
        let mut args = vec!["--url", url.as_str(), "--era", era];
        args.extend(CALLS);
        check(&sdk(&args), era);
    }
}

#[test]
fn a_federated_tools_content_arrives_as_its_server_sent_it_over_stdio() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let argv = json!([env!("CARGO_BIN_EXE_toolgate"), "mcp-stdio", "--catalog", "registry"]).to_string();
    let root = dir.dir.path().display().to_string();
    let mut args = vec!["--stdio", argv.as_str(), "--cwd", root.as_str(), "--era", "initialize"];
    args.extend(CALLS);
    check(&sdk(&args), "stdio");
}

#[test]
fn the_typescript_sdk_receives_every_content_type_over_http_and_stdio() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let (_gateway, url, _log) = serve(dir.dir.path(), &[]);
    let argv = json!([env!("CARGO_BIN_EXE_toolgate"), "mcp-stdio", "--catalog", "registry"]).to_string();
    let root = dir.dir.path().display().to_string();
    for (path, args) in [("http", vec!["--url", url.as_str()]), ("stdio", vec!["--stdio", &argv, "--cwd", &root])] {
        check(&crate::mcp_conformance::typescript(&[args.as_slice(), CALLS.as_slice()].concat()), path);
    }
}

/// A desktop client launches `mcp-stdio` from a folder of its own: relative
/// `--catalog` and `--packs-dir` are read from the configuration file's
/// folder, and a path that fails is named whole on stderr.
#[test]
fn mcp_stdio_reads_relative_paths_from_the_configuration_files_folder() {
    let dir = CatalogDir::new();
    catalogue(&dir);
    let config = dir.file("toolgate.yaml", "policy: {strict: false}\n").display().to_string();
    let binary = env!("CARGO_BIN_EXE_toolgate");
    let argv = json!([binary, "mcp-stdio", "--config", config, "--catalog", "registry", "--packs-dir", "packs"]);
    let lines = sdk(&["--stdio", &argv.to_string(), "--cwd", "/", "--era", "initialize", "picture={}"]);
    let names = crate::mcp_front_door::names(&lines);
    for name in ["document", "link", "mixed", "picture", "refusal", "sound"] {
        assert!(names.contains(&name.to_owned()), "{name} in {names:?}");
    }

    let out = crate::common::toolgate()
        .current_dir("/")
        .args(["mcp-stdio", "--config", &config, "--catalog", "nope"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = crate::common::stderr(&out);
    let whole = dir.dir.path().join("nope").display().to_string();
    assert!(said.contains(&format!("{whole}: no such file or folder")), "{said}");
}

/// A federated tool's progress reaches the caller's progress token, and a
/// caller's cancellation reaches the tool's server, in both eras and over
/// stdio.
#[test]
fn progress_is_relayed_to_the_caller_and_cancellation_to_the_server() {
    let dir = CatalogDir::new();
    let mark = dir.dir.path().join("cancelled");
    let server = stdio_server("media", "media_server.py", &[&mark.display().to_string()], "");
    dir.file("registry/tools.yaml", &format!("mcp_servers:\n{server}"));
    let (_gateway, url, _log) = serve(dir.dir.path(), &[]);
    let stdio = json!([env!("CARGO_BIN_EXE_toolgate"), "mcp-stdio", "--catalog", "registry"]).to_string();
    let root = dir.dir.path().display().to_string();
    let paths = [
        ("discover", vec!["--url", url.as_str(), "--era", "discover"]),
        ("initialize", vec!["--url", url.as_str(), "--era", "initialize"]),
        ("stdio", vec!["--stdio", stdio.as_str(), "--cwd", root.as_str(), "--era", "initialize"]),
    ];
    for (era, args) in paths {
        let _ = std::fs::remove_file(&mark);
        let out = std::process::Command::new(crate::common::mcp::python())
            .arg(crate::common::repo().join("tests/mcp/progress_client.py"))
            .args(&args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{era}: {text}\n{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let slow = lines.iter().find(|l| l["call"] == "slow").expect("the slow call's line");
        assert_eq!(slow["text"], "done", "{era}: {slow}");
        let told: Vec<(f64, String)> = slow["progress"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["progress"].as_f64().unwrap(), p["message"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            told,
            [(1.0, "step 1 of 3".into()), (2.0, "step 2 of 3".into()), (3.0, "step 3 of 3".into())],
            "{era}"
        );
        assert_eq!(slow["progress"][0]["total"], 3.0);
        // The server was told the call was cancelled: it leaves its mark.
        let written = crate::common::wait_for_file(&mark);
        assert_eq!(written, "cancelled", "{era}");
    }
}
