"""The MCP conformance suite's test tools, as the suite's scenarios describe
them (@modelcontextprotocol/conformance 0.1.16), on stdio: for toolgate to
federate, so that the suite's tools scenarios run through toolgate's front
door against a federated server."""
import base64

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

EMPTY = {"type": "object", "properties": {}}
# A 1x1 red pixel PNG.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00").decode()

TOOLS = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_progress",
    "test_error_handling",
]


async def list_tools(ctx, params):
    return types.ListToolsResult(
        tools=[types.Tool(name=name, description=f"The conformance suite's {name}.", input_schema=EMPTY) for name in TOOLS]
    )


def text(value):
    return types.TextContent(type="text", text=value)


async def call_tool(ctx, params):
    name = params.name
    if name == "test_simple_text":
        return types.CallToolResult(content=[text("This is a simple text response for testing.")])
    if name == "test_image_content":
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])
    if name == "test_audio_content":
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])
    if name == "test_embedded_resource":
        resource = types.TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
        )
        return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=resource)])
    if name == "test_multiple_content_types":
        resource = types.TextResourceContents(
            uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
        )
        return types.CallToolResult(
            content=[
                text("Multiple content types test:"),
                types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                types.EmbeddedResource(type="resource", resource=resource),
            ]
        )
    if name == "test_tool_with_progress":
        token = (ctx.meta or {}).get("progress_token", (ctx.meta or {}).get("progressToken"))
        for value in (0, 50, 100):
            if token is not None:
                await ctx.session.send_progress_notification(token, value, 100, related_request_id=ctx.request_id)
            await anyio.sleep(0.05)
        return types.CallToolResult(content=[text("Progress test completed.")])
    return types.CallToolResult(content=[text("This tool intentionally returns an error for testing")], is_error=True)


server = Server("conformance-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
