"""The Python baseline: difflib.get_close_matches (n=3, cutoff=0.6), as
difflib-based resolvers suggest names, on the same names as benches/suggest.rs.

Run: python3 benches/difflib_baseline.py
"""
import difflib
import statistics
import time

SERVICES = ["github", "slack", "jira", "stripe", "notion", "linear", "gdrive", "gmail", "salesforce", "zendesk",
            "hubspot", "shopify", "asana", "trello", "dropbox", "twilio", "sentry", "datadog", "pagerduty", "confluence"]
VERBS = ["get", "list", "create", "update", "delete", "search", "archive", "export", "import", "sync", "approve",
         "cancel", "schedule", "assign", "close", "reopen", "merge", "share", "tag", "move", "copy", "restore",
         "publish", "summarize", "count"]
NOUNS = ["invoice", "customer", "order", "ticket", "issue", "pull_request", "repository", "file", "folder",
         "calendar_event", "message", "channel", "user", "team", "project", "task", "comment", "attachment",
         "payment", "refund", "subscription", "product", "price", "contact", "deal", "lead", "incident", "alert",
         "dashboard", "monitor", "page", "database", "record", "report", "webhook", "label", "milestone", "release",
         "branch", "commit"]


def tool_names(n):
    total = len(SERVICES) * len(VERBS) * len(NOUNS)
    out = []
    for i in range(n):
        j = (i * 7919) % total
        s, rest = j % len(SERVICES), j // len(SERVICES)
        v, noun = rest % len(VERBS), rest // len(VERBS)
        out.append(f"{SERVICES[s]}_{VERBS[v]}_{NOUNS[noun]}")
    return out


def typo(name):
    mid = len(name) // 2
    return name[:mid] + name[mid + 1:]


def median_seconds(fn, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


for n in (100, 1_000, 10_000):
    names = tool_names(n)
    query = typo(names[n // 3])
    runs = 50 if n < 10_000 else 15
    miss = median_seconds(lambda: difflib.get_close_matches(query, names, n=3, cutoff=0.6), runs)
    unrelated = median_seconds(lambda: difflib.get_close_matches("launch_rocket_now", names, n=3, cutoff=0.6), runs)
    print(f"difflib n={n:>6}: miss_typo {miss * 1e3:8.3f} ms   miss_unrelated {unrelated * 1e3:8.3f} ms")
