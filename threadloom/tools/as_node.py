"""A ``Tool`` used directly as a graph node (``builder.add_node("name", my_tool)``).

LangGraph runs such a node as it runs any LangChain tool given plain input:
``tool.invoke(state, config)``. The state's keys that name the tool's arguments are its
arguments (other keys are ignored), injected parameters are filled from the state and
the config, and whatever the tool returns (an update dict, a ``Command``, None) is the
node's result, unwrapped: there is no tool call, so no ``ToolMessage``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threadloom.tools.core import Tool


def _arguments(state: Any) -> Any:
    """The tool's input read from the node's state: a mapping as a dict, an object with
    fields (a pydantic model, a dataclass) as its ``__dict__``, anything else unchanged
    (then ``Tool.parse_args`` refuses it with a ``ToolError`` naming its type)."""
    if isinstance(state, Mapping):
        return dict(state)
    return dict(getattr(state, "__dict__", None) or {}) or state


def tool_as_node(tool: Tool) -> Callable[..., Any]:
    """The node function ``(state, config) -> result`` that runs ``tool`` on the state.

    Sync when the tool has a sync ``func`` (the engine runs it on its worker pool in an
    async run), else async over the tool's coroutine. Raises what the tool raises, and
    ``ToolError`` when the state does not hold valid arguments.
    """
    if tool.func is not None:

        def run(state: Any, config: Any = None) -> Any:
            return tool.invoke(_arguments(state), state=state, config=config)

        run.__name__ = tool.name
        return run

    async def arun(state: Any, config: Any = None) -> Any:
        return await tool.ainvoke(_arguments(state), state=state, config=config)

    arun.__name__ = tool.name
    return arun
