"""Haystack's ``ChatMessage`` spellings on threadloom's messages.

A Haystack user types ``msg.is_from("user")``, ``msg.tool_call.tool_name``,
``msg.tool_call_result.result``, ``msg.meta`` and ``ChatMessage.from_user("hi")``.
``HaystackSpellings`` (a base of ``BaseMessage``) gives every message those names, as
read-only views over threadloom's own fields, which stay the stored truth:

- ``is_from(role)``: ``role`` is a ``ChatRole`` or its string (``"user"``, ``"system"``,
  ``"assistant"``, ``"tool"``); an unknown role raises ``ValueError``, as Haystack's.
- ``meta``: ``response_metadata``.
- ``tool_call`` / ``tool_calls`` items read through ``ToolCallView`` (a ``dict`` with
  ``tool_name``, ``arguments`` and ``id`` attributes), ``None`` on messages without calls.
- ``tool_call_result`` / ``tool_call_results``: a ``ToolCallResult`` (``result``,
  ``origin``, ``error``) for a ``ToolMessage``; ``None`` / ``[]`` otherwise. A
  ``ToolMessage`` stores only the call's id and name, so ``origin.arguments`` is ``None``.
- ``from_user`` / ``from_system`` / ``from_assistant`` / ``from_tool``: build the
  matching threadloom message (``meta`` goes to ``response_metadata``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ChatRole(StrEnum):
    """Haystack's chat roles; each equals its string (``ChatRole.USER == "user"``)."""

    USER = "user"
    SYSTEM = "system"
    ASSISTANT = "assistant"
    TOOL = "tool"

    @staticmethod
    def from_str(string: str) -> ChatRole:
        """The role named ``string``.

        Raises:
            ValueError: not one of ``user``, ``system``, ``assistant``, ``tool``.
        """
        for role in ChatRole:
            if role.value == string:
                return role
        raise ValueError(f"Unknown chat role {string!r}; supported roles: "
                         f"{[r.value for r in ChatRole]}")


_ROLE_OF_TYPE = {"human": ChatRole.USER, "system": ChatRole.SYSTEM, "ai": ChatRole.ASSISTANT,
                 "AIMessageChunk": ChatRole.ASSISTANT, "tool": ChatRole.TOOL}


class ToolCallView(dict):  # type: ignore[type-arg]
    """A threadloom tool-call dict (``{"name", "args", "id"}``) that also reads as
    Haystack's ``ToolCall``: ``tool_name``, ``arguments``, ``id``. Equal to the plain dict."""

    @property
    def tool_name(self) -> str | None:
        """The called tool's name (``self["name"]``)."""
        return self.get("name")

    @property
    def arguments(self) -> Any:
        """The call's arguments (``self["args"]``); ``None`` when not known."""
        return self.get("args")

    @property
    def id(self) -> str | None:
        """The call's id."""
        return self.get("id")


@dataclass(frozen=True)
class ToolCallResult:
    """Haystack's ``ToolCallResult`` read from a ``ToolMessage``.

    Attributes:
        result: the message's text.
        origin: the call it answers (a ``ToolCallView`` with ``name`` and ``id``).
        error: whether the tool failed (``status == "error"``).
    """

    result: str
    origin: ToolCallView
    error: bool


class HaystackSpellings:
    """Mixin of ``BaseMessage``: Haystack's ``ChatMessage`` names (see the module doc)."""

    __slots__ = ()

    def is_from(self, role: ChatRole | str) -> bool:
        """Whether the message has ``role`` (a ``ChatRole`` or its string)."""
        wanted = role if isinstance(role, ChatRole) else ChatRole.from_str(role)
        return _ROLE_OF_TYPE.get(getattr(self, "type", "")) is wanted

    @property
    def meta(self) -> dict[str, Any]:
        """Haystack's ``meta``: the message's ``response_metadata``."""
        return getattr(self, "response_metadata", {})  # type: ignore[no-any-return]

    @property
    def tool_call(self) -> ToolCallView | None:
        """The first tool call, or ``None``."""
        calls = getattr(self, "tool_calls", None)
        return ToolCallView(calls[0]) if calls else None

    @property
    def tool_call_results(self) -> list[ToolCallResult]:
        """``[ToolCallResult]`` for a ``ToolMessage``, else ``[]``."""
        result = self.tool_call_result
        return [] if result is None else [result]

    @property
    def tool_call_result(self) -> ToolCallResult | None:
        """The ``ToolCallResult`` of a ``ToolMessage``, else ``None``."""
        if getattr(self, "type", None) != "tool":
            return None
        origin = ToolCallView(name=getattr(self, "name", None), args=None,
                              id=getattr(self, "tool_call_id", None))
        return ToolCallResult(result=getattr(self, "text", ""), origin=origin,
                              error=getattr(self, "status", "success") == "error")

    @classmethod
    def from_user(cls, text: str | None = None, meta: dict[str, Any] | None = None,
                  name: str | None = None) -> Any:
        """A ``HumanMessage`` (Haystack's ``ChatMessage.from_user``)."""
        from threadloom.messages.types import HumanMessage

        return HumanMessage(text or "", name=name, response_metadata=dict(meta or {}))

    @classmethod
    def from_system(cls, text: str, meta: dict[str, Any] | None = None,
                    name: str | None = None) -> Any:
        """A ``SystemMessage`` (Haystack's ``ChatMessage.from_system``)."""
        from threadloom.messages.types import SystemMessage

        return SystemMessage(text, name=name, response_metadata=dict(meta or {}))

    @classmethod
    def from_assistant(cls, text: str | None = None, meta: dict[str, Any] | None = None,
                       name: str | None = None, tool_calls: list[Any] | None = None, *,
                       reasoning: str | None = None) -> Any:
        """An ``AIMessage`` (Haystack's ``ChatMessage.from_assistant``); ``tool_calls``
        are threadloom tool-call dicts (``{"name", "args", "id"}``)."""
        from threadloom.messages.types import AIMessage

        calls = [dict(c) for c in tool_calls or ()]
        return AIMessage(text or "", name=name, tool_calls=calls,
                         response_metadata=dict(meta or {}), reasoning_content=reasoning)

    @classmethod
    def from_tool(cls, tool_result: Any, origin: Any, error: bool = False,
                  meta: dict[str, Any] | None = None) -> Any:
        """A ``ToolMessage`` answering ``origin`` (a tool-call dict); a result that is no
        string is written as JSON."""
        from threadloom.messages.types import ToolMessage

        text = tool_result if isinstance(tool_result, str) else json.dumps(tool_result,
                                                                            default=str)
        return ToolMessage(text, tool_call_id=origin["id"], name=origin.get("name"),
                           status="error" if error else "success",
                           response_metadata=dict(meta or {}))


__all__ = ["ChatRole", "HaystackSpellings", "ToolCallResult", "ToolCallView"]
