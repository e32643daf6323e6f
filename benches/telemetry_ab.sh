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
# target's, and the CPU a request (user + system over the round, warm-up
# included) of the gateway process, of the SDK's span-export thread in it,
# of the sink and of h2load: all four share the machine's cores, so the
# export thread and the sink are what shipping the spans costs whatever
# made them. Last, how many spans each gateway dropped (its export queue
# full). Saved outputs of several runs pool round by round with
# benches/paired_rounds.py.
#   cargo build --release && cargo bench --bench load --no-run
#   benches/telemetry_ab.sh none=target/release/toolgate:none spans=target/release/toolgate:spans
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,22p' "$0"; exit 2; }
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
# User + system ticks of a process (or of a thread: /proc/PID/task/TID).
ticks() { awk '{print $14 + $15}' "$1/stat"; }
# The gateway's span-export thread (the SDK names it), or none.
exporter() {
    { grep -l '^OpenTelemetry.T' /proc/"$1"/task/*/comm 2>/dev/null || true; } | head -1 | xargs -r dirname
}
# Ticks of the export thread, 0 when there is none.
exporter_ticks() { if [ -n "$1" ]; then ticks "$1"; else echo 0; fi; }
h2load_under=(/usr/bin/time -f "%U %S" -o "$dir/h2load.cpu")
for shape in ${SHAPES:-1x64 16x4}; do
    for _ in $(seq "$rounds"); do
        for target in "$@"; do
            name=${target%%=*}
            thread=$(exporter "${pid[$name]}")
            before="$(ticks "/proc/${pid[$name]}") $(exporter_ticks "$thread") $(ticks "/proc/$served_pid")"
            rps=$(h2load_execute "$dir/request" "${port[$name]}" -c "${shape%x*}" -m "${shape#*x}" -D 4 \
                --warm-up-time 1 | awk '/finished in/ {print $4}')
            after="$(ticks "/proc/${pid[$name]}") $(exporter_ticks "$thread") $(ticks "/proc/$served_pid")"
            echo "$shape $name $rps $before $after $(tail -1 "$dir/h2load.cpu")"
        done
    done
done | python3 -c '
import os, sys, statistics, collections
hz = os.sysconf("SC_CLK_TCK")
rps, cpu, names = collections.defaultdict(list), collections.defaultdict(list), []
for line in sys.stdin:
    print(line.strip())
    shape, name, r, *fields = line.split()
    names += [name] if name not in names else []
    rps[shape, name].append(float(r))
    # 5 s of load (1 s warm-up), at about the measured rate
    calls = float(r) * 5
    before, after = fields[0:3], fields[3:6]
    us = [(int(a) - int(b)) / hz * 1e6 / calls for b, a in zip(before, after)]
    us.append((float(fields[6]) + float(fields[7])) * 1e6 / calls)
    cpu[shape, name].append(us)
for shape in dict.fromkeys(s for s, _ in rps):
    base = statistics.median(rps[shape, names[0]])
    for name in names:
        median = statistics.median(rps[shape, name])
        gateway, export, sink, client = (statistics.median(c) for c in zip(*cpu[shape, name]))
        print(f"{shape} {name}: median {median:.0f} RPS ({min(rps[shape, name]):.0f}-{max(rps[shape, name]):.0f}),"
              f" {median / base:.3f} of {names[0]}, CPU a request {gateway:.1f} us"
              f" (export thread {export:.1f}), sink {sink:.1f} us, h2load {client:.1f} us,"
              f" all {gateway + sink + client:.1f} us")
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
