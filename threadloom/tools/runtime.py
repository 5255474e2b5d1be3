"""``ToolRuntime``: what a tool that asks for it gets of the run (LangChain's object).

A tool parameter typed ``ToolRuntime`` (or ``ToolRuntime[Context]``, ``ToolRuntime[
Context, State]``), whatever its name, is filled by the engine and hidden from the model,
as in LangChain: no ``Annotated`` marker is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic

from typing_extensions import TypeVar

ContextT = TypeVar("ContextT", default=None)
StateT = TypeVar("StateT", default=dict[str, Any])


def _no_op_writer(chunk: Any) -> None:
    """The stream writer outside a run: drops what it is given."""


@dataclass
class ToolRuntime(Generic[ContextT, StateT]):
    """The run as one tool call sees it, as LangChain's ``ToolRuntime``.

    Attributes:
        state: the graph state the ``ToolNode`` was given.
        context: the run's ``context=`` object (``Runtime.context``).
        config: the run config.
        stream_writer: writes to the ``custom`` stream mode.
        tool_call_id: the id of the call being run.
        store: the long-term store; always None in threadloom (it has none).
        tools: the ``ToolNode``'s tools, in the order it was given them.
        execution_info: the ids of the node call running the tool (``Runtime``'s).
        server_info: who runs the graph, when a server does; else None.
    """

    state: StateT
    context: ContextT
    config: dict[str, Any]
    stream_writer: Callable[[Any], None]
    tool_call_id: str | None
    store: Any
    tools: list[Any] = field(default_factory=list)
    execution_info: Any = None
    server_info: Any = None

    __threadloom_injection__ = "tool_runtime"


def is_tool_runtime(annotation: Any) -> bool:
    """Whether an annotation is ``ToolRuntime`` or a parametrised ``ToolRuntime[...]``."""
    return annotation is ToolRuntime or getattr(annotation, "__origin__", None) is ToolRuntime


def default_tool_runtime(state: Any, tool_call_id: Any, config: Any) -> ToolRuntime[Any, Any]:
    """The ``ToolRuntime`` of a tool invoked by hand (``Tool.invoke``), outside a node."""
    return ToolRuntime(state=state, context=None, config=config or {},
                       stream_writer=_no_op_writer, tool_call_id=tool_call_id, store=None)


__all__ = ["ToolRuntime", "default_tool_runtime", "is_tool_runtime"]
