"""The OpenAI chat-completions wire format: message dicts <-> threadloom messages.

``message_from_openai`` reads request/response message dicts as every OpenAI-compatible
server sends them; ``to_openai_messages`` writes the request ``messages`` list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from threadloom.messages.records import make_tool_call
from threadloom.messages.types import (
    _DEVELOPER_FLAG,
    _ROLE_CLASSES,
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)


def message_from_openai(data: dict[str, Any]) -> BaseMessage:
    """Read one OpenAI chat-completions message dict (a request or response message, or a
    whole ``choice`` with ``message`` and ``finish_reason``).

    ``content: null`` becomes ``""``; tool-call ``arguments`` may be a JSON string, an
    object or a double-encoded string (all give dict ``args``; anything that is not a
    JSON object goes to ``invalid_tool_calls`` with an error); a missing or empty call id
    is synthesized; ``reasoning_content`` (or ``reasoning``) and ``refusal`` are kept.

    Raises:
        ValueError: unknown role, or a tool message without ``tool_call_id``.
    """
    finish_reason = None
    if "message" in data and "role" not in data:
        finish_reason = data.get("finish_reason")
        data = data["message"]
    role = data.get("role") or "assistant"
    content = data.get("content")
    if content is None:
        content = ""
    common: dict[str, Any] = {"content": content}
    for key in ("id", "name"):
        if data.get(key) is not None:
            common[key] = data[key]
    if role in ("assistant", "ai"):
        return _ai_from_openai(data, common, finish_reason)
    if role in ("user", "human"):
        return HumanMessage(**common)
    if role == "system":
        return SystemMessage(**common)
    if role == "developer":
        return SystemMessage(**common, additional_kwargs={_DEVELOPER_FLAG: "developer"})
    if role == "tool":
        if not data.get("tool_call_id"):
            raise ValueError("tool message dict has no 'tool_call_id'")
        status = data.get("status", "success")
        return ToolMessage(**common, tool_call_id=data["tool_call_id"], status=status)
    raise ValueError(f"unknown message role {role!r}; expected one of {sorted(_ROLE_CLASSES)}")


def _ai_from_openai(
    data: dict[str, Any], common: dict[str, Any], finish_reason: str | None
) -> AIMessage:
    tool_calls: list[Any] = []
    invalid: list[Any] = []
    for raw in data.get("tool_calls") or ():
        fn = raw.get("function")
        if fn is None:  # our own / LangChain shape: {"name", "args", "id"}
            call = make_tool_call(raw.get("name"), raw.get("args"), raw.get("id"))
        else:
            call = make_tool_call(fn.get("name"), fn.get("arguments"), raw.get("id"))
        (invalid if "error" in call else tool_calls).append(call)
    invalid.extend(data.get("invalid_tool_calls") or ())
    reasoning = data.get("reasoning_content")
    if reasoning is None:
        reasoning = data.get("reasoning")
    extra = {"extra_content": data["extra_content"]} if data.get("extra_content") else {}
    meta = {"finish_reason": finish_reason} if finish_reason else {}
    return AIMessage(
        **common,
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
        refusal=data.get("refusal"),
        additional_kwargs=extra,
        response_metadata=meta,
    )


def to_openai_messages(
    messages: Iterable[Any],
    *,
    empty_content: str | None = "",
    include_reasoning: bool = False,
) -> list[dict[str, Any]]:
    """Serialize messages to the chat-completions request format.

    Args:
        messages: messages or message-likes (coerced with ``coerce_message``).
        empty_content: ``content`` of an assistant message without text. ``""`` (default)
            is accepted by every server seen (LM Studio rejects ``null``, llama.cpp a
            missing key); pass ``None`` for strict-OpenAI ``null``.
        include_reasoning: echo ``reasoning_content`` on assistant turns (DeepSeek
            thinking mode with tools expects it).

    Returns:
        One dict per message: roles ``system``/``developer``, ``user``, ``assistant``
        (always with a ``content`` key; ``tool_calls`` with ``arguments`` as a JSON string,
        invalid calls sent back with their raw text), ``tool`` (with ``tool_call_id``).
        Content lists pass through.

    Raises:
        ValueError: a ``RemoveMessage`` (it is a reducer marker, never a turn).
    """
    out: list[dict[str, Any]] = []
    for value in messages:
        msg = value if isinstance(value, BaseMessage) else _coerce(value)
        if isinstance(msg, AIMessage):
            out.append(_ai_to_openai(msg, empty_content, include_reasoning))
            continue
        if isinstance(msg, RemoveMessage):
            raise ValueError(f"RemoveMessage(id={msg.id!r}) cannot be sent to a model")
        if isinstance(msg, ToolMessage):
            item = {"role": "tool", "tool_call_id": msg.tool_call_id, "content": msg.content}
        elif isinstance(msg, SystemMessage):
            item = {
                "role": msg.additional_kwargs.get(_DEVELOPER_FLAG, "system"),
                "content": msg.content,
            }
        else:
            item = {"role": "user", "content": msg.content}
        if msg.name and not isinstance(msg, ToolMessage):
            item["name"] = msg.name
        out.append(item)
    return out


def _ai_to_openai(msg: AIMessage, empty_content: str | None, reasoning: bool) -> dict[str, Any]:
    if isinstance(msg, AIMessageChunk) and msg.tool_call_chunks:
        msg = msg.to_message()
    content: Any = msg.content
    if not content:
        content = msg.refusal or empty_content
    item: dict[str, Any] = {"role": "assistant", "content": content}
    if msg.name:
        item["name"] = msg.name
    calls = [
        _wire_call(c["id"], c["name"], json.dumps(c["args"], ensure_ascii=False))
        for c in msg.tool_calls
    ]
    # An invalid call's raw arguments live only in its error tool message; the history
    # sent back always carries valid JSON (case H14).
    calls.extend(
        _wire_call(c.get("id") or "", c.get("name") or "", "{}") for c in msg.invalid_tool_calls
    )
    if calls:
        item["tool_calls"] = calls
    if reasoning and msg.reasoning_content is not None:
        item["reasoning_content"] = msg.reasoning_content
    if msg.additional_kwargs.get("extra_content"):
        item["extra_content"] = msg.additional_kwargs["extra_content"]
    return item


def _wire_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _coerce(value: Any) -> BaseMessage:
    # coerce reads role dicts with message_from_openai, so it is imported on use.
    from threadloom.messages.coerce import coerce_message

    return coerce_message(value)


__all__ = ["message_from_openai", "to_openai_messages"]
