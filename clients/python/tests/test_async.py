"""The asyncio client: the same methods, concurrency, cancellation."""

from __future__ import annotations

import asyncio
import time

import pytest

from toolgate import AsyncGateway, ToolResolutionError


async def test_the_same_api_awaited(addr: str) -> None:
    async with AsyncGateway(addr) as gw:
        found = await gw.resolve(["support", "web_serch"])
        assert found.unknown == ["web_serch"] and found.suggestions == {"web_serch": ["web_search"]}
        with pytest.raises(ToolResolutionError) as raised:
            await gw.resolve(["web_serch"], strict=True)
        assert raised.value.unknown == ["web_serch"]
        assert [t["name"] for t in await gw.list_tools(["web_search"], format="anthropic")] == ["web_search"]
        outcome = await gw.execute("WebSearch", {"query": "q"})
        assert outcome.ok and outcome.repairs[0].kind == "TOOL_NAME"
        started = time.monotonic()
        outcomes = await gw.execute_all([("nap", "{}", "1"), ("nap", "{}", "2")])
        assert time.monotonic() - started < 1.9 and [o.call_id for o in outcomes] == ["1", "2"]
        messages = await gw.execute_openai(
            [{"id": "c", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]
        )
        assert messages == [{"role": "tool", "tool_call_id": "c", "content": "{}"}]
        reply = await gw.execute_anthropic([{"type": "tool_use", "id": "t", "name": "echo", "input": {}}])
        assert reply["content"][0]["is_error"] is False
        assert (await gw.execute_responses([]) ) == []


async def test_a_cancelled_call_is_cancelled_and_the_gateway_serves_on(addr: str) -> None:
    async with AsyncGateway(addr) as gw:
        task = asyncio.create_task(gw.execute("nap", "{}"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await gw.execute("echo", "{}")).ok
