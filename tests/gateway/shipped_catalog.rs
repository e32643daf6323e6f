//! The catalogue shipped in `catalog/` loads under strict validation with
//! every pack enabled, and shows aliases and toolsets.

use std::path::PathBuf;

use toolgate::catalog::{self, LoadOptions};

use crate::common::{repo, run, stderr};

fn every_pack() -> Vec<String> {
    let dir = repo().join("catalog/packs");
    let mut packs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_owned())
        .collect();
    packs.sort();
    packs
}

/// Every YAML file under catalog/ is either a registry file or a pack.
#[test]
fn every_file_under_catalog_loads_strictly() {
    let yaml: Vec<PathBuf> = walk(&repo().join("catalog"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    let registry: Vec<&PathBuf> = yaml.iter().filter(|p| p.parent() == Some(&repo().join("catalog"))).collect();
    let packs: Vec<&PathBuf> = yaml.iter().filter(|p| p.parent() == Some(&repo().join("catalog/packs"))).collect();
    assert_eq!(registry.len() + packs.len(), yaml.len(), "YAML outside catalog/ and catalog/packs/: {yaml:?}");
    assert!(!packs.is_empty());

    let options = LoadOptions {
        registry: vec![repo().join("catalog")],
        packs_dir: repo().join("catalog/packs"),
        packs: every_pack(),
        strict: true,
    };
    let loaded = catalog::load(&options, &crate::common::test_env(&[])).unwrap_or_else(|e| panic!("{:#?}", e.problems));
    let catalog = &loaded.catalog;
    assert!(loaded.warnings.is_empty());
    assert!(catalog.tools().iter().any(|t| !t.aliases.is_empty() && t.source.to_string().starts_with("pack:")));
    assert!(catalog.tools().iter().any(|t| !t.aliases.is_empty() && t.source.to_string() == "registry"));
    assert!(catalog.toolsets().len() >= 2);
}

#[test]
fn validate_strict_accepts_the_shipped_catalogue() {
    let mut args = vec!["validate".to_owned(), "--strict".to_owned()];
    for pack in every_pack() {
        args.extend(["--pack".to_owned(), pack]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(repo(), &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// The shipped tools work end to end: the courier pack's script backend, the
/// registry's tools on built-ins.
#[tokio::test]
async fn the_shipped_tools_answer_through_execute() {
    use toolgate::proto::v1::ErrorKind;

    use crate::common::{error, execute, kind, TestGateway};

    let flags = toolgate::config::Flags {
        catalog: vec![repo().join("catalog")],
        packs_dir: Some(repo().join("catalog/packs")),
        packs: every_pack(),
        ..Default::default()
    };
    let mut gw = TestGateway::flags(flags).start().await;
    let response = execute(&mut gw.client, "parcel_status", r#"{"code": "PK-1001"}"#).await;
    assert!(response.ok, "{response:?}");
    let result: serde_json::Value = serde_json::from_str(&response.result_json).unwrap();
    assert_eq!(result["status"], "in transit");
    let response = execute(&mut gw.client, "RescheduleDelivery", r#"{"code": "PK-1002", "day": 2}"#).await;
    assert_eq!(kind(&response), ErrorKind::Refused);
    assert_eq!(error(&response).message, "this parcel was already delivered");
    let response = execute(&mut gw.client, "track_parcel", r#"{"code": "PK-4040"}"#).await;
    assert_eq!(kind(&response), ErrorKind::NotFound);
    let response = execute(&mut gw.client, "compute", r#"{"expression": "(12.5 * 4) / 3"}"#).await;
    assert!(response.result_json.contains("16.666"), "{}", response.result_json);
    let response = execute(&mut gw.client, "time_in_city", r#"{"timezone": "Europe/Paris"}"#).await;
    assert!(response.ok, "{response:?}");
}
