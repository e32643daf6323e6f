//! The words of a text as the index compares them: runs of letters and
//! digits (`s3`, `ipv6` stay whole), split again where a name changes case
//! (`createPullRequest`), lower-cased, and stemmed (Snowball's English
//! stemmer, so `creates`, `created` and `creating` are one word). Single
//! letters are left out.
//!
//! Beside the words, the shapes of the values a text holds: an issue key
//! (`ENG-88`, `PROJ-123`), an email address, a URL, a phone number in
//! E.164 form, an IPv4 address, a UUID. A task that says `ENG-88` asks for a
//! tool whose description shows a value of that shape (`(e.g., ABC-123)`),
//! whatever words either uses.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, LazyLock},
};

use regex::Regex;

use rust_stemmers::{Algorithm, Stemmer};

/// Splits and stems text.
pub(crate) struct Words {
    stemmer: Stemmer,
}

impl Default for Words {
    fn default() -> Self {
        Self { stemmer: Stemmer::create(Algorithm::English) }
    }
}

impl Words {
    /// The words of `text`, in order.
    pub(crate) fn of(&self, text: &str) -> Vec<String> {
        let mut words = Vec::new();
        lowered(text, |word| words.push(self.stemmer.stem(word).into_owned()));
        words
    }

    /// The words of `text`, in order, lower-cased but not stemmed.
    pub(crate) fn unstemmed(&self, text: &str) -> Vec<String> {
        let mut words = Vec::new();
        lowered(text, |word| words.push(word.to_owned()));
        words
    }

    /// Whether `word` (lower-cased) names several things: a plural the
    /// stemmer takes back to its singular (`issues`, `teams`, `watchers`),
    /// not a word that only ends in s (`status`, `access`, `news`).
    pub(crate) fn plural(&self, word: &str) -> bool {
        word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") && self.stemmer.stem(word) != word
    }
}

/// The shapes of values, each a capture group named for the term it gives.
static SHAPES: LazyLock<Regex> = LazyLock::new(|| {
    // ASCII word boundaries (`(?-u:\b)`): the lazy DFA takes those, not
    // Unicode ones.
    Regex::new(concat!(
        r"(?P<url>(?-u:\b)https?://[^\s)]+)",
        r"|(?P<email>(?-u:\b)[A-Za-z0-9_.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?-u:\b))",
        r"|(?P<uuid>(?-u:\b)[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?-u:\b))",
        r"|(?P<key>(?-u:\b)[A-Z][A-Z0-9]{1,9}-[0-9]+(?-u:\b))",
        r"|(?P<phone>\+[0-9]{7,15}(?-u:\b))",
        r"|(?P<ip>(?-u:\b)[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?-u:\b))",
    ))
    .expect("the shapes' expression")
});

/// The term each shape gives: not a word (no word holds `<`).
const SHAPE_TERMS: [(&str, &str); 6] = [
    ("url", "<url>"),
    ("email", "<email>"),
    ("uuid", "<uuid>"),
    ("key", "<key>"),
    ("phone", "<phone>"),
    ("ip", "<ip>"),
];

/// Calls `each` with the term of every value's shape in `text`, in order.
pub(crate) fn shapes(text: &str, mut each: impl FnMut(&'static str)) {
    for found in SHAPES.captures_iter(text) {
        if let Some(&(_, term)) = SHAPE_TERMS.iter().find(|(group, _)| found.name(group).is_some()) {
            each(term);
        }
    }
}

/// Words that repeat (an index's): each word's stem is found once.
pub(crate) struct Stems<'w> {
    words: &'w Words,
    known: HashMap<String, Arc<str>>,
}

impl<'w> Stems<'w> {
    pub(crate) fn new(words: &'w Words) -> Self {
        Self { words, known: HashMap::new() }
    }

    /// The words these stems are of.
    pub(crate) fn words(&self) -> &'w Words {
        self.words
    }

    /// Calls `each` with the stem of every word of `text`, in order.
    pub(crate) fn each(&mut self, text: &str, mut each: impl FnMut(&Arc<str>)) {
        lowered(text, |word| match self.known.get(word) {
            Some(stem) => each(stem),
            None => {
                let stem: Arc<str> = self.words.stemmer.stem(word).into();
                each(&stem);
                self.known.insert(word.to_owned(), stem);
            }
        });
    }
}

/// `text` with each run of letters and digits that [`parts`] would split
/// (`GitHub`) lower-cased, so that it is one word, where `whole` says so of
/// it lower-cased.
pub(crate) fn whole(text: &str, whole: impl Fn(&str) -> bool) -> Cow<'_, str> {
    let mut read = Cow::Borrowed(text);
    let mut at = 0;
    // Each run with the one separator after it, if any.
    for piece in text.split_inclusive(|c: char| !c.is_alphanumeric()) {
        let run = piece.trim_end_matches(|c: char| !c.is_alphanumeric());
        if parts(run).nth(1).is_some() {
            let lowered = run.to_lowercase();
            if lowered.len() == run.len() && whole(&lowered) {
                read.to_mut().replace_range(at..at + run.len(), &lowered);
            }
        }
        at += piece.len();
    }
    read
}

/// Calls `each` with every word of `text` of two characters or more,
/// lower-cased.
fn lowered(text: &str, mut each: impl FnMut(&str)) {
    let mut lower = String::new();
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        for part in parts(run) {
            if part.chars().nth(1).is_none() {
                continue;
            }
            lower.clear();
            lower.extend(part.chars().flat_map(char::to_lowercase));
            each(&lower);
        }
    }
}

/// A run of letters and digits split where the case turns from lower to
/// upper (`pullRequest`), and before the last capital of a capital run
/// followed by a lower-case letter (`HTTPServer`: `HTTP`, `Server`).
fn parts(run: &str) -> impl Iterator<Item = &str> {
    let chars: Vec<(usize, char)> = run.char_indices().collect();
    let mut cuts = vec![0];
    for i in 1..chars.len() {
        let (previous, current) = (chars[i - 1].1, chars[i].1);
        let next = chars.get(i + 1).map(|&(_, c)| c);
        let cut = (previous.is_lowercase() && current.is_uppercase())
            || (previous.is_uppercase() && current.is_uppercase() && next.is_some_and(char::is_lowercase));
        if cut {
            cuts.push(chars[i].0);
        }
    }
    cuts.push(run.len());
    (0..cuts.len() - 1).map(move |i| &run[cuts[i]..cuts[i + 1]]).filter(|part| !part.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_on_separators_and_case() {
        let words = Words::default();
        assert_eq!(words.of("createPullRequest"), ["creat", "pull", "request"]);
        assert_eq!(words.of("API-get-user"), ["api", "get", "user"]);
        assert_eq!(words.of("kubectl_get"), ["kubectl", "get"]);
        assert_eq!(words.of("HTTPServer on ipv6, s3"), ["http", "server", "on", "ipv6", "s3"]);
        assert_eq!(words.of("Creates the issues; creating issue"), ["creat", "the", "issu", "creat", "issu"]);
        assert_eq!(words.of("a b 7"), Vec::<String>::new());
        assert_eq!(words.of("Größe ändern"), ["größe", "ändern"]);
    }

    #[test]
    fn a_run_split_by_case_can_be_read_whole() {
        let known = |word: &str| ["github", "hubspot"].contains(&word);
        let words = Words::default();
        let read = whole("Ask GitHub, not HubSpot's JavaScript: Größe", known);
        assert_eq!(read, "Ask github, not hubspot's JavaScript: Größe");
        assert_eq!(words.of(&read), ["ask", "github", "not", "hubspot", "java", "script", "größe"]);
        assert!(matches!(whole("github and git", known), Cow::Borrowed(_)));
        // Separators of any width before and between runs.
        let read = whole("«GitHub»—🚀HubSpot…İstanbulGitHub GitHub", known);
        assert_eq!(read, "«github»—🚀hubspot…İstanbulGitHub github");
    }

    #[test]
    fn plurals_are_told_from_words_ending_in_s() {
        let words = Words::default();
        for plural in ["issues", "teams", "watchers", "countries", "transitions"] {
            assert!(words.plural(plural), "{plural}");
        }
        for word in ["status", "access", "news", "its", "issue", "kvs"] {
            assert!(!words.plural(word), "{word}");
        }
        assert_eq!(words.unstemmed("getIssueWatchers of PROJ"), ["get", "issue", "watchers", "of", "proj"]);
    }

    #[test]
    fn values_give_their_shapes() {
        let mut found = Vec::new();
        let text = "Move ENG-88 (e.g., ABC-123) to bob@example.com at https://x.io/a, call +14155550100 \
                    from 203.0.113.10 for 35f984c1-7dd8-4571-8606-459e31277d35; not 3-4 or a-1 or 1.2.3";
        shapes(text, |term| found.push(term));
        assert_eq!(found, ["<key>", "<key>", "<email>", "<url>", "<phone>", "<ip>", "<uuid>"]);
    }

    #[test]
    fn stems_found_once_are_the_same_stems() {
        let words = Words::default();
        let mut stems = Stems::new(&words);
        let text = "Creates the issues; creating issue createPullRequest";
        let mut found = Vec::new();
        for _ in 0..2 {
            stems.each(text, |stem| found.push(stem.to_string()));
        }
        assert_eq!(found, [words.of(text), words.of(text)].concat());
    }
}
