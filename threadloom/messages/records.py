"""Plain-dict records carried by messages: tool calls, their streamed chunks, and their
arguments as providers send them.

``ToolCall``/``InvalidToolCall``/``ToolCallChunk`` mirror LangChain's TypedDicts of the
same names. ``parse_tool_args`` and ``make_tool_call`` read the ``arguments`` of the
OpenAI wire format (a JSON string, an object, or a double-encoded string).
"""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from threadloom.messages.ids import uuid4_hex


class ToolCall(TypedDict):
    """A parsed tool call: ``{"name": str, "args": dict, "id": str, "type"?: "tool_call"}``."""

    name: str
    args: dict[str, Any]
    id: str
    type: NotRequired[Literal["tool_call"]]


class InvalidToolCall(TypedDict):
    """A tool call whose arguments could not be parsed; ``error`` says why."""

    name: str | None
    args: str | None
    id: str | None
    error: str | None


class ToolCallChunk(TypedDict):
    """A streamed piece of a tool call; pieces with the same ``index`` are concatenated."""

    name: str | None
    args: str | None
    id: str | None
    index: int | None


def new_tool_call_id() -> str:
    """Return a fresh tool-call id, ``"call_" + uuid4 hex`` (for providers that send none)."""
    return "call_" + uuid4_hex()


def parse_tool_args(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Parse tool-call arguments as providers send them.

    Args:
        raw: a JSON string (the spec), a dict (Ollama), a string holding a JSON string of
            an object (double-encoded), ``""`` or ``None`` (no arguments).

    Returns:
        ``(args, None)`` with ``args`` a dict, or ``(None, error)`` when the arguments are
        not valid JSON or do not decode to a JSON object.
    """
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return None, f"tool arguments must be a JSON object, got {type(raw).__name__}"
    value: Any = raw
    for _ in range(2):  # spec string, then once more for double-encoded arguments
        try:
            value = json.loads(value)
        except ValueError as exc:
            return None, f"tool arguments are not valid JSON: {exc}"
        if not isinstance(value, str):
            break
    if isinstance(value, dict):
        return value, None
    return None, f"tool arguments must be a JSON object, got {type(value).__name__}"


def make_tool_call(
    name: str | None, raw_args: Any, call_id: str | None
) -> ToolCall | InvalidToolCall:
    """Build a ``ToolCall``, or an ``InvalidToolCall`` (it has an ``error`` key) when the
    arguments are unusable or the name is missing. A missing or empty id is synthesized.
    A ``ToolCall`` is a ``ToolCallView``: the dict, also read as Haystack's ``ToolCall``."""
    call_id = call_id or new_tool_call_id()
    args, error = parse_tool_args(raw_args)
    if error is None and not name:
        error = "tool call has no function name"
    if error is not None:
        text = raw_args if isinstance(raw_args, str) or raw_args is None else json.dumps(raw_args)
        return {"name": name, "args": text, "id": call_id, "error": error}
    from threadloom.messages.spellings import ToolCallView

    return ToolCallView(name=name, args=args, id=call_id, type="tool_call")  # type: ignore[return-value]


__all__ = [
    "InvalidToolCall",
    "ToolCall",
    "ToolCallChunk",
    "make_tool_call",
    "new_tool_call_id",
    "parse_tool_args",
]
