//! Tool search: which of a caller's tools fit a task written in words.
//!
//! Okapi BM25 over each tool's fields, weighted: its name (split into words
//! at `_`, `-` and case changes; a federated tool's name carries its
//! server's) and aliases count twice, its description once, parameter
//! names and descriptions half (`words.rs` says what a word is). On top, a
//! tool whose name the query covers gains up to `NAME_COVERAGE` (8): the
//! share of its name's words the query holds, each weighed by how rare it
//! is, so one word of the task's content matching one word of a long name
//! cannot win alone; and only when the query holds a word of the name that
//! says no kind of action (the kind rule below counts those), unless the
//! name, past its server's, is only such words (`git_pull`): "find me some
//! songs" is not `FindMovies`' for its verb. A stop word of the query
//! (`stop_words.txt`) counts a fifth, and each word also asks for its
//! near-synonyms (`synonyms.txt`, kept as data) at `SYNONYM_WEIGHT` (0.3).
//! Last, what the task asks to do
//! (its first word of a kind in `actions.txt`: create, read, list, search,
//! update, delete, start, stop; a phrasal verb, "set up", "turn off", read
//! whole) against what each tool's name says it does:
//! a tool of that kind gains `ACTION_MATCH` (1), one whose name says only
//! other kinds keeps `ACTION_OTHER` (0.9) of its score, so that among
//! siblings on one server (`create_issue`, `get_issue`,
//! `add_issue_comment`) the one that does what was asked comes first;
//! when a sibling (a tool of its group whose name does it to the same
//! thing, below) does the kind asked, it keeps `SIBLING_OTHER` (0.9) of
//! that again: "revoke the Spaces access key" finds `spaces-key-delete`
//! though the create tool's description says more of keys.
//! Two kinds are read from number as well as verbs: a name that reads
//! (`get`, `fetch`…) things named in the plural (`getIssues`,
//! `get_issue_watchers`) lists them, and a question that opens with
//! `which` or `what` and names things in the plural within its next three
//! words ("which phone numbers do we own", "what statuses can it move to")
//! asks for a list or a search, whatever verb follows; any other question
//! ("who changed the estimate", "when does it renew": `ASKING`) asks to
//! read, list or search.
//! And what the task does it to (the words after its verb, past stop
//! words and particles, up to the next stop word: "leave a comment on the
//! issue", "tear down the peering") against what a name does it to (its
//! last word that says no kind, before any stop word: `add_issue_comment`,
//! `create-index-for-model`): a tool that does
//! the kind asked to that thing gains `HEAD_MATCH` (2).
//! Then the group: the tools of one MCP server or tool pack, their words
//! pooled, are read as one document too, each word for the share of the
//! group's tools that use it and for how few groups do; the group the
//! task's own words (no stop words, no synonyms) fit best gives each of its
//! tools `GROUP_FIT` (4), the others in proportion. A task in a server's
//! vocabulary ("a MongoDB collection") then favours that server's tools
//! over another's whose name happens to say more of it. A word of the
//! task split by case ("GitHub", "HubSpot") that, lower-cased, is the name
//! of one of those groups is read whole (`github`): the user names the
//! server, not "git" and "hub". And a task that names a group (a word of it
//! is the group's name) asks for that group's tools: the others keep
//! `NAMED_OTHER` (0.7) of their score.
//!
//! The statistics BM25 needs (how many tools, how long a tool is on
//! average, how many tools hold a word) are those of the tools searched
//! only: each set of tools searched gets a view of its own (made at its
//! first search, kept among the last `VIEWS` (16)), so a tool the caller may
//! not use changes no score the caller sees and no time a search takes;
//! an absent tool and a hidden one are answered alike.
//!
//! A leaf like [`crate::similar`]: it knows documents by their position, not
//! the catalogue; the catalogue builds one index per snapshot.

mod scan;
mod words;

use std::{
    collections::{HashMap, HashSet},
    hash::{Hash, Hasher},
    sync::{Arc, LazyLock, Mutex},
};

pub use scan::scan;
use words::{Stems, Words};

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;
/// How much a word of the name or an alias counts against one of the
/// description.
const NAME_WEIGHT: f32 = 2.0;
/// How much a word of a parameter's name or description counts.
const PARAMETER_WEIGHT: f32 = 0.5;
/// How much a stop word of the query counts against one that says what
/// the task is.
const STOP_WEIGHT: f32 = 0.2;
/// How much a near-synonym of a query word counts against the word.
const SYNONYM_WEIGHT: f32 = 0.3;
/// What a tool whose every name word the query holds gains.
const NAME_COVERAGE: f32 = 8.0;
/// What a tool whose name says the kind of thing the task asks gains.
const ACTION_MATCH: f32 = 1.0;
/// The share of its score a tool keeps whose name says only other kinds.
const ACTION_OTHER: f32 = 0.9;
/// The share of its score a tool keeps, again, whose name says only other
/// kinds when a sibling (a tool of its group doing it to the same thing,
/// [`Actions::head`]) does the kind asked: among `spaces-key-create` and
/// `spaces-key-delete`, the verb decides whatever else the create tool's
/// description says (0.8 gave the same figures, 0.7 fewer).
const SIBLING_OTHER: f32 = 0.9;
/// What a tool gains whose name does it to what the task does it to
/// ([`Actions::object`], [`Actions::head`]), when it does the kind asked
/// (or its name says no kind).
const HEAD_MATCH: f32 = 2.0;
/// What a tool gains when its group (its MCP server or tool pack) is the
/// one whose tools' words fit the task best; the others in proportion.
const GROUP_FIT: f32 = 4.0;
/// The share of its score a tool keeps when the task names a group (its
/// MCP server or tool pack: "…on DigitalOcean", "in the GitHub repo") and
/// the tool is of none it names (0.6 to 0.8 gave the same figures within a
/// task or two, 0.5 and 0.9 fewer).
const NAMED_OTHER: f32 = 0.7;
/// How quickly a word's share of a group's tools saturates: a word a fifth
/// of a group's tools use says three quarters of what one they all use
/// says.
const GROUP_SATURATION: f32 = 0.1;
/// How many sets of searched tools keep their view.
const VIEWS: usize = 16;

/// The stems of the stop words.
static STOP: LazyLock<HashSet<String>> = LazyLock::new(|| {
    let words = Words::default();
    let text = include_str!("stop_words.txt");
    text.lines().filter(|line| !line.starts_with('#')).flat_map(|line| words.of(line)).collect()
});

/// Each stem's near-synonyms (stems), from `synonyms.txt`.
static SYNONYMS: LazyLock<HashMap<String, Vec<String>>> = LazyLock::new(|| {
    let words = Words::default();
    let mut synonyms: HashMap<String, Vec<String>> = HashMap::new();
    for line in include_str!("synonyms.txt").lines() {
        let line = line.split('#').next().unwrap_or_default();
        let group: Vec<String> = line
            .split(',')
            .filter_map(|entry| match words.of(entry).as_slice() {
                [word] => Some(word.clone()),
                _ => None,
            })
            .collect();
        for word in &group {
            let others = synonyms.entry(word.clone()).or_default();
            for other in &group {
                if other != word && !others.contains(other) {
                    others.push(other.clone());
                }
            }
        }
    }
    synonyms
});

/// The kinds of thing each stem, or pair of stems, says a tool does or a
/// task asks (a bit each, by line of `actions.txt`).
static ACTIONS: LazyLock<Actions> = LazyLock::new(|| {
    let words = Words::default();
    let mut actions = Actions::default();
    for (bit, (_, said)) in kinds().enumerate() {
        for entry in said.split(',') {
            match words.of(entry).as_slice() {
                [word] => {
                    *actions.words.entry(word.clone()).or_default() |= 1 << bit;
                    for form in inflected(entry.trim()) {
                        if let [stem] = words.of(&form).as_slice() {
                            *actions.words.entry(stem.clone()).or_default() |= 1 << bit;
                        }
                    }
                }
                [verb, particle] => {
                    actions.phrases.entry(verb.clone()).or_default().push((particle.clone(), 1 << bit));
                    actions.particles.insert(particle.clone());
                }
                _ => {}
            }
        }
    }
    actions
});

/// A verb's `-ing` and `-ed` forms when they are spelled by adding the
/// ending alone (not a verb ending in e or y, nor one whose last consonant
/// doubles: "set", "stop"): the stemmer may not take them back to the
/// verb's own stem ("adding" and "added" give "ad", as it undoes a doubled
/// consonant it cannot tell from "add"'s own).
fn inflected(verb: &str) -> Vec<String> {
    let vowel = |c: u8| b"aeiou".contains(&c);
    let doubles = match verb.as_bytes() {
        [.., a, b, c] => !vowel(*a) && vowel(*b) && !vowel(*c) && !b"wxy".contains(c),
        _ => true,
    };
    match verb.ends_with(['e', 'y']) || doubles || !verb.bytes().all(|c| c.is_ascii_lowercase()) {
        true => Vec::new(),
        false => vec![format!("{verb}ing"), format!("{verb}ed")],
    }
}

/// How far past its verb's next word a phrasal verb's particle may be
/// ("roll the droplet back"; 2 to 4 gave the same figures).
const SPLIT: usize = 3;

/// What words and phrasal verbs ("set up", "turn off") say of the kind of
/// thing done.
#[derive(Default)]
struct Actions {
    words: HashMap<String, u16>,
    /// By verb, each particle with the phrase's kind.
    phrases: HashMap<String, Vec<(String, u16)>>,
    /// The phrases' particles ("up", "down", "off"): after a verb, a
    /// particle is part of it, never what it is done to ("tear down the
    /// peering").
    particles: HashSet<String>,
}

impl Actions {
    /// The kinds `stems` say, in order: a phrase for its two stems (its
    /// verb alone may say another kind: "set" updates, "set up" creates),
    /// each other stem for itself (0: none).
    fn said<'s>(&'s self, stems: &'s [impl AsRef<str>]) -> impl Iterator<Item = u16> + 's {
        self.steps(stems).map(|(kind, _)| kind)
    }

    /// [`Actions::said`], each kind with where the words after it start.
    fn steps<'s>(&'s self, stems: &'s [impl AsRef<str>]) -> impl Iterator<Item = (u16, usize)> + 's {
        let mut at = 0;
        std::iter::from_fn(move || {
            let stem = stems.get(at)?.as_ref();
            // The phrase's particle next, or split from its verb by what it
            // is done to ("turn the droplet back on") within the `SPLIT`
            // words after the next; the words between are still read as
            // what it is done to.
            let phrase = self.phrases.get(stem).and_then(|particles| {
                stems.iter().skip(at + 1).take(1 + SPLIT).enumerate().find_map(|(away, later)| {
                    let found = particles.iter().find(|(particle, _)| particle == later.as_ref());
                    found.map(|&(_, kind)| (away, kind))
                })
            });
            at += if phrase.is_some_and(|(away, _)| away == 0) { 2 } else { 1 };
            let kind = phrase.map(|(_, kind)| kind);
            Some((kind.unwrap_or_else(|| self.words.get(stem).copied().unwrap_or(0)), at))
        })
    }

    /// Whether `stem` alone says a kind.
    fn says(&self, stem: &str) -> bool {
        self.words.contains_key(stem) || self.phrases.contains_key(stem)
    }

    /// The first kind `stems` say ([`Actions::steps`]), with where the
    /// words after it start.
    fn first(&self, stems: &[impl AsRef<str>]) -> Option<(u16, usize)> {
        self.steps(stems).find(|&(kind, _)| kind != 0)
    }

    /// What `stems` do it to: the words after their first word of a kind
    /// (a phrasal verb's two; `after`, from [`Actions::first`]), past stop
    /// words, words of a kind ("a new") and particles ("tear down the
    /// peering": a verb no phrase names), up to the next stop word or
    /// word of a kind, three at most: "leave a comment on the issue" does it
    /// to a comment.
    fn object<'s>(&self, stems: &'s [String], after: Option<usize>) -> &'s [String] {
        let Some(mut start) = after else { return &[] };
        let passed = |stem: &String| STOP.contains(stem) || self.says(stem) || self.particles.contains(stem);
        while start < stems.len() && passed(&stems[start]) {
            start += 1;
        }
        let mut end = start;
        while end < stems.len() && end < start + 3 && !STOP.contains(&stems[end]) && !self.says(&stems[end]) {
            end += 1;
        }
        &stems[start..end]
    }

    /// What a name says its tool does it to: its last word before any stop
    /// word ("for", "from") that says no kind (`add_issue_comment`: a
    /// comment; `create-index-for-model`: an index).
    fn head<'s>(&self, stems: &'s [Arc<str>]) -> Option<&'s Arc<str>> {
        let before = stems.iter().position(|stem| STOP.contains(stem.as_ref())).unwrap_or(stems.len());
        stems[..before].iter().rev().find(|stem| !self.says(stem))
    }
}

/// The kinds of `actions.txt` in order (a bit each in [`Actions`]): each
/// one's name and the words that say it.
fn kinds() -> impl Iterator<Item = (&'static str, &'static str)> {
    let lines = include_str!("actions.txt").lines().filter(|line| !line.starts_with('#'));
    lines.filter_map(|line| line.split_once(':')).map(|(kind, said)| (kind.trim(), said))
}

/// The bit of `kind` (a line of `actions.txt`) in [`Actions`].
fn kind(kind: &str) -> u16 {
    1 << kinds().position(|(name, _)| name == kind).expect("a kind of actions.txt")
}

/// Reading things named in the plural (the kind of such a name, read and
/// the kind it says too, list), what a question asking "which" things
/// asks for (list or search), and what any other question asks for (read,
/// list or search).
static PLURAL: LazyLock<Plural> = LazyLock::new(|| Plural {
    reads: kind("read"),
    lists: kind("list"),
    asks: kind("list") | kind("search"),
    knows: kind("read") | kind("list") | kind("search"),
});

struct Plural {
    reads: u16,
    lists: u16,
    asks: u16,
    knows: u16,
}

/// The words that open a question asking for several things when a plural
/// follows ("which projects…", "what statuses…").
const ASKING_WHICH: [&str; 2] = ["which", "what"];

/// The words that open a question: it asks to know (read, list or search),
/// whatever verb follows ("who changed the estimate", "when does the
/// subscription renew", "did the webhook accept the deliveries"). Not the
/// words that open a request ("can you", "would you", "will you": they ask
/// for what their verb says), nor "do" and "have", which open commands as
/// well ("have the bot post…").
const ASKING: [&str; 14] =
    ["who", "what", "when", "where", "which", "why", "how", "is", "are", "was", "were", "does", "did", "has"];

/// What is searched of one tool.
#[derive(Clone, Copy, Debug, Default)]
pub struct Document<'d> {
    pub name: &'d str,
    pub aliases: &'d [String],
    pub description: &'d str,
    /// Each parameter's name and description.
    pub parameters: &'d [(String, String)],
    /// Where the tool comes from, when that is a whole set of tools: its
    /// MCP server or tool pack. A group's tools' words, pooled, say what the
    /// group is about ("a bot" and "a channel" for a chat server's tools).
    pub group: Option<&'d str>,
}

impl Document<'_> {
    /// A hash of everything searched: equal for a tool that did not change.
    pub fn fingerprint(&self) -> u64 {
        let mut hasher = std::hash::DefaultHasher::new();
        (self.name, self.aliases, self.description, self.parameters, self.group).hash(&mut hasher);
        hasher.finish()
    }
}

/// One document's words, by word number.
struct Entry {
    /// Each word with its weighted count.
    terms: Box<[(u32, f32)]>,
    /// The words of the name and of each alias.
    names: Box<[Box<[u32]>]>,
    /// The kinds of thing its name and aliases say it does ([`ACTIONS`]).
    actions: u16,
    /// What its name and aliases say it does it to ([`Actions::head`]).
    heads: Box<[u32]>,
    /// Whether its name, past its group's name, is only words of a kind
    /// (`git_pull`, `search`): then those words alone cover it.
    verbs_only: bool,
    /// Its group, by number, and the words it adds to the group's pool: of
    /// its name, aliases, description and parameter names, each once.
    group: Option<u32>,
    pooled: Box<[u32]>,
}

/// The words of every document of one catalogue, by document.
pub struct SearchIndex {
    words: Words,
    vocabulary: HashMap<Arc<str>, u32>,
    /// By word number, whether the word says a kind of action.
    kinded: Box<[bool]>,
    entries: Vec<Entry>,
    /// By group number, the word its name is when it is one word
    /// (`github`, `hubspot`).
    group_names: Box<[Option<u32>]>,
    /// Each document's position by its [`Document::fingerprint`].
    fingerprints: HashMap<u64, u32>,
    /// The last sets searched, most recent first.
    views: Mutex<Vec<Arc<View>>>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("documents", &self.entries.len())
            .field("words", &self.vocabulary.len())
            .finish()
    }
}

/// What is searched of a query, its words by number (those some document
/// holds).
struct Query {
    /// Its words with how much each counts (a stop word less), then their
    /// near-synonyms that the query does not say itself.
    terms: Vec<(u32, f32)>,
    /// Its own words that are no stop words.
    said: Vec<u32>,
    /// The kinds of thing its first word of a kind asks for ([`ACTIONS`];
    /// 0: none).
    asked: u16,
    /// What it asks to do it to ([`Actions::object`]).
    object: Vec<u32>,
}

/// The postings of one set of documents: each word's documents (by their
/// place in `among`) with the word's weighted count in each.
struct View {
    among: Box<[u32]>,
    /// Where each word's postings start in `postings` (one more than words).
    offsets: Box<[u32]>,
    /// Each word's documents, with the word's weighted count in each
    /// saturated as BM25 does.
    postings: Box<[(u32, f32)]>,
    /// Where each word's name postings start in `named`.
    name_offsets: Box<[u32]>,
    /// Each word's documents whose name (0) or an alias (1…) holds it: the
    /// document's place, the name's number and the sum of its words' idf.
    named: Box<[(u32, u32, f32)]>,
    /// Each word's [`View::idf`], by number.
    idfs: Box<[f32]>,
    /// Where each word's group postings start in `grouped`.
    group_offsets: Box<[u32]>,
    /// Each word's groups (of the view's documents) whose tools use it:
    /// the group and what the word says of it (how rare the word is among
    /// the groups, times its saturated share of the group's tools).
    grouped: Box<[(u32, f32)]>,
    /// How many groups there are (numbers below it).
    groups: usize,
    /// The words that are whole names of its groups (`github`) and that its
    /// documents hold, sorted.
    named_groups: Box<[u32]>,
    /// By place, the kinds its siblings do: the tools of its group (of the
    /// view's documents) doing it to the same thing ([`Entry::heads`]).
    siblings: Box<[u16]>,
}

/// Where each word's items start (one more than words), and the items,
/// word by word.
type Laid<T> = (Box<[u32]>, Box<[T]>);

/// Lays out, for each word, the items `each` gives it.
fn lay_out<T: Copy + Default>(words: usize, each: impl Fn(&mut dyn FnMut(u32, T))) -> Laid<T> {
    let mut offsets = vec![0u32; words + 1];
    each(&mut |term, _| offsets[term as usize + 1] += 1);
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    let mut next = offsets.clone();
    let mut items = vec![T::default(); offsets[words] as usize];
    each(&mut |term, item| {
        let slot = &mut next[term as usize];
        items[*slot as usize] = item;
        *slot += 1;
    });
    (offsets.into(), items.into())
}

impl View {
    fn build(entries: &[Entry], group_names: &[Option<u32>], words: usize, among: Box<[u32]>) -> Self {
        let documents =
            || among.iter().enumerate().map(|(place, &document)| (place as u32, &entries[document as usize]));
        let (offsets, postings) = lay_out(words, |add: &mut dyn FnMut(u32, _)| {
            for (place, entry) in documents() {
                for &(term, weight) in entry.terms.iter() {
                    add(term, (place, weight));
                }
            }
        });
        let lengths: Box<[f32]> =
            documents().map(|(_, entry)| entry.terms.iter().map(|&(_, w)| w).sum::<f32>()).collect();
        let average = (lengths.iter().sum::<f32>() / among.len().max(1) as f32).max(f32::MIN_POSITIVE);
        // Each posting's count saturated as BM25 does, once.
        let mut postings = postings;
        for (place, frequency) in postings.iter_mut() {
            let length = lengths[*place as usize];
            *frequency = *frequency * (K1 + 1.0) / (*frequency + K1 * (1.0 - B + B * length / average));
        }
        let count = among.len() as f32;
        let idfs: Box<[f32]> = (0..words)
            .map(|term| {
                let holding = (offsets[term + 1] - offsets[term]) as f32;
                match holding == 0.0 {
                    true => 0.0,
                    false => (1.0 + (count - holding + 0.5) / (holding + 0.5)).ln(),
                }
            })
            .collect();
        let (name_offsets, named) = lay_out(words, |add: &mut dyn FnMut(u32, _)| {
            for (place, entry) in documents() {
                for (name, terms) in entry.names.iter().enumerate() {
                    let whole: f32 = terms.iter().map(|&term| idfs[term as usize]).sum();
                    for &term in terms.iter() {
                        add(term, (place, name as u32, whole.max(f32::MIN_POSITIVE)));
                    }
                }
            }
        });
        let ((group_offsets, grouped), groups) = Self::groups(entries, words, &among);
        let siblings = Self::siblings(entries, &among);
        // A group's name counts when a tool of the view says it (a federated
        // tool's name carries its server's).
        let mut named_groups: Vec<u32> = among
            .iter()
            .filter_map(|&document| group_names[entries[document as usize].group? as usize])
            .filter(|&term| offsets[term as usize + 1] > offsets[term as usize])
            .collect();
        named_groups.sort_unstable();
        named_groups.dedup();
        let named_groups = named_groups.into();
        Self {
            among,
            offsets,
            postings,
            name_offsets,
            named,
            idfs,
            group_offsets,
            grouped,
            groups,
            siblings,
            named_groups,
        }
    }

    /// The groups' pooled words among the documents `among`: for each word,
    /// the groups whose tools use it and what it says of each.
    fn groups(entries: &[Entry], words: usize, among: &[u32]) -> (Laid<(u32, f32)>, usize) {
        let mut tools: Vec<u32> = Vec::new();
        let mut using: HashMap<(u32, u32), u32> = HashMap::new();
        for entry in among.iter().map(|&document| &entries[document as usize]) {
            let Some(group) = entry.group else { continue };
            if tools.len() <= group as usize {
                tools.resize(group as usize + 1, 0);
            }
            tools[group as usize] += 1;
            for &term in entry.pooled.iter() {
                *using.entry((term, group)).or_default() += 1;
            }
        }
        let present = tools.iter().filter(|&&n| n > 0).count() as f32;
        let mut holding = vec![0u32; words];
        for &(term, _) in using.keys() {
            holding[term as usize] += 1;
        }
        let (offsets, grouped) = lay_out(words, |add: &mut dyn FnMut(u32, _)| {
            for (&(term, group), &count) in &using {
                let held = holding[term as usize] as f32;
                let rare = (1.0 + (present - held + 0.5) / (held + 0.5)).ln();
                let share = count as f32 / tools[group as usize] as f32;
                add(term, (group, rare * share / (share + GROUP_SATURATION)));
            }
        });
        ((offsets, grouped), tools.len())
    }

    /// By place in `among`, the kinds the tools of its group (tools of no
    /// group together) whose names do it to one of the same things do.
    fn siblings(entries: &[Entry], among: &[u32]) -> Box<[u16]> {
        let entries = || among.iter().map(|&document| &entries[document as usize]);
        let mut doing: HashMap<(Option<u32>, u32), u16> = HashMap::new();
        for entry in entries() {
            for &head in entry.heads.iter() {
                *doing.entry((entry.group, head)).or_default() |= entry.actions;
            }
        }
        let kinds = |entry: &Entry| entry.heads.iter().fold(0, |kinds, &head| kinds | doing[&(entry.group, head)]);
        entries().map(kinds).collect()
    }

    /// Whether `term` is the whole name of one of its groups.
    fn names_group(&self, term: u32) -> bool {
        self.named_groups.binary_search(&term).is_ok()
    }

    fn grouped(&self, term: u32) -> &[(u32, f32)] {
        let (start, end) = (self.group_offsets[term as usize], self.group_offsets[term as usize + 1]);
        &self.grouped[start as usize..end as usize]
    }

    fn postings(&self, term: u32) -> &[(u32, f32)] {
        let (start, end) = (self.offsets[term as usize], self.offsets[term as usize + 1]);
        &self.postings[start as usize..end as usize]
    }

    /// The rarer a word among the view's documents, the more it says; 0
    /// for a word none holds.
    fn idf(&self, term: u32) -> f32 {
        self.idfs[term as usize]
    }

    fn named(&self, term: u32) -> &[(u32, u32, f32)] {
        let (start, end) = (self.name_offsets[term as usize], self.name_offsets[term as usize + 1]);
        &self.named[start as usize..end as usize]
    }

    fn bytes(&self) -> usize {
        let words = (self.offsets.len() + self.name_offsets.len() + self.idfs.len() + self.group_offsets.len()) * 4;
        let places = self.among.len() * 4 + self.siblings.len() * 2;
        places + words + self.postings.len() * 8 + self.named.len() * 12 + self.grouped.len() * 8
    }
}

impl SearchIndex {
    /// The index of `documents`, each known by its position.
    pub fn build<'d>(documents: impl IntoIterator<Item = Document<'d>>) -> Self {
        let words = Words::default();
        let mut stems = Stems::new(&words);
        let mut vocabulary: HashMap<Arc<str>, u32> = HashMap::new();
        let mut entries = Vec::new();
        let mut fingerprints = HashMap::new();
        let mut counts: HashMap<u32, f32> = HashMap::new();
        let mut groups: HashMap<&'d str, u32> = HashMap::new();
        // By group number, its name's words, and the word its name is when
        // it is one.
        let mut group_words: Vec<Box<[Arc<str>]>> = Vec::new();
        let mut group_names = Vec::new();
        let mut number = |stem: &Arc<str>| {
            let next = vocabulary.len() as u32;
            *vocabulary.entry(Arc::clone(stem)).or_insert(next)
        };
        for (position, document) in documents.into_iter().enumerate() {
            counts.clear();
            let mut pooled: Vec<u32> = Vec::new();
            let mut names: Vec<Box<[u32]>> = Vec::new();
            let mut actions = 0;
            let mut heads = Vec::new();
            let group = document.group.map(|group| {
                let next = groups.len() as u32;
                *groups.entry(group).or_insert_with(|| {
                    // A new group: its name's words, and the word it is, if one.
                    let mut whole = Vec::new();
                    stems.each(group, |stem| whole.push(Arc::clone(stem)));
                    group_names.push(match whole.as_slice() {
                        [word] => Some(number(word)),
                        _ => None,
                    });
                    group_words.push(whole.into());
                    next
                })
            });
            let own_group: &[Arc<str>] = group.map_or(&[], |group| &group_words[group as usize]);
            let mut verbs_only = None;
            for name in std::iter::once(document.name).chain(document.aliases.iter().map(String::as_str)) {
                let mut words = Vec::new();
                let mut said = Vec::new();
                stems.each(name, |stem| {
                    said.push(Arc::clone(stem));
                    let term = number(stem);
                    if !words.contains(&term) {
                        words.push(term);
                    }
                    *counts.entry(term).or_default() += NAME_WEIGHT;
                });
                verbs_only
                    .get_or_insert_with(|| said.iter().all(|stem| own_group.contains(stem) || ACTIONS.says(stem)));
                let mut does = ACTIONS.said(&said).fold(0, |does, kind| does | kind);
                if let Some(head) = ACTIONS.head(&said) {
                    let head = number(head);
                    if !heads.contains(&head) {
                        heads.push(head);
                    }
                }
                let language = stems.words();
                if does & PLURAL.reads != 0 && language.unstemmed(name).last().is_some_and(|w| language.plural(w)) {
                    does |= PLURAL.lists;
                }
                actions |= does;
                pooled.extend_from_slice(&words);
                // An alias that says the name again adds nothing to cover.
                if !names.iter().any(|known| known[..] == words[..]) {
                    names.push(words.into_boxed_slice());
                }
            }
            let mut add = |text: &str, weight: f32, pool: bool| {
                let mut count = |stem: &Arc<str>| {
                    let term = number(stem);
                    *counts.entry(term).or_default() += weight;
                    if pool {
                        pooled.push(term);
                    }
                };
                stems.each(text, &mut count);
                words::shapes(text, |shape| count(&Arc::from(shape)));
            };
            add(document.description, 1.0, true);
            for (name, description) in document.parameters {
                add(name, PARAMETER_WEIGHT, true);
                add(description, PARAMETER_WEIGHT, false);
            }
            pooled.sort_unstable();
            pooled.dedup();
            let position = u32::try_from(position).expect("fewer than 2^32 tools");
            fingerprints.entry(document.fingerprint()).or_insert(position);
            let mut terms: Vec<(u32, f32)> = counts.drain().collect();
            terms.sort_unstable_by_key(|&(term, _)| term);
            entries.push(Entry {
                terms: terms.into(),
                names: names.into(),
                actions,
                heads: heads.into(),
                verbs_only: verbs_only.unwrap_or(false),
                group,
                pooled: pooled.into(),
            });
        }
        drop(stems);
        let group_names = group_names.into();
        let mut kinded = vec![false; vocabulary.len()];
        for (word, &term) in &vocabulary {
            kinded[term as usize] = ACTIONS.says(word);
        }
        let kinded = kinded.into();
        Self { words, vocabulary, kinded, entries, group_names, fingerprints, views: Mutex::new(Vec::new()) }
    }

    /// The bytes the index holds: its words, each document's, and the views
    /// kept (what it allocates, counted; not the maps' own overhead).
    pub fn bytes(&self) -> usize {
        let words: usize = self.vocabulary.keys().map(|word| word.len() + 24).sum();
        let entries: usize = self
            .entries
            .iter()
            .map(|e| {
                let names: usize = e.names.iter().map(|n| n.len() * 4 + 16).sum();
                e.terms.len() * 8 + e.pooled.len() * 4 + e.heads.len() * 4 + names + 64
            })
            .sum();
        let views: usize = crate::lock::lock(&self.views).iter().map(|view| view.bytes()).sum();
        words + self.kinded.len() + entries + self.fingerprints.len() * 16 + views
    }

    /// How many documents the index holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The position of the document searched as `document` was, if the index
    /// holds it.
    pub fn position_of(&self, document: &Document<'_>) -> Option<u32> {
        self.fingerprints.get(&document.fingerprint()).copied()
    }

    /// The view of the documents `among` (positions past the index left
    /// out): a kept one, or made now and kept.
    fn view(&self, among: &[u32]) -> Arc<View> {
        let among: Box<[u32]> = among.iter().copied().filter(|&d| (d as usize) < self.entries.len()).collect();
        {
            let mut views = crate::lock::lock(&self.views);
            if let Some(found) = views.iter().position(|view| view.among == among) {
                let view = views.remove(found);
                views.insert(0, Arc::clone(&view));
                return view;
            }
        }
        let view = Arc::new(View::build(&self.entries, &self.group_names, self.vocabulary.len(), among));
        let mut views = crate::lock::lock(&self.views);
        views.insert(0, Arc::clone(&view));
        views.truncate(VIEWS);
        view
    }

    /// What is searched of `query` ([`Query`]).
    fn query(&self, query: &str, view: &View) -> Query {
        let query = &*words::whole(query, |word| {
            let [stem] = self.words.of(word).try_into().unwrap_or_default();
            self.vocabulary.get(stem.as_str()).is_some_and(|&term| view.names_group(term))
        });
        let mut weighed: Vec<(String, f32)> = Vec::new();
        let unstemmed = self.words.unstemmed(query);
        let which = unstemmed.first().is_some_and(|first| ASKING_WHICH.contains(&first.as_str()))
            && unstemmed.iter().skip(1).take(3).any(|word| self.words.plural(word));
        let stems = self.words.of(query);
        let first = ACTIONS.first(&stems);
        let question = unstemmed.first().is_some_and(|first| ASKING.contains(&first.as_str()));
        let asked = match (which, question) {
            (true, _) => PLURAL.asks,
            (false, true) => PLURAL.knows,
            (false, false) => first.map_or(0, |(kind, _)| kind),
        };
        let object = ACTIONS.object(&stems, first.map(|(_, after)| after));
        let object: Vec<u32> = object.iter().filter_map(|stem| self.vocabulary.get(stem.as_str())).copied().collect();
        let shapes = {
            let mut shapes = Vec::new();
            words::shapes(query, |shape| shapes.push(shape.to_owned()));
            shapes
        };
        for word in stems.into_iter().chain(shapes) {
            let weight = if STOP.contains(&word) { STOP_WEIGHT } else { 1.0 };
            match weighed.iter_mut().find(|(known, _)| *known == word) {
                Some((_, known)) => *known = known.max(weight),
                None => weighed.push((word, weight)),
            }
        }
        let said: Vec<u32> = weighed
            .iter()
            .filter(|(word, _)| !STOP.contains(word))
            .filter_map(|(word, _)| self.vocabulary.get(word.as_str()).copied())
            .collect();
        for i in 0..weighed.len() {
            let weight = weighed[i].1 * SYNONYM_WEIGHT;
            for synonym in SYNONYMS.get(&weighed[i].0).into_iter().flatten() {
                if !weighed.iter().any(|(known, _)| known == synonym) {
                    weighed.push((synonym.clone(), weight));
                }
            }
        }
        let terms = weighed
            .into_iter()
            .filter_map(|(word, weight)| Some((*self.vocabulary.get(word.as_str())?, weight)))
            .collect();
        Query { terms, said, asked, object }
    }

    /// The `limit` documents among `among` (positions, each once) that fit
    /// `query` best, best first, with their scores; documents sharing no
    /// word with the query are never returned. Equal scores keep position
    /// order.
    pub fn search(&self, query: &str, among: &[u32], limit: usize) -> Vec<(u32, f32)> {
        let view = self.view(among);
        if view.among.is_empty() {
            return Vec::new();
        }
        let Query { terms, said, asked, object } = self.query(query, &view);
        let mut scores = vec![0.0f32; view.among.len()];
        let mut scored = Vec::new();
        for &(term, weight) in &terms {
            let idf = view.idf(term);
            for &(place, saturated) in view.postings(term) {
                let score = &mut scores[place as usize];
                if *score == 0.0 {
                    scored.push(place);
                }
                *score += weight * idf * saturated;
            }
        }
        // Name coverage: the share of each name's words (weighed by how rare
        // they are) the query holds, for the names holding one; a tool's best.
        let mut shares = vec![0.0f32; view.among.len()];
        let mut of_aliases: HashMap<(u32, u32), f32> = HashMap::new();
        // Whether the query holds a word of the name that says no kind.
        let mut held_plain = vec![false; view.among.len()];
        for &(term, weight) in &terms {
            let said = view.idf(term) * weight;
            let kinded = self.kinded[term as usize];
            for &(place, name, whole) in view.named(term) {
                held_plain[place as usize] |= !kinded;
                match name {
                    0 => shares[place as usize] += said / whole,
                    _ => *of_aliases.entry((place, name)).or_default() += said / whole,
                }
            }
        }
        for ((place, _), share) in of_aliases {
            shares[place as usize] = shares[place as usize].max(share);
        }
        for &place in &scored {
            let score = &mut scores[place as usize];
            let entry = &self.entries[view.among[place as usize] as usize];
            if held_plain[place as usize] || entry.verbs_only {
                *score += NAME_COVERAGE * shares[place as usize];
            }
            // What the task asks to do against what the name says it does.
            let does = entry.actions;
            if asked != 0 && does != 0 {
                match does & asked != 0 {
                    true => *score += ACTION_MATCH,
                    // A sibling does what is asked: `SIBLING_OTHER` again.
                    false if view.siblings[place as usize] & asked != 0 => *score *= ACTION_OTHER * SIBLING_OTHER,
                    false => *score *= ACTION_OTHER,
                }
            }
            // What the task does it to against what the name does it to,
            // for a tool that does what is asked.
            let fits = does == 0 || does & asked != 0;
            if fits && entry.heads.iter().any(|head| object.contains(head)) {
                *score += HEAD_MATCH;
            }
        }
        // The group whose tools' words fit the task best, and the others in
        // proportion: a tool of it gains up to `GROUP_FIT`.
        let mut fits = vec![0.0f32; view.groups];
        for &term in &said {
            for &(group, says) in view.grouped(term) {
                fits[group as usize] += says;
            }
        }
        let best = fits.iter().copied().fold(0.0f32, f32::max);
        if best > 0.0 {
            for &place in &scored {
                if let Some(group) = self.entries[view.among[place as usize] as usize].group {
                    scores[place as usize] += GROUP_FIT * fits[group as usize] / best;
                }
            }
        }
        // A server the task names ("…on DigitalOcean"): the tools of no
        // server it names keep `NAMED_OTHER` of their score.
        let named: Vec<u32> = said.iter().copied().filter(|&term| view.names_group(term)).collect();
        if !named.is_empty() {
            for &place in &scored {
                let group = self.entries[view.among[place as usize] as usize].group;
                if !group.and_then(|group| self.group_names[group as usize]).is_some_and(|name| named.contains(&name)) {
                    scores[place as usize] *= NAMED_OTHER;
                }
            }
        }
        let mut ranked: Vec<(u32, f32)> = scored
            .into_iter()
            .map(|place| (view.among[place as usize], scores[place as usize]))
            .filter(|&(_, score)| score > 0.0)
            .collect();
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if ranked.len() > limit && limit > 0 {
            ranked.select_nth_unstable_by(limit - 1, order);
        }
        ranked.truncate(limit);
        ranked.sort_unstable_by(order);
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
    fn a_word_of_a_kind_alone_does_not_cover_a_name() {
        // A real function list as listed (tests/data/tool_search_bfcl, s163).
        let described = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|&(name, said)| (name.to_owned(), said.to_owned())).collect()
        };
        let movies = described(&[
            ("genre", "The genre of the movie to search for."),
            ("starring", "The name of a specific actor or actress the user wants to see in the movie."),
        ]);
        let music = described(&[
            ("artist", "The name of the artist or band."),
            ("album", "The title of the album."),
            ("genre", "The musical genre of the songs."),
            ("year", "The release year of the song."),
        ]);
        let stream = described(&[
            ("title", "The title of the movie to be streamed."),
            ("subtitle_language", "The preferred language for the movie's subtitles."),
        ]);
        let play = described(&[
            ("track", "The title of the song to be played."),
            ("artist", "The name of the artist performing the song. If unspecified, any artist is acceptable."),
            ("device", "The media player device where the song will be played."),
            ("album", "The album where the song is featured. If unspecified, any album is acceptable."),
        ]);
        let tool = |group, name, description, parameters| Document {
            name,
            description,
            parameters,
            group: Some(group),
            ..Document::default()
        };
        let index = SearchIndex::build([
            tool(
                "s163",
                "s163_Media_3_FindMovies",
                "Search for movies that fit a user's preferences such as genre and starring actors.",
                &movies,
            ),
            tool(
                "s163",
                "s163_Media_3_PlayMovie",
                "Streams a selected movie online with the option to choose subtitles in various languages.",
                &stream,
            ),
            tool(
                "s163",
                "s163_Music_3_PlayMedia",
                "Plays a specified track on a designated media player device.",
                &play,
            ),
            tool(
                "s163",
                "s163_Music_3_LookupMusic",
                "Retrieve a list of songs that align with the user's musical preferences based on artist, album, \
                 genre, and release year.",
                &music,
            ),
        ]);
        // "find" says what is asked (a search: both are), not which tool.
        let all = [0, 1, 2, 3];
        assert_eq!(names(&index, "Can you find me Metal songs by Jinjer?", &all)[0], 3);
        // A name that is its verb, past its server's, is still covered by it.
        let git = SearchIndex::build([
            tool("git", "git_git_pull", "Fetch from and integrate with another repository or a local branch", &[]),
            tool("git", "git_git_log", "Shows the commit logs of the changes from the remote", &[]),
        ]);
        assert_eq!(names(&git, "Pull the latest changes from the remote", &[0, 1])[0], 0);
    }

    #[test]
    fn among_siblings_the_one_that_does_what_is_asked_comes_first() {
        // Two real servers' tools as listed (tests/data/tool_search).
        let index = SearchIndex::build([
            document("slack_slack_post_message", "Post a new message to a Slack channel"),
            document("slack_slack_get_channel_history", "Get recent messages from a channel"),
            document("redis_get", "Get value by key from Redis"),
            document("redis_set", "Set a Redis key-value pair with optional expiration"),
            document("redis_info", "Information about the Redis server"),
        ]);
        let all = [0, 1, 2, 3, 4];
        assert_eq!(names(&index, "Read the latest messages in a Slack channel", &all)[0], 1);
        assert_eq!(names(&index, "Change the value of a key in Redis, with an expiry", &all)[0], 3);
        assert_eq!(names(&index, "Look up the value of a key in Redis", &all)[0], 2);
        // A name that says no kind keeps its score.
        assert_eq!(names(&index, "Information about Redis", &all)[0], 4);
    }

    #[test]
    fn among_siblings_the_one_done_to_what_the_task_names_comes_first() {
        // Real tools as listed (tests/data/tool_search).
        let index = SearchIndex::build([
            document("github_create_issue", "Create a new issue in a GitHub repository"),
            document("github_add_issue_comment", "Add a comment to an existing issue"),
            document("monday_create_board", "Create a monday.com board"),
            document("monday_create_item", "Create a new item with provided values"),
        ]);
        let all = [0, 1, 2, 3];
        assert_eq!(names(&index, "Leave a comment on GitHub issue 42 saying the fix is deployed", &all)[0], 1);
        assert_eq!(names(&index, "Create an item on the monday.com board", &all)[0], 3);
        // What the task does it to is read after its verb, not before.
        assert_eq!(names(&index, "On the GitHub issue, create a new issue", &all)[0], 0);
    }

    #[test]
    fn among_siblings_on_one_thing_the_verb_decides() {
        // The pairs' catalogue, each server a group: the create tools'
        // descriptions say more of the task's other words than the delete
        // tools' do ("secret key… committed to source control").
        let pairs = Pairs::grouped();
        let (tools, all) = (&pairs.tools, &pairs.all);
        let first = |task: &str, among: &[u32]| pairs.first(task, among);
        let task = "Revoke the Spaces access key that leaked in the repo";
        assert_eq!(first(task, all), "digitalocean_spaces-key-delete");
        assert_eq!(first("Delete the duplicate Invoice #42 item from the board", all), "monday_delete_item");
        // Without the sibling that does what is asked, the words decide.
        let without: Vec<u32> =
            all.iter().copied().filter(|&i| tools[i as usize].1 != "digitalocean_spaces-key-delete").collect();
        assert_eq!(first(task, &without), "digitalocean_spaces-key-create");
    }

    #[test]
    fn a_question_asks_to_know_whatever_verb_follows() {
        // The pairs' catalogue, each server a group: "renew" and "changed"
        // would not ask to read.
        let pairs = Pairs::grouped();
        let first = |task: &str| pairs.first(task, &pairs.all);
        assert_eq!(first("When does subscription sub_01h9 renew next"), "paddle_get_subscription");
        assert_eq!(first("What changed on the board in the last week and who changed it"), "monday_get_board_activity");
    }

    #[test]
    fn a_verb_says_its_kind_in_its_forms() {
        let words = Words::default();
        let asked = |task: &str| ACTIONS.first(&words.of(task)).map(|(kind, _)| kind);
        // The stemmer gives "ad" for "adding" and "added", "add" for "add".
        assert_eq!(words.of("adding added add"), ["ad", "ad", "add"]);
        let create = Some(kind("create"));
        assert_eq!(asked("Remember it by adding an observation to the graph"), create);
        assert_eq!(asked("The user added an observation"), create);
        assert_eq!(asked("Setting the title"), Some(kind("update")));
    }

    #[test]
    fn a_particle_after_a_verb_is_not_what_it_is_done_to() {
        let words = Words::default();
        let object = |task: &str| {
            let stems = words.of(task);
            let first = ACTIONS.first(&stems);
            ACTIONS.object(&stems, first.map(|(_, after)| after)).to_vec()
        };
        // "tear" deletes, and no phrase names "tear down".
        assert_eq!(object("Tear down the VPC peering between prod and staging"), ["vpc", "peer", "between"]);
        assert_eq!(object("Check off the 'submit expenses' task"), ["submit", "expens", "task"]);
    }

    #[test]
    fn a_phrasal_verb_says_its_own_kind() {
        // Real tool names (tests/data/tool_search), described alike.
        let index = SearchIndex::build([
            document("postman_getMonitor", "A monitor"),
            document("postman_createMonitor", "A monitor"),
            document("digitalocean_power-on-droplet", "A Droplet"),
            document("digitalocean_power-off-droplet", "A Droplet"),
        ]);
        let all = [0, 1, 2, 3];
        // "set" alone asks to update (neither); "set up" to create.
        assert_eq!(names(&index, "Set up a monitor", &all)[0], 1);
        assert_eq!(names(&index, "Look at the monitor", &all)[0], 0);
        // In a name as in a task.
        assert_eq!(names(&index, "Shut down droplet 42", &all)[0], 3);
        assert_eq!(names(&index, "Boot up droplet 42", &all)[0], 2);
        // A phrase split by what it is done to.
        assert_eq!(names(&index, "Set the nightly monitor up", &all)[0], 1);
        assert_eq!(names(&index, "Turn droplet 42 back on", &all)[0], 2);
    }

    #[test]
    fn what_is_asked_for_in_the_plural_is_listed() {
        // Real servers' tool names (tests/data/tool_search_untuned), each
        // described alike so that their names decide.
        let api = "Twilio - Api: This is the public Twilio REST API.";
        let index = SearchIndex::build([
            document("twilio_TwilioApiV2010--FetchAvailablePhoneNumberCountry", api),
            document("twilio_TwilioApiV2010--UpdateConference", api),
            document("twilio_TwilioApiV2010--ListAvailablePhoneNumberCountry", api),
            document("linear_listIssueLabels", "Linear"),
            document("linear_getIssues", "Linear"),
        ]);
        let all = [0, 1, 2, 3, 4];
        // A question for several things asks for a list, whatever verb
        // follows ("get" would ask to read one).
        assert_eq!(names(&index, "Which countries can we get Twilio numbers in?", &all)[0], 2);
        // A name that gets things in the plural lists them.
        assert_eq!(names(&index, "Browse the issues in Linear", &all)[0], 4);
    }

    #[test]
    fn a_value_finds_the_tools_that_show_one_of_its_shape() {
        // Real tools' parameters as listed (tests/data/tool_search_untuned:
        // Linear's issue identifiers, Twilio's E.164 numbers).
        let issue = [("issueId".to_owned(), "The ID or identifier of the issue (e.g., ABC-123)".to_owned())];
        let to = [(
            "To".to_owned(),
            "The recipient's phone number in [E.164](https://www.twilio.com/docs/glossary/what-e164) format (for \
             SMS/MMS) or [channel address](https://www.twilio.com/docs/messaging/channels), e.g. \
             `whatsapp:+15552229999`."
                .to_owned(),
        )];
        let index = SearchIndex::build([
            document("linear_archiveProject", "Archive a project"),
            Document { parameters: &issue, ..document("linear_archiveIssue", "Archive an issue") },
            document("twilio_CreateAccount", "Create a new Twilio subaccount"),
            Document { parameters: &to, ..document("twilio_CreateMessage", "Send a message") },
        ]);
        let all = [0, 1, 2, 3];
        assert_eq!(names(&index, "Archive ENG-3, it's obsolete", &all)[0], 1);
        assert_eq!(names(&index, "Archive the project", &all)[0], 0);
        assert_eq!(names(&index, "Text +14155550100 that the order has shipped", &all)[0], 3);
    }

    /// The committed pairs' catalogue (tests/data/tool_search: 36 real
    /// servers' tools as listed): each tool's server, name and description.
    fn pairs_catalogue() -> Vec<(String, String, String)> {
        let mut tools = Vec::new();
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tool_search/catalog");
        for file in std::fs::read_dir(folder).unwrap() {
            let listing: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(file.unwrap().path()).unwrap()).unwrap();
            let server = listing["server"].as_str().unwrap().to_owned();
            for tool in listing["tools"].as_array().unwrap() {
                let name = format!("{server}_{}", tool["name"].as_str().unwrap());
                tools.push((server.clone(), name, tool["description"].as_str().unwrap_or_default().to_owned()));
            }
        }
        tools
    }

    /// [`pairs_catalogue`]'s tools, their index with each server a group,
    /// and all their positions.
    struct Pairs {
        tools: Vec<(String, String, String)>,
        index: SearchIndex,
        all: Vec<u32>,
    }

    impl Pairs {
        fn grouped() -> Self {
            let tools = pairs_catalogue();
            let index = pairs_index(&tools, true);
            let all = (0..tools.len() as u32).collect();
            Self { tools, index, all }
        }

        /// The name of the tool ranked first for `task` among `among`.
        fn first(&self, task: &str, among: &[u32]) -> String {
            self.tools[names(&self.index, task, among)[0] as usize].1.clone()
        }
    }

    /// The index of [`pairs_catalogue`]'s tools, each server a group or
    /// none.
    fn pairs_index(tools: &[(String, String, String)], grouped: bool) -> SearchIndex {
        SearchIndex::build(tools.iter().map(|(group, name, description)| Document {
            group: grouped.then_some(group.as_str()),
            ..document(name, description)
        }))
    }

    #[test]
    fn the_group_whose_tools_speak_of_the_task_counts() {
        // The pairs' catalogue, each server a group or none.
        let tools = pairs_catalogue();
        let (with, without) = (pairs_index(&tools, true), pairs_index(&tools, false));
        let all: Vec<u32> = (0..tools.len() as u32).collect();
        let first = |index: &SearchIndex, task: &str| tools[names(index, task, &all)[0] as usize].1.clone();
        // MongoDB's tools speak of collections throughout; without groups
        // the other server's tool whose name says more of the task came first.
        let task = "Describe the schema of a MongoDB collection";
        assert_eq!(first(&with, task), "mongodb_collection-schema");
        assert_eq!(first(&without, task), "neon_describe_table_schema");
    }

    #[test]
    fn a_server_named_as_a_brand_is_one_word() {
        // The pairs' catalogue, each server a group: "GitHub" read as "git"
        // and "hub" found the git server's `git_pull`.
        let pairs = Pairs::grouped();
        let (tools, index, all) = (&pairs.tools, &pairs.index, &pairs.all);
        let first = |task: &str, among: &[u32]| pairs.first(task, among);
        let task = "See which files a GitHub pull request changed";
        assert_eq!(first(task, all), "github_get_pull_request_files");
        assert_eq!(first("Create a new MongoDB collection called audit_logs", all), "mongodb_create-collection");
        // A server the caller cannot use reads nothing whole: without the
        // GitHub server's tools, the task is read and scored as by an index
        // that never had them.
        let without: Vec<u32> = all.iter().copied().filter(|&i| tools[i as usize].0 != "github").collect();
        let alone = SearchIndex::build(without.iter().map(|&i| {
            let (group, name, description) = &tools[i as usize];
            Document { group: Some(group.as_str()), ..document(name, description) }
        }));
        let places: Vec<u32> = (0..without.len() as u32).collect();
        let named = |found: Vec<(u32, f32)>, of: &dyn Fn(u32) -> usize| -> Vec<(String, f32)> {
            found.into_iter().map(|(document, score)| (tools[of(document)].1.clone(), score)).collect()
        };
        assert_eq!(
            named(index.search(task, &without, 5), &|document| document as usize),
            named(alone.search(task, &places, 5), &|document| without[document as usize] as usize)
        );
        assert_eq!(first(task, &without), "git_git_pull");
    }

    #[test]
    fn a_server_the_task_names_is_asked_for() {
        // The pairs' catalogue, each server a group: Neon's tools speak of
        // Postgres databases and tables more than the Postgres server's one
        // tool does.
        let pairs = Pairs::grouped();
        let first = |task: &str| pairs.first(task, &pairs.all);
        assert_eq!(first("Count yesterday's signups in the users table of our Postgres database"), "postgres_query");
        assert_eq!(
            first("Which Kubernetes versions and node sizes can I use on DigitalOcean"),
            "digitalocean_doks-list-options"
        );
    }

    #[test]
    fn near_synonyms_find_what_the_tool_calls_otherwise() {
        let index = SearchIndex::build([
            document("get_time", "The current time in a timezone"),
            document("get_forecast", "The weather for the next days in a city"),
            document("create_issue", "Open an issue in a repository"),
            document("restart_service", "Restart a service"),
        ]);
        let all = [0, 1, 2, 3];
        assert_eq!(names(&index, "will it rain tomorrow in Lyon", &all)[0], 1);
        assert_eq!(names(&index, "file a ticket about the crash", &all)[0], 2);
        assert_eq!(names(&index, "reboot the billing service", &all)[0], 3);
    }

    #[test]
    fn one_word_of_the_task_does_not_win_for_a_name_alone() {
        let index = SearchIndex::build([
            document("slack_send_message", "Send a message to a Slack channel"),
            document("github_search_code", "Search code across repositories"),
        ]);
        // "message" is a word of the first tool's name, but the task asks to
        // search code for it.
        assert_eq!(names(&index, "search the code for the error message text", &[0, 1])[0], 1);
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

    #[test]
    fn views_are_kept_for_the_last_sets_searched() {
        let index = index();
        for n in 0..(VIEWS + 4) {
            let among: Vec<u32> = (0..5).cycle().skip(n % 5).take(1 + n % 5).collect();
            let first = index.search("repository issue", &among, 8);
            assert_eq!(index.search("repository issue", &among, 8), first);
        }
        assert!(crate::lock::lock(&index.views).len() <= VIEWS);
        let unchanged = document("get_weather", "The weather forecast for a city");
        assert_eq!(index.position_of(&unchanged), Some(4));
        assert_eq!(index.position_of(&document("get_weather", "Tomorrow's weather")), None);
    }
}
