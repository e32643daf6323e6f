//! Suggestion quality measured against Python's difflib on real tool names
//! (tests/data: 157 names from public MCP servers and agent toolkits, 1,277
//! drifted and unrelated queries, difflib's answers; regenerate with
//! `python3 tests/data/difflib_reference.py`).

use serde::Deserialize;
use toolgate::similar::SuggestIndex;

use crate::common::repo;

#[derive(Deserialize)]
struct Case {
    query: String,
    intended: Option<String>,
    kind: String,
    difflib: Vec<String>,
}

#[test]
fn suggestions_find_drifted_names_and_agree_with_difflib() {
    let names: Vec<String> = std::fs::read_to_string(repo().join("tests/data/tool_names.txt"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let cases: Vec<Case> =
        serde_json::from_str(&std::fs::read_to_string(repo().join("tests/data/difflib_reference.json")).unwrap())
            .unwrap();
    let index = SuggestIndex::new(names.iter().map(|n| (n.clone(), n.clone())));
    let top3 = |query: &str| -> Vec<String> {
        let mut found: Vec<(f64, &String)> =
            index.suggest(query, 0.6, 3, |_| true).into_iter().map(|s| (s.score, s.target)).collect();
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        found.into_iter().take(3).map(|(_, n)| n.clone()).collect()
    };

    let (mut drift, mut drift_hit, mut difflib_hit) = (0, 0, 0);
    let (mut unrelated, mut unrelated_silent) = (0, 0);
    let (mut compared, mut agreed) = (0, 0);
    let mut misses = Vec::new();
    for case in &cases {
        let ours = top3(&case.query);
        match &case.intended {
            Some(intended) => {
                drift += 1;
                if ours.first() == Some(intended) {
                    drift_hit += 1;
                } else {
                    misses.push(format!("{} ({}): {:?}", case.query, case.kind, ours));
                }
                difflib_hit += usize::from(case.difflib.first() == Some(intended));
            }
            None => {
                unrelated += 1;
                unrelated_silent += usize::from(ours.is_empty());
            }
        }
        if let Some(first) = case.difflib.first() {
            compared += 1;
            agreed += usize::from(ours.first() == Some(first));
        }
    }
    println!(
        "drifted: {drift_hit}/{drift} intended name first (difflib: {difflib_hit}/{drift}); \
         unrelated: {unrelated_silent}/{unrelated} without suggestion; \
         top suggestion equal to difflib's: {agreed}/{compared}"
    );
    // Typos, case, separator and namespace drift must find the intended name.
    assert!(drift_hit * 1000 >= drift * 995, "{drift_hit}/{drift}; misses: {misses:#?}");
    assert!(drift_hit > difflib_hit, "at least as good as difflib, which misses upper-case drift");
    // Unrelated words should get no suggestion.
    assert!(unrelated_silent * 10 >= unrelated * 9, "{unrelated_silent}/{unrelated}");
    // Where difflib suggests, its first choice is ours too.
    assert!(agreed * 100 >= compared * 97, "{agreed}/{compared}");
}
