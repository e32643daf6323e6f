//! "Did you mean" suggestions on difflib's scale, fast at 10,000 names.
//!
//! The similarity of two names is the normalised Damerau-Levenshtein
//! similarity (`1 - distance / longer length`) of their folded forms
//! (namespace stripped, lower-cased; see [`folded`]). It is on the scale of
//! Python's `difflib` ratio, so difflib's cut-offs (0.6 for Resolve, 0.5 for
//! Execute) keep their meaning, and unlike Jaro-Winkler it rates unrelated
//! names low.
//!
//! A brute-force scan of 10,000 names costs milliseconds, so [`SuggestIndex`]
//! is built once at load and prunes candidates with two exact bounds before
//! computing any distance:
//! - length: `distance >= |la - lb|`, so only names of a length that can reach
//!   the cut-off are considered;
//! - shared bigrams: each edit operation (insert, delete, substitute, swap two
//!   neighbours) destroys at most 3 bigrams, so two names within distance `d`
//!   share at least `max(la, lb) - 1 - 3d` bigrams (counted as multisets).
//!
//! Neither bound ever drops a name that would pass the cut-off.
//!
//! Pure: knows nothing of the catalogue; entries carry a caller-chosen target.

use std::collections::HashMap;

use super::normalise::folded;

/// Similarity of two names in `[0, 1]`, on the scale of difflib's ratio.
pub fn similarity(a: &str, b: &str) -> f64 {
    strsim::normalized_damerau_levenshtein(&folded(a), &folded(b))
}

/// A name found by [`SuggestIndex::suggest`].
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion<'a, T> {
    pub score: f64,
    pub target: &'a T,
}

struct Entry<T> {
    folded: String,
    chars: usize,
    target: T,
}

/// Names to suggest from, each pointing at a target (a tool, a toolset, …).
/// Several names may share a target (a tool and its aliases).
pub struct SuggestIndex<T> {
    entries: Vec<Entry<T>>,
    /// Entry ids, ordered by length in characters.
    by_length: Vec<u32>,
    /// For each bigram, the entries holding it and how often.
    postings: HashMap<(char, char), Vec<(u32, u16)>>,
}

impl<T> SuggestIndex<T> {
    /// Builds the index over `(name, target)` pairs.
    pub fn new(names: impl IntoIterator<Item = (String, T)>) -> Self {
        let entries: Vec<Entry<T>> = names
            .into_iter()
            .map(|(name, target)| {
                let folded = folded(&name);
                Entry { chars: folded.chars().count(), folded, target }
            })
            .collect();
        let mut by_length: Vec<u32> = (0..entries.len() as u32).collect();
        by_length.sort_by_key(|&id| entries[id as usize].chars);
        let mut postings: HashMap<(char, char), Vec<(u32, u16)>> = HashMap::new();
        for (id, entry) in entries.iter().enumerate() {
            for (bigram, count) in bigram_counts(&entry.folded) {
                postings.entry(bigram).or_default().push((id as u32, count));
            }
        }
        Self { entries, by_length, postings }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry whose similarity to `query` is at least `cutoff` and whose
    /// target `accept`s, best first. Equal scores keep no particular order:
    /// callers break ties by the name they show.
    pub fn suggest(&self, query: &str, cutoff: f64, accept: impl Fn(&T) -> bool) -> Vec<Suggestion<'_, T>> {
        let query = folded(query);
        let query_chars = query.chars().count();
        if query_chars == 0 || self.entries.is_empty() {
            return Vec::new();
        }
        let (min_len, max_len) = length_bounds(query_chars, cutoff);
        let first = self.by_length.partition_point(|&id| self.entries[id as usize].chars < min_len);
        let last = self.by_length.partition_point(|&id| self.entries[id as usize].chars <= max_len);
        if first >= last {
            return Vec::new();
        }

        let mut shared = vec![0u16; self.entries.len()];
        for (bigram, query_count) in bigram_counts(&query) {
            if let Some(posting) = self.postings.get(&bigram) {
                for &(id, count) in posting {
                    let slot = &mut shared[id as usize];
                    *slot = slot.saturating_add(count.min(query_count));
                }
            }
        }

        let mut found = Vec::new();
        for &id in &self.by_length[first..last] {
            let entry = &self.entries[id as usize];
            let longer = entry.chars.max(query_chars);
            let max_distance = ((1.0 - cutoff) * longer as f64 + 1e-9).floor() as i64;
            let needed = longer as i64 - 1 - 3 * max_distance;
            if i64::from(shared[id as usize]) < needed || !accept(&entry.target) {
                continue;
            }
            let score = strsim::normalized_damerau_levenshtein(&query, &entry.folded);
            if score >= cutoff {
                found.push(Suggestion { score, target: &entry.target });
            }
        }
        found.sort_by(|a, b| b.score.total_cmp(&a.score));
        found
    }
}

/// The lengths (in characters) a name may have to reach `cutoff` against a
/// query of `query_chars` characters.
fn length_bounds(query_chars: usize, cutoff: f64) -> (usize, usize) {
    let q = query_chars as f64;
    if cutoff <= 0.0 {
        return (0, usize::MAX);
    }
    let min = (cutoff * q - 1e-9).ceil().max(0.0) as usize;
    let max = (q / cutoff + 1e-9).floor() as usize;
    (min, max)
}

fn bigram_counts(text: &str) -> HashMap<(char, char), u16> {
    let mut counts = HashMap::new();
    let mut chars = text.chars();
    if let Some(mut previous) = chars.next() {
        for c in chars {
            *counts.entry((previous, c)).or_insert(0u16) += 1;
            previous = c;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(names: &[&str]) -> SuggestIndex<String> {
        SuggestIndex::new(names.iter().map(|n| (n.to_string(), n.to_string())))
    }

    fn names(index: &SuggestIndex<String>, query: &str, cutoff: f64) -> Vec<String> {
        index.suggest(query, cutoff, |_| true).into_iter().map(|s| s.target.clone()).collect()
    }

    #[test]
    fn single_typos_find_the_intended_name() {
        let idx = index(&["web_search", "exa_search", "calculator", "current_time", "reschedule_delivery"]);
        for typo in ["web_serch", "web_saerch", "wbe_search", "web_searchh", "web_seerch", "eb_search"] {
            assert_eq!(names(&idx, typo, 0.6).first().map(String::as_str), Some("web_search"), "{typo}");
        }
        assert_eq!(names(&idx, "calculater", 0.6), ["calculator"]);
        assert_eq!(names(&idx, "reshedule_delivery", 0.6), ["reschedule_delivery"]);
    }

    #[test]
    fn case_separator_and_namespace_drift_find_the_name() {
        let idx = index(&["web_search", "get_weather_forecast", "list_notes"]);
        assert_eq!(names(&idx, "WebSearch", 0.6), ["web_search"]);
        assert_eq!(names(&idx, "web-search", 0.6), ["web_search"]);
        assert_eq!(names(&idx, "GetWeatherForecast", 0.6), ["get_weather_forecast"]);
        assert_eq!(names(&idx, "functions.web_search", 0.6), ["web_search"]);
        assert_eq!(names(&idx, "mcp__notes__List-Notes", 0.6), ["list_notes"]);
    }

    #[test]
    fn unrelated_words_get_nothing() {
        let idx = index(&["web_search", "calculator", "current_time", "echo", "send_email", "create_issue"]);
        for word in ["launch_rocket", "zzz", "banana", "transfer_funds", "x"] {
            assert!(names(&idx, word, 0.6).is_empty(), "{word}: {:?}", names(&idx, word, 0.6));
        }
    }

    #[test]
    fn best_first() {
        let idx = index(&["exa_search", "web_fetch", "web_search", "weather"]);
        // 0.9, 0.78 and 0.6 (difflib rates them 0.95, 0.78 and 0.63).
        assert_eq!(names(&idx, "web_serch", 0.6), ["web_search", "web_fetch", "exa_search"]);
    }

    #[test]
    fn accept_filters_targets() {
        let idx = index(&["web_search", "exa_search"]);
        let found: Vec<_> =
            idx.suggest("web_serch", 0.6, |t| t != "web_search").into_iter().map(|s| s.target).collect();
        assert_eq!(found, ["exa_search"]);
    }

    #[test]
    fn empty_query_and_empty_index() {
        assert!(names(&index(&["a"]), "", 0.6).is_empty());
        assert!(names(&index(&[]), "abc", 0.6).is_empty());
    }

    /// The pruning bounds never drop a name that a full scan would find.
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
        ];
        for cutoff in [0.3, 0.5, 0.6, 0.8] {
            for query in queries {
                let mut expected: Vec<&str> =
                    pool.iter().copied().filter(|name| similarity(query, name) >= cutoff).collect();
                expected.sort();
                let mut got = names(&idx, query, cutoff);
                got.sort();
                assert_eq!(got, expected, "query {query} cutoff {cutoff}");
            }
        }
    }
}
