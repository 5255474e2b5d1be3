"""``ToolCallRequest``: one tool call as a ``wrap_tool_call`` wrapper sees it (LangChain's
and LangGraph's ``ToolCallRequest``), for ``ToolNode`` and the agent's middleware."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ToolCallRequest:
    """One tool call, as ``wrap_tool_call`` wrappers see it (LangChain's ``ToolCallRequest``).

    Attributes:
        tool_call: ``{"name", "args", "id", "type"?}``.
        tool: the ``Tool`` that will run it (None: the name is unknown; a wrapper may
            ``override(tool=...)`` with one the node was not given).
        state: the state at the time of the call.
        config: the run config.
        runtime: in the agent, the engine ``Runtime``; in a ``ToolNode``, the call's
            ``ToolRuntime``.
    """

    tool_call: dict[str, Any]
    tool: Any
    state: Any = None
    config: dict[str, Any] = field(default_factory=dict)
    runtime: Any = None

    def override(self, **changes: Any) -> ToolCallRequest:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a field; once built, with a ``DeprecationWarning`` (as LangGraph's): a
        wrapper should pass ``request.override(...)`` on instead of changing it."""
        try:
            object.__getattribute__(self, name)
        except AttributeError:  # being built
            pass
        else:
            warnings.warn(
                f"Setting ToolCallRequest.{name} directly is deprecated; use "
                f"request.override({name}=...) instead", DeprecationWarning, stacklevel=2)
        object.__setattr__(self, name, value)


__all__ = ["ToolCallRequest"]
