//! Tool search measured on real tools: recall of the right tool for each
//! task of `tests/data/tool_search` (1,145 tools as 36 published MCP
//! servers list them, 617 tasks) and of `tests/data/tool_search_untuned`
//! (853 tools of 21 others, 267 tasks), beside two baselines that share
//! none of the search's code (plain BM25 as the `bm25` crate gives it, and a
//! name holding the task's words); latency and
//! index cost at 10,000 tools; and the time of one caller's searches with
//! and without 3,000 tools it cannot see.
//!
//! `tests/data/tool_search_fresh` is a third set, of other servers again,
//! whose misses are never listed. `tests/data/tool_search_bfcl` and
//! `tool_search_bfcl_held` are requests people typed (BFCL live), each
//! asked of its own few functions alone; the second half's misses are
//! never listed. `tests/data/tool_search_metatool` and
//! `tool_search_metatool_held` are 199 chat plugins (MetaTool) and requests
//! for half of them each; the second half's misses are never listed.
//!
//! `cargo bench --bench tool_search [-- --misses[=1]] [--recall]`: with
//! `--misses`, every task whose right tool is not in the first five, with
//! what came first (`--misses=1`: not first); with `--recall`, recall only.

// Benchmarks report what they measured.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
#![allow(unreachable_pub)]

use std::{path::Path, time::Instant};

use serde_json::{json, Value};
use toolgate::{
    catalog::{self, Catalog, LoadOptions},
    env::Env,
    search::SearchIndex,
};

/// The sets no ranking may be tuned on: their misses are never listed, so
/// that reading them cannot tune the ranking to them.
const HELD_OUT: [&str; 3] =
    ["tests/data/tool_search_fresh", "tests/data/tool_search_bfcl_held", "tests/data/tool_search_metatool_held"];

/// One server's listing, as the data keeps it.
struct Server {
    name: String,
    tools: Vec<Value>,
}

fn servers(data: &Path) -> Vec<Server> {
    let mut files: Vec<_> =
        std::fs::read_dir(data.join("catalog")).unwrap().map(|entry| entry.unwrap().path()).collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            let listing: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            Server {
                name: listing["server"].as_str().unwrap().to_owned(),
                tools: listing["tools"].as_array().unwrap().clone(),
            }
        })
        .collect()
}

/// The catalogue of `servers`' tools, each named `SERVER_TOOL` (with
/// `_COPY` after it for copies past the first), loaded as a registry. A
/// tool whose name so made breaks the provider rule (over 64 characters,
/// or characters outside it) is left out, as a federated server's would be.
fn catalogue(servers: &[Server], copies: usize, dir: &Path) -> Catalog {
    catalogue_with(servers, copies, Vec::new(), dir)
}

/// [`catalogue`] with `more` tools (registry entries) beside the servers'.
/// Each server's tools are a tool pack of its name, so that, as federated
/// from their server, they are one group to the search.
fn catalogue_with(servers: &[Server], copies: usize, more: Vec<Value>, dir: &Path) -> Catalog {
    let packs_dir = dir.join(format!("packs-{copies}-{}", more.len()));
    std::fs::create_dir_all(&packs_dir).unwrap();
    let mut packs = Vec::new();
    for server in servers {
        let mut tools = Vec::new();
        for copy in 0..copies {
            for tool in &server.tools {
                let suffix = if copy == 0 { String::new() } else { format!("_{copy}") };
                let name = format!("{}_{}{suffix}", server.name, tool["name"].as_str().unwrap());
                if name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                    continue;
                }
                tools.push(json!({
                    "name": name,
                    "description": tool["description"],
                    "parameters": tool["inputSchema"],
                    "backend": {"builtin": "echo"},
                }));
            }
        }
        let pack = packs_dir.join(format!("{}.yaml", server.name));
        std::fs::write(pack, serde_json::to_string(&json!({"tools": tools})).unwrap()).unwrap();
        packs.push(server.name.clone());
    }
    let path = dir.join(format!("registry-{copies}-{}.yaml", more.len()));
    std::fs::write(&path, serde_json::to_string(&json!({"tools": more})).unwrap()).unwrap();
    let options = LoadOptions { registry: vec![path], packs_dir, packs, ..LoadOptions::default() };
    let loaded = catalog::load(&options, &Env::default()).unwrap_or_else(|e| panic!("{:?}", e.problems));
    for warning in &loaded.warnings {
        eprintln!("warning: {warning:?}");
    }
    loaded.catalog
}

/// A task, the names of the tools that do it and, where the task is asked
/// of one server's tools alone (as a caller granted only those asks), that
/// server.
struct Task {
    text: String,
    right: Vec<String>,
    among: Option<String>,
}

impl Task {
    /// Whether the task may be answered with `name`.
    fn offers(&self, name: &str) -> bool {
        self.among.as_ref().is_none_or(|server| name.strip_prefix(server.as_str()).is_some_and(|r| r.starts_with('_')))
    }
}

fn tasks(data: &Path) -> Vec<Task> {
    let text = std::fs::read_to_string(data.join("tasks.jsonl")).unwrap();
    text.lines()
        .map(|line| {
            let task: Value = serde_json::from_str(line).unwrap();
            let right = task["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().replacen('/', "_", 1));
            let among = task["among"].as_str().map(str::to_owned);
            Task { text: task["task"].as_str().unwrap().to_owned(), right: right.collect(), among }
        })
        .collect()
}

/// The baseline: tools ranked by how many of the task's words (three
/// letters or more, lower-cased) their name holds, catalogue order among
/// equals; none that holds none.
fn baseline(catalog: &Catalog, task: &Task, limit: usize) -> Vec<String> {
    let words: Vec<String> =
        task.text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() >= 3).map(str::to_lowercase).collect();
    let mut scored: Vec<(usize, &str)> = catalog
        .tools()
        .iter()
        .map(|tool| {
            let name = tool.name.to_lowercase();
            (words.iter().filter(|w| name.contains(w.as_str())).count(), tool.name.as_str())
        })
        .filter(|&(score, name)| score > 0 && task.offers(name))
        .collect();
    scored.sort_by_key(|&(score, _)| std::cmp::Reverse(score));
    scored.into_iter().take(limit).map(|(_, name)| name.to_owned()).collect()
}

/// The other baseline: plain Okapi BM25 as a maintained crate gives it
/// (`bm25`: its own tokenizer, stemmer and stop words; k1 1.2, b 0.75),
/// each tool one document of its name's words, its description and its
/// parameters' names, as the servers list them.
struct PlainBm25 {
    engine: bm25::SearchEngine<u32>,
    names: Vec<String>,
}

impl PlainBm25 {
    fn new(servers: &[Server], known: &[&str]) -> Self {
        // Names and parameter names split into words (`createPullRequest`,
        // `issue_number`), which a text tokenizer keeps whole.
        let words = |name: &str| {
            let mut split = String::new();
            let mut last = ' ';
            for c in name.chars() {
                if c.is_uppercase() && last.is_lowercase() {
                    split.push(' ');
                }
                split.push(if c.is_alphanumeric() { c } else { ' ' });
                last = c;
            }
            split
        };
        let (mut names, mut corpus) = (Vec::new(), Vec::new());
        for server in servers {
            for tool in &server.tools {
                let name = format!("{}_{}", server.name, tool["name"].as_str().unwrap());
                if !known.contains(&name.as_str()) {
                    continue;
                }
                let parameters = tool["inputSchema"]["properties"].as_object();
                let parameters: Vec<String> = parameters.into_iter().flat_map(|p| p.keys()).map(|p| words(p)).collect();
                let description = tool["description"].as_str().unwrap_or_default();
                corpus.push(format!("{}. {description}. {}", words(&name), parameters.join(" ")));
                names.push(name);
            }
        }
        let engine = bm25::SearchEngineBuilder::<u32>::with_corpus(bm25::Language::English, corpus).build();
        Self { engine, names }
    }

    /// The first `limit` the task may be answered with, equal scores in
    /// catalogue order (the crate leaves their order to a hash map's, which
    /// changes from run to run).
    fn search(&self, task: &Task, limit: usize) -> Vec<String> {
        let mut found: Vec<(f32, u32)> = self
            .engine
            .search(&task.text, None)
            .into_iter()
            .filter(|hit| task.offers(&self.names[hit.document.id as usize]))
            .map(|hit| (hit.score, hit.document.id))
            .collect();
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        found.into_iter().take(limit).map(|(_, id)| self.names[id as usize].clone()).collect()
    }
}

/// The first `limit` of the tools the task is asked of (of `all`, or of
/// its server's alone), as `SearchTools` ranks them.
fn search(catalog: &Catalog, all: &[u32], task: &Task, limit: usize) -> Vec<String> {
    let tools = catalog.tools();
    let among: Vec<u32> = match task.among {
        None => all.to_vec(),
        Some(_) => all.iter().copied().filter(|&id| task.offers(&tools[id as usize].name)).collect(),
    };
    let index = catalog.search_index();
    index.search(&task.text, &among, limit).into_iter().map(|(id, _)| tools[id as usize].name.clone()).collect()
}

/// Prints recall@1 and recall@5 of the search and of the baselines on
/// `tasks` over `catalog`.
fn recall(catalog: &Catalog, plain: &PlainBm25, tasks: &[Task], title: &str, misses: Option<usize>) {
    let all: Vec<u32> = (0..catalog.tools().len() as u32).collect();
    println!("## Recall, {title}\n");
    println!("| ranking | recall@1 | recall@5 |\n|---|---:|---:|");
    type Ranker<'a> = &'a dyn Fn(&Task) -> Vec<String>;
    let ranked_search = |task: &Task| search(catalog, &all, task, 5);
    let ranked_baseline = |task: &Task| baseline(catalog, task, 5);
    let ranked_plain = |task: &Task| plain.search(task, 5);
    let rankers: [(&str, Ranker); 3] = [
        ("SearchTools (BM25)", &ranked_search),
        ("baseline: plain BM25 (the `bm25` crate)", &ranked_plain),
        ("baseline: words in the name", &ranked_baseline),
    ];
    // Each ranking's hits at 1 and at 5, task by task.
    let mut hits: Vec<Vec<[bool; 2]>> = Vec::new();
    for (name, rank) in rankers {
        let (mut first, mut five) = (0, 0);
        let mut its = Vec::new();
        for task in tasks {
            let ranked = rank(task);
            let hit = |k: usize| ranked.iter().take(k).any(|name| task.right.contains(name));
            let [at_1, at_5] = [hit(1), hit(5)];
            first += usize::from(at_1);
            five += usize::from(at_5);
            its.push([at_1, at_5]);
            if misses.is_some_and(|at| !hit(at)) && name.starts_with("SearchTools") {
                println!("miss: {} -> want {:?}, got {:?}", task.text, task.right, ranked);
            }
        }
        let n = tasks.len() as f64;
        println!("| {name} | {:.3} | {:.3} |", first as f64 / n, five as f64 / n);
        hits.push(its);
    }
    println!();
    for (at, k) in [(0, 1), (1, 5)] {
        let only = |a: &[[bool; 2]], b: &[[bool; 2]]| a.iter().zip(b).filter(|(a, b)| a[at] && !b[at]).count();
        let (ours, theirs) = (only(&hits[0], &hits[1]), only(&hits[1], &hits[0]));
        println!(
            "Against plain BM25 at {k}, task by task: {ours} tasks only SearchTools gets right, {theirs} only BM25 \
             (exact McNemar p = {:.2e}).",
            mcnemar(ours, theirs)
        );
    }
    println!();
}

/// The exact (binomial) two-sided McNemar p-value of `b` against `c`
/// discordant pairs.
fn mcnemar(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    // ln C(n, k) - n ln 2, summed over the tail at or below min(b, c).
    let ln_choose = |k: usize| (1..=k).map(|i| ((n - k + i) as f64 / i as f64).ln()).sum::<f64>();
    let tail: f64 = (0..=b.min(c)).map(|k| (ln_choose(k) - n as f64 * 2f64.ln()).exp()).sum();
    (2.0 * tail).min(1.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let misses = args.iter().find_map(|a| match a.as_str() {
        "--misses" => Some(5),
        "--misses=1" => Some(1),
        _ => None,
    });
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let servers = servers(&repo.join("tests/data/tool_search"));
    let tasks = tasks(&repo.join("tests/data/tool_search"));
    let sets = [
        ("tests/data/tool_search", "pairs"),
        ("tests/data/tool_search_untuned", "untuned catalogue"),
        (
            "tests/data/tool_search_everyday",
            "everyday assistant (not held out: its synonyms were written in view of it)",
        ),
        (HELD_OUT[0], "fresh catalogue (held out: its misses are never listed)"),
        (
            "tests/data/tool_search_bfcl",
            "real requests (BFCL live), each asked of its own few tools (a caller granted only those)",
        ),
        (
            HELD_OUT[1],
            "real requests (BFCL live), each asked of its own few tools (held out: its misses are never listed)",
        ),
        ("tests/data/tool_search_metatool", "plugins (MetaTool), one server: requests for half the plugins"),
        (HELD_OUT[2], "plugins (MetaTool), one server: requests for the other half (held out: misses never listed)"),
    ];
    for (data, what) in sets {
        if !repo.join(data).join("tasks.jsonl").exists() {
            continue;
        }
        let servers = self::servers(&repo.join(data));
        let catalog = catalogue(&servers, 1, dir.path());
        let known: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
        // A task whose right tools were all left out cannot be asked.
        let tasks: Vec<Task> = self::tasks(&repo.join(data))
            .into_iter()
            .filter(|t| t.right.iter().any(|r| known.contains(&r.as_str())))
            .collect();
        recall(
            &catalog,
            &PlainBm25::new(&servers, &known),
            &tasks,
            &format!("{what}: {} tasks over {} tools of {} servers", tasks.len(), known.len(), servers.len()),
            misses.filter(|_| !HELD_OUT.contains(&data)),
        );
    }

    if args.iter().any(|a| a == "--recall") {
        return;
    }
    // Latency and cost at 10,000 tools: the catalogue nine times over.
    let big = catalogue(&servers, 9, dir.path());
    let all: Vec<u32> = (0..big.tools().len() as u32).collect();
    let mut first = Vec::new();
    for task in tasks.iter().take(50) {
        let started = Instant::now();
        std::hint::black_box(big.search(&task.text, &all, 8));
        first.push(started.elapsed().as_secs_f64() * 1e6);
    }
    let started = Instant::now();
    let index = big.search_index();
    let built = started.elapsed();
    let mut took = Vec::new();
    for _ in 0..5 {
        for task in &tasks {
            let started = Instant::now();
            std::hint::black_box(index.search(&task.text, &all, 8));
            took.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    println!("\n## At {} tools\n", big.tools().len());
    println!("| what | value |\n|---|---:|");
    println!("| index made (in the background, at each swap) | {:.1} ms |", built.as_secs_f64() * 1e3);
    println!("| index memory (its allocations, counted) | {:.1} MiB |", index.bytes() as f64 / (1024.0 * 1024.0));
    println!("| search before the index is made (reading each tool): p50 | {:.0} µs |", at(&mut first, 0.5));
    println!("| search, limit 8, all tools: p50 | {:.0} µs |", at(&mut took, 0.5));
    println!("| search, limit 8, all tools: p99 | {:.0} µs |", at(&mut took, 0.99));
    hidden(&servers, &tasks, dir.path());
}

/// The `q` quantile of `took`.
fn at(took: &mut [f64], q: f64) -> f64 {
    took.sort_by(f64::total_cmp);
    took[((took.len() - 1) as f64 * q) as usize]
}

/// Timing says nothing of hidden tools: one caller's searches over the
/// pairs' tools, in a catalogue of those tools alone and in one that also
/// holds 3,000 tools the caller cannot see, sharing 200 words no visible
/// tool uses; asked with the tasks, and with those 200 words.
fn hidden(servers: &[Server], tasks: &[Task], dir: &Path) {
    let word = |n: usize| format!("zorbex{}", (b'a' + (n % 26) as u8) as char).repeat(1 + n / 26);
    let more: Vec<Value> = (0..3000)
        .map(|i| {
            let words: Vec<String> = (0..6).map(|k| word((i * 7 + k * 13) % 200)).collect();
            json!({
                "name": format!("hidden_{i}"),
                "description": words.join(" "),
                "parameters": {"type": "object", "properties": {}},
                "backend": {"builtin": "echo"},
            })
        })
        .collect();
    let alone = catalogue(servers, 1, dir);
    let with = catalogue_with(servers, 1, more, dir);
    let visible = |catalog: &Catalog| -> Vec<u32> {
        let ids = catalog.tools().iter().enumerate().filter(|(_, t)| !t.name.starts_with("hidden_"));
        ids.map(|(id, _)| id as u32).collect()
    };
    let (seen_alone, seen_with) = (visible(&alone), visible(&with));
    assert_eq!(seen_alone.len(), seen_with.len());
    let (index_alone, index_with) = (alone.search_index(), with.search_index());
    let words: Vec<String> = (0..200).map(word).collect();
    let queries: [(&str, Vec<&str>); 2] = [
        ("the tasks", tasks.iter().map(|t| t.text.as_str()).collect()),
        ("200 words only hidden tools hold", words.iter().map(String::as_str).collect()),
    ];
    println!("\n## Hidden tools change no time\n");
    println!("{} visible tools; beside them, none or 3,000 hidden.\n", seen_alone.len());
    println!("| asked | p50, no hidden tools | p50, 3,000 hidden | difference |\n|---|---:|---:|---:|");
    for (asked, queries) in queries {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        // Each query asked of both, in turn which goes first (the second
        // finds the caches warm).
        for round in 0..60 {
            for query in &queries {
                let ask = |index: &SearchIndex, seen: &[u32], took: &mut Vec<f64>| {
                    let started = Instant::now();
                    let found = std::hint::black_box(index.search(query, seen, 8));
                    took.push(started.elapsed().as_secs_f64() * 1e6);
                    found.len()
                };
                let (first, second) = match round % 2 {
                    0 => (ask(index_alone, &seen_alone, &mut a), ask(index_with, &seen_with, &mut b)),
                    _ => (ask(index_with, &seen_with, &mut b), ask(index_alone, &seen_alone, &mut a)),
                };
                assert_eq!(first, second, "{query}");
            }
        }
        let (a, b) = (at(&mut a, 0.5), at(&mut b, 0.5));
        println!("| {asked} | {a:.1} µs | {b:.1} µs | {:+.1} % |", (b - a) / a * 100.0);
    }
}
