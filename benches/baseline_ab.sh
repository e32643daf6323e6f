#!/usr/bin/env bash
# The gateway against plain tonic, every server in its own binary, h2load
# interleaved round by round (ROUNDS rounds of 4 s after 1 s of warm-up,
# at 1 connection × 64 streams and 1 × 1; SHAPES to choose): the plain
# echo of benches/bare-echo (a crate of its own: no dev-dependency
# features), the same with mimalloc (the gateway's allocator), the load
# bench's `--serve bare` (built by `cargo bench`, so with Tokio's
# test-util), and each gateway given as NAME=BINARY (telemetry off). Prints
# every round, then per shape the medians of the round-by-round ratios.
#   cargo bench --bench load --no-run && cargo build --release
#   benches/baseline_ab.sh gateway=target/release/toolgate
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,13p' "$0"; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/benches/common.sh"
(cd "$root/benches/bare-echo" \
    && CARGO_TARGET_DIR="$root/target/bare-echo" cargo build --release -q \
    && CARGO_TARGET_DIR="$root/target/bare-echo-mimalloc" cargo build --release -q --features mimalloc)
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
python3 "$root/benches/echo_request.py" "$dir/request"
declare -A port
names=()
# NAME CMD...: a server that prints its port and serves until stdin closes.
start_piped() {
    local name=$1 fd
    shift
    mkfifo "$dir/$name.in"
    "$@" < "$dir/$name.in" > "$dir/$name.port" &
    pids+=($!)
    exec {fd}> "$dir/$name.in"
    until [ -s "$dir/$name.port" ]; do sleep 0.05; done
    port[$name]=$(head -1 "$dir/$name.port")
    names+=("$name")
}
start_piped echo "$root/target/bare-echo/release/bare-echo"
start_piped echo-mimalloc "$root/target/bare-echo-mimalloc/release/bare-echo"
start_piped bench-bare "$(load_bench)" --serve bare
for target in "$@"; do
    name=${target%%=*} bin=${target#*=}
    "$bin" serve --catalog "$root/catalog" --listen 127.0.0.1:0 2> "$dir/$name.log" &
    pids+=($!)
    port[$name]=$(gateway_port "$dir/$name.log")
    names+=("$name")
done
for shape in ${SHAPES:-1x64 1x1}; do
    for _ in $(seq "${ROUNDS:-6}"); do
        for name in "${names[@]}"; do
            rps=$(h2load_execute "$dir/request" "${port[$name]}" -c "${shape%x*}" -m "${shape#*x}" -D 4 \
                --warm-up-time 1 | awk '/finished in/ {print $4}')
            echo "$shape $name $rps"
        done
    done
done | python3 -c '
import collections, statistics, sys
rps, names = collections.defaultdict(list), []
for line in sys.stdin:
    print(line.strip())
    shape, name, r = line.split()
    names += [name] if name not in names else []
    rps[shape, name].append(float(r))
for shape in dict.fromkeys(s for s, _ in rps):
    for base in ("echo", "echo-mimalloc"):
        for name in names:
            if name == base:
                continue
            ratios = [a / b for a, b in zip(rps[shape, name], rps[shape, base])]
            print(f"{shape} {name}/{base}: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}), {len(ratios)} rounds")
'
