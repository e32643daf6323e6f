"""An MCP client (the Python reference SDK) that asks toolgate's front door
for progress and cancels a call: calls `slow` with a progress callback and
prints the updates it was told and the result; then calls `wait` and
cancels it after a moment. One JSON line each.

    progress_client.py --url URL [--era discover|initialize]
"""

import argparse
import json

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--era", default="discover")
    args = parser.parse_args()
    async with streamable_http_client(args.url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            if args.era == "discover":
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


anyio.run(main)
