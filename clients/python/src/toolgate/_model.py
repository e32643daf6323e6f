"""What the gateway answers, as plain Python: tools, outcomes, errors.

Shared by the sync and asyncio gateways; no I/O here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
from urllib.parse import unquote

import grpc
from google.rpc import error_details_pb2, status_pb2

from toolgate.v1 import toolgate_pb2 as pb

#: The metadata header that carries an end user's token (the gateway's default).
USER_TOKEN_HEADER = "x-toolgate-user-token"

_FORMATS = {
    None: pb.TOOL_FORMAT_UNSPECIFIED,
    "openai": pb.TOOL_FORMAT_OPENAI,
    "anthropic": pb.TOOL_FORMAT_ANTHROPIC,
    "mcp": pb.TOOL_FORMAT_MCP,
}


class ToolgateError(Exception):
    """Every error this client raises."""


class GatewayUnavailable(ToolgateError):
    """The gateway cannot be reached (down, wrong address, TLS mismatch)."""

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(f"cannot reach the gateway at {address}: {detail}")
        self.address = address


class DeadlineExceeded(ToolgateError):
    """The call did not finish within its timeout."""


class AuthenticationError(ToolgateError):
    """The gateway refused the credentials (api_key, user_token, certificate)."""


class RequestError(ToolgateError):
    """The gateway refused the request itself (INVALID_ARGUMENT and the like)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class RateLimited(RequestError):
    """The principal's request limit (RESOURCE_EXHAUSTED): try again after
    `retry_after` seconds (from the status's RetryInfo; None when absent)."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        self.retry_after = retry_after


class ToolResolutionError(RequestError):
    """Strict resolution met unknown names.

    `unknown` lists them in request order; `suggestions` maps each to up to 3
    names, best first.
    """

    def __init__(self, message: str, unknown: list[str], suggestions: dict[str, list[str]]) -> None:
        super().__init__(grpc.StatusCode.NOT_FOUND, message)
        self.unknown = unknown
        self.suggestions = suggestions


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    #: The JSON Schema of the arguments object.
    parameters: dict[str, Any]
    aliases: list[str]
    #: "builtin", "registry", "pack:<name>" or "mcp:<server>".
    source: str
    idempotent: bool


@dataclass(frozen=True)
class Match:
    """A tool `search_tools` found, and its score (higher fits better)."""

    tool: Tool
    score: float


@dataclass(frozen=True)
class Resolution:
    """What `resolve` found: the tools (request order), and the names it
    dropped (non-strict) with their suggestions."""

    tools: list[Tool]
    unknown: list[str]
    suggestions: dict[str, list[str]]
    #: The warning text for the unknown names; empty when every name resolved.
    message: str
    catalog_version: str


@dataclass(frozen=True)
class Repair:
    #: "TOOL_NAME", "ARGUMENT_NAME", "ARGUMENTS_JSON", "ARGUMENT_VALUE",
    #: "ARGUMENTS_ENVELOPE", "WORDS_DROPPED" (or "REPAIR_KIND_<n>" from a
    #: newer gateway).
    kind: str
    original: str
    repaired: str


@dataclass(frozen=True)
class Violation:
    field: str
    description: str


@dataclass(frozen=True)
class ToolError:
    #: "UNKNOWN_TOOL", "INVALID_ARGUMENTS", "NOT_FOUND", "REFUSED",
    #: "TOOL_CRASHED", "TIMEOUT", "UNAVAILABLE", "RETRY_BUDGET_EXHAUSTED",
    #: "RATE_LIMITED", "PERMISSION_DENIED" (or "ERROR_KIND_<n>" from a newer
    #: gateway).
    kind: str
    #: Written for the model: give it back as the tool's result.
    message: str
    retryable: bool
    suggestions: list[str] = field(default_factory=list)
    available_tools: list[str] = field(default_factory=list)
    available_tools_total: int = 0
    required: list[str] = field(default_factory=list)
    optional: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    #: RATE_LIMITED: seconds until the call would pass.
    retry_after: float | None = None


@dataclass(frozen=True)
class Outcome:
    """One call's answer. `content` is what the model reads next."""

    ok: bool
    #: The canonical tool name; empty when the name matched no tool.
    tool: str
    repairs: list[Repair]
    #: The arguments as validated, after repair.
    arguments_json: str
    #: The tool's result, byte for byte (ok and not a dry run).
    result_json: str
    error: ToolError | None
    #: The answer of an earlier call with the same idempotency key.
    replayed: bool
    call_id: str
    #: RATE_LIMITED: seconds until the call would pass (None otherwise).
    retry_after: float | None = None

    @property
    def result(self) -> Any:
        """The result, parsed (None when there is none)."""
        return json.loads(self.result_json) if self.result_json else None

    @property
    def content(self) -> str:
        """The text for the model: the result, or the error written for it."""
        if self.ok:
            return self.result_json
        return self.error.message if self.error else "the tool call failed"


def _name(enum: Any, value: int, prefix: str) -> str:
    """An enum value's name without its prefix; a value this client does not
    know (a newer gateway) keeps its number."""
    try:
        return enum.Name(value).removeprefix(prefix)
    except ValueError:
        return f"{prefix}{value}"


def tool_of(message: pb.Tool) -> Tool:
    return Tool(
        name=message.name,
        description=message.description,
        parameters=json.loads(message.parameters_json) if message.parameters_json else {},
        aliases=list(message.aliases),
        source=message.source,
        idempotent=message.idempotent,
    )


def matches_of(response: pb.SearchToolsResponse) -> list[Match]:
    return [Match(tool=tool_of(tool), score=score) for tool, score in zip(response.tools, response.scores)]


def outcome_of(response: pb.ExecuteResponse) -> Outcome:
    error = None
    if response.HasField("error"):
        e = response.error
        error = ToolError(
            kind=_name(pb.ErrorKind, e.kind, "ERROR_KIND_"),
            message=e.message,
            retryable=e.retryable,
            suggestions=list(e.suggestions),
            available_tools=list(e.available_tools),
            available_tools_total=e.available_tools_total,
            required=list(e.expected_parameters.required),
            optional=list(e.expected_parameters.optional),
            violations=[Violation(v.field, v.description) for v in e.violations],
            retry_after=_seconds(e.retry_after) if e.HasField("retry_after") else None,
        )
    return Outcome(
        ok=response.ok,
        tool=response.tool,
        repairs=[Repair(_name(pb.RepairKind, r.kind, "REPAIR_KIND_"), r.original, r.repaired) for r in response.repairs],
        arguments_json=response.arguments_json,
        result_json=response.result_json,
        error=error,
        replayed=response.replayed,
        call_id=response.call_id,
        retry_after=error.retry_after if error else None,
    )


def _seconds(duration: Any) -> float:
    """A google.protobuf.Duration in seconds."""
    return duration.seconds + duration.nanos / 1e9


def resolution_of(response: pb.ResolveResponse) -> Resolution:
    return Resolution(
        tools=[tool_of(t) for t in response.tools],
        unknown=[u.name for u in response.unknown],
        suggestions={u.name: list(u.suggestions) for u in response.unknown},
        message=response.message,
        catalog_version=response.catalog_version,
    )


def arguments_text(arguments: str | Mapping[str, Any] | None) -> str:
    """The arguments as the request carries them: a string exactly as the
    model emitted it, or a mapping serialised to JSON."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, (bytes, bytearray)):
        return bytes(arguments).decode("utf-8")
    try:
        return json.dumps(arguments, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise TypeError(f"the arguments are not JSON-serialisable: {err}") from None


def execute_request(
    tool: str,
    arguments: str | Mapping[str, Any] | None,
    *,
    call_id: str = "",
    tools: Sequence[str] | None = None,
    strict: bool | None = None,
    dry_run: bool = False,
    session_id: str = "",
    idempotency_key: str = "",
) -> pb.ExecuteRequest:
    request = pb.ExecuteRequest(
        tool=tool,
        arguments_json=arguments_text(arguments),
        call_id=call_id,
        tools=list(tools or []),
        dry_run=dry_run,
        session_id=session_id,
        idempotency_key=idempotency_key,
    )
    if strict is not None:
        request.strict = strict
    return request


def format_of(format: str | None) -> int:
    try:
        return _FORMATS[format]
    except KeyError:
        raise ValueError(f"unknown format {format!r}: expected 'openai', 'anthropic', 'mcp' or None") from None


def status_details(error: grpc.RpcError) -> status_pb2.Status | None:
    """The rich status (google.rpc.Status) a gateway error carries, if any."""
    trailers = error.trailing_metadata() or ()  # type: ignore[attr-defined]
    for key, value in trailers:
        if key == "grpc-status-details-bin":
            return status_pb2.Status.FromString(value)
    return None


def translate(error: grpc.RpcError, address: str) -> ToolgateError:
    """The exception for a failed RPC."""
    code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
    # grpcio decodes the percent-encoding of status messages; a message
    # relayed through other stacks may still carry it.
    message = unquote(error.details() or "")  # type: ignore[attr-defined]
    if code == grpc.StatusCode.UNAVAILABLE:
        return GatewayUnavailable(address, message)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded(f"the gateway at {address} did not answer in time")
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationError(message)
    status = status_details(error)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        retry_after = None
        for detail in status.details if status is not None else ():
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                retry_after = _seconds(info.retry_delay)
        return RateLimited(message, retry_after)
    if status is not None:
        for detail in status.details:
            failure = pb.ResolveFailure()
            if detail.Unpack(failure):
                unknown = [u.name for u in failure.unknown]
                suggestions = {u.name: list(u.suggestions) for u in failure.unknown}
                return ToolResolutionError(message, unknown, suggestions)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info) and info.reason:
                return RequestError(code, message)
    return RequestError(code, message)


def address_of(addr: str) -> tuple[str, bool | None]:
    """`host:port` for grpcio, and whether the scheme asked for TLS (None
    when there is no scheme)."""
    for scheme, tls in (("https://", True), ("http://", False)):
        if addr.startswith(scheme):
            return addr[len(scheme) :].rstrip("/"), tls
    if "://" in addr:
        raise ValueError(f"unsupported address {addr!r}: expected host:port, http://host:port or https://host:port")
    return addr, None
