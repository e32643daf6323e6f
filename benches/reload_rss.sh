#!/usr/bin/env bash
# Reload at 10,000 tools: the real binary serving a generated registry
# (three typed parameters a tool, every schema different); the file is
# rewritten as an editor does, RELOADS times; for each, the time from the
# rename to the "reloaded" log line (the watcher's debounce included) and
# the resident memory after it, then the peak (VmHWM).
#   cargo build --release && benches/reload_rss.sh [RELOADS]
# (BIN=path/to/toolgate measures another build; EDIT=names renames every
# tool instead of changing every description.)
set -euo pipefail
reloads=${1:-6}
bin=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release/toolgate}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
mkdir -p "$dir/registry"
python3 - "$dir/registry/tools.yaml" <<'PY'
import sys
lines = ["tools:"]
for i in range(10000):
    lines.append(f"""  - name: svc{i}_list_issue_{i % 97}
    description: List issues of service {i}.
    parameters: {{type: object, properties: {{id{i % 13}: {{type: string, pattern: "^[a-z0-9-]+$"}}, limit: {{type: integer, minimum: 1, maximum: {100 + i}}}, include_archived: {{type: boolean}}}}, required: [id{i % 13}], additionalProperties: false}}
    backend: {{builtin: echo}}""")
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
cd "$dir"
"$bin" serve --catalog registry --listen 127.0.0.1:0 2>serve.log &
pid=$!
until grep -q "toolgate listening on" serve.log; do sleep 0.02; done
sleep 1
echo "ready: $(grep VmRSS /proc/$pid/status | tr -s ' ')"
for i in $(seq 1 "$reloads"); do
    python3 - <<'PY'
import os
p = "registry/tools.yaml"
s = open(p).read()
if os.environ.get("EDIT") == "names":  # every tool renamed: nothing shared but the schemas
    s = s.replace("name: svc", "name: srv") if "name: svc" in s else s.replace("name: srv", "name: svc")
else:  # every description changed
    s = s.replace("List issues", "List the issues") if "List issues" in s else s.replace("List the issues", "List issues")
open(p + ".swp", "w").write(s)
os.rename(p + ".swp", p)
PY
    start=$(date +%s.%N)
    until [ "$(grep -c 'catalogue and configuration reloaded' serve.log)" -ge "$i" ]; do sleep 0.005; done
    end=$(date +%s.%N)
    sleep 0.5
    printf 'reload %d: %.2f s, %s\n' "$i" "$(echo "$end - $start" | bc)" "$(grep VmRSS /proc/$pid/status | tr -s ' ')"
done
echo "peak: $(grep VmHWM /proc/$pid/status | tr -s ' ')"
