//! What an outside attack on the gateway found, each fixed: through the real
//! binary or a real client.

use std::{os::unix::fs::PermissionsExt, path::Path};

use crate::common::{run, stderr, stdout, toolgate, CatalogDir};

/// An executable shell script at `path` printing `output`.
fn shell_tool(path: &Path, output: &str) {
    std::fs::write(path, format!("#!/bin/sh\ncat >/dev/null\necho '{output}'\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_relative_catalogue_runs_programs_named_by_a_relative_path() {
    let dir = CatalogDir::new();
    shell_tool(&dir.registry().join("t.sh"), r#"{"ok": true, "result": "ran"}"#);
    std::fs::create_dir_all(dir.registry().join("bin")).unwrap();
    shell_tool(&dir.registry().join("bin/u.sh"), r#"{"ok": true, "result": "ran too"}"#);
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: t\n    description: x\n    backend: {command: {argv: [./t.sh]}}\n  \
         - name: u\n    description: x\n    backend: {command: {argv: [bin/u.sh], cwd: bin}}\n",
    );
    let (mut child, _lines, listening) = crate::common::serve_registry(dir.dir.path(), &[]);
    let addr = format!("http://{}", listening.split(' ').next().unwrap());
    for (tool, result) in [("t", "\"ran\""), ("u", "\"ran too\"")] {
        let out = toolgate().args(["call", tool, "{}", "--addr", &addr]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).contains(&format!("result: {result}")), "{}", stdout(&out));
    }
    child.kill().unwrap();
}

#[test]
fn validate_names_a_program_that_is_missing_or_not_executable() {
    let dir = CatalogDir::new();
    dir.file("registry/not-exec.sh", "#!/bin/sh\n");
    dir.file(
        "registry/tools.yaml",
        "tools:\n  - name: gone\n    description: x\n    backend: {command: {argv: [./gone.sh]}}\n  \
         - name: plain\n    description: x\n    backend: {command: {argv: [./not-exec.sh]}}\n  \
         - name: nowhere\n    description: x\n    backend: {command: {argv: [no-such-program-anywhere]}}\n",
    );
    let out = run(dir.dir.path(), &["validate", "--catalog", "registry"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    let abs = std::path::absolute(dir.registry()).unwrap();
    for expected in [
        format!(
            "registry/tools.yaml: tools[0] (gone).backend.command.argv[0]: cannot run '{}/./gone.sh': the file does not exist",
            abs.display()
        ),
        format!(
            "registry/tools.yaml: tools[1] (plain).backend.command.argv[0]: cannot run '{}/./not-exec.sh': the file is not executable",
            abs.display()
        ),
        "registry/tools.yaml: tools[2] (nowhere).backend.command.argv[0]: cannot run 'no-such-program-anywhere': \
         no executable of that name on the PATH children inherit"
            .to_owned(),
    ] {
        assert!(text.contains(&expected), "{expected}\nnot in:\n{text}");
    }
}
