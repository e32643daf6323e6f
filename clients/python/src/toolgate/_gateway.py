"""`Gateway` (blocking) and `AsyncGateway` (asyncio): the gateway's three
RPCs, credentials as metadata, failures as exceptions, and the providers'
shapes in and out."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import grpc

from toolgate.v1 import toolgate_pb2 as pb
from toolgate.v1 import toolgate_pb2_grpc as pb_grpc

from . import adapters
from ._model import (
    USER_TOKEN_HEADER,
    Match,
    Outcome,
    Resolution,
    Tool,
    ToolResolutionError,
    address_of,
    execute_request,
    format_of,
    matches_of,
    outcome_of,
    resolution_of,
    tool_of,
    translate,
)
from .adapters import Call


@dataclass(frozen=True)
class TLS:
    """TLS to the gateway: a CA to trust (default: the system's roots), and a
    client certificate and key for mTLS. Each a path or PEM bytes."""

    ca: str | Path | bytes | None = None
    cert: str | Path | bytes | None = None
    key: str | Path | bytes | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        def pem(value: str | Path | bytes | None) -> bytes | None:
            if value is None or isinstance(value, bytes):
                return value
            return Path(value).read_bytes()

        return grpc.ssl_channel_credentials(pem(self.ca), pem(self.key), pem(self.cert))


CallLike = Call | tuple | Mapping[str, Any]


def _call(value: CallLike) -> Call:
    if isinstance(value, Call):
        return value
    if isinstance(value, tuple) and len(value) in (2, 3):
        return Call(*value)
    if isinstance(value, Mapping) and "tool" in value:
        return Call(value["tool"], value.get("arguments"), value.get("call_id", ""))
    raise ValueError(f"expected a Call, a (tool, arguments[, call_id]) tuple or a {{'tool', 'arguments'}} mapping; got {value!r}")


class _Base:
    def __init__(
        self,
        addr: str = "127.0.0.1:50051",
        *,
        api_key: str | None = None,
        user_token: str | None = None,
        tls: bool | TLS | None = None,
        timeout: float | None = None,
        user_token_header: str = USER_TOKEN_HEADER,
    ) -> None:
        target, scheme_tls = address_of(addr)
        self.address = addr
        self._target = target
        self._tls: TLS | None = tls if isinstance(tls, TLS) else (TLS() if (tls or scheme_tls) else None)
        self._timeout = timeout
        metadata: list[tuple[str, str]] = []
        if api_key:
            metadata.append(("authorization", f"Bearer {api_key}"))
        if user_token:
            metadata.append((user_token_header, user_token))
        self._metadata = tuple(metadata)

    def _wait(self, timeout: float | None) -> float | None:
        return self._timeout if timeout is None else timeout


class Gateway(_Base):
    """A blocking client of a toolgate gateway.

    >>> gw = Gateway("127.0.0.1:50051")
    >>> outcome = gw.execute("WebSearch", '{"query": "rust"}')
    >>> outcome.content
    """

    def __init__(self, addr: str = "127.0.0.1:50051", **options: Any) -> None:
        super().__init__(addr, **options)
        if self._tls is None:
            self._channel = grpc.insecure_channel(self._target)
        else:
            self._channel = grpc.secure_channel(self._target, self._tls.credentials())
        self._stub = pb_grpc.ToolGatewayServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _rpc(self, method: Any, request: Any, timeout: float | None) -> Any:
        try:
            return method(request, metadata=self._metadata, timeout=self._wait(timeout))
        except grpc.RpcError as err:
            raise translate(err, self.address) from None

    def resolve(self, names: Sequence[str], strict: bool | None = None, *, timeout: float | None = None) -> Resolution:
        """The tools `names` (tools, aliases, toolsets) mean. Strict: unknown
        names raise `ToolResolutionError`; else they are dropped and listed in
        the result's `unknown` and `suggestions`."""
        request = pb.ResolveRequest(names=list(names))
        if strict is not None:
            request.strict = strict
        return resolution_of(self._rpc(self._stub.Resolve, request, timeout))

    def list_tools(
        self, names: Sequence[str] | None = None, *, format: str | None = None, timeout: float | None = None
    ) -> Any:
        """The tools (all, or `names`): `Tool`s, or with `format` ("openai",
        "anthropic", "mcp") the provider's tools array as plain lists and dicts."""
        request = pb.ListToolsRequest(tools=list(names or []), format=format_of(format))
        response = self._rpc(self._stub.ListTools, request, timeout)
        return json.loads(response.formatted_json) if format else [tool_of(t) for t in response.tools]

    def search_tools(
        self, query: str, limit: int = 8, *, toolset: str | None = None, timeout: float | None = None
    ) -> list[Match]:
        """Your tools (within `toolset`, when given) that fit a task written
        in words, best first: to offer a model the few a step needs. `limit`
        is at most 50 (0 means 8); an empty query raises `RequestError`."""
        request = pb.SearchToolsRequest(query=query, limit=limit, toolset=toolset or "")
        return matches_of(self._rpc(self._stub.SearchTools, request, timeout))

    def execute(
        self,
        tool: str,
        arguments: str | Mapping[str, Any] | None = None,
        *,
        call_id: str = "",
        tools: Sequence[str] | None = None,
        strict: bool | None = None,
        dry_run: bool = False,
        session_id: str = "",
        idempotency_key: str = "",
        timeout: float | None = None,
    ) -> Outcome:
        """Runs one tool call exactly as the model emitted it. A tool problem
        is an `Outcome` with `ok` false, never an exception."""
        request = execute_request(
            tool,
            arguments,
            call_id=call_id,
            tools=tools,
            strict=strict,
            dry_run=dry_run,
            session_id=session_id,
            idempotency_key=idempotency_key,
        )
        return outcome_of(self._rpc(self._stub.Execute, request, timeout))

    def execute_all(self, calls: Iterable[CallLike], *, timeout: float | None = None, **options: Any) -> list[Outcome]:
        """A model turn's calls, sent at once, answered in order."""
        requests = [execute_request(c.tool, c.arguments, call_id=c.call_id, **options) for c in map(_call, calls)]
        futures = [self._stub.Execute.future(r, metadata=self._metadata, timeout=self._wait(timeout)) for r in requests]
        outcomes = []
        for future in futures:
            try:
                outcomes.append(outcome_of(future.result()))
            except grpc.RpcError as err:
                for rest in futures:
                    rest.cancel()
                raise translate(err, self.address) from None
        return outcomes

    def execute_openai(self, tool_calls: Iterable[Any], **options: Any) -> list[dict[str, Any]]:
        """An assistant message's `tool_calls`, run; their `role: tool` messages."""
        calls = adapters.calls_of(tool_calls, adapters.from_openai)
        return [adapters.to_openai(o, c.call_id) for c, o in zip(calls, self.execute_all(calls, **options))]

    def execute_responses(self, items: Iterable[Any], **options: Any) -> list[dict[str, Any]]:
        """A Responses API output's `function_call` items, run; their
        `function_call_output` items (other items are skipped)."""
        calls = adapters.calls_of(items, adapters.from_responses, ("function_call",))
        return [adapters.to_responses(o, c.call_id) for c, o in zip(calls, self.execute_all(calls, **options))]

    def execute_anthropic(self, content: Iterable[Any], **options: Any) -> dict[str, Any]:
        """An Anthropic assistant message's `tool_use` blocks, run; the user
        message holding their `tool_result` blocks (other blocks skipped)."""
        calls = adapters.calls_of(content, adapters.from_anthropic, ("tool_use",))
        results = [adapters.to_anthropic(o, c.call_id) for c, o in zip(calls, self.execute_all(calls, **options))]
        return {"role": "user", "content": results}


class AsyncGateway(_Base):
    """The asyncio client: the same methods as `Gateway`, awaited."""

    def __init__(self, addr: str = "127.0.0.1:50051", **options: Any) -> None:
        super().__init__(addr, **options)
        if self._tls is None:
            self._channel = grpc.aio.insecure_channel(self._target)
        else:
            self._channel = grpc.aio.secure_channel(self._target, self._tls.credentials())
        self._stub = pb_grpc.ToolGatewayServiceStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "AsyncGateway":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _rpc(self, method: Any, request: Any, timeout: float | None) -> Any:
        try:
            return await method(request, metadata=self._metadata, timeout=self._wait(timeout))
        except grpc.RpcError as err:
            raise translate(err, self.address) from None

    async def resolve(self, names: Sequence[str], strict: bool | None = None, *, timeout: float | None = None) -> Resolution:
        request = pb.ResolveRequest(names=list(names))
        if strict is not None:
            request.strict = strict
        return resolution_of(await self._rpc(self._stub.Resolve, request, timeout))

    async def list_tools(
        self, names: Sequence[str] | None = None, *, format: str | None = None, timeout: float | None = None
    ) -> Any:
        request = pb.ListToolsRequest(tools=list(names or []), format=format_of(format))
        response = await self._rpc(self._stub.ListTools, request, timeout)
        return json.loads(response.formatted_json) if format else [tool_of(t) for t in response.tools]

    async def search_tools(
        self, query: str, limit: int = 8, *, toolset: str | None = None, timeout: float | None = None
    ) -> list[Match]:
        request = pb.SearchToolsRequest(query=query, limit=limit, toolset=toolset or "")
        return matches_of(await self._rpc(self._stub.SearchTools, request, timeout))

    async def execute(
        self,
        tool: str,
        arguments: str | Mapping[str, Any] | None = None,
        *,
        call_id: str = "",
        tools: Sequence[str] | None = None,
        strict: bool | None = None,
        dry_run: bool = False,
        session_id: str = "",
        idempotency_key: str = "",
        timeout: float | None = None,
    ) -> Outcome:
        request = execute_request(
            tool,
            arguments,
            call_id=call_id,
            tools=tools,
            strict=strict,
            dry_run=dry_run,
            session_id=session_id,
            idempotency_key=idempotency_key,
        )
        return outcome_of(await self._rpc(self._stub.Execute, request, timeout))

    async def execute_all(self, calls: Iterable[CallLike], *, timeout: float | None = None, **options: Any) -> list[Outcome]:
        runs = [self.execute(c.tool, c.arguments, call_id=c.call_id, timeout=timeout, **options) for c in map(_call, calls)]
        return list(await asyncio.gather(*runs))

    async def execute_openai(self, tool_calls: Iterable[Any], **options: Any) -> list[dict[str, Any]]:
        calls = adapters.calls_of(tool_calls, adapters.from_openai)
        outcomes = await self.execute_all(calls, **options)
        return [adapters.to_openai(o, c.call_id) for c, o in zip(calls, outcomes)]

    async def execute_responses(self, items: Iterable[Any], **options: Any) -> list[dict[str, Any]]:
        calls = adapters.calls_of(items, adapters.from_responses, ("function_call",))
        outcomes = await self.execute_all(calls, **options)
        return [adapters.to_responses(o, c.call_id) for c, o in zip(calls, outcomes)]

    async def execute_anthropic(self, content: Iterable[Any], **options: Any) -> dict[str, Any]:
        calls = adapters.calls_of(content, adapters.from_anthropic, ("tool_use",))
        outcomes = await self.execute_all(calls, **options)
        return {"role": "user", "content": [adapters.to_anthropic(o, c.call_id) for c, o in zip(calls, outcomes)]}


__all__ = ["AsyncGateway", "Gateway", "TLS", "ToolResolutionError"]
