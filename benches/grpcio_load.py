"""Load from Python's grpcio, as a Python agent backend calls: one channel
(so one HTTP/2 connection) carrying CONCURRENCY calls at once, from asyncio.

    python benches/grpcio_load.py PORT SECONDS CONCURRENCY

Generates the stubs from proto/ into a temporary folder (grpcio-tools), calls
Execute of the built-in `echo` for one second of warm-up and SECONDS
measured, and prints one JSON line: calls (warm-up included), rps, mean_us,
p50_us, p99_us. Run by
`cargo bench --bench load` when this Python has grpcio and grpcio-tools.
"""

import asyncio
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stubs():
    from grpc_tools import protoc
    import grpc_tools

    out = tempfile.mkdtemp(prefix="toolgate-stubs-")
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    code = protoc.main([
        "protoc",
        f"-I{os.path.join(ROOT, 'proto')}",
        f"-I{include}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        "toolgate/v1/toolgate.proto",
    ])
    if code != 0:
        raise SystemExit(f"protoc failed with {code}")
    sys.path.insert(0, out)
    from toolgate.v1 import toolgate_pb2, toolgate_pb2_grpc

    return toolgate_pb2, toolgate_pb2_grpc


async def main(port, seconds, concurrency):
    import grpc

    pb, rpc = stubs()
    request = pb.ExecuteRequest(tool="echo", arguments_json='{"message": "hello", "n": 42}')
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = rpc.ToolGatewayServiceStub(channel)
        await stub.Execute(request)
        warm_until = time.perf_counter() + 1.0
        stop_at = warm_until + seconds
        latencies = []
        calls = 0

        async def caller():
            nonlocal calls
            while True:
                started = time.perf_counter()
                if started >= stop_at:
                    return
                response = await stub.Execute(request)
                if not response.ok:
                    raise SystemExit(f"call failed: {response}")
                calls += 1
                if started >= warm_until:
                    latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(caller() for _ in range(concurrency)))
    latencies.sort()
    at = lambda q: latencies[min(int(len(latencies) * q), len(latencies) - 1)]
    print(json.dumps({
        "calls": calls,
        "rps": len(latencies) / seconds,
        "mean_us": sum(latencies) / len(latencies) * 1e6,
        "p50_us": at(0.5) * 1e6,
        "p99_us": at(0.99) * 1e6,
    }))


if __name__ == "__main__":
    port, seconds, concurrency = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    asyncio.run(main(port, seconds, concurrency))
