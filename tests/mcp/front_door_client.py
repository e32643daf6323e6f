"""An MCP client of toolgate's front door, with the Python reference SDK:
lists the tools and makes the calls named on the command line, printing one
JSON line per answer for the Rust test to read.

    front_door_client.py (--url URL | --stdio ARGV_JSON) [--era discover|initialize]
        [--header NAME=VALUE]... [--ca PEM [--cert PEM --key PEM]] [--cwd DIR] CALL...

With --watch, after the calls the client says it is listening and waits
(at most 60 s) until it is told its tools changed (session era: on the GET
stream; 2026-07-28: with subscriptions/listen), then lists them again.

With --ca the server's certificate must chain to that CA (https), and
--cert/--key present a client certificate.

CALL is NAME=ARGUMENTS_JSON, or NAME=ARGUMENTS_JSON@KEY (with an idempotency
key in _meta).
"""

import argparse
import json
import sys

import ssl

import anyio
import httpx2
import mcp.types
from mcp import ClientSession, StdioServerParameters
from mcp.client.subscriptions import listen
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def call_of(spec):
    name, arguments = spec.split("=", 1)
    meta = None
    if not arguments.endswith("}"):
        arguments, key = arguments.rsplit("@", 1)
        meta = {"dev.toolgate/idempotency_key": key}
    return name, json.loads(arguments), meta


CHANGED = anyio.Event()


async def on_message(message):
    if isinstance(message, mcp.types.ToolListChangedNotification):
        CHANGED.set()


async def watch(session, era):
    with anyio.fail_after(60):
        if era == "discover":
            async with listen(session, tools_list_changed=True) as subscription:
                print(json.dumps({"listening": True}), flush=True)
                async for _event in subscription:
                    break
        else:
            print(json.dumps({"listening": True}), flush=True)
            await CHANGED.wait()
    tools = await session.list_tools()
    print(json.dumps({"changed": {t.name: t.description for t in tools.tools}}), flush=True)


async def run(session, era, calls, watching=False):
    if era == "discover":
        await session.discover()
    else:
        await session.initialize()
    print(json.dumps({"protocol_version": str(session.protocol_version)}), flush=True)
    tools = await session.list_tools()
    print(json.dumps({"tools": [t.model_dump(by_alias=True, exclude_none=True) for t in tools.tools]}), flush=True)
    for spec in calls:
        name, arguments, meta = call_of(spec)
        try:
            result = await session.call_tool(name, arguments, meta=meta)
            print(json.dumps({"call": name, "result": result.model_dump(by_alias=True, exclude_none=True)}), flush=True)
        except Exception as err:  # the SDK raises JSON-RPC errors
            error = getattr(err, "error", None)
            print(json.dumps({"call": name, "error": {
                "code": getattr(error, "code", None), "message": getattr(error, "message", str(err)),
                "data": getattr(error, "data", None)}}), flush=True)
    if watching:
        await watch(session, era)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--stdio", help="the server's argv, as a JSON array")
    parser.add_argument("--era", default="discover")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--cwd")
    parser.add_argument("--watch", action="store_true")
    parser.add_argument("--ca")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("calls", nargs="*")
    args = parser.parse_args()
    calls = args.calls
    if args.url:
        headers = dict(h.split("=", 1) for h in args.header)
        if args.ca:
            context = ssl.create_default_context(cafile=args.ca)
            if args.cert:
                context.load_cert_chain(args.cert, args.key)
            client = httpx2.AsyncClient(headers=headers, verify=context, timeout=httpx2.Timeout(30, read=300))
        else:
            client = create_mcp_http_client(headers=headers)
        async with client:
            async with streamable_http_client(args.url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write, message_handler=on_message) as session:
                    await run(session, args.era, calls, args.watch)
    else:
        argv = json.loads(args.stdio)
        params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=args.cwd)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, message_handler=on_message) as session:
                await run(session, args.era, calls, args.watch)


if __name__ == "__main__":
    try:
        anyio.run(main)
    except Exception as err:
        print(json.dumps({"failed": repr(err)}), flush=True)
        sys.exit(1)
