# What the shell benches share; sourced, with $root set to the repository.

# The load bench's binary (`cargo bench --bench load --no-run`).
load_bench() {
    ls -t "$root"/target/release/deps/load-* | grep -v '\.d$' | head -1
}

# Starts the load bench serving WHAT (bare: the plain tonic echo server;
# sink: the OTLP sink) on file descriptor 3, which keeps it running until
# closed, and waits for it; sets $served to its port and $served_pid to its
# process. Writes WHAT.port in DIR.
serve_bench() {
    local what=$1 dir=$2
    exec 3> >(exec "$(load_bench)" --serve "$what" > "$dir/$what.port")
    served_pid=$!
    until [ -s "$dir/$what.port" ]; do sleep 0.05; done
    served=$(head -1 "$dir/$what.port")
}

# Sets the array $telemetry to the environment of a gateway exporting to
# the OTLP sink at URL: MODE none (nothing exported, no span made), metrics
# (metrics only), spans (metrics and every span) or sampled (metrics and
# 10 % of traces).
telemetry_env() {
    local mode=$1 url=$2
    local otlp=(OTEL_EXPORTER_OTLP_ENDPOINT="$url" OTEL_METRIC_EXPORT_INTERVAL=1000)
    case $mode in
        none) telemetry=() ;;
        metrics) telemetry=("${otlp[@]}" OTEL_TRACES_EXPORTER=none) ;;
        spans) telemetry=("${otlp[@]}") ;;
        sampled) telemetry=("${otlp[@]}" OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1) ;;
        *) echo "unknown telemetry $mode (none, metrics, spans or sampled)" >&2; exit 2 ;;
    esac
}

# Waits until the gateway logging to LOG listens; prints its port.
gateway_port() {
    until grep -q "listening on" "$1"; do sleep 0.05; done
    sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$1" | head -1
}

# h2load sending the echo Execute in REQUEST (benches/echo_request.py) to
# the gateway on PORT, with h2load's other ARGS (-c, -m, -D or -n, ...);
# run under the command in the array $h2load_under when it is set.
h2load_execute() {
    local request=$1 port=$2
    shift 2
    ${h2load_under[@]+"${h2load_under[@]}"} h2load "$@" -d "$request" -H "content-type: application/grpc" -H "te: trailers" \
        "http://127.0.0.1:$port/toolgate.v1.ToolGatewayService/Execute"
}
