//! The documentation as a newcomer uses it: every key the configuration
//! file's reader accepts is in `docs/configuration.md`; the command examples
//! of the README and `docs/` run with the output they show (trycmd); the
//! identity walk-through of `docs/identity.md` and the OAuth one of
//! `docs/mcp.md` run start to finish; every `yaml` example validates.

use std::{collections::BTreeSet, path::Path, process::Command};

use crate::common::{backend::closed_port, bash, listening, repo, run, stderr, CatalogDir};

/// The keys the configuration file's reader accepts, found by asking it: a
/// probe key no reader knows, placed under each key found so far (as a
/// mapping, a list of mappings, or a mapping of names), makes the reader
/// say which keys it expected there. Paths are dotted; `[]` is any item of
/// a list, `*` any name of a mapping of names (`rate_limits.tools.*.burst`).
fn configuration_keys(dir: &Path) -> BTreeSet<String> {
    let expected = |yaml: String| -> Option<Vec<String>> {
        std::fs::write(dir.join("probe.yaml"), yaml).unwrap();
        let err = stderr(&run(dir, &["validate", "--config", "probe.yaml"]));
        let at = err.find("unknown field `zz_probe`, expected ")?;
        let listed = &err[at..];
        let listed = &listed[..listed.find(" at line").unwrap_or(listed.len())];
        Some(listed.split('`').skip(3).step_by(2).map(str::to_owned).collect())
    };
    // `path` as YAML with the probe at its end.
    fn nest(path: &[String]) -> String {
        let mut yaml = "{zz_probe: 1}".to_owned();
        for segment in path.iter().rev() {
            yaml = match segment.as_str() {
                "[]" => format!("[{yaml}]"),
                "*" => format!("{{some_name: {yaml}}}"),
                key => format!("{{{key}: {yaml}}}"),
            };
        }
        yaml
    }
    let mut found = BTreeSet::new();
    let mut pending = vec![Vec::<String>::new()];
    while let Some(path) = pending.pop() {
        let keys = expected(nest(&path)).unwrap_or_else(|| panic!("no keys under {path:?}"));
        for key in keys {
            let mut under = path.clone();
            under.push(key);
            found.insert(under.join(".").replace(".[]", "[]"));
            for shape in [None, Some("[]"), Some("*")] {
                let mut deeper = under.clone();
                deeper.extend(shape.map(str::to_owned));
                if expected(nest(&deeper)).is_some() {
                    pending.push(deeper);
                    break;
                }
            }
        }
    }
    found
}

#[test]
fn the_configuration_reference_lists_every_key_the_reader_accepts() {
    let dir = CatalogDir::new();
    let keys = configuration_keys(dir.dir.path());
    assert!(
        keys.contains("rate_limits.tools.*.per_minute") && keys.contains("principals[].api_key_sha256"),
        "{keys:?}"
    );
    let doc = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    let missing: Vec<&String> = keys.iter().filter(|key| !doc.contains(&format!("`{key}`"))).collect();
    assert!(missing.is_empty(), "docs/configuration.md does not list {missing:?} (of {keys:?})");
}

/// The first ```sh block after `heading` in `doc`.
fn shell_block(doc: &str, heading: &str) -> String {
    let at = doc.find(heading).unwrap_or_else(|| panic!("{heading} is in the doc"));
    let start = at + doc[at..].find("```sh\n").expect("a shell block") + "```sh\n".len();
    let end = start + doc[start..].find("```\n").expect("the block ends");
    doc[start..end].to_owned()
}

/// The shell block after `heading` in `doc`, run as written in a folder
/// holding the shipped catalogue, each of `ports` replaced by a free one;
/// its stdout and the gateway's log (`toolgate.log`), once it succeeded.
fn walk_through(doc: &str, heading: &str, ports: &[&str]) -> (String, String, Vec<u16>) {
    let doc = std::fs::read_to_string(repo().join(doc)).unwrap();
    let free: Vec<u16> = ports.iter().map(|_| closed_port().port()).collect();
    let mut script = shell_block(&doc, heading);
    for (port, free) in ports.iter().zip(&free) {
        script = script.replace(port, &free.to_string());
    }
    let dir = CatalogDir::new();
    std::os::unix::fs::symlink(repo().join("catalog"), dir.dir.path().join("catalog")).unwrap();
    let out = bash(&script, dir.dir.path(), true, &[]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let log = std::fs::read_to_string(dir.dir.path().join("toolgate.log")).unwrap_or_default();
    assert!(out.status.success(), "the walk-through failed:\n{stdout}\n{stderr}\n{log}");
    (stdout.into_owned(), log, free)
}

#[test]
fn the_identity_walk_through_runs_start_to_finish() {
    // Free ports for the gateway and its health port, the rest as written.
    let (stdout, log, _) = walk_through("docs/identity.md", "## A walk-through, start to finish", &["50051", "8081"]);
    // The user reached the tool through the bound parameter, the key's
    // principal ran a courier tool, and the certificate's another.
    assert!(stdout.contains("ok: my_orders\n"), "{stdout}");
    assert!(stdout.contains(r#""customer": "alice""#), "{stdout}");
    assert!(stdout.contains("ok: track_parcel\nrepaired tool name: \"TrackParcel\" -> \"track_parcel\""), "{stdout}");
    assert!(stdout.contains("ok: calculator\n"), "{stdout}");
    assert!(stdout.contains("catalogue ok:"), "{stdout}");
    assert!(log.contains("2 principals configured"), "{log}");
    assert!(log.contains(r#"audit: execute principal="support-bot""#), "an audit line a call with an identity: {log}");
}

#[test]
fn the_two_replica_recipe_runs_a_keyed_call_once() {
    let (stdout, _, _) =
        walk_through("docs/once-only.md", "### Two replicas, one Redis: a recipe", &["6390", "50061", "50062"]);
    // The first replica ran it; the second answered the first's answer.
    assert_eq!(stdout.matches("ok: reschedule_delivery").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("replayed: the first answer to this idempotency key").count(), 1, "{stdout}");
}

#[test]
fn the_oauth_walk_through_runs_start_to_finish() {
    let (stdout, _, free) = walk_through("docs/mcp.md", "### OAuth, start to finish", &["8765"]);
    let port = free[0];
    // Refused without the token, pointed at the metadata; the metadata; the
    // call with it, repaired, as the principal of the token's client.
    let metadata = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    assert!(
        stdout.to_lowercase().contains(&format!("www-authenticate: bearer resource_metadata=\"{metadata}\"")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!(r#""resource":"http://127.0.0.1:{port}/mcp""#)), "{stdout}");
    assert!(stdout.contains(r#""scopes_supported":["tools"]"#), "{stdout}");
    assert!(stdout.contains(r#""isError":false"#) && stdout.contains("PK-1001"), "{stdout}");
    let audit = stdout.lines().find(|l| l.contains("audit: execute")).unwrap_or_else(|| panic!("{stdout}"));
    for field in
        [r#"principal="desktop""#, r#"auth="oauth""#, r#"user="alice""#, r#"tool="track_parcel""#, r#"outcome="ok""#]
    {
        assert!(audit.contains(field), "{field} in {audit}");
    }
}

#[test]
fn the_go_and_java_stub_commands_run_as_written() {
    let doc = std::fs::read_to_string(repo().join("docs/clients.md")).unwrap();
    let script = shell_block(&doc, "**Other languages**");
    // A folder that is not this project, holding only the proto.
    let dir = CatalogDir::new();
    std::os::unix::fs::symlink(repo().join("proto"), dir.dir.path().join("proto")).unwrap();
    let out = bash(&script, dir.dir.path(), true, &[]);
    assert!(out.status.success(), "the stub commands failed: {}", String::from_utf8_lossy(&out.stderr));
    for file in [
        "gen/go/toolgate/v1/toolgate.pb.go",
        "gen/go/toolgate/v1/toolgate_grpc.pb.go",
        "gen/java/dev/toolgate/v1/ToolGatewayServiceGrpc.java",
        "gen/java/dev/toolgate/v1/ExecuteRequest.java",
    ] {
        assert!(dir.dir.path().join(file).exists(), "{file} was not written");
    }
    let go = std::fs::read_to_string(dir.dir.path().join("gen/go/toolgate/v1/toolgate.pb.go")).unwrap();
    assert!(go.contains("package toolgatev1"), "the Go package");
}

/// The `console` blocks of the README and `docs/` (`$ toolgate …` and the
/// output it prints, stderr included), run from the repository's root.
#[test]
fn the_documented_commands_print_what_the_docs_show() {
    trycmd::TestCases::new()
        .register_bin("toolgate", Path::new(env!("CARGO_BIN_EXE_toolgate")))
        .case(repo().join("README.md"))
        .case(repo().join("docs/*.md"));
}

/// The README's tour of tool calls, run as written from the repository's
/// root against a gateway on the shipped catalogue (`TOOLGATE_ADDR` names
/// its free port, as for the examples).
#[test]
fn the_readmes_tour_of_calls_answers_as_the_readme_says() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let script = shell_block(&readme, "Then tool calls as a model would emit them");
    let mut command = crate::common::toolgate();
    command.current_dir(repo()).args(["serve", "--pack", "courier", "--listen", "127.0.0.1:0"]);
    let (_gateway, _log, listening) = listening(&mut command);
    let addr = listening.split(' ').next().unwrap();
    // Some calls fail on purpose (exit 1): the script runs on.
    let out = bash(&script, repo(), false, &[("TOOLGATE_ADDR", addr)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "ok: track_parcel\nrepaired tool name: \"Track-Parcel\" -> \"track_parcel\"\nrepaired arguments JSON:"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("error: INVALID_ARGUMENTS (retryable)\n'day' must be between 1 and 7, got 9\n"),
        "{stdout}"
    );
    assert!(stdout.contains("error: REFUSED (not retryable)\nthis parcel was already delivered\n"), "{stdout}");
    assert!(
        stdout.contains(r#"{"type":"function","function":{"name":"track_parcel""#),
        "the OpenAI tools array: {stdout}"
    );
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_link_between_the_docs_leads_somewhere() {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let fence = regex::Regex::new(r"(?s)```.*?```").unwrap();
    let mut docs = vec![repo().join("README.md")];
    docs.extend(std::fs::read_dir(repo().join("docs")).unwrap().map(|e| e.unwrap().path()));
    let mut broken = Vec::new();
    for doc in docs.iter().filter(|p| p.extension().is_some_and(|e| e == "md")) {
        let text = std::fs::read_to_string(doc).unwrap();
        for found in link.captures_iter(&fence.replace_all(&text, "")) {
            let target = &found[1];
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() { doc.clone() } else { doc.parent().unwrap().join(path) };
            if !file.exists() {
                broken.push(format!("{}: {target} (no such file)", doc.display()));
            } else if !fragment.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let headings = std::fs::read_to_string(&file).unwrap();
                let known = headings
                    .lines()
                    .filter_map(|l| l.trim_start_matches('#').strip_prefix(' ').filter(|_| l.starts_with('#')))
                    .any(|h| anchor(h) == fragment);
                if !known {
                    broken.push(format!("{}: {target} (no such heading)", doc.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

/// Every `yaml` block of the README and `docs/`, pasted as a newcomer
/// pastes it, passes `toolgate validate`: a block of catalogue keys as a
/// catalogue file, any other as the configuration file (beside the shipped
/// catalogue). What a block names of the reader's own is made first: the
/// environment variables it reads (`${VAR}`, `api_key_env`), and the key
/// sets it names (`jwks_file`, a development JWKS).
#[test]
fn every_yaml_example_in_the_docs_passes_validate() {
    let catalogue_keys = ["tools", "toolsets", "aliases", "mcp_servers", "mcp_pins"];
    let mut docs: Vec<_> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, repo().join("README.md"));
    let (mut checked, mut failed) = (0, Vec::new());
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (at, _) in text.match_indices("```yaml\n") {
            let start = at + "```yaml\n".len();
            let block = &text[start..start + text[start..].find("```\n").expect("the block ends")];
            let line = text[..at].lines().count() + 1;
            let keys: BTreeSet<&str> = block
                .lines()
                .filter_map(|l| l.split_once(':').map(|(k, _)| k))
                .filter(|k| !k.starts_with([' ', '#', '-']))
                .collect();
            let dir = CatalogDir::new();
            std::os::unix::fs::symlink(repo().join("catalog"), dir.dir.path().join("catalog")).unwrap();
            let words = |after: &str| -> Vec<String> {
                block
                    .split(after)
                    .skip(1)
                    .map(|rest| {
                        rest.chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '/' || *c == '.' || *c == '-')
                            .collect()
                    })
                    .collect()
            };
            let vars: Vec<(String, &str)> =
                words("${").into_iter().chain(words("api_key_env: ")).map(|v| (v, "set-by-the-test")).collect();
            for file in words("jwks_file: ") {
                let made = run(dir.dir.path(), &["auth", "dev-token", "--sub", "docs", "--dir", ".dev"]);
                assert!(made.status.success());
                let path = dir.dir.path().join(&file);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::copy(dir.dir.path().join(".dev/jwks.json"), path).unwrap();
            }
            let args: &[&str] = match keys.iter().all(|k| catalogue_keys.contains(k)) {
                true => {
                    dir.file("example/example.yaml", block);
                    &["validate", "--catalog", "example"]
                }
                false => {
                    dir.file("toolgate.yaml", block);
                    &["validate", "--config", "toolgate.yaml"]
                }
            };
            let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
                .args(args)
                .current_dir(dir.dir.path())
                .envs(vars.iter().map(|(k, v)| (k.as_str(), *v)))
                .output()
                .unwrap();
            checked += 1;
            if !out.status.success() {
                failed.push(format!("{}:{line}: {}", doc.display(), String::from_utf8_lossy(&out.stderr)));
            }
        }
    }
    assert!(checked >= 7, "only {checked} yaml blocks found");
    assert!(failed.is_empty(), "examples that do not validate:\n{}", failed.join("\n"));
}
