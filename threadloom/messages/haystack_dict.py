"""Reading Haystack's ``ChatMessage.to_dict()`` data as threadloom messages.

Haystack writes a message as ``{"role", "meta", "name", "content": [part, ...]}`` where
each part is one of ``{"text": str}``, ``{"tool_call": {"tool_name", "arguments", "id"}}``,
``{"tool_call_result": {"result", "origin": <tool_call>, "error"}}`` or
``{"reasoning": {"reasoning_text"}}``. ``message_from_haystack_dict`` builds the
threadloom message a Haystack user would have built with ``ChatMessage.from_user`` /
``from_assistant`` / ``from_system`` / ``from_tool`` (``meta`` goes to
``response_metadata``). Only data is read: nothing named in it is imported.
``message_to_haystack_dict`` writes that form (what ``ChatMessage.to_dict()`` would give
for the same message).
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


_ROLES = {"human": "user", "system": "system", "ai": "assistant",
          "AIMessageChunk": "assistant", "tool": "tool"}


def message_to_haystack_dict(message: Any) -> dict[str, Any]:
    """Haystack's ``ChatMessage.to_dict()`` form of a threadloom message: ``role``,
    ``meta`` (``response_metadata``), ``name`` and ``content`` parts (reasoning, text,
    tool calls; a tool message's one ``tool_call_result``, whose ``origin`` has the
    arguments when the message knows them).

    Raises:
        ValueError: a message of another role (a ``RemoveMessage``).
    """
    role = _ROLES.get(getattr(message, "type", ""))
    if role is None:
        raise ValueError(f"{type(message).__name__} has no Haystack role")
    parts: list[dict[str, Any]] = []
    if role == "tool":
        result = message.tool_call_result
        origin = dict(_call_dict(result.origin), arguments=result.origin.arguments or {})
        parts.append({"tool_call_result": {"result": result.result, "origin": origin,
                                           "error": result.error}})
    else:
        reasoning = getattr(message, "reasoning_content", None)
        if reasoning:
            parts.append({"reasoning": {"reasoning_text": reasoning, "extra": {}}})
        calls = list(getattr(message, "tool_calls", None) or ())
        if message.text or not calls:
            parts.append({"text": message.text})
        parts.extend({"tool_call": _call_dict(c)} for c in calls)
    name = None if role == "tool" else message.name  # a tool's name is its call's
    return {"role": role, "meta": dict(message.response_metadata), "name": name,
            "content": parts}


def _call_dict(call: Any) -> dict[str, Any]:
    return {"tool_name": call.get("name"), "arguments": call.get("args"), "id": call.get("id"),
            "extra": None}


def _call(data: Any) -> Any:
    data = data or {}
    return make_tool_call(data.get("tool_name"), data.get("arguments"), data.get("id"))


__all__ = ["is_haystack_message_dict", "message_from_haystack_dict", "message_to_haystack_dict"]
