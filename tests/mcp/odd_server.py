"""MCP servers that misbehave, for toolgate's tests. Usage: odd_server.py MODE

  garbage         print non-JSON lines on stdout, then serve normally
  exit            exit at once
  hang            read stdin and never answer
  invalid_schema  list a good tool and one whose inputSchema is not valid JSON Schema
  many            list 5,000 tools, 500 a page
  poisoned        list a clean tool and the first published poisoning example of
                  tests/data/poisoning/examples.jsonl (cited there), as published
  long            list a clean tool and one whose description is 8,000 characters
"""
import sys
import time

mode = sys.argv[1]

if mode == "exit":
    sys.exit(1)
if mode == "hang":
    sys.stdin.read()
    time.sleep(3600)

import anyio  # noqa: E402
from mcp import types  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402

OBJECT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def tools():
    if mode == "poisoned":
        import json
        import pathlib

        data = pathlib.Path(__file__).resolve().parents[1] / "data" / "poisoning" / "examples.jsonl"
        example = json.loads(data.read_text().splitlines()[0])["tool"]
        return [
            types.Tool(name="echo_text", description="Return the text.", input_schema=OBJECT),
            types.Tool(name=example["name"], description=example["description"], input_schema=example["inputSchema"]),
        ]
    if mode == "long":
        line = "Each section of the manual covers one command, its options and an example of its use. "
        manual = "Search the product manual. " + line * ((8000 - 26) // len(line) + 1)
        return [
            types.Tool(name="echo_text", description="Return the text.", input_schema=OBJECT),
            types.Tool(name="search_manual", description=manual[:8000], input_schema=OBJECT),
        ]
    if mode == "invalid_schema":
        return [
            types.Tool(name="good_tool", description="A tool with a valid schema.", input_schema=OBJECT),
            types.Tool(
                name="bad_tool",
                description="A tool whose schema is broken.",
                input_schema={"type": "object", "properties": {"day": {"type": "int"}}},
            ),
        ]
    if mode == "many":
        return [
            types.Tool(name=f"bulk_tool_{i:04d}", description=f"Bulk tool number {i}.", input_schema=OBJECT)
            for i in range(5000)
        ]
    return [types.Tool(name="echo_text", description="Return the text.", input_schema=OBJECT)]


ALL = tools()
PAGE = 500


async def list_tools(ctx, params):
    start = int(params.cursor) if params is not None and params.cursor else 0
    page = ALL[start : start + PAGE]
    next_cursor = str(start + PAGE) if start + PAGE < len(ALL) else None
    return types.ListToolsResult(tools=page, next_cursor=next_cursor)


async def call_tool(ctx, params):
    text = (params.arguments or {}).get("text", "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("odd", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    if mode == "garbage":
        sys.stdout.write("this is not JSON\n{\"also\": not json\n")
        sys.stdout.flush()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
