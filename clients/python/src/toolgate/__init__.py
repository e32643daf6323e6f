"""toolgate: one import from a model's tool call to the gateway and back.

    from toolgate import Gateway

    gw = Gateway("127.0.0.1:50051")
    messages += gw.execute_openai(reply.choices[0].message.tool_calls)

`Gateway` blocks; `AsyncGateway` is the same API for asyncio. The generated
stubs are `toolgate.v1.toolgate_pb2` and `toolgate.v1.toolgate_pb2_grpc`.
"""

from ._gateway import TLS, AsyncGateway, Gateway
from ._model import (
    AuthenticationError,
    DeadlineExceeded,
    GatewayUnavailable,
    Match,
    Outcome,
    RateLimited,
    Repair,
    RequestError,
    Resolution,
    Tool,
    ToolError,
    ToolgateError,
    ToolResolutionError,
    Violation,
)
from .adapters import Call

__all__ = [
    "TLS",
    "AsyncGateway",
    "AuthenticationError",
    "Call",
    "DeadlineExceeded",
    "Gateway",
    "GatewayUnavailable",
    "Match",
    "Outcome",
    "RateLimited",
    "Repair",
    "RequestError",
    "Resolution",
    "Tool",
    "ToolError",
    "ToolgateError",
    "ToolResolutionError",
    "Violation",
]
