#!/usr/bin/env bash
# h2load against the gateway and the plain tonic server of the load bench
# (`--serve bare`), ROUNDS rounds of 4 s each, interleaved, at one connection
# with 64 streams and with one: every round's RPS and the ratio of the
# medians. More rounds than `cargo bench --bench load` runs, for a steadier
# median on a machine whose two cores the generator shares. With
# CLIENTS="h2load grpcio" the same rounds are also run by Python's grpcio
# (benches/grpcio_load.py: one channel, 64 calls at once and one at a time;
# the Python of TOOLGATE_BENCH_PYTHON, else .venv's, with grpcio and
# grpcio-tools).
#   cargo build --release && cargo bench --bench load --no-run
#   benches/h2load_ab.sh [ROUNDS]   (BIN=path/to/toolgate: another build)
set -euo pipefail
rounds=${1:-6}
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/benches/common.sh"
dir=$(mktemp -d)
gateway=""
trap 'exec 3>&-; [ -z "$gateway" ] || kill "$gateway" 2>/dev/null || true; rm -rf "$dir"' EXIT
serve_bench bare "$dir"
bare=$served
"${BIN:-$root/target/release/toolgate}" serve --catalog "$root/catalog" --listen 127.0.0.1:0 2> "$dir/serve.log" &
gateway=$!
port=$(gateway_port "$dir/serve.log")
python3 "$root/benches/echo_request.py" "$dir/request"
rps() {
    h2load_execute "$dir/request" "$2" -c 1 -m "$1" -D 4 --warm-up-time 1 | awk '/finished in/ {print $4}'
}
python=${TOOLGATE_BENCH_PYTHON:-$root/.venv/bin/python}
grpcio() {
    "$python" "$root/benches/grpcio_load.py" "$2" 4 "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["rps"])'
}
for client in ${CLIENTS:-h2load}; do
    case $client in
        h2load) measure=rps ;;
        grpcio) measure=grpcio ;;
        *) echo "unknown client $client (h2load or grpcio)" >&2; exit 2 ;;
    esac
    for streams in 64 1; do
        for _ in $(seq "$rounds"); do
            echo "$client $streams gateway $($measure "$streams" "$port")"
            echo "$client $streams bare $($measure "$streams" "$bare")"
        done
    done
done | python3 -c '
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in sys.stdin:
    client, streams, target, rps = line.split()
    runs[client, streams, target].append(float(rps))
for client, streams in dict.fromkeys((c, s) for c, s, _ in runs):
    g, b = runs[client, streams, "gateway"], runs[client, streams, "bare"]
    g, b = [round(x) for x in sorted(g)], [round(x) for x in sorted(b)]
    print(f"{client} 1 conn x {streams}: gateway {g}, bare {b}, median ratio {statistics.median(g) / statistics.median(b):.2f}")
'
