//! Realistic snake_case tool names for benchmarks: `<service>_<verb>_<noun>`,
//! spread over the whole space by a fixed permutation, so the first 100 are as
//! varied as the first 10,000. `benches/difflib_baseline.py` builds the same list.

const SERVICES: [&str; 20] = [
    "github",
    "slack",
    "jira",
    "stripe",
    "notion",
    "linear",
    "gdrive",
    "gmail",
    "salesforce",
    "zendesk",
    "hubspot",
    "shopify",
    "asana",
    "trello",
    "dropbox",
    "twilio",
    "sentry",
    "datadog",
    "pagerduty",
    "confluence",
];
const VERBS: [&str; 25] = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "archive",
    "export",
    "import",
    "sync",
    "approve",
    "cancel",
    "schedule",
    "assign",
    "close",
    "reopen",
    "merge",
    "share",
    "tag",
    "move",
    "copy",
    "restore",
    "publish",
    "summarize",
    "count",
];
const NOUNS: [&str; 40] = [
    "invoice",
    "customer",
    "order",
    "ticket",
    "issue",
    "pull_request",
    "repository",
    "file",
    "folder",
    "calendar_event",
    "message",
    "channel",
    "user",
    "team",
    "project",
    "task",
    "comment",
    "attachment",
    "payment",
    "refund",
    "subscription",
    "product",
    "price",
    "contact",
    "deal",
    "lead",
    "incident",
    "alert",
    "dashboard",
    "monitor",
    "page",
    "database",
    "record",
    "report",
    "webhook",
    "label",
    "milestone",
    "release",
    "branch",
    "commit",
];

/// The first `n` names (n ≤ 20,000).
pub fn tool_names(n: usize) -> Vec<String> {
    let total = SERVICES.len() * VERBS.len() * NOUNS.len();
    assert!(n <= total);
    (0..n)
        .map(|i| {
            let j = (i * 7919) % total;
            let (s, rest) = (j % SERVICES.len(), j / SERVICES.len());
            let (v, noun) = (rest % VERBS.len(), rest / VERBS.len());
            format!("{}_{}_{}", SERVICES[s], VERBS[v], NOUNS[noun])
        })
        .collect()
}
