#!/usr/bin/env bash
# h2load against the gateway and the plain tonic server of the load bench
# (`--serve bare`), ROUNDS rounds of 4 s each, interleaved, at one connection
# with 64 streams and with one: every round's RPS and the ratio of the
# medians. More rounds than `cargo bench --bench load` runs, for a steadier
# median on a machine whose two cores the generator shares.
#   cargo build --release && cargo bench --bench load --no-run
#   benches/h2load_ab.sh [ROUNDS]   (BIN=path/to/toolgate: another build)
set -euo pipefail
rounds=${1:-6}
root="$(cd "$(dirname "$0")/.." && pwd)"
bench=$(ls -t "$root"/target/release/deps/load-* | grep -v '\.d$' | head -1)
dir=$(mktemp -d)
exec 3> >(exec "$bench" --serve bare > "$dir/bare.port")
trap 'exec 3>&-; kill "$gateway" 2>/dev/null || true; rm -rf "$dir"' EXIT
"${BIN:-$root/target/release/toolgate}" serve --catalog "$root/catalog" --listen 127.0.0.1:0 2> "$dir/serve.log" &
gateway=$!
until [ -s "$dir/bare.port" ] && grep -q "listening on" "$dir/serve.log"; do sleep 0.05; done
bare=$(head -1 "$dir/bare.port")
port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$dir/serve.log" | head -1)
python3 "$root/benches/echo_request.py" "$dir/request"
rps() {
    h2load -c 1 -m "$1" -D 4 --warm-up-time 1 -d "$dir/request" \
        -H "content-type: application/grpc" -H "te: trailers" \
        "http://127.0.0.1:$2/toolgate.v1.ToolGatewayService/Execute" | awk '/finished in/ {print $4}'
}
for streams in 64 1; do
    for _ in $(seq "$rounds"); do
        echo "$streams gateway $(rps "$streams" "$port")"
        echo "$streams bare $(rps "$streams" "$bare")"
    done
done | python3 -c '
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in sys.stdin:
    streams, target, rps = line.split()
    runs[streams, target].append(float(rps))
for streams in ("64", "1"):
    g, b = runs[streams, "gateway"], runs[streams, "bare"]
    print(f"1 conn x {streams}: gateway {sorted(g)}, bare {sorted(b)}, median ratio {statistics.median(g) / statistics.median(b):.2f}")
'
