"""``create_agent``'s arguments checked and normalized at build time, each error naming
the argument (a wrong model or tool fails here, not at the first run)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from threadloom.agent.hooks import HOOK_POINTS, normalize_hooks
from threadloom.tools import Tool, tool


def check_model(model: Any) -> None:
    """Refuse, at build time, a ``model`` that is no chat model.

    Raises:
        TypeError: naming the argument: ``model`` has no ``ainvoke`` method (the agent
            calls it; ``threadloom.models.BaseChatModel`` gives one from ``invoke``).
    """
    if not callable(getattr(model, "ainvoke", None)):
        raise TypeError(
            f"create_agent(model=...): got {model!r} ({type(model).__name__}); expected a chat "
            "model with an ainvoke method (ScriptedChatModel, OpenAIChatModel, a subclass of "
            "threadloom.models.BaseChatModel) or a 'provider:model' string for "
            "init_chat_model")


def takes_tools(model: Any) -> bool:
    """Whether the model's ``ainvoke`` accepts a ``tools`` argument
    (a parameter named so, or ``**kwargs``), as Haystack checks its generator's ``run``."""
    method: Any = getattr(model, "ainvoke", None)
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return True  # cannot tell: let the first call say
    return any(p.name == "tools" or p.kind is p.VAR_KEYWORD for p in params)


def tools_of(tools: Sequence[Any] | None) -> list[Tool]:
    """The ``tools=`` argument as ``Tool`` objects (plain functions wrapped with ``@tool``).

    Raises:
        TypeError: ``tools`` is one tool instead of a list, or an item is no tool.
        ValueError: two tools share a name.
    """
    if tools is None:
        return []
    if isinstance(tools, Tool) or callable(tools):
        raise TypeError("tools must be a list of tools or functions")
    for index, item in enumerate(tools):
        if not isinstance(item, Tool) and not callable(item):
            raise TypeError(f"create_agent(tools=...): tools[{index}] is {item!r} "
                            f"({type(item).__name__}); expected a Tool, a @tool function or "
                            "a plain function")
    out = [t if isinstance(t, Tool) else tool(t) for t in tools]
    names = [t.name for t in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"two or more tools are named {dupes}; tool names must be unique")
    return out


def hooks_of(hooks: Any, middleware: Sequence[Any] | None) -> tuple[dict[str, list[Any]], list[Any],
                                                                  list[Any]]:
    """``(hooks by point, wrap_model_call wrappers, wrap_tool_call wrappers)`` from the
    ``hooks=`` and ``middleware=`` arguments (middleware hooks run after ``hooks``)."""
    hook_map = normalize_hooks(hooks)
    if not middleware:
        return hook_map, [], []
    from threadloom.agent.middleware import compile_middleware

    mw_hooks, model_wrappers, tool_wrappers = compile_middleware(list(middleware))
    for point in HOOK_POINTS:
        hook_map[point] = [*hook_map[point], *mw_hooks.get(point, [])]
    return hook_map, list(model_wrappers), list(tool_wrappers)


__all__ = ["check_model", "hooks_of", "takes_tools", "tools_of"]
