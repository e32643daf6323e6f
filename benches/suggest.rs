//! Resolve's cost for a hit and for a miss (with suggestions) against
//! catalogues of 100, 1,000 and 10,000 realistic tool names.
//!
//! `cargo bench --bench suggest`; numbers in docs/benchmarks.md.

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
// The support modules are modules of this one binary.
#![allow(unreachable_pub)]

#[path = "support/catalogue.rs"]
mod catalogue;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use toolgate::{
    resolve,
    similar::{self, SuggestIndex},
};

/// A typo of an existing name: one letter dropped in the middle.
fn typo(name: &str) -> String {
    let mid = name.len() / 2;
    format!("{}{}", &name[..mid], &name[mid + 1..])
}

fn resolve_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("resolve");
    for n in [100, 1_000, 10_000] {
        let (catalog, names) = catalogue::load(n, "{type: object, properties: {id: {type: string}}}");
        let hit = [names[n / 2].clone()];
        let miss_typo = [typo(&names[n / 3])];
        let miss_unrelated = ["launch_rocket_now".to_owned()];
        assert_eq!(resolve::resolve(&catalog, &hit).tools.len(), 1);
        let typo_resolution = resolve::resolve(&catalog, &miss_typo);
        assert_eq!(typo_resolution.unknown[0].suggestions[0], names[n / 3], "the typo finds its name");
        group.bench_with_input(BenchmarkId::new("hit", n), &hit, |b, q| b.iter(|| resolve::resolve(&catalog, q)));
        group.bench_with_input(BenchmarkId::new("miss_typo", n), &miss_typo, |b, q| {
            b.iter(|| resolve::resolve(&catalog, q))
        });
        group.bench_with_input(BenchmarkId::new("miss_unrelated", n), &miss_unrelated, |b, q| {
            b.iter(|| resolve::resolve(&catalog, q))
        });
    }
    group.finish();
}

/// The index alone against a brute-force scan, at 10,000 names.
fn index_vs_scan(c: &mut Criterion) {
    let names = catalogue::tool_names(10_000);
    let index = SuggestIndex::new(names.iter().enumerate().map(|(i, n)| (n.clone(), i)));
    let query = typo(&names[3_333]);
    let mut group = c.benchmark_group("suggest_10000");
    group.bench_function("index", |b| b.iter(|| index.suggest(&query, 0.6, 3, |_| true).len()));
    group.bench_function("brute_force_scan", |b| {
        b.iter(|| names.iter().filter(|n| similar::similarity(&query, n) >= 0.6).count())
    });
    group.finish();
}

criterion_group!(benches, resolve_bench, index_vs_scan);
criterion_main!(benches);
