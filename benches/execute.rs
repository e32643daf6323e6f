//! The Execute core without dispatch (resolve the name, parse and repair the
//! arguments, validate them: `Executor::prepare`) against catalogues of 100,
//! 1,000 and 10,000 tools: an exact hit, a drifted name repaired, and a miss.
//!
//! `cargo bench --bench execute`; numbers in BENCHMARKS.md.

mod catalogue;

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use toolgate::exec::{Call, ExecLimits, Executor};

/// A realistic tool: three typed parameters, one required, no extras.
const PARAMETERS: &str = "{type: object, properties: {id: {type: string, pattern: \"^[a-z0-9-]+$\"}, \
    limit: {type: integer, minimum: 1, maximum: 100}, include_archived: {type: boolean}}, \
    required: [id], additionalProperties: false}";

fn executor(n: usize) -> (Executor, Vec<String>) {
    let (catalog, names) = catalogue::load(n, PARAMETERS);
    (Executor::standalone(Arc::new(catalog), ExecLimits::default()).unwrap(), names)
}

/// `github_list_issue` → `GithubListIssue`.
fn camel(name: &str) -> String {
    name.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect()
}

fn prepare(c: &mut Criterion) {
    let mut group = c.benchmark_group("prepare");
    let arguments = r#"{"id": "issue-1042", "limit": 20, "include_archived": false}"#;
    for n in [100, 1_000, 10_000] {
        let (executor, names) = executor(n);
        let target = &names[n / 2];
        let call = |tool: String| Call { tool, arguments_json: arguments.into(), ..Call::default() };
        let hit = call(target.clone());
        let repaired = call(camel(target));
        let miss = call(format!("{}x", &target[..target.len() - 1]));
        assert!(executor.prepare(&hit).unwrap().is_ok());
        let ready = executor.prepare(&repaired).unwrap().expect("the drifted name is repaired");
        assert_eq!(ready.repairs.len(), 1);
        let outcome = executor.prepare(&miss).unwrap().expect_err("a miss");
        let error = outcome.result.unwrap_err();
        assert_eq!(error.suggestions.first(), Some(target), "{}", error.message);
        group.bench_with_input(BenchmarkId::new("hit", n), &hit, |b, c| b.iter(|| executor.prepare(c)));
        group.bench_with_input(BenchmarkId::new("repaired_name", n), &repaired, |b, c| b.iter(|| executor.prepare(c)));
        group.bench_with_input(BenchmarkId::new("miss", n), &miss, |b, c| b.iter(|| executor.prepare(c)));
    }
    group.finish();
}

criterion_group!(benches, prepare);
criterion_main!(benches);
