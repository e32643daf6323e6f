//! The crate's layering, read from its source: every `crate::` path in
//! `src/` (comments aside) points to a module of a lower layer, so no module
//! imports one above it or one beside it. The layers are those `src/lib.rs`
//! documents.

use std::{collections::BTreeSet, path::Path};

use crate::common::repo;

/// Highest first; a module may use only modules of later rows.
const LAYERS: &[&[&str]] = &[
    &["main"],
    &["cli"],
    &["server"],
    &["service"],
    &["live"],
    &["config"],
    &["auth"],
    &["exec"],
    &["resolve", "mcp"],
    &["catalog"],
    &["similar", "process", "telemetry", "tls", "proto", "state"],
    &["env"],
];

fn layer(module: &str) -> usize {
    LAYERS.iter().position(|row| row.contains(&module)).unwrap_or_else(|| panic!("module '{module}' has no layer"))
}

/// The top-level module a file belongs to: `src/exec/backends/http.rs` → `exec`.
fn module_of(path: &Path, src: &Path) -> String {
    let relative = path.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The top-level modules named after `crate::` in `code`, including each
/// item of a `use crate::{a::x, b}` group.
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
    path.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
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
            if used != module && layer(&used) <= layer(&module) {
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
}
