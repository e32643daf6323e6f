//! The crate's layering, read from its source: every `crate::` path in
//! `src/` (comments aside) points to a module of a lower layer, so no module
//! imports one above it or one beside it. The layers are those `src/lib.rs`
//! and docs/architecture.md document. Front doors are modules of their own
//! (`front/grpc`, `front/mcp`, …): they share a layer and never import each
//! other, and nothing below them imports one.

use std::{collections::BTreeSet, path::Path};

use crate::common::repo;

/// Highest first; a module may use only modules of later rows.
const LAYERS: &[&[&str]] = &[
    &["main"],
    &["cli"],
    &["app"],
    &["front"],
    &["server"],
    &["live"],
    &["config"],
    &["exec"],
    &["identity"],
    &["resolve", "mcp", "state"],
    &["tls"],
    &["catalog"],
    &["similar", "search", "process", "telemetry", "proto"],
    &["env", "lock"],
];

/// The layer of a module: `front/grpc` is in the layer of `front`.
fn layer(module: &str) -> usize {
    let top = module.split('/').next().unwrap();
    LAYERS.iter().position(|row| row.contains(&top)).unwrap_or_else(|| panic!("module '{module}' has no layer"))
}

/// The module a file belongs to: `src/exec/backends/http.rs` → `exec`; a
/// front door is its folder: `src/front/grpc/serve.rs` → `front/grpc`.
fn module_of(path: &Path, src: &Path) -> String {
    let relative = path.strip_prefix(src).unwrap();
    let mut parts = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
    let first = parts.next().unwrap().trim_end_matches(".rs").to_owned();
    match (first.as_str(), parts.next()) {
        ("front", Some(door)) if door != "mod.rs" => {
            format!("front/{}", door.trim_end_matches(".rs"))
        }
        _ => first,
    }
}

/// The modules named after `crate::` in `code` (a front door by its folder:
/// `crate::front::grpc::x` → `front/grpc`), including each item of a `use
/// crate::{a::x, b}` group.
fn used_modules(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Items at depth 0 of the group, each up to its first `::`.
            let (mut depth, mut item, mut end) = (0usize, String::new(), group.len());
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = i;
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        used.insert(head(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            if !item.trim().is_empty() {
                used.insert(head(&item));
            }
            rest = &group[end..];
        } else {
            used.insert(head(rest));
        }
    }
    used.remove("");
    used
}

fn head(path: &str) -> String {
    let word = |text: &str| -> String { text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    let path = path.trim();
    let first = word(path);
    match path.strip_prefix("front::") {
        Some(rest) if !word(rest).is_empty() && word(rest) != "self" => format!("front/{}", word(rest)),
        _ => first,
    }
}

fn without_comments(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_imports_only_modules_below_it() {
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let module = module_of(file, &src);
        if module == "lib" {
            continue;
        }
        let code = without_comments(&std::fs::read_to_string(file).unwrap());
        for used in used_modules(&code) {
            // A front door may use itself and the `front` module's own items;
            // `front` (its mod.rs) may name its doors.
            let own = used == module || (module.starts_with("front/") && used == "front") || module == "front";
            if !own && layer(&used) <= layer(&module) {
                wrong.push(format!("{}: {module} uses {used}", file.strip_prefix(repo()).unwrap().display()));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layering:\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_sees_groups_and_paths() {
    let code = "use crate::{catalog::{self, Tool}, exec::Call, similar};\nlet x = crate::env::Env::default();";
    let found: Vec<String> = used_modules(code).into_iter().collect();
    assert_eq!(found, ["catalog", "env", "exec", "similar"]);
    let code = "use crate::{front::grpc::Gateway, front::mcp};\nlet y = crate::front::grpc::serve;";
    let found: Vec<String> = used_modules(code).into_iter().collect();
    assert_eq!(found, ["front/grpc", "front/mcp"]);
}

#[test]
fn front_doors_share_a_layer_and_never_meet() {
    let src = repo().join("src");
    assert_eq!(module_of(&src.join("front/grpc/serve.rs"), &src), "front/grpc");
    assert_eq!(module_of(&src.join("front/mcp.rs"), &src), "front/mcp");
    assert_eq!(module_of(&src.join("front/mod.rs"), &src), "front");
    assert_eq!(layer("front/grpc"), layer("front/mcp"));
    // One door naming another is against the layering, as a lower module
    // naming a door is.
    assert!(layer("front/mcp") <= layer("front/grpc"));
    assert!(layer("front/grpc") < layer("exec"));
}

/// The modules of each row of a layer table: the backticked or linked
/// names of its module column (`cli/`, `live.rs`, [`config`],
/// `front/grpc/ (and every other door)` → `cli`, `live`, `config`, `front`).
fn table_rows<'t>(lines: impl Iterator<Item = &'t str>) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for line in lines {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 3 || cells[0].parse::<usize>().is_err() {
            continue;
        }
        let mut names: Vec<String> = cells[1]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|name| {
                let name = name.split(['/', '.', ' ']).next().unwrap();
                name.to_owned()
            })
            .collect();
        names.dedup();
        rows.push(names);
    }
    rows
}

/// `LAYERS` without the binary's own row, each row sorted.
fn layers_rows() -> Vec<Vec<String>> {
    LAYERS[1..]
        .iter()
        .map(|row| {
            let mut row: Vec<String> = row.iter().map(|m| m.to_string()).collect();
            row.sort();
            row
        })
        .collect()
}

fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.iter_mut().for_each(|row| row.sort());
    rows
}

/// The map agrees with the code: the layer tables of `src/lib.rs` and of
/// `docs/architecture.md` name the rows this test holds the imports to,
/// and every path of `src/` the page names exists.
#[test]
fn the_map_names_the_layers_and_paths_that_exist() {
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    let lib_rows = table_rows(lib.lines().filter_map(|l| l.strip_prefix("//!")));
    // `[`env`](mod@env)` and `[`cli`]` are named in backticks too.
    assert_eq!(sorted(lib_rows), layers_rows(), "src/lib.rs's layer table");
    let page = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    assert_eq!(sorted(table_rows(page.lines())), layers_rows(), "docs/architecture.md's layer table");

    // Every path the page names: `src/…`, or a backticked path that begins
    // with a module's folder or file (`exec/rate.rs`, `front/mcp/`).
    let modules: Vec<&str> = LAYERS.iter().flat_map(|row| row.iter().copied()).collect();
    let mut named = BTreeSet::new();
    for (i, _) in page.match_indices("src/") {
        let path: String =
            page[i + 4..].chars().take_while(|c| c.is_ascii_alphanumeric() || "_/.-".contains(*c)).collect();
        named.insert(path.trim_end_matches('.').to_owned());
    }
    for quoted in page.split('`').skip(1).step_by(2) {
        let first = quoted.split(['/', '.']).next().unwrap();
        let path_like = quoted.contains('/') || quoted.ends_with(".rs");
        if path_like && modules.contains(&first) && !quoted.contains(' ') && !quoted.contains("::") {
            named.insert(quoted.trim_start_matches("src/").to_owned());
        }
    }
    let missing: Vec<&String> =
        named.iter().filter(|path| !path.is_empty() && !repo().join("src").join(path).exists()).collect();
    assert!(missing.is_empty(), "docs/architecture.md names paths of src/ that do not exist: {missing:?}");
    assert!(named.len() > 30, "the page's paths were found: {named:?}");

    // What a successor needs is in the repository: no source comment
    // points to a design document outside it.
    let mut files = Vec::new();
    rust_files(&repo().join("src"), &mut files);
    let outside: Vec<String> = files
        .iter()
        .filter(|file| std::fs::read_to_string(file).unwrap().contains("DESIGN"))
        .map(|file| file.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    assert!(outside.is_empty(), "comments citing a document outside the repository: {outside:?}");
}
