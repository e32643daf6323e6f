"""An MCP client (the Python reference SDK) that asks toolgate's front door
for progress and cancels a call: calls `slow` with a progress callback and
prints the updates it was told and the result; then calls `wait` and
cancels it after a moment. One JSON line each.

    progress_client.py (--url URL | --stdio ARGV_JSON [--cwd DIR]) [--era discover|initialize]
"""

import argparse
import json

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def run(session, era):
    if era == "discover":
        await session.discover()
    else:
        await session.initialize()
    told = []

    async def progress(value, total, message):
        told.append({"progress": value, "total": total, "message": message})

    result = await session.call_tool("slow", {}, progress_callback=progress)
    print(json.dumps({"call": "slow", "progress": told, "text": result.content[0].text}), flush=True)
    with anyio.move_on_after(1.0):
        await session.call_tool("wait", {})
    print(json.dumps({"call": "wait", "cancelled": True}), flush=True)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--stdio", help="the server's argv, as a JSON array")
    parser.add_argument("--cwd")
    parser.add_argument("--era", default="discover")
    args = parser.parse_args()
    if args.url:
        async with streamable_http_client(args.url) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await run(session, args.era)
    else:
        argv = json.loads(args.stdio)
        params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=args.cwd)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await run(session, args.era)


anyio.run(main)
