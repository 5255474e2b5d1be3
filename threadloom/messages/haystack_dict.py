"""Reading Haystack's ``ChatMessage.to_dict()`` data as threadloom messages.

Haystack writes a message as ``{"role", "meta", "name", "content": [part, ...]}`` where
each part is one of ``{"text": str}``, ``{"tool_call": {"tool_name", "arguments", "id"}}``,
``{"tool_call_result": {"result", "origin": <tool_call>, "error"}}`` or
``{"reasoning": {"reasoning_text"}}``. ``message_from_haystack_dict`` builds the
threadloom message a Haystack user would have built with ``ChatMessage.from_user`` /
``from_assistant`` / ``from_system`` / ``from_tool`` (``meta`` goes to
``response_metadata``). Only data is read: nothing named in it is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadloom.messages.records import make_tool_call
from threadloom.messages.spellings import HaystackSpellings

_KNOWN_PARTS = ("text", "tool_call", "tool_call_result", "reasoning")


def is_haystack_message_dict(data: Any) -> bool:
    """Whether ``data`` has the shape of Haystack's ``ChatMessage.to_dict()``."""
    return (isinstance(data, Mapping) and isinstance(data.get("role"), str)
            and isinstance(data.get("content"), list) and "type" not in data)


def message_from_haystack_dict(data: Mapping[str, Any]) -> Any:
    """The threadloom message for a Haystack ``ChatMessage`` dict (see the module doc).

    Raises:
        ValueError: an unknown role, a content part of another kind (image, file), or a
            tool message without a ``tool_call_result``.
    """
    role = data.get("role")
    meta = dict(data.get("meta") or {})
    name = data.get("name")
    texts: list[str] = []
    calls: list[Any] = []
    results: list[Mapping[str, Any]] = []
    reasoning: str | None = None
    for part in data.get("content") or ():
        kind = next((k for k in _KNOWN_PARTS if isinstance(part, Mapping) and k in part), None)
        if kind is None:
            raise ValueError(f"Haystack message content part {part!r} is not supported "
                             f"(supported: {', '.join(_KNOWN_PARTS)})")
        value = part[kind]
        if kind == "text":
            texts.append(str(value))
        elif kind == "tool_call":
            calls.append(_call(value))
        elif kind == "tool_call_result":
            results.append(value)
        else:
            reasoning = str((value or {}).get("reasoning_text") or "")
    text = "".join(texts) if texts else None
    if role == "user":
        return HaystackSpellings.from_user(text, meta=meta, name=name)
    if role == "system":
        return HaystackSpellings.from_system(text or "", meta=meta, name=name)
    if role == "assistant":
        return HaystackSpellings.from_assistant(text, meta=meta, name=name, tool_calls=calls,
                                                reasoning=reasoning)
    if role == "tool":
        if not results:
            raise ValueError("Haystack tool message has no tool_call_result part")
        result = results[0]
        return HaystackSpellings.from_tool(result.get("result"), _call(result.get("origin")),
                                           error=bool(result.get("error")), meta=meta)
    raise ValueError(f"Haystack message role {role!r} is not one of user, system, "
                     "assistant, tool")


def _call(data: Any) -> Any:
    data = data or {}
    return make_tool_call(data.get("tool_name"), data.get("arguments"), data.get("id"))


__all__ = ["is_haystack_message_dict", "message_from_haystack_dict"]
