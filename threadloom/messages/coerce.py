"""Coercion of message-like values to messages, and our own lossless dict dumps.

``coerce_message``/``convert_to_messages`` accept what LangChain's ``convert_to_messages``
does; ``message_to_dict``/``message_from_dict`` are the checkpoint codec's message format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from threadloom.messages.types import (
    _DEVELOPER_FLAG,
    _ROLE_CLASSES,
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    construct_unchecked,
)
from threadloom.messages.wire import message_from_openai

_ANY_MESSAGE: TypeAdapter[Any] = TypeAdapter(AnyMessage)
# The message classes themselves: a type test is cheaper than ``isinstance`` through
# pydantic's ABC metaclass, and these are what lists almost always hold.
_MESSAGE_TYPES = frozenset(
    {AIMessage, AIMessageChunk, HumanMessage, RemoveMessage, SystemMessage, ToolMessage})


def coerce_message(value: Any) -> BaseMessage:
    """Turn one message-like value into a message (as LangChain's ``convert_to_messages``).

    Accepted: a ``BaseMessage`` (returned as is); a ``str`` (a ``HumanMessage``); a
    ``(role, content)`` tuple with role user/human/assistant/ai/system/developer, or
    ``("tool", content, tool_call_id)``; an OpenAI role dict (``{"role": ..., ...}``);
    a dict from ``message_to_dict`` (with ``"type"``).

    Raises:
        TypeError: the value has none of these shapes.
        ValueError: an unknown role, or a tool message without ``tool_call_id``.
    """
    if isinstance(value, BaseMessage):
        return value
    if isinstance(value, str):
        if type(value) is str:  # nothing to validate: what HumanMessage(content=value) builds
            return construct_unchecked(HumanMessage, content=value)
        return HumanMessage(content=value)
    if isinstance(value, dict):
        if "role" in value:
            return message_from_openai(value)
        if "type" in value:
            return message_from_dict(value)
        raise TypeError(f"cannot convert dict {sorted(value)!r} to a message: no 'role' or 'type'")
    if isinstance(value, (tuple, list)) and len(value) in (2, 3) and isinstance(value[0], str):
        return _from_tuple(value)
    raise TypeError(
        f"cannot convert {type(value).__name__} to a message; expected a message, a str, "
        "a (role, content) tuple or a role dict"
    )


def _from_tuple(value: Sequence[Any]) -> BaseMessage:
    role, content = value[0], value[1]
    cls = _ROLE_CLASSES.get(role.lower())
    if cls is None:
        raise ValueError(f"unknown message role {role!r}; expected one of {sorted(_ROLE_CLASSES)}")
    if cls is ToolMessage:
        if len(value) != 3:
            raise ValueError("a tool message tuple needs 3 items: ('tool', content, tool_call_id)")
        return ToolMessage(content=content, tool_call_id=value[2])
    if len(value) != 2:
        raise ValueError(f"a {role!r} message tuple needs 2 items: (role, content)")
    if role.lower() == "developer":
        return SystemMessage(content=content, additional_kwargs={_DEVELOPER_FLAG: "developer"})
    if type(content) is str:  # nothing to validate: what cls(content=content) would build
        return construct_unchecked(cls, content=content)
    return cls(content=content)


def convert_to_messages(values: Any) -> list[BaseMessage]:
    """Coerce a list of message-likes (or a single one; ``None`` gives ``[]``) to a new list.

    Raises:
        TypeError, ValueError: as ``coerce_message``.
    """
    if values is None:
        return []
    if isinstance(values, list):
        return [v if type(v) in _MESSAGE_TYPES or isinstance(v, BaseMessage)
                else coerce_message(v) for v in values]
    return [coerce_message(values)]


# --- our own dumps ---------------------------------------------------------------------


def message_to_dict(message: BaseMessage) -> dict[str, Any]:
    """Dump a message to a flat dict with its ``type`` (fields left at their default are
    omitted); ``message_from_dict`` reads it back equal. Values stay as given, so a
    non-JSON ``artifact`` is left to the caller's codec."""
    data = message.model_dump(exclude_defaults=True)
    data["type"] = message.type
    return data


def message_from_dict(data: dict[str, Any]) -> BaseMessage:
    """Read a dict written by ``message_to_dict``.

    Raises:
        ValueError: the ``type`` is unknown or a field is invalid (the message says which).
    """
    try:
        return _ANY_MESSAGE.validate_python(data)  # type: ignore[no-any-return]
    except ValidationError as exc:
        raise ValueError(f"invalid message dict (type={data.get('type')!r}): {exc}") from exc


__all__ = ["coerce_message", "convert_to_messages", "message_from_dict", "message_to_dict"]
