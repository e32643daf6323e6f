//! Tool search: which of a caller's tools fit a task written in words.
//!
//! Okapi BM25 over each tool's fields, weighted: its name (split into words
//! at `_`, `-` and case changes) and aliases count three times, its
//! description, parameter names and parameter descriptions once (`words.rs`
//! says what a word is). The statistics BM25 needs (how many tools, how
//! long a tool is on average, how many tools hold a word) are computed at
//! each search over the tools searched only: a tool the caller may not use
//! changes no score the caller sees, and an absent tool and a hidden one are
//! answered alike.
//!
//! A leaf like [`crate::similar`]: it knows documents by their position, not
//! the catalogue; the catalogue builds one index per snapshot.

mod words;

use std::{collections::HashMap, sync::Arc};

use words::{Stems, Words};

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;
/// How much a word of the name or an alias counts against one of the text.
const NAME_WEIGHT: f32 = 3.0;

/// What is searched of one tool.
#[derive(Clone, Copy, Debug, Default)]
pub struct Document<'d> {
    pub name: &'d str,
    pub aliases: &'d [String],
    pub description: &'d str,
    /// Each parameter's name and description.
    pub parameters: &'d [(String, String)],
}

/// The words of every document of one catalogue, by document.
pub struct SearchIndex {
    words: Words,
    /// Each word's documents (ascending) with the word's weighted count in
    /// each.
    postings: HashMap<Arc<str>, Vec<(u32, f32)>>,
    /// Each document's weighted length.
    lengths: Vec<f32>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("documents", &self.lengths.len())
            .field("words", &self.postings.len())
            .finish()
    }
}

impl SearchIndex {
    /// The index of `documents`, each known by its position.
    pub fn build<'d>(documents: impl IntoIterator<Item = Document<'d>>) -> Self {
        let words = Words::default();
        let mut stems = Stems::new(&words);
        let mut postings: HashMap<Arc<str>, Vec<(u32, f32)>> = HashMap::new();
        let mut lengths = Vec::new();
        let mut counts: HashMap<Arc<str>, f32> = HashMap::new();
        for (position, document) in documents.into_iter().enumerate() {
            counts.clear();
            let mut add = |text: &str, weight: f32| {
                stems.each(text, |stem| *counts.entry(Arc::clone(stem)).or_default() += weight)
            };
            add(document.name, NAME_WEIGHT);
            for alias in document.aliases {
                add(alias, NAME_WEIGHT);
            }
            add(document.description, 1.0);
            for (name, description) in document.parameters {
                add(name, 1.0);
                add(description, 1.0);
            }
            let position = u32::try_from(position).expect("fewer than 2^32 tools");
            lengths.push(counts.values().sum());
            for (word, weight) in counts.drain() {
                postings.entry(word).or_default().push((position, weight));
            }
        }
        drop(stems);
        Self { words, postings, lengths }
    }

    /// The bytes the index holds: its words, their lists and the lengths
    /// (what it allocates, counted; not the maps' own overhead).
    pub fn bytes(&self) -> usize {
        let lists: usize = self.postings.iter().map(|(word, list)| word.len() + list.capacity() * 8 + 48).sum();
        lists + self.lengths.capacity() * 4
    }

    /// How many documents the index holds.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The `limit` documents among `among` (positions, each once) that fit
    /// `query` best, best first, with their scores; documents sharing no
    /// word with the query are never returned. Equal scores keep position
    /// order.
    pub fn search(&self, query: &str, among: &[u32], limit: usize) -> Vec<(u32, f32)> {
        let mut terms = self.words.of(query);
        terms.sort_unstable();
        terms.dedup();
        let mut searched = vec![false; self.lengths.len()];
        let mut total = 0.0;
        for &document in among {
            if let Some(slot) = searched.get_mut(document as usize) {
                *slot = true;
                total += self.lengths[document as usize];
            }
        }
        let count = among.iter().filter(|&&d| (d as usize) < self.lengths.len()).count() as f32;
        if count == 0.0 {
            return Vec::new();
        }
        let average = (total / count).max(f32::MIN_POSITIVE);
        let mut scores = vec![0.0f32; self.lengths.len()];
        let mut scored = Vec::new();
        for term in &terms {
            let Some(postings) = self.postings.get(term.as_str()) else { continue };
            let within = || postings.iter().filter(|(document, _)| searched[*document as usize]);
            let holding = within().count() as f32;
            if holding == 0.0 {
                continue;
            }
            let idf = (1.0 + (count - holding + 0.5) / (holding + 0.5)).ln();
            for &(document, frequency) in within() {
                let length = self.lengths[document as usize];
                let saturated = frequency * (K1 + 1.0) / (frequency + K1 * (1.0 - B + B * length / average));
                let score = &mut scores[document as usize];
                if *score == 0.0 {
                    scored.push(document);
                }
                *score += idf * saturated;
            }
        }
        let mut ranked: Vec<(u32, f32)> =
            scored.into_iter().map(|d| (d, scores[d as usize])).filter(|&(_, score)| score > 0.0).collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(limit);
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document<'d>(name: &'d str, description: &'d str) -> Document<'d> {
        Document { name, description, ..Document::default() }
    }

    fn index() -> SearchIndex {
        SearchIndex::build([
            document("create_issue", "Create a new issue in a repository"),
            document("list_issues", "List the issues of a repository"),
            document("send_message", "Post a message to a chat channel"),
            document("delete_repository", "Delete a repository for good"),
            document("get_weather", "The weather forecast for a city"),
        ])
    }

    fn names(index: &SearchIndex, query: &str, among: &[u32]) -> Vec<u32> {
        index.search(query, among, 8).into_iter().map(|(document, _)| document).collect()
    }

    #[test]
    fn the_best_fitting_tools_come_first() {
        let index = index();
        let all = [0, 1, 2, 3, 4];
        assert_eq!(names(&index, "open a new issue", &all)[0], 0);
        assert_eq!(names(&index, "list the open issues", &all)[0], 1);
        assert_eq!(names(&index, "posting messages", &all), [2]);
        assert_eq!(names(&index, "forecast for Paris", &all)[0], 4);
        assert!(names(&index, "quantum chromodynamics", &all).is_empty());
        assert!(index.search("issue", &all, 1).len() == 1);
    }

    #[test]
    fn tools_outside_the_search_change_nothing() {
        let index = index();
        // Searched among 0, 1 and 2, the scores are those of an index that
        // never had 3 and 4.
        let alone = SearchIndex::build([
            document("create_issue", "Create a new issue in a repository"),
            document("list_issues", "List the issues of a repository"),
            document("send_message", "Post a message to a chat channel"),
        ]);
        for query in ["delete the repository", "create issue", "weather in a channel"] {
            assert_eq!(index.search(query, &[0, 1, 2], 8), alone.search(query, &[0, 1, 2], 8), "{query}");
        }
        assert!(names(&index, "delete repository forecast", &[0, 1, 2]).iter().all(|&d| d < 3));
    }

    #[test]
    fn names_count_more_than_descriptions_and_parameters_are_read() {
        let parameters = [("channel_id".to_owned(), "The Slack channel to post in".to_owned())];
        let index = SearchIndex::build([
            document("channel_archive", "Archive it"),
            document("archive", "Keeps a channel's history"),
            Document { name: "post", description: "Post a message", parameters: &parameters, ..Document::default() },
        ]);
        assert_eq!(names(&index, "channel", &[0, 1, 2])[0], 0);
        assert_eq!(names(&index, "slack", &[0, 1, 2]), [2]);
        assert!(names(&index, "archive", &[]).is_empty());
        assert!(names(&index, "archive", &[7]).is_empty(), "positions past the index are none");
    }
}
