#!/usr/bin/env bash
# Instructions the model door executes a request, counted by callgrind: a
# count, not a time, so two builds compare whatever else this machine is
# doing (its timings vary by a tenth or more from one run to the next).
# Each BINARY serves the model door under valgrind before the model_door
# bench's own model server (`--serve`); wrk sends one request at a time,
# first 3 s of warm-up (not counted), then 8 s counted; printed: the
# instructions a request of the door's process, for a whole completion
# whose call is repaired (`GetWeather`, `{'city': 'Paris',}`) and for one
# whose call is well formed. Needs valgrind and wrk (`scripts/bench-deps`).
#   cargo build --release && cargo bench --bench model_door --no-run
#   benches/door_instructions.sh target/release/toolgate [OTHER_BINARY ...]
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,12p' "$0"; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
bench=$(ls -t "$root"/target/release/deps/model_door-* | grep -v '\.d$' | head -1)
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT

"$bench" --serve > "$dir/upstream" &
pids+=($!)
until [ -s "$dir/upstream" ]; do sleep 0.05; done
mkdir -p "$dir/registry"
echo 'tools: []' > "$dir/registry/tools.yaml"
printf 'model_door:\n  upstreams:\n    - name: bench\n      base_url: http://%s/v1\n' "$(head -1 "$dir/upstream")" \
    > "$dir/toolgate.yaml"

# A wrk script posting the bench's request for MODEL (`drift`: the call
# comes repaired; `retry` after a tool's message: it comes well formed).
script() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
model, told = sys.argv[1], sys.argv[2] == "told"
schema = lambda p: {"type": "object", "properties": {p: {"type": "string"}}, "required": [p]}
messages = [{"role": "user", "content": "Weather in Paris?"}]
if told:
    messages.append({"role": "tool", "content": "sunny", "tool_call_id": "call_1"})
body = {"model": model, "stream": False, "messages": messages, "tools": [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                      "parameters": schema("city")}},
    {"type": "function", "function": {"name": "grep", "description": "Search files.",
                                      "parameters": schema("pattern")}}]}
print('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = ' + json.dumps(json.dumps(body)))
EOF
}
script drift - > "$dir/repaired.lua"
script retry told > "$dir/well_formed.lua"

for binary in "$@"; do
    for answer in repaired well_formed; do
        run="$dir/run"
        rm -rf "$run" && mkdir -p "$run" && cp -r "$dir/registry" "$dir/toolgate.yaml" "$run/"
        (cd "$run" && TOOLGATE_LOG=warn,toolgate=info exec valgrind --tool=callgrind \
            --callgrind-out-file="$run/callgrind.out" "$binary" serve --catalog registry --listen 127.0.0.1:0 \
            --model-listen 127.0.0.1:0 --config toolgate.yaml > "$run/log" 2>&1) &
        door=$!
        until grep -q "listening on" "$run/log"; do sleep 0.2; done
        url=$(sed -n 's/.*model door (OpenAI-compatible) on \(.*\)$/\1/p' "$run/log")/chat/completions
        wrk -t1 -c1 -d3s -s "$dir/$answer.lua" "$url" > /dev/null
        callgrind_control -z "$door" > /dev/null 2>&1
        requests=$(wrk -t1 -c1 -d8s -s "$dir/$answer.lua" "$url" | awk '/requests in/ {print $1}')
        callgrind_control -d "$door" > /dev/null 2>&1
        kill "$door"
        wait "$door" 2>/dev/null || true
        total=$(callgrind_annotate "$run"/callgrind.out.* 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
        echo "$binary, $answer call: $((total / requests)) instructions a request ($requests requests)"
    done
done
