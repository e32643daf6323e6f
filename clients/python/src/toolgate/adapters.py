"""Providers' tool-call shapes to Execute, and outcomes back to their
tool-result messages.

- OpenAI Chat Completions: a `tool_calls` item
  `{"id", "type": "function", "function": {"name", "arguments"}}` in, a
  `{"role": "tool", "tool_call_id", "content"}` message out.
- OpenAI Responses API: a `{"type": "function_call", "call_id", "name",
  "arguments"}` item in, a `{"type": "function_call_output", "call_id",
  "output"}` item out.
- Anthropic Messages: a `{"type": "tool_use", "id", "name", "input"}` block in,
  a `{"type": "tool_result", "tool_use_id", "content", "is_error"}` block out
  (sent back inside a `{"role": "user", "content": [...]}` message).

Plain dicts and the providers' SDK objects (pydantic models) are both
accepted. A shape that is none of these raises `ValueError` naming what was
expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ._model import Outcome


@dataclass(frozen=True)
class Call:
    """One tool call as the model emitted it."""

    tool: str
    #: A string exactly as emitted, or a mapping (serialised to JSON).
    arguments: str | Mapping[str, Any] | None
    call_id: str = ""


OPENAI_SHAPE = "an OpenAI tool_calls item {'id', 'type': 'function', 'function': {'name', 'arguments'}}"
RESPONSES_SHAPE = "an OpenAI Responses item {'type': 'function_call', 'call_id', 'name', 'arguments'}"
ANTHROPIC_SHAPE = "an Anthropic content block {'type': 'tool_use', 'id', 'name', 'input'}"


def plain(value: Any) -> Any:
    """A mapping for `value`: itself, or an SDK object's `model_dump()`."""
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return value


def _field(item: Any, key: str, expected: str) -> Any:
    if not isinstance(item, Mapping) or key not in item:
        raise ValueError(f"expected {expected}; got {_shown(item)} (no {key!r})")
    return item[key]


def _text(item: Any, key: str, expected: str) -> str:
    value = _field(item, key, expected)
    if not isinstance(value, str):
        raise ValueError(f"expected {expected}; its {key!r} is {type(value).__name__}, not a string")
    return value


def _shown(item: Any) -> str:
    text = repr(item)
    return text if len(text) <= 120 else text[:117] + "..."


# OpenAI Chat Completions


def from_openai(tool_call: Any) -> Call:
    item = plain(tool_call)
    function = plain(_field(item, "function", OPENAI_SHAPE))
    arguments = function.get("arguments") if isinstance(function, Mapping) else None
    return Call(
        tool=_text(function, "name", OPENAI_SHAPE),
        arguments=arguments if isinstance(arguments, (str, Mapping)) or arguments is None else str(arguments),
        call_id=_text(item, "id", OPENAI_SHAPE),
    )


def to_openai(outcome: Outcome, call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": outcome.content}


# OpenAI Responses API


def from_responses(item: Any) -> Call:
    entry = plain(item)
    if _field(entry, "type", RESPONSES_SHAPE) != "function_call":
        raise ValueError(f"expected {RESPONSES_SHAPE}; got an item of type {entry['type']!r}")
    return Call(
        tool=_text(entry, "name", RESPONSES_SHAPE),
        arguments=entry.get("arguments"),
        call_id=_text(entry, "call_id", RESPONSES_SHAPE),
    )


def to_responses(outcome: Outcome, call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": outcome.content}


# Anthropic Messages


def from_anthropic(block: Any) -> Call:
    entry = plain(block)
    if _field(entry, "type", ANTHROPIC_SHAPE) != "tool_use":
        raise ValueError(f"expected {ANTHROPIC_SHAPE}; got a block of type {entry['type']!r}")
    arguments = _field(entry, "input", ANTHROPIC_SHAPE)
    if not isinstance(arguments, (str, Mapping)):
        raise ValueError(f"expected {ANTHROPIC_SHAPE}; its 'input' is {type(arguments).__name__}")
    return Call(tool=_text(entry, "name", ANTHROPIC_SHAPE), arguments=arguments, call_id=_text(entry, "id", ANTHROPIC_SHAPE))


def to_anthropic(outcome: Outcome, call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": outcome.content, "is_error": not outcome.ok}


def calls_of(items: Any, convert: Any, kinds: tuple[str, ...] = ()) -> list[Call]:
    """The calls among `items`: every item converted, except (for the
    Responses API and Anthropic) items of the other types a turn holds
    (`message`, `reasoning`, `text`, …), which are skipped."""
    calls = []
    for item in items:
        entry = plain(item)
        if kinds and isinstance(entry, Mapping) and entry.get("type") not in kinds and "type" in entry:
            continue
        calls.append(convert(entry))
    return calls
