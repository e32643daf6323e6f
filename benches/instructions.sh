#!/usr/bin/env bash
# Instructions the gateway executes per Execute, counted by callgrind: far
# steadier than requests a second on a shared 2-core machine, where rounds
# of one target move by 20 %. Starts BINARY under valgrind with TELEMETRY
# (none, metrics, spans, sampled: as in telemetry_ab.sh, exporting to the
# load bench's sink), sends nothing and stops it, then starts it again and
# sends N echo calls (h2load, 16 connections x 4 streams), and prints the
# instructions of the second run less the first, per call. Under valgrind the threads take
# turns, so the exporter keeps up and every span is shipped (at saturation
# in the real server about half are dropped); lock contention and cache
# misses are not counted. Needs valgrind (`scripts/bench-deps`).
#   cargo build --release && cargo bench --bench load --no-run
#   benches/instructions.sh target/release/toolgate spans 20000
#   callgrind_annotate --inclusive=yes $OUT/run.out   # where they go (OUT=dir keeps the files)
set -euo pipefail
[ $# -eq 3 ] || { sed -n '2,14p' "$0"; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/benches/common.sh"
bin=$1 mode=$2 calls=$3
dir=${OUT:-$(mktemp -d)}
mkdir -p "$dir"
trap 'exec 3>&-; [ -n "${OUT:-}" ] || rm -rf "$dir"' EXIT
serve_bench sink "$dir"
telemetry_env "$mode" "http://127.0.0.1:$served"
python3 "$root/benches/echo_request.py" "$dir/request"
# Runs the gateway under callgrind, sends $1 calls, stops it; prints the instructions.
run() {
    env "${telemetry[@]}" valgrind --tool=callgrind --callgrind-out-file="$dir/$2.out" \
        "$bin" serve --catalog "$root/catalog" --listen 127.0.0.1:0 2> "$dir/$2.log" &
    local pid=$!
    local port
    port=$(gateway_port "$dir/$2.log")
    if [ "$1" -gt 0 ]; then
        h2load_execute "$dir/request" "$port" -c 16 -m 4 -n "$1" |
            grep -q "$1 succeeded" || { echo "not every call succeeded" >&2; exit 1; }
    fi
    # Past one export interval, so that what the calls left is shipped.
    sleep 2
    kill -INT "$pid"
    wait "$pid" || true
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$dir/$2.log"
}
idle=$(run 0 idle)
busy=$(run "$calls" run)
echo "$mode: $(( (busy - idle) / calls )) instructions a call ($busy with $calls calls, $idle with none)"
