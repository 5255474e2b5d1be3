"""threadloom: a small, fast, safe engine for stateful LLM workflows and tool-calling agents.

This module only re-exports the public API (see ``__all__``). The engine's names are
imported at once; the agent, models and checkpointers are imported on first use, so
``import threadloom`` stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from threadloom.engine.channels import Ephemeral, UntrackedValue
from threadloom.engine.compiled import CompiledGraph
from threadloom.engine.graph import StateGraph
from threadloom.engine.runtime import Runtime, get_config, get_stream_writer, interrupt
from threadloom.engine.snapshot import StateSnapshot
from threadloom.errors import (
    GraphRecursionError,
    InvalidRouteError,
    InvalidUpdateError,
    ThreadBusyError,
    ThreadloomError,
)
from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from threadloom.reducers import (
    REMOVE_ALL_MESSAGES,
    MessagesState,
    add_messages,
    merge_lists,
    replace_values,
)
from threadloom.types import (
    END,
    START,
    Command,
    Interrupt,
    Overwrite,
    RetryPolicy,
    Send,
    StateUpdate,
)

_LAZY = {
    "tool": "threadloom.tools",
    "Tool": "threadloom.tools",
    "InjectedState": "threadloom.tools",
    "InjectedToolCallId": "threadloom.tools",
    "ToolNode": "threadloom.nodes",
    "tools_condition": "threadloom.nodes",
    "create_agent": "threadloom.agent",
    "AgentState": "threadloom.agent",
    "State": "threadloom.agent",
    "hook": "threadloom.agent",
    "ScriptedChatModel": "threadloom.models",
    "OpenAIChatModel": "threadloom.models",
    "init_chat_model": "threadloom.models",
    "InMemoryCheckpointer": "threadloom.checkpoint.memory",
    "SqliteCheckpointer": "threadloom.checkpoint.sqlite",
}

if TYPE_CHECKING:
    from threadloom.agent import AgentState, State, create_agent, hook
    from threadloom.checkpoint.memory import InMemoryCheckpointer
    from threadloom.checkpoint.sqlite import SqliteCheckpointer
    from threadloom.models import OpenAIChatModel, ScriptedChatModel, init_chat_model
    from threadloom.nodes import ToolNode, tools_condition
    from threadloom.tools import InjectedState, InjectedToolCallId, Tool, tool


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'threadloom' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "END", "START", "REMOVE_ALL_MESSAGES",
    "AIMessage", "AIMessageChunk", "AgentState", "AnyMessage", "BaseMessage", "Command",
    "CompiledGraph", "Ephemeral", "GraphRecursionError", "HumanMessage", "InMemoryCheckpointer",
    "InjectedState", "InjectedToolCallId", "Interrupt", "InvalidRouteError",
    "InvalidUpdateError", "MessagesState", "OpenAIChatModel", "Overwrite", "RemoveMessage",
    "RetryPolicy", "UntrackedValue",
    "Runtime", "ScriptedChatModel", "Send", "SqliteCheckpointer", "State", "StateGraph",
    "StateSnapshot", "StateUpdate", "SystemMessage", "ThreadBusyError", "ThreadloomError",
    "Tool", "ToolCall", "ToolMessage", "ToolNode", "add_messages", "create_agent", "get_config",
    "get_stream_writer", "hook", "init_chat_model", "interrupt", "merge_lists",
    "replace_values", "tool", "tools_condition",
]
