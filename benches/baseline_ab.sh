#!/usr/bin/env bash
# The gateway against plain tonic, every server in its own binary, h2load
# interleaved round by round (every server warmed for 1 s, then ROUNDS rounds of 4 s
# at 1 connection × 64 streams and 1 × 1; SHAPES to choose): the plain
# echo of benches/bare-echo (a crate of its own: no dev-dependency
# features), the same with mimalloc (the gateway's allocator), with
# BENCH_BARE=1 the load bench's `--serve bare` (built by `cargo bench`, so
# with Tokio's test-util), and each gateway given as NAME=BINARY or
# NAME=BINARY@TELEMETRY (none, the default, metrics, spans or sampled, as in
# telemetry_ab.sh, exporting to the load bench's sink). Prints every round
# with each server's CPU time per request (from /proc), then per shape the
# medians of the round-by-round ratios and CPU differences.
#   cargo bench --bench load --no-run && cargo build --release
#   benches/baseline_ab.sh off=target/release/toolgate spans=target/release/toolgate@spans
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,15p' "$0"; exit 2; }
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
[ -z "${BENCH_BARE:-}" ] || start_piped bench-bare "$(load_bench)" --serve bare
declare -A pid
pid[echo]=${pids[0]} pid[echo-mimalloc]=${pids[1]}
[ -z "${BENCH_BARE:-}" ] || pid[bench-bare]=${pids[2]}
for target in "$@"; do
    name=${target%%=*} bin=${target#*=} mode=none
    [[ $bin == *@* ]] && mode=${bin##*@} bin=${bin%@*}
    telemetry=()
    if [ "$mode" != none ]; then
        [ -n "${served:-}" ] || serve_bench sink "$dir"
        telemetry_env "$mode" "http://127.0.0.1:$served"
    fi
    env ${telemetry[@]+"${telemetry[@]}"} "$bin" serve --catalog "$root/catalog" --listen 127.0.0.1:0 2> "$dir/$name.log" &
    pids+=($!)
    pid[$name]=$!
    port[$name]=$(gateway_port "$dir/$name.log")
    names+=("$name")
done
# CPU seconds (user + system) process $1 has used.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# Each server warmed once (its CPU a round is then the requests' alone).
for name in "${names[@]}"; do
    h2load_execute "$dir/request" "${port[$name]}" -c 1 -m 64 -D 1 > /dev/null
done
for shape in ${SHAPES:-1x64 1x1}; do
    for _ in $(seq "${ROUNDS:-6}"); do
        for name in "${names[@]}"; do
            before=$(cpu "${pid[$name]}")
            out=$(h2load_execute "$dir/request" "${port[$name]}" -c "${shape%x*}" -m "${shape#*x}" -D 4)
            after=$(cpu "${pid[$name]}")
            rps=$(awk '/finished in/ {print $4}' <<< "$out")
            done=$(awk '/^requests:/ {print $8}' <<< "$out")
            echo "$shape $name $rps $(python3 -c "print(f'{($after - $before) * 1e6 / $done:.2f}')")"
        done
    done
done | python3 -c '
import collections, statistics, sys
rps, cpu, names = collections.defaultdict(list), collections.defaultdict(list), []
for line in sys.stdin:
    print(line.strip())
    shape, name, r, c = line.split()
    names += [name] if name not in names else []
    rps[shape, name].append(float(r))
    cpu[shape, name].append(float(c))
for shape in dict.fromkeys(s for s, _ in rps):
    for base in ("echo", "echo-mimalloc"):
        for name in names:
            if name == base:
                continue
            ratios = [a / b for a, b in zip(rps[shape, name], rps[shape, base])]
            extra = [a - b for a, b in zip(cpu[shape, name], cpu[shape, base])]
            print(f"{shape} {name}/{base}: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}), "
                  f"CPU a request {statistics.median(extra):+.2f} us ({min(extra):+.2f} to {max(extra):+.2f}), {len(ratios)} rounds")
'
