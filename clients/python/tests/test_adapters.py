"""Providers' tool-call shapes in and tool-result messages out, compared with
the formats the providers document."""

from __future__ import annotations

import json

import pytest

from toolgate import Gateway
from toolgate.adapters import from_anthropic, from_openai, from_responses


@pytest.fixture()
def gw(addr: str):
    with Gateway(addr) as gateway:
        yield gateway


def test_openai_chat_completions(gw: Gateway) -> None:
    tool_calls = [
        {"id": "call_a", "type": "function", "function": {"name": "WebSearch", "arguments": '{"query": "rust"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "track_parcel", "arguments": '{"code": "nope"}'}},
    ]
    messages = gw.execute_openai(tool_calls)
    assert messages[0] == {"role": "tool", "tool_call_id": "call_a", "content": '{"query":"rust"}'}
    assert messages[1]["role"] == "tool" and messages[1]["tool_call_id"] == "call_b"
    assert messages[1]["content"].startswith("'code' must match")
    assert set(messages[1]) == {"role", "tool_call_id", "content"}


class SdkObject:
    """What the providers' SDKs hand out: pydantic models."""

    def __init__(self, **fields) -> None:
        self.fields = fields

    def model_dump(self) -> dict:
        return {k: v.model_dump() if isinstance(v, SdkObject) else v for k, v in self.fields.items()}


def test_sdk_objects_are_read_like_dicts(gw: Gateway) -> None:
    call = SdkObject(id="call_c", type="function", function=SdkObject(name="echo", arguments='{"x": 1}'))
    assert gw.execute_openai([call]) == [{"role": "tool", "tool_call_id": "call_c", "content": '{"x":1}'}]


def test_openai_responses_api(gw: Gateway) -> None:
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "id": "fc_1", "call_id": "call_r", "name": "web_search", "arguments": '{"query": "x"}'},
        {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
    ]
    assert gw.execute_responses(output) == [
        {"type": "function_call_output", "call_id": "call_r", "output": '{"query":"x"}'}
    ]


def test_anthropic_messages(gw: Gateway) -> None:
    content = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "web_search", "input": {"query": "rust"}},
        {"type": "tool_use", "id": "toolu_2", "name": "launch_rocket", "input": {}},
    ]
    message = gw.execute_anthropic(content)
    assert message["role"] == "user"
    ok, failed = message["content"]
    assert ok == {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"query":"rust"}', "is_error": False}
    assert failed["type"] == "tool_result" and failed["tool_use_id"] == "toolu_2" and failed["is_error"] is True
    assert failed["content"].startswith("Tool 'launch_rocket' not found.")
    json.dumps(message)  # ready to send as is


def test_unexpected_shapes_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match=r"expected an OpenAI tool_calls item .*no 'function'"):
        from_openai({"id": "x", "name": "echo"})
    with pytest.raises(ValueError, match=r"its 'name' is int, not a string"):
        from_openai({"id": "x", "function": {"name": 3, "arguments": "{}"}})
    with pytest.raises(ValueError, match=r"expected an OpenAI Responses item .*type 'message'"):
        from_responses({"type": "message"})
    with pytest.raises(ValueError, match=r"expected an Anthropic content block .*no 'input'"):
        from_anthropic({"type": "tool_use", "id": "t", "name": "echo"})
    with pytest.raises(ValueError, match=r"expected an Anthropic content block .*got 'not a block'"):
        from_anthropic("not a block")
