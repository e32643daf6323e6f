#!/usr/bin/env bash
# The client under test in the MCP conformance suite's client scenarios:
# toolgate's MCP client, federating the scenario's server. The suite runs
# `conformance_client.sh URL` with MCP_CONFORMANCE_SCENARIO set; this starts
# `toolgate serve` on a catalogue naming that server and, for the scenarios
# that call a tool, calls it with `toolgate call` as a model would.
# TOOLGATE_BIN names the binary (default: target/debug/toolgate).
set -euo pipefail
url="${*: -1}"
bin="${TOOLGATE_BIN:-$(dirname "$0")/../../target/debug/toolgate}"
dir=$(mktemp -d)
pid=""
cleanup() {
    status=$?
    if [ "$status" != 0 ] && [ -f "$dir/log" ]; then cat "$dir/log" >&2; fi
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/registry"
printf 'mcp_servers:\n  scenario:\n    url: "%s"\n' "$url" >"$dir/registry/tools.yaml"
"$bin" serve --catalog "$dir/registry" --listen 127.0.0.1:0 2>"$dir/log" &
pid=$!
addr=""
for _ in $(seq 1 200); do
    addr=$(sed -n 's/.*toolgate listening on \([0-9.:]*\).*/\1/p' "$dir/log" | head -n 1)
    if [ -n "$addr" ]; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then cat "$dir/log" >&2; exit 1; fi
    sleep 0.05
done
if [ -z "$addr" ]; then cat "$dir/log" >&2; exit 1; fi
case "${MCP_CONFORMANCE_SCENARIO:-}" in
    tools_call) "$bin" call --addr "http://$addr" add_numbers '{"a": 2, "b": 3}' ;;
    sse-retry) "$bin" call --addr "http://$addr" test_reconnection '{}' ;;
    *) "$bin" tools list --catalog "$dir/registry" >/dev/null ;;
esac
