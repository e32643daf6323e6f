#!/usr/bin/env bash
# What exporting telemetry costs, from outside: h2load against several
# gateways at once, each started with its own telemetry, interleaved round
# by round (ROUNDS rounds of 4 s after 1 s of warm-up, at 1 connection × 64
# and 16 × 4; SHAPES="1x64" for one), every one exporting to the load
# bench's OTLP sink (`--serve sink`: decodes and counts, keeps nothing).
# Each TARGET is NAME=BINARY:MODE[+VAR=VALUE,...], MODE one of
#   none     no OTLP endpoint: nothing exported, no span made
#   metrics  metrics only (OTEL_TRACES_EXPORTER=none)
#   spans    metrics and every span
#   sampled  metrics and 10 % of traces (parentbased_traceidratio 0.1)
# with any VAR=VALUE added to its environment (the SDK's OTEL_BSP_* knobs).
# Prints every round, then per shape the median RPS, its ratio to the first
# target's, and the gateway process's CPU a request (user + system ticks
# over the round, warm-up included); last, how many spans each gateway
# dropped (its export queue full).
#   cargo build --release && cargo bench --bench load --no-run
#   benches/telemetry_ab.sh none=target/release/toolgate:none spans=target/release/toolgate:spans
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,18p' "$0"; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/benches/common.sh"
rounds=${ROUNDS:-4}
dir=$(mktemp -d)
pids=()
trap 'exec 3>&-; kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
serve_bench sink "$dir"
declare -A port pid
for target in "$@"; do
    name=${target%%=*} rest=${target#*=}
    bin=${rest%%:*} mode=${rest#*:}
    extra=""
    [[ $mode == *+* ]] && extra=${mode#*+} && mode=${mode%%+*}
    telemetry_env "$mode" "http://127.0.0.1:$served"
    envs=(${extra//,/ } "${telemetry[@]}")
    env "${envs[@]}" "$bin" serve --catalog "$root/catalog" --listen 127.0.0.1:0 2> "$dir/$name.log" &
    pid[$name]=$!
    pids+=($!)
    port[$name]=$(gateway_port "$dir/$name.log")
done
python3 "$root/benches/echo_request.py" "$dir/request"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for shape in ${SHAPES:-1x64 16x4}; do
    for _ in $(seq "$rounds"); do
        for target in "$@"; do
            name=${target%%=*}
            before=$(ticks "${pid[$name]}")
            rps=$(h2load_execute "$dir/request" "${port[$name]}" -c "${shape%x*}" -m "${shape#*x}" -D 4 \
                --warm-up-time 1 | awk '/finished in/ {print $4}')
            echo "$shape $name $rps $before $(ticks "${pid[$name]}")"
        done
    done
done | python3 -c '
import os, sys, statistics, collections
hz = os.sysconf("SC_CLK_TCK")
rps, cpu, names = collections.defaultdict(list), collections.defaultdict(list), []
for line in sys.stdin:
    print(line.strip())
    shape, name, r, before, after = line.split()
    names += [name] if name not in names else []
    rps[shape, name].append(float(r))
    # 5 s of load (1 s warm-up), at about the measured rate
    cpu[shape, name].append((int(after) - int(before)) / hz * 1e6 / (float(r) * 5))
for shape in dict.fromkeys(s for s, _ in rps):
    base = statistics.median(rps[shape, names[0]])
    for name in names:
        median = statistics.median(rps[shape, name])
        print(f"{shape} {name}: median {median:.0f} RPS ({min(rps[shape, name]):.0f}-{max(rps[shape, name]):.0f}),"
              f" {median / base:.3f} of {names[0]}, CPU a request {statistics.median(cpu[shape, name]):.1f} us")
'
# Spans the gateways dropped because their export queue was full: a run
# that drops spans measures less than exporting every span.
for target in "$@"; do
    name=${target%%=*}
    kill -INT "${pid[$name]}"
    wait "${pid[$name]}" || true
    dropped=$(sed -n 's/.*dropped_span_count=\([0-9]*\).*/\1/p' "$dir/$name.log")
    echo "$name: ${dropped:-0} spans dropped"
done
