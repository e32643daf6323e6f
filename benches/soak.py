"""Once-only calls under faults: two gateways (the release binary) on one
Redis, keyed calls of a tool that is not idempotent at a steady rate, and a
client that retries what is retryable (same key, the other replica), while
Redis is stopped (SIGSTOP) or slowed (a proxy adding latency) and replicas
are killed (SIGKILL), stopped (SIGTERM) and reloaded (SIGHUP).

Counts, per key: how often the tool ran (the HTTP backend records each
call's key) and how the client's last attempt ended. It must never run twice,
never be lost, and never end "effect unknown" unless it ran.

    .venv/bin/python benches/soak.py [--seconds 180] [--rate 50]

(after `cargo build --release` and `scripts/test`, which installs grpcio and
the Python client into .venv). Numbers in docs/benchmarks.md.
"""

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from toolgate.v1 import toolgate_pb2 as pb
from toolgate.v1 import toolgate_pb2_grpc as pb_grpc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "release", "toolgate")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend:
    """The tool: records each call's key, takes 20 ms, answers."""

    def __init__(self):
        self.runs = Counter()
        self.lock = threading.Lock()
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                with backend.lock:
                    backend.runs[json.loads(body)["key"]] += 1
                time.sleep(0.02)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"paid": true}')

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            # Bursts of retries after a fault open many connections at once.
            request_queue_size = 1024
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Proxy:
    """A TCP proxy in front of Redis adding latency to its answers."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.delay = 0.0

    async def start(self):
        self.server = await asyncio.start_server(self.client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def client(self, reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.close()
            return
        queue = asyncio.Queue()

        async def upward():
            try:
                while data := await reader.read(65536):
                    up_writer.write(data)
                    await up_writer.drain()
            except (ConnectionError, OSError):
                pass
            up_writer.close()

        async def downward():
            try:
                while data := await up_reader.read(65536):
                    await queue.put((time.monotonic() + self.delay, data))
            except (ConnectionError, OSError):
                pass
            await queue.put(None)

        async def deliver():
            try:
                while (item := await queue.get()) is not None:
                    due, data = item
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            writer.close()

        await asyncio.gather(upward(), downward(), deliver())


class Replica:
    def __init__(self, name, folder, redis_url):
        self.name = name
        self.folder = folder
        self.port = free_port()
        with open(os.path.join(folder, "toolgate.yaml"), "w") as f:
            f.write(f'state: {{redis: "{redis_url}"}}\n')
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            [BINARY, "serve", "--config", "toolgate.yaml", "--catalog", "registry",
             "--listen", f"127.0.0.1:{self.port}", "--drain-timeout", "5s"],
            cwd=self.folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for line in self.process.stderr:
            if "toolgate listening on" in line:
                break
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()

    def signal(self, sig):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)


async def keyed_call(stubs, key, stats):
    """The client: retries what is retryable, on the other replica, for up
    to a minute. Returns how the last attempt ended."""
    replica = random.randrange(len(stubs))
    deadline = time.monotonic() + 60
    attempts = 0
    while time.monotonic() < deadline:
        attempts += 1
        request = pb.ExecuteRequest(tool="pay", arguments_json=json.dumps({"key": key}), idempotency_key=key)
        started = time.monotonic()
        try:
            response = await stubs[replica].Execute(request, timeout=3)
        except grpc.aio.AioRpcError as err:
            stats["transport " + err.code().name] += 1
            replica = (replica + 1) % len(stubs)
            await asyncio.sleep(0.2)
            continue
        took = time.monotonic() - started
        if response.ok:
            return "ok", attempts
        message = response.error.message
        if "did not run" in message:
            stats["did not run"] += 1
            stats["did not run, slowest ms"] = max(stats["did not run, slowest ms"], int(took * 1000))
        elif "still running" in message:
            stats["still running"] += 1
        if not response.error.retryable:
            if "effect is unknown" in message:
                stats["unknown: " + message.split(";")[0][:50]] += 1
                return "unknown", attempts
            return "refused: " + message[:60], attempts
        replica = (replica + 1) % len(stubs)
        await asyncio.sleep(0.2)
    return "gave up", attempts


async def faults(redis, proxy, replicas, seconds, log):
    """One fault every 8 s, in turn."""
    kinds = ["stop redis", "slow redis", "kill replica", "term replica", "reload"]
    started = time.monotonic()
    turn = 0
    while time.monotonic() - started < seconds - 10:
        await asyncio.sleep(8)
        kind = kinds[turn % len(kinds)]
        turn += 1
        log.append(kind)
        if kind == "stop redis":
            redis.send_signal(signal.SIGSTOP)
            await asyncio.sleep(random.uniform(1, 3))
            redis.send_signal(signal.SIGCONT)
        elif kind == "slow redis":
            proxy.delay = random.uniform(0.3, 0.8)
            await asyncio.sleep(5)
            proxy.delay = 0.0
        elif kind in ("kill replica", "term replica"):
            replica = replicas[turn % 2]
            replica.signal(signal.SIGKILL if kind == "kill replica" else signal.SIGTERM)
            await asyncio.to_thread(replica.process.wait)
            await asyncio.sleep(1)
            await asyncio.to_thread(replica.start)
        else:
            for replica in replicas:
                replica.signal(signal.SIGHUP)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=180)
    parser.add_argument("--rate", type=int, default=50)
    args = parser.parse_args()

    redis_port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    proxy = Proxy(redis_port)
    await proxy.start()
    backend = Backend()
    folder = tempfile.mkdtemp()
    os.mkdir(os.path.join(folder, "registry"))
    with open(os.path.join(folder, "registry", "tools.yaml"), "w") as f:
        f.write(f"tools:\n  - name: pay\n    description: Pays.\n    timeout: 5s\n"
                f"    backend: {{http: {{url: \"http://127.0.0.1:{backend.port}/pay\"}}}}\n")
    replicas = []
    for name in ("a", "b"):
        home = os.path.join(folder, name)
        os.mkdir(home)
        os.symlink(os.path.join(folder, "registry"), os.path.join(home, "registry"))
        replica = Replica(name, home, f"redis://127.0.0.1:{proxy.port}/0")
        replica.start()
        replicas.append(replica)
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{r.port}") for r in replicas]
    stubs = [pb_grpc.ToolGatewayServiceStub(c) for c in channels]

    stats = Counter()
    log = []
    results = {}

    async def one(key):
        results[key] = await keyed_call(stubs, key, stats)

    fault_task = asyncio.create_task(faults(redis, proxy, replicas, args.seconds, log))
    tasks = []
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < args.seconds:
        tasks.append(asyncio.create_task(one(f"k{n}")))
        n += 1
        await asyncio.sleep(max(0.0, started + n / args.rate - time.monotonic()))
    await asyncio.gather(*tasks)
    fault_task.cancel()

    runs = backend.runs
    endings = Counter(result for result, _ in results.values())
    duplicates = sum(1 for k in results if runs[k] > 1)
    unknown_never_ran = sum(1 for k, (r, _) in results.items() if r == "unknown" and runs[k] == 0)
    unknown_ran = sum(1 for k, (r, _) in results.items() if r == "unknown" and runs[k] == 1)
    ok_never_ran = sum(1 for k, (r, _) in results.items() if r == "ok" and runs[k] == 0)
    other = Counter(f"{r[:40]}… ran {runs[k]}" for k, (r, _) in results.items() if r not in ("ok", "unknown"))
    retried = sum(1 for _, a in results.values() if a > 1)
    report = {
        "seconds": args.seconds, "calls": len(results), "faults": Counter(log),
        "endings": endings, "retried": retried, "ran twice": duplicates,
        "effect unknown, never ran": unknown_never_ran, "effect unknown, ran": unknown_ran,
        "ok but never ran (lost)": ok_never_ran, "gave up": endings.get("gave up", 0),
        "answers": stats, "other endings, and how often their tool ran": other,
    }
    print(json.dumps(report, indent=1, default=dict))
    for replica in replicas:
        replica.signal(signal.SIGTERM)
    redis.kill()
    bad = duplicates + unknown_never_ran + ok_never_ran + endings.get("gave up", 0)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    asyncio.run(main())
