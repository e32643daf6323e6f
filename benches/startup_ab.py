#!/usr/bin/env python3
"""Start-up of several builds, interleaved: each TARGET (NAME=BINARY) runs
`serve --catalog CATALOG --listen 127.0.0.1:0` until its "listening" line
(read from a pipe), then its RSS is read and it is stopped; ROUNDS rounds
(9 unless set), the targets in turn in each. Prints each target's median
time to ready with its range, and its median RSS when ready. On a machine
whose speed moves through the day, only builds measured in one run compare.

    cargo build --release
    cargo bench --bench startup -- --write /tmp/reg10k.yaml
    benches/startup_ab.py /tmp/reg10k.yaml old=/tmp/toolgate-before new=target/release/toolgate
"""

import os
import re
import statistics
import subprocess
import sys
import time


def start(binary, catalog):
    """Milliseconds until `binary` listens, and its RSS in MB then."""
    began = time.perf_counter()
    server = subprocess.Popen(
        [binary, "serve", "--catalog", catalog, "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in server.stderr:
        if "listening on" in line:
            break
    else:
        sys.exit(f"{binary} stopped before listening")
    ready = (time.perf_counter() - began) * 1000
    with open(f"/proc/{server.pid}/status") as status:
        rss = int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1)) / 1024
    server.terminate()
    server.communicate()
    return ready, rss


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    catalog, targets = sys.argv[1], [arg.split("=", 1) for arg in sys.argv[2:]]
    measured = {name: [] for name, _ in targets}
    for _ in range(int(os.environ.get("ROUNDS", "9"))):
        for name, binary in targets:
            measured[name].append(start(binary, catalog))
    for name, runs in measured.items():
        ready = sorted(r for r, _ in runs)
        rss = statistics.median(m for _, m in runs)
        print(
            f"{name}: ready after {statistics.median(ready):.0f} ms ({ready[0]:.0f}-{ready[-1]:.0f}),"
            f" RSS when ready {rss:.1f} MB"
        )


main()
