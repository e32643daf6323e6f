"""Load from the Python MCP reference SDK, as an agent's client calls: one
client session, N calls in flight at once (asyncio tasks), each call the
same tools/call, for a warm-up second and then SECONDS measured. Prints one
JSON line: calls, errors, seconds, rps, mean_us, p50_us, p99_us.

    mcp_client.py --url URL [--era initialize|discover] [--concurrency N]
        [--seconds S] [--header NAME=VALUE]... TOOL ARGUMENTS_JSON
"""

import argparse
import json
import time

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--era", default="initialize")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("tool")
    parser.add_argument("arguments")
    args = parser.parse_args()
    arguments = json.loads(args.arguments)
    headers = dict(h.split("=", 1) for h in args.header)
    latencies = []
    errors = 0
    async with create_mcp_http_client(headers=headers) as client:
        async with streamable_http_client(args.url, http_client=client) as (read, write, *_):
            async with ClientSession(read, write) as session:
                if args.era == "discover":
                    await session.discover()
                else:
                    await session.initialize()
                # One call first: a tool that is not there fails the run.
                first = await session.call_tool(args.tool, arguments)
                if first.is_error:
                    raise SystemExit(f"the first call failed: {first}")
                start = time.perf_counter()
                measure_from = start + 1.0
                end = measure_from + args.seconds

                async def worker():
                    nonlocal errors
                    while True:
                        began = time.perf_counter()
                        if began >= end:
                            return
                        result = await session.call_tool(args.tool, arguments)
                        done = time.perf_counter()
                        if began >= measure_from:
                            latencies.append(done - began)
                            if result.is_error:
                                errors += 1

                async with anyio.create_task_group() as group:
                    for _ in range(args.concurrency):
                        group.start_soon(worker)
    latencies.sort()
    count = len(latencies)
    pick = lambda q: latencies[min(count - 1, int(q * count))] * 1e6 if count else 0.0
    print(json.dumps({
        "calls": count,
        "errors": errors,
        "seconds": args.seconds,
        "rps": count / args.seconds,
        "mean_us": sum(latencies) / count * 1e6 if count else 0.0,
        "p50_us": pick(0.50),
        "p99_us": pick(0.99),
    }), flush=True)


if __name__ == "__main__":
    anyio.run(main)
