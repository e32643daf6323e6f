"""Regenerates difflib_reference.json: drifted and unrelated tool names with
what Python's difflib.get_close_matches(query, names, n=3, cutoff=0.6) answers.

The suggestion-quality test compares toolgate's suggestions with these.
Run: python3 tests/data/difflib_reference.py  (deterministic: fixed seed)
"""
import difflib
import json
import random
from pathlib import Path

HERE = Path(__file__).parent
names = [l.strip() for l in (HERE / "tool_names.txt").read_text().splitlines()
         if l.strip() and not l.startswith("#")]
rng = random.Random(20261130)
letters = "abcdefghijklmnopqrstuvwxyz"


def camel(name):
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def typo(name, kind):
    i = rng.randrange(1, len(name) - 1) if len(name) > 2 else 0
    if kind == "delete":
        return name[:i] + name[i + 1:]
    if kind == "insert":
        return name[:i] + rng.choice(letters) + name[i:]
    if kind == "substitute":
        return name[:i] + rng.choice([c for c in letters if c != name[i]]) + name[i + 1:]
    if kind == "transpose":
        i = min(i, len(name) - 2)
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    raise ValueError(kind)


cases = []
for name in names:
    if len(name) < 4:
        continue
    for kind in ("delete", "insert", "substitute", "transpose"):
        q = typo(name, kind)
        if q != name and q not in names:
            cases.append({"query": q, "intended": name, "kind": "typo"})
    for kind, q in (("camel_case", camel(name)), ("kebab_case", name.replace("_", "-")),
                    ("upper_case", name.upper()), ("namespace", "functions." + name)):
        if q != name and q not in names:
            cases.append({"query": q, "intended": name, "kind": kind})

unrelated = [
    "launch_rocket", "order_pizza", "transfer_funds", "book_flight", "play_music", "banana",
    "zzz", "hello", "reboot_server", "feed_the_cat", "compile_kernel", "buy_stock", "dance",
    "open_garage_door", "call_taxi", "water_plants", "mine_bitcoin", "paint_wall", "x",
    "quantum_entangle", "harvest_wheat", "tune_guitar", "adopt_puppy", "knit_scarf",
    "schedule_dentist", "solve_sudoku", "rotate_keys", "bake_bread", "fly_drone", "wash_car",
]
for q in unrelated:
    cases.append({"query": q, "intended": None, "kind": "unrelated"})

for case in cases:
    case["difflib"] = difflib.get_close_matches(case["query"], names, n=3, cutoff=0.6)

(HERE / "difflib_reference.json").write_text(json.dumps(cases, indent=1) + "\n")
print(f"{len(cases)} cases")
