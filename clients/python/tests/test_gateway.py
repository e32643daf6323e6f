"""The blocking client against the real gateway: every method, the errors a
user meets, credentials, deadlines."""

from __future__ import annotations

import socket
import time

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import API_KEY, user_token
from toolgate import (
    AuthenticationError,
    Call,
    DeadlineExceeded,
    Gateway,
    GatewayUnavailable,
    Match,
    RequestError,
    Tool,
    ToolResolutionError,
)
from toolgate._model import outcome_of
from toolgate.v1 import toolgate_pb2 as pb


@pytest.fixture()
def gw(addr: str):
    with Gateway(addr) as gateway:
        yield gateway


def test_addresses_with_and_without_a_scheme(addr: str) -> None:
    for form in (addr, f"http://{addr}"):
        with Gateway(form) as gateway:
            assert gateway.execute("echo", {"a": 1}).ok
    with pytest.raises(ValueError, match="expected host:port"):
        Gateway(f"grpc://{addr}")


def test_resolve_drops_unknown_names_with_suggestions(gw: Gateway) -> None:
    found = gw.resolve(["support", "web_serch", "zzz"])
    assert [t.name for t in found.tools] == ["track_parcel", "web_search"]
    assert found.unknown == ["web_serch", "zzz"]
    assert found.suggestions == {"web_serch": ["web_search"], "zzz": []}
    assert "Did you mean 'web_search'?" in found.message
    assert found.catalog_version


def test_strict_resolve_raises_with_the_unknown_names_in_order(gw: Gateway) -> None:
    with pytest.raises(ToolResolutionError) as raised:
        gw.resolve(["web_serch", "track_parcel", "trak_parcel"], strict=True)
    error = raised.value
    assert error.unknown == ["web_serch", "trak_parcel"]
    assert error.suggestions == {"web_serch": ["web_search"], "trak_parcel": ["track_parcel"]}
    # The message as the gateway wrote it: no percent-encoding left.
    assert "Did you mean 'web_search'?" in str(error) and "%3F" not in str(error)


def test_search_tools_finds_the_tools_for_a_task_best_first(gw: Gateway) -> None:
    found = gw.search_tools("where is my parcel")
    assert all(isinstance(m, Match) for m in found)
    assert found[0].tool.name == "track_parcel" and found[0].score > 0
    assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)
    assert [m.tool.name for m in gw.search_tools("search the web", 1)] == ["web_search"]
    assert gw.search_tools("search the web for parcels", toolset="support")[0].tool.name in ("web_search", "track_parcel")
    assert gw.search_tools("quantum chromodynamics") == []
    with pytest.raises(RequestError, match="the query is empty"):
        gw.search_tools("   ")
    with pytest.raises(RequestError, match="limit 51 is above 50"):
        gw.search_tools("parcel", 51)


def test_list_tools_as_tools_and_in_each_providers_format(gw: Gateway) -> None:
    tools = gw.list_tools()
    assert all(isinstance(t, Tool) for t in tools)
    search = next(t for t in tools if t.name == "web_search")
    assert search.parameters["required"] == ["query"] and search.source == "registry"
    openai = gw.list_tools(["support"], format="openai")
    assert [t["function"]["name"] for t in openai] == ["track_parcel", "web_search"]
    assert openai[0]["type"] == "function" and "parameters" in openai[0]["function"]
    anthropic = gw.list_tools(["web_search"], format="anthropic")
    assert anthropic[0]["name"] == "web_search" and anthropic[0]["input_schema"]["type"] == "object"
    mcp = gw.list_tools(["web_search"], format="mcp")
    assert mcp["tools"][0]["inputSchema"]["required"] == ["query"]
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        gw.list_tools(format="xml")
    with pytest.raises(RequestError):
        gw.list_tools(["no_such_tool"])


def test_execute_repairs_and_answers_in_band(gw: Gateway) -> None:
    outcome = gw.execute("WebSearch", "```json\n{'query': 'rust',}\n```", call_id="call_1")
    assert outcome.ok and outcome.tool == "web_search" and outcome.call_id == "call_1"
    assert [r.kind for r in outcome.repairs] == ["TOOL_NAME", "ARGUMENTS_JSON"]
    assert outcome.result == {"query": "rust"} and outcome.content == '{"query":"rust"}'

    wrong = gw.execute("track_parcel", {"code": "XX-1"})
    assert not wrong.ok and wrong.error is not None
    assert wrong.error.kind == "INVALID_ARGUMENTS" and wrong.error.retryable
    assert wrong.content == wrong.error.message and "'code' must match" in wrong.content
    assert wrong.error.violations[0].field == "/code"

    unknown = gw.execute("launch_rocket", "{}", tools=["support"])
    assert unknown.error is not None and unknown.error.kind == "UNKNOWN_TOOL"
    assert unknown.error.available_tools == ["track_parcel", "web_search"]

    dry = gw.execute("web_search", {"query": "x"}, dry_run=True)
    assert dry.ok and dry.result_json == "" and dry.result is None


def test_arguments_that_are_not_json_fail_before_any_call(gw: Gateway) -> None:
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        gw.execute("web_search", {"query": object()})
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        gw.execute("web_search", {"limit": float("nan")})


def test_execute_all_runs_at_once_and_answers_in_order(gw: Gateway) -> None:
    started = time.monotonic()
    outcomes = gw.execute_all(
        [Call("nap", "{}", "a"), ("web_search", {"query": "q"}, "b"), {"tool": "nap", "call_id": "c"}]
    )
    assert time.monotonic() - started < 1.9, "the two naps ran together"
    assert [o.call_id for o in outcomes] == ["a", "b", "c"]
    assert [o.result for o in outcomes] == ["rested", {"query": "q"}, "rested"]
    with pytest.raises(ValueError, match="expected a Call"):
        gw.execute_all([42])


def test_a_gateway_that_is_down_is_named() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Gateway(f"127.0.0.1:{port}", timeout=2) as down:
        with pytest.raises(GatewayUnavailable, match=f"cannot reach the gateway at 127.0.0.1:{port}"):
            down.execute("echo", "{}")


def test_a_deadline_ends_the_call(gw: Gateway) -> None:
    # The gateway answers before the deadline, in-band, for the model.
    late = gw.execute("nap", "{}", timeout=0.5)
    assert late.error is not None and late.error.kind == "TIMEOUT", late
    assert gw.execute("echo", "{}").ok, "the gateway keeps serving"
    # A peer that never answers: the deadline is the client's.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host, port = silent.getsockname()
        with Gateway(f"{host}:{port}") as stuck:
            with pytest.raises(DeadlineExceeded, match=f"{host}:{port} did not answer in time"):
                stuck.execute("echo", "{}", timeout=0.5)


def test_credentials_travel_as_metadata(keyed, signing_key) -> None:
    with Gateway(keyed.addr, api_key=API_KEY) as allowed:
        assert allowed.execute("echo", {"a": 1}).ok
        assert allowed.execute("whoami").result == ""
    token = user_token(signing_key, "user-42")
    with Gateway(keyed.addr, api_key=API_KEY, user_token=token) as for_user:
        assert for_user.execute("whoami").result == "user-42", "the tool learns who the call is for"
    # A token signed by another key is refused.
    forged = user_token(ec.generate_private_key(ec.SECP256R1()), "admin")
    with Gateway(keyed.addr, api_key=API_KEY, user_token=forged) as forger:
        with pytest.raises(AuthenticationError):
            forger.execute("whoami")
    with Gateway(keyed.addr, api_key="wrong") as refused:
        with pytest.raises(AuthenticationError):
            refused.execute("echo", "{}")
    with Gateway(keyed.addr) as anonymous:
        with pytest.raises(AuthenticationError):
            anonymous.list_tools()


def test_values_from_a_newer_gateway_are_kept() -> None:
    # An enum value this client's proto does not know yet.
    response = pb.ExecuteResponse(ok=False, error=pb.ToolError(kind=42, message="new"))
    response.repairs.add(kind=17, original="a", repaired="b")
    outcome = outcome_of(response)
    assert outcome.error is not None and outcome.error.kind == "ERROR_KIND_42"
    assert outcome.repairs[0].kind == "REPAIR_KIND_17"
    assert outcome.content == "new"


def test_rate_limits_are_in_band_for_calls_and_raised_for_requests(tmp_path) -> None:
    from conftest import CATALOG, Served

    from toolgate import RateLimited

    (tmp_path / "toolgate.yaml").write_text(
        "rate_limits:\n  principal: {per_minute: 3, burst: 3}\n  tools:\n    echo: {per_minute: 2, per: all}\n"
    )
    served = Served(["--config", "toolgate.yaml", "--catalog", str(CATALOG)], tmp_path)
    try:
        with Gateway(served.addr) as gw:
            assert gw.execute("echo", {"a": 1}).ok
            assert gw.execute("echo", {"a": 2}).ok
            limited = gw.execute("echo", {"a": 3})
            assert not limited.ok and limited.error is not None
            assert limited.error.kind == "RATE_LIMITED"
            assert limited.error.retryable
            assert limited.retry_after is not None and 0 < limited.retry_after <= 30
            assert limited.retry_after == limited.error.retry_after
            assert "try again in" in limited.content
            with pytest.raises(RateLimited) as raised:
                gw.execute("echo", {"a": 4})
            assert raised.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert raised.value.retry_after is not None and raised.value.retry_after > 0
    finally:
        served.stop()
