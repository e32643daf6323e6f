"""An MCP server (stdio) whose tools answer every kind of content, for
toolgate's tests of what a federated tool's result keeps on the way:

  picture   an image (PNG bytes, base64)
  sound     an audio clip (WAV bytes, base64)
  document  an embedded resource (text)
  link      a resource link
  mixed     text, an image and a resource link, with structuredContent and _meta
  refusal   isError, with text and an image
  slow      reports progress three times (1/3, 2/3, 3/3), then answers "done"
  wait      waits until the call is cancelled, then writes "cancelled" to the
            file named by its first argument (if any)
"""
import base64
import sys

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

EMPTY = {"type": "object", "properties": {}}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(32))).decode()

TOOLS = ["picture", "sound", "document", "link", "mixed", "refusal", "slow", "wait"]
MARK = sys.argv[1] if len(sys.argv) > 1 else None


async def list_tools(ctx, params):
    return types.ListToolsResult(
        tools=[types.Tool(name=name, description=f"Answers with {name}.", input_schema=EMPTY) for name in TOOLS]
    )


def image():
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


def link():
    return types.ResourceLink(type="resource_link", uri="file:///notes/today.md", name="today", mime_type="text/markdown")


async def call_tool(ctx, params):
    name = params.name
    if name == "slow":
        meta = ctx.meta
        token = (meta or {}).get("progress_token", (meta or {}).get("progressToken"))
        for step in (1, 2, 3):
            if token is not None:
                await ctx.session.send_progress_notification(
                    token, step, 3, f"step {step} of 3", related_request_id=ctx.request_id
                )
            await anyio.sleep(0.05)
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])
    if name == "wait":
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            # Cancelled by `notifications/cancelled`: leave the mark.
            if MARK:
                with open(MARK, "w") as mark:
                    mark.write("cancelled")
            raise
        return types.CallToolResult(content=[types.TextContent(type="text", text="waited")])
    if name == "picture":
        return types.CallToolResult(content=[image()])
    if name == "sound":
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])
    if name == "document":
        resource = types.TextResourceContents(uri="file:///notes/today.md", mime_type="text/markdown", text="# Today\n")
        return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=resource)])
    if name == "link":
        return types.CallToolResult(content=[link()])
    if name == "mixed":
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="three parts"), image(), link()],
            structured_content={"parts": 3},
            meta={"dev.example/origin": "media"},
        )
    return types.CallToolResult(content=[types.TextContent(type="text", text="not this one"), image()], is_error=True)


server = Server("media", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
