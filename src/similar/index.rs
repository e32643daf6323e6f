//! "Did you mean" suggestions on difflib's scale, fast at 10,000 names.
//!
//! The similarity of two names is the mean of two measures of their folded
//! forms (namespace stripped, lower-cased; see [`folded`]):
//! - the normalised optimal-string-alignment similarity, `1 - OSA / longer
//!   length` (Damerau-Levenshtein with adjacent transpositions, each
//!   substring edited once), and
//! - the Sørensen-Dice coefficient of their bigrams, with start and end marks
//!   so that short names have bigrams enough to compare.
//!
//! The blend is on the scale of Python's difflib ratio (so difflib's
//! cut-offs, 0.6 and 0.5, keep their meaning): case, separator and namespace
//! drift and single typos rate 0.75 to 0.95, unrelated names well under 0.6.
//! tests/gateway/suggestion_quality.rs holds it to that on 157 real tool
//! names and 1,277 drifted and unrelated queries: the intended name first for
//! at least 99.5 % of the drifted ones (more often than difflib, which misses
//! upper-case drift), no suggestion for at least 90 % of the unrelated ones,
//! and difflib's first choice as ours in at least 97 % of the cases where
//! difflib has one.
//!
//! Edit distance alone cannot be indexed at a 0.6 cut-off: two names 40 %
//! apart may share no bigram. The Dice half makes the bigram index exact:
//! [`SuggestIndex`] counts shared bigrams through posting lists built at load,
//! bounds each name's score from above with that count and the lengths, and
//! computes the edit distance (bit-parallel, rapidfuzz) only while a bound can
//! still beat the cut-off and the best names found so far. The bound never
//! under-rates a name, so the index answers exactly what a full scan would.
//!
//! Pure: knows nothing of the catalogue; entries carry a caller-chosen target.

use std::collections::HashMap;

use rapidfuzz::distance::osa;

use super::normalise::folded;

/// Marks the start and the end of a name in its bigrams.
const START: char = '\u{2}';
const END: char = '\u{3}';

/// Similarity of two names in `[0, 1]`, on the scale of difflib's ratio.
pub fn similarity(a: &str, b: &str) -> f64 {
    let a: Vec<char> = folded(a).chars().collect();
    let b: Vec<char> = folded(b).chars().collect();
    let (ba, bb) = (bigram_counts(&a), bigram_counts(&b));
    let shared: u32 = ba.iter().map(|(k, &n)| u32::from(n.min(*bb.get(k).unwrap_or(&0)))).sum();
    let distance = osa::distance(a.iter().copied(), b.iter().copied());
    score(a.len(), b.len(), distance, shared)
}

/// The blend, from the lengths (in characters), the OSA distance and the
/// number of shared bigrams.
fn score(a_len: usize, b_len: usize, distance: usize, shared: u32) -> f64 {
    (osa_similarity(a_len, b_len, distance) + dice(a_len, b_len, shared)) / 2.0
}

fn osa_similarity(a_len: usize, b_len: usize, distance: usize) -> f64 {
    let longer = a_len.max(b_len);
    if longer == 0 {
        return 1.0;
    }
    1.0 - distance as f64 / longer as f64
}

/// A name of `n` characters has `n + 1` bigrams once marked.
fn dice(a_len: usize, b_len: usize, shared: u32) -> f64 {
    2.0 * f64::from(shared) / (a_len + b_len + 2) as f64
}

/// The highest score two names of these lengths sharing `shared` bigrams can
/// have. Each edit (insert, delete, substitute, swap two neighbours) breaks at
/// most 3 bigrams, so OSA ≥ (longer + 1 - shared) / 3; and OSA ≥ the length
/// difference.
fn upper_bound(a_len: usize, b_len: usize, shared: u32) -> f64 {
    let longer = a_len.max(b_len);
    let broken = (longer + 1).saturating_sub(shared as usize);
    let min_distance = a_len.abs_diff(b_len).max(broken.div_ceil(3));
    score(a_len, b_len, min_distance, shared)
}

/// A name found by [`SuggestIndex::suggest`].
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion<'a, T> {
    pub score: f64,
    pub target: &'a T,
}

struct Entry<T> {
    chars: Box<[char]>,
    target: T,
}

/// The fewest shared bigrams with which a name of `len` characters can reach
/// `cutoff` against a query of `query_len` (`u16::MAX`: none can). The upper
/// bound grows with the shared count, so a binary search finds it.
fn fewest_shared(query_len: usize, len: usize, cutoff: f64) -> u16 {
    let most = (query_len.min(len) + 1) as u32;
    if upper_bound(query_len, len, most) < cutoff {
        return u16::MAX;
    }
    let (mut low, mut high) = (0u32, most);
    while low < high {
        let mid = (low + high) / 2;
        if upper_bound(query_len, len, mid) >= cutoff {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    low.min(u32::from(u16::MAX - 1)) as u16
}

/// Names to suggest from, each pointing at a target (a tool, a toolset, …).
/// Several names may share a target (a tool and its aliases).
pub struct SuggestIndex<T> {
    entries: Vec<Entry<T>>,
    /// Each entry's length in characters, apart for a cache-friendly scan.
    lengths: Vec<u16>,
    longest: usize,
    /// For each bigram, the entries holding it and how often.
    postings: HashMap<u64, Vec<(u32, u16)>>,
}

impl<T: PartialEq> SuggestIndex<T> {
    /// Builds the index over `(name, target)` pairs.
    pub fn new(names: impl IntoIterator<Item = (String, T)>) -> Self {
        let entries: Vec<Entry<T>> =
            names.into_iter().map(|(name, target)| Entry { chars: folded(&name).chars().collect(), target }).collect();
        let mut postings: HashMap<u64, Vec<(u32, u16)>> = HashMap::new();
        for (id, entry) in entries.iter().enumerate() {
            for (bigram, count) in bigram_counts(&entry.chars) {
                postings.entry(bigram).or_default().push((id as u32, count));
            }
        }
        let lengths: Vec<u16> = entries.iter().map(|e| e.chars.len().min(usize::from(u16::MAX)) as u16).collect();
        let longest = lengths.iter().copied().max().unwrap_or(0) as usize;
        Self { entries, lengths, longest, postings }
    }

    /// Whether [`SuggestIndex::new`] over `names` would build this index:
    /// the same names, folded, for the same targets, in the same order.
    pub fn built_from<'n>(&self, names: impl IntoIterator<Item = (&'n str, T)>) -> bool {
        let mut names = names.into_iter();
        let same = self.entries.iter().all(|entry| {
            names.next().is_some_and(|(name, target)| {
                entry.target == target && entry.chars.iter().copied().eq(folded(name).chars())
            })
        });
        same && names.next().is_none()
    }

    /// The best `limit` targets whose names reach `cutoff` against `query`,
    /// among the targets that `accept`, best first, each target once (with the
    /// score of its nearest name). Names tied with the last one kept are kept
    /// too, so that the caller can break ties by the name it shows.
    pub fn suggest(
        &self,
        query: &str,
        cutoff: f64,
        limit: usize,
        accept: impl Fn(&T) -> bool,
    ) -> Vec<Suggestion<'_, T>> {
        if limit == 0 || self.entries.is_empty() {
            return Vec::new();
        }
        let query: Vec<char> = folded(query).chars().collect();

        // Shared bigrams of every name.
        let mut shared = vec![0u16; self.entries.len()];
        for (bigram, query_count) in bigram_counts(&query) {
            for &(id, count) in self.postings.get(&bigram).map(Vec::as_slice).unwrap_or(&[]) {
                let slot = &mut shared[id as usize];
                *slot = slot.saturating_add(count.min(query_count));
            }
        }
        // The fewest shared bigrams with which a name of each length can
        // still reach the cut-off; the bound is computed only for those.
        let needed: Vec<u16> = (0..=self.longest).map(|len| fewest_shared(query.len(), len, cutoff)).collect();
        let mut candidates: Vec<(f64, u32)> = Vec::new();
        for (id, (&common, &len)) in shared.iter().zip(&self.lengths).enumerate() {
            if common < needed[len as usize] {
                continue;
            }
            let bound = upper_bound(query.len(), len as usize, u32::from(common));
            if bound >= cutoff && accept(&self.entries[id].target) {
                candidates.push((bound, id as u32));
            }
        }

        // The names with the best bounds first: they raise the bar that the
        // others' bounds must reach before any distance is computed.
        let head = (limit * 4).max(16).min(candidates.len());
        if head < candidates.len() {
            candidates.select_nth_unstable_by(head, |a, b| b.0.total_cmp(&a.0));
        }
        let comparator = osa::BatchComparator::new(query.iter().copied());
        let mut best: Vec<Suggestion<'_, T>> = Vec::new();
        for (bound, id) in candidates {
            let bar = bar(&best, limit, cutoff);
            if bound < bar {
                continue;
            }
            let entry = &self.entries[id as usize];
            let common = u32::from(shared[id as usize]);
            let longer = query.len().max(entry.chars.len());
            // The largest distance that can still reach the bar.
            let reach = (dice(query.len(), entry.chars.len(), common) + 1.0 - 2.0 * bar) * longer as f64;
            let args = osa::Args::default().score_cutoff((reach + 1e-9).floor().max(0.0) as usize);
            let Some(distance) = comparator.distance_with_args(entry.chars.iter().copied(), &args) else {
                continue;
            };
            let score = score(query.len(), entry.chars.len(), distance, common);
            if score >= bar {
                keep(&mut best, Suggestion { score, target: &entry.target }, limit);
            }
        }
        best
    }
}

/// The score a name must reach to enter `best`.
fn bar<T>(best: &[Suggestion<'_, T>], limit: usize, cutoff: f64) -> f64 {
    match best.get(limit - 1) {
        Some(last) => last.score.max(cutoff),
        None => cutoff,
    }
}

/// Adds a found name: each target once with its best score, best first, the
/// first `limit` and any tied with the last of them.
fn keep<'a, T: PartialEq>(best: &mut Vec<Suggestion<'a, T>>, found: Suggestion<'a, T>, limit: usize) {
    match best.iter_mut().find(|s| s.target == found.target) {
        Some(same) if same.score >= found.score => return,
        Some(same) => same.score = found.score,
        None => best.push(found),
    }
    best.sort_by(|a, b| b.score.total_cmp(&a.score));
    if let Some(last) = best.get(limit - 1).map(|s| s.score) {
        best.retain(|s| s.score >= last);
    }
}

/// Bigrams of a name with its start and end marked, counted.
fn bigram_counts(chars: &[char]) -> HashMap<u64, u16> {
    let mut counts = HashMap::with_capacity(chars.len() + 1);
    let mut previous = START;
    for &c in chars.iter().chain([END].iter()) {
        let key = (u64::from(previous) << 32) | u64::from(c);
        let n = counts.entry(key).or_insert(0u16);
        *n = n.saturating_add(1);
        previous = c;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(names: &[&str]) -> SuggestIndex<String> {
        SuggestIndex::new(names.iter().map(|n| (n.to_string(), n.to_string())))
    }

    fn names(index: &SuggestIndex<String>, query: &str, cutoff: f64, limit: usize) -> Vec<String> {
        index.suggest(query, cutoff, limit, |_| true).into_iter().map(|s| s.target.clone()).collect()
    }

    /// An index is built from its names only if they are the same, folded,
    /// for the same targets, in the same order, and no more or fewer.
    #[test]
    fn an_index_is_built_from_exactly_its_names() {
        let built = SuggestIndex::new([("Lookup_Order".to_owned(), 0), ("refund".to_owned(), 1)]);
        assert!(built.built_from([("lookup_order", 0), ("REFUND", 1)]));
        assert!(!built.built_from([("lookup_order", 0)]));
        assert!(!built.built_from([("lookup_order", 0), ("refund", 1), ("cancel", 2)]));
        assert!(!built.built_from([("lookup_order", 0), ("refund", 2)]));
        assert!(!built.built_from([("refund", 1), ("lookup_order", 0)]));
    }

    #[test]
    fn the_edit_distance_is_the_one_strsim_defines() {
        for (a, b) in [("web_serch", "web_search"), ("ecoh", "echo"), ("ca", "abc"), ("", "abc"), ("日本語", "日語本")]
        {
            let a_chars: Vec<char> = a.chars().collect();
            let b_chars: Vec<char> = b.chars().collect();
            let ours = osa::distance(a_chars.iter().copied(), b_chars.iter().copied());
            assert_eq!(ours, strsim::osa_distance(a, b), "{a} / {b}");
        }
    }

    #[test]
    fn scores_are_on_difflibs_scale() {
        let close = |a, b, lo, hi| {
            let s = similarity(a, b);
            assert!((lo..=hi).contains(&s), "{a} / {b}: {s}");
        };
        close("web_serch", "web_search", 0.85, 0.95);
        close("WebSearch", "web_search", 0.75, 0.9);
        close("functions.web_search", "web_search", 1.0, 1.0);
        close("launch_rocket", "web_search", 0.0, 0.3);
        close("calculater", "calculator", 0.8, 0.9);
        assert_eq!(similarity("", ""), 1.0);
    }

    #[test]
    fn single_typos_find_the_intended_name() {
        let idx = index(&["web_search", "exa_search", "calculator", "current_time", "reschedule_delivery"]);
        for typo in ["web_serch", "web_saerch", "wbe_search", "web_searchh", "web_seerch", "eb_search"] {
            assert_eq!(names(&idx, typo, 0.6, 3).first().map(String::as_str), Some("web_search"), "{typo}");
        }
        assert_eq!(names(&idx, "calculater", 0.6, 3), ["calculator"]);
        assert_eq!(names(&idx, "reshedule_delivery", 0.6, 3), ["reschedule_delivery"]);
    }

    #[test]
    fn case_separator_and_namespace_drift_find_the_name() {
        let idx = index(&["web_search", "get_weather_forecast", "list_notes"]);
        assert_eq!(names(&idx, "WebSearch", 0.6, 3), ["web_search"]);
        assert_eq!(names(&idx, "web-search", 0.6, 3), ["web_search"]);
        assert_eq!(names(&idx, "GetWeatherForecast", 0.6, 3), ["get_weather_forecast"]);
        assert_eq!(names(&idx, "functions.web_search", 0.6, 3), ["web_search"]);
        assert_eq!(names(&idx, "mcp__notes__List-Notes", 0.6, 3), ["list_notes"]);
    }

    #[test]
    fn unrelated_words_get_nothing() {
        let idx = index(&["web_search", "calculator", "current_time", "echo", "send_email", "create_issue"]);
        for word in ["launch_rocket", "zzz", "banana", "transfer_funds", "x"] {
            assert!(names(&idx, word, 0.6, 3).is_empty(), "{word}: {:?}", names(&idx, word, 0.6, 3));
        }
    }

    #[test]
    fn best_first_and_limited() {
        let idx = index(&["exa_search", "web_fetch", "web_search", "weather"]);
        // 0.88, 0.69, 0.54 (difflib: 0.95, 0.78, 0.63).
        assert_eq!(names(&idx, "web_serch", 0.6, 3), ["web_search", "web_fetch"]);
        assert_eq!(names(&idx, "web_serch", 0.6, 1), ["web_search"]);
        assert_eq!(names(&idx, "web_serch", 0.5, 3), ["web_search", "web_fetch", "exa_search"]);
    }

    #[test]
    fn ties_with_the_last_kept_are_all_returned() {
        let idx = index(&["get_user", "set_user", "let_user"]);
        let found = names(&idx, "xet_user", 0.6, 1);
        assert_eq!(found.len(), 3, "{found:?}");
    }

    #[test]
    fn one_entry_per_target() {
        let idx =
            SuggestIndex::new([("web_search".to_owned(), 1), ("websearch".to_owned(), 1), ("web_fetch".to_owned(), 2)]);
        let found = idx.suggest("web_serch", 0.5, 3, |_| true);
        assert_eq!(found.iter().map(|s| *s.target).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(found[0].score, similarity("web_serch", "web_search"));
    }

    #[test]
    fn accept_filters_targets() {
        let idx = index(&["web_search", "exa_search"]);
        let found: Vec<_> =
            idx.suggest("web_serch", 0.5, 3, |t| t != "web_search").into_iter().map(|s| s.target).collect();
        assert_eq!(found, ["exa_search"]);
    }

    #[test]
    fn empty_query_and_empty_index() {
        assert!(names(&index(&["a"]), "", 0.6, 3).is_empty());
        assert!(names(&index(&[]), "abc", 0.6, 3).is_empty());
        assert_eq!(names(&index(&["a", ""]), "", 0.6, 3), [""]);
    }

    /// The index answers exactly what a full scan would.
    #[test]
    fn index_agrees_with_a_full_scan() {
        let pool = [
            "web_search",
            "exa_search",
            "search_web",
            "get_user",
            "get_users",
            "set_user",
            "delete_user",
            "list_issues",
            "create_issue",
            "update_issue",
            "ab",
            "ba",
            "abc",
            "a",
            "get_file_contents",
            "push_files",
            "create_pull_request",
            "list_pull_requests",
            "merge_pull_request",
            "ɑbc",
            "日本語ツール",
            "aaaa",
            "abab",
            "baba",
            "x_y_z",
            "zyx",
        ];
        let idx = index(&pool);
        let queries = [
            "web_serch",
            "searchweb",
            "getuser",
            "get-users",
            "ab",
            "b",
            "ba",
            "crate_issue",
            "list_pull_request",
            "日本語ツル",
            "pushfiles",
            "get_file_content",
            "x",
            "merge_pr",
            "delete",
            "aa",
            "",
            "bbbb",
            "xyz",
            "WEB SEARCH",
            "tools.get_user",
            "a_b_a_b",
        ];
        for cutoff in [0.3, 0.5, 0.6, 0.8] {
            for limit in [1, 3, 100] {
                for query in queries {
                    let mut scored: Vec<(f64, &str)> =
                        pool.iter().map(|n| (similarity(query, n), *n)).filter(|(s, _)| *s >= cutoff).collect();
                    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
                    let expected: Vec<&str> = scored.iter().take(limit).map(|(_, n)| *n).collect();
                    let mut got: Vec<(f64, String)> = idx
                        .suggest(query, cutoff, limit, |_| true)
                        .into_iter()
                        .map(|s| (s.score, s.target.clone()))
                        .collect();
                    got.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                    let got: Vec<&str> = got.iter().take(limit).map(|(_, n)| n.as_str()).collect();
                    assert_eq!(got, expected, "query {query:?} cutoff {cutoff} limit {limit}");
                }
            }
        }
    }
}
