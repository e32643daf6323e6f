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
# over the round, warm-up included).
#   cargo build --release && cargo bench --bench load --no-run
#   benches/telemetry_ab.sh none=target/release/toolgate:none spans=target/release/toolgate:spans
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,19p' "$0"; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds=${ROUNDS:-4}
bench=$(ls -t "$root"/target/release/deps/load-* | grep -v '\.d$' | head -1)
dir=$(mktemp -d)
exec 3> >(exec "$bench" --serve sink > "$dir/sink.port")
pids=()
trap 'exec 3>&-; kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
until [ -s "$dir/sink.port" ]; do sleep 0.05; done
sink="http://127.0.0.1:$(head -1 "$dir/sink.port")"
declare -A port pid
for target in "$@"; do
    name=${target%%=*} rest=${target#*=}
    bin=${rest%%:*} mode=${rest#*:}
    extra=""
    [[ $mode == *+* ]] && extra=${mode#*+} && mode=${mode%%+*}
    envs=(${extra//,/ })
    otlp=(OTEL_EXPORTER_OTLP_ENDPOINT="$sink" OTEL_METRIC_EXPORT_INTERVAL=1000)
    case $mode in
        none) ;;
        metrics) envs+=("${otlp[@]}" OTEL_TRACES_EXPORTER=none) ;;
        spans) envs+=("${otlp[@]}") ;;
        sampled) envs+=("${otlp[@]}" OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1) ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    env "${envs[@]}" "$bin" serve --catalog "$root/catalog" --listen 127.0.0.1:0 2> "$dir/$name.log" &
    pid[$name]=$!
    pids+=($!)
    until grep -q "listening on" "$dir/$name.log"; do sleep 0.05; done
    port[$name]=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$dir/$name.log" | head -1)
done
python3 "$root/benches/echo_request.py" "$dir/request"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for shape in ${SHAPES:-1x64 16x4}; do
    for _ in $(seq "$rounds"); do
        for target in "$@"; do
            name=${target%%=*}
            before=$(ticks "${pid[$name]}")
            rps=$(h2load -c "${shape%x*}" -m "${shape#*x}" -D 4 --warm-up-time 1 -d "$dir/request" \
                -H "content-type: application/grpc" -H "te: trailers" \
                "http://127.0.0.1:${port[$name]}/toolgate.v1.ToolGatewayService/Execute" |
                awk '/finished in/ {print $4}')
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
