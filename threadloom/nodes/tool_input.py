"""What ``ToolNode`` reads from its input: the state's messages and the last AI message;
and ``tools_condition``, the router that sends a tool-calling reply to the tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.messages import AIMessage
from threadloom.types import END

__all__ = ["last_ai", "messages_of", "tools_condition"]


def messages_of(state: Any, key: str) -> list[Any]:
    """The message list of a dict state, an object state, or a bare list of messages."""
    if isinstance(state, list):
        return state
    if isinstance(state, dict):
        messages = state.get(key)
    else:
        messages = getattr(state, key, None)
    if messages is None:
        raise ValueError(f"ToolNode: the state has no {key!r} messages")
    return list(messages)


def last_ai(messages: Sequence[Any]) -> AIMessage:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    raise ValueError("ToolNode: no AI message in the state's messages; nothing to run")


def tools_condition(state: Any, messages_key: str = "messages") -> str:
    """Route to ``"tools"`` when the last message is an AI message asking for tools, else END.

    As LangGraph's ``tools_condition``; calls in ``invalid_tool_calls`` count too, so that
    broken calls are answered with error messages rather than left dangling.
    """
    messages = messages_of(state, messages_key)
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
        return "tools"
    return END
