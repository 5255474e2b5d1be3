"""Compiling middleware into agent hooks and call wrappers (``compile_middleware``).

The seam between ``threadloom.agent.middleware`` (what users write) and the agent core
(``builder.py``): node hooks become ``async fn(state, context)`` agent hooks that check
``jump_to`` against what the middleware declared; wrappers become ``async w(request,
handler)`` callables, sync ones run in a worker thread with a blocking handler.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from threadloom.agent.hooks import HOOK_POINTS
from threadloom.agent.middleware import (
    _JUMP_ATTR,
    NODE_HOOKS,
    AgentMiddleware,
    MiddlewareJumpError,
    MiddlewareRuntime,
    ModelWrapper,
    StateView,
    ToolWrapper,
    _check_targets,
)
from threadloom.agent.state import State

_REVERSED_POINTS = ("after_llm", "after_run")


def _impl(mw: AgentMiddleware, name: str) -> Callable[..., Any] | None:
    """The bound method implementing ``name`` when the subclass overrides it, else None."""
    cls = type(mw)
    if getattr(cls, "a" + name, None) is not None:
        return getattr(mw, "a" + name)
    if getattr(cls, name) is not getattr(AgentMiddleware, name):
        return getattr(mw, name)
    return None


def _make_hook(mw: AgentMiddleware, hook: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    allowed = getattr(impl, _JUMP_ATTR, None)
    allowed = _check_targets(mw.can_jump_to if allowed is None else allowed, mw.name)
    label = f"{mw.name}.{hook}"

    async def run(state: State, context: Any = None) -> dict[str, Any] | None:
        result = impl(StateView(state), _runtime(context))
        if inspect.isawaitable(result):
            result = await result
        return _checked_update(result, mw.name, hook, allowed)

    run.__qualname__ = run.__name__ = label
    return run


def _runtime(hook_context: Any) -> MiddlewareRuntime:
    from threadloom.agent.requests import run_options
    from threadloom.engine.runtime import current_task

    task = current_task()
    if task is None:
        return MiddlewareRuntime(hook_context, {}, hook_context)
    user = run_options().user_context
    context = user if user is not None else hook_context
    return MiddlewareRuntime(context, task.config, hook_context)


def _checked_update(
    result: Any, name: str, hook: str, allowed: tuple[str, ...]
) -> dict[str, Any] | None:
    if result is None:
        return None
    if not isinstance(result, Mapping):
        raise TypeError(f"middleware {name!r} {hook} returned {type(result).__name__}; "
                        "return None or a dict of state updates")
    target = result.get("jump_to")
    if target is not None and target not in allowed:
        raise MiddlewareJumpError(name, hook, target, allowed)
    return dict(result)


def _make_wrapper(impl: Callable[..., Any], label: str) -> ModelWrapper:
    if inspect.iscoroutinefunction(impl):
        async def wrapper(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
            return await impl(request, handler)
    else:
        async def wrapper(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
            loop = asyncio.get_running_loop()

            async def call(req: Any) -> Any:
                return await handler(req)

            def sync_handler(req: Any) -> Any:
                # The worker thread's context (a copy of the node's) travels with the
                # scheduled coroutine, so the handler still sees the running task.
                return asyncio.run_coroutine_threadsafe(call(req), loop).result()

            result = await asyncio.to_thread(impl, request, sync_handler)
            if inspect.isawaitable(result):
                result = await result
            return result

    wrapper.__qualname__ = wrapper.__name__ = label
    return wrapper


def compile_middleware(
    middleware: Sequence[AgentMiddleware] | None,
) -> tuple[dict[str, list[Callable[..., Any]]], list[ModelWrapper], list[ToolWrapper]]:
    """Turn middleware objects into agent hooks and call wrappers.

    Args:
        middleware: ``AgentMiddleware`` instances (classes or decorated functions), in the
            order given to ``create_agent(middleware=[...])``.

    Returns:
        ``(hooks, model_wrappers, tool_wrappers)``: ``hooks`` has every name of
        ``HOOK_POINTS`` as a key, each a list of ``async fn(state, context)`` returning
        None or a dict of updates (``after_llm``/``after_run`` in reverse middleware order);
        the wrappers are ``async w(request, handler)``, outermost first.

    Raises:
        TypeError: an entry that is not an ``AgentMiddleware`` (a class instead of an
            instance is named as such).
        ValueError: two middleware with the same name, or an unknown jump target.
    """
    hooks: dict[str, list[Callable[..., Any]]] = {point: [] for point in HOOK_POINTS}
    model_wrappers: list[ModelWrapper] = []
    tool_wrappers: list[ToolWrapper] = []
    seen: set[str] = set()
    for mw in middleware or ():
        _check_middleware(mw, seen)
        for hook, point in NODE_HOOKS.items():
            impl = _impl(mw, hook)
            if impl is not None:
                hooks[point].append(_make_hook(mw, hook, impl))
        impl = _impl(mw, "wrap_model_call")
        if impl is not None:
            model_wrappers.append(_make_wrapper(impl, f"{mw.name}.wrap_model_call"))
        impl = _impl(mw, "wrap_tool_call")
        if impl is not None:
            tool_wrappers.append(_make_wrapper(impl, f"{mw.name}.wrap_tool_call"))
    for point in _REVERSED_POINTS:
        hooks[point].reverse()
    return hooks, model_wrappers, tool_wrappers


def _check_middleware(mw: Any, seen: set[str]) -> None:
    if isinstance(mw, type) and issubclass(mw, AgentMiddleware):
        raise TypeError(f"middleware {mw.__name__} is a class; pass an instance: "
                        f"{mw.__name__}()")
    if not isinstance(mw, AgentMiddleware):
        raise TypeError(f"middleware entries must be AgentMiddleware instances (a class or "
                        f"a function decorated with @before_model etc.), got {mw!r}")
    if mw.name in seen:
        raise ValueError(f"two middleware are named {mw.name!r}; each may appear once "
                         "(give decorated functions distinct names or name=...)")
    seen.add(mw.name)


__all__ = ["compile_middleware"]
