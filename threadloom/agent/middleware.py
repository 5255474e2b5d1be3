"""Agent middleware, as LangChain's ``create_agent`` middleware, compiled into agent hooks.

A middleware groups hooks by name. Node hooks (``before_agent``, ``before_model``,
``after_model``, ``after_agent``) map onto the agent's hook points (``before_run``,
``before_llm``, ``after_llm``, ``after_run``); wrappers (``wrap_model_call``,
``wrap_tool_call``) surround each model call and each tool call. Only the methods a
subclass overrides are used (as trio calls observer hooks only when overridden), so an
unused hook costs nothing. Every method may be sync or ``async``.

Ordering follows LangChain: ``before_*`` hooks run in list order, ``after_*`` hooks in
reverse list order, and the first middleware's wrapper is the outermost.

Ready-made middleware lives in ``threadloom.agent.middleware_library`` and
``compile_middleware`` (the seam the agent core calls) in
``threadloom.agent.middleware_compile``; both are re-exported here.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from threadloom.agent.state import State
from threadloom.errors import ThreadloomError

JUMP_TARGETS = ("model", "tools", "end")
"""Where a node hook may send the run with ``{"jump_to": ...}``."""

NODE_HOOKS = {
    "before_agent": "before_run",
    "before_model": "before_llm",
    "after_model": "after_llm",
    "after_agent": "after_run",
}
"""Middleware hook name -> agent hook point."""

_JUMP_ATTR = "__can_jump_to__"

F = TypeVar("F", bound=Callable[..., Any])
ModelWrapper = Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]
"""``async def w(request: ModelRequest, handler) -> AIMessage``."""
ToolWrapper = Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]
"""``async def w(request: ToolCallRequest, handler) -> ToolMessage | Command``."""


class MiddlewareJumpError(ThreadloomError, ValueError):
    """A middleware hook jumped to a target it did not declare in ``can_jump_to``.

    Attributes:
        middleware: the middleware's name.
        hook: the hook that jumped (``"before_model"``...).
        target: the undeclared target.
    """

    def __init__(self, middleware: str, hook: str, target: Any, allowed: Sequence[str]) -> None:
        declared = ", ".join(allowed) or "nothing"
        super().__init__(
            f"middleware {middleware!r} {hook} returned jump_to={target!r}, but it declares "
            f"can_jump_to: {declared}; declare it, e.g. @{hook}(can_jump_to=[{target!r}]) or "
            f"@hook_config(can_jump_to=[{target!r}]) on the method (targets: "
            f"{', '.join(JUMP_TARGETS)})")
        self.middleware, self.hook, self.target = middleware, hook, target


@dataclass(frozen=True, slots=True)
class MiddlewareRuntime:
    """The second argument of a middleware node hook (LangChain's ``runtime``).

    Attributes:
        context: the ``context=`` object given to ``invoke`` (as LangChain), or else the
            run's ``hook_context``.
        config: the running node's config (``{}`` outside a graph run).
        hook_context: the run's ``hook_context`` (request-scoped objects from the caller).
    """

    context: Any = None
    config: dict[str, Any] = field(default_factory=dict)
    hook_context: Any = None

    @property
    def stream_writer(self) -> Callable[[Any], None]:
        """Writes to the ``custom`` stream mode (a no-op when nobody streams it)."""
        from threadloom.engine.runtime import get_stream_writer

        return get_stream_writer()


class StateView(Mapping[str, Any]):
    """The agent state as a middleware sees it: ``state["messages"]`` as in LangChain.

    A read-only mapping over the live ``State`` that also offers ``State``'s ``set``,
    ``has`` and ``data`` (writes through ``set`` go through the key's handler). Returning
    a dict of updates from the hook is the usual way to write.
    """

    __slots__ = ("_state",)

    def __init__(self, state: State) -> None:
        self._state = state

    def __getitem__(self, key: str) -> Any:
        return self._state.data[key]

    def __iter__(self) -> Any:
        return iter(self._state.data)

    def __len__(self) -> int:
        return len(self._state.data)

    def set(self, key: str, value: Any, handler_override: Any = None) -> None:
        """As ``State.set``."""
        self._state.set(key, value, handler_override)

    def has(self, key: str) -> bool:
        """As ``State.has``."""
        return self._state.has(key)

    @property
    def data(self) -> dict[str, Any]:
        """The live value dict (``State.data``)."""
        return self._state.data

    @property
    def state(self) -> State:
        """The underlying ``State``."""
        return self._state

    def __repr__(self) -> str:
        return f"StateView({self._state!r})"


def hook_config(*, can_jump_to: Iterable[str] | None = None) -> Callable[[F], F]:
    """Declare where a middleware method may jump, as LangChain's ``hook_config``.

    Args:
        can_jump_to: targets among ``"model"``, ``"tools"``, ``"end"``.

    Raises:
        ValueError: an unknown target.
    """
    targets = _check_targets(can_jump_to, "hook_config")

    def mark(fn: F) -> F:
        setattr(fn, _JUMP_ATTR, targets)
        return fn

    return mark


def _check_targets(targets: Iterable[str] | None, where: str) -> tuple[str, ...]:
    if targets is None:
        return ()
    if isinstance(targets, str):
        targets = [targets]
    result = tuple(targets)
    for target in result:
        if target not in JUMP_TARGETS:
            raise ValueError(f"{where}: unknown jump target {target!r}; valid targets: "
                             f"{', '.join(JUMP_TARGETS)}")
    return result


class AgentMiddleware:
    """Base class of agent middleware, as LangChain's ``AgentMiddleware``.

    Override any of the hooks below (sync or ``async def``); the others are never called.
    Node hooks take ``(state, runtime)`` — ``state`` a ``StateView``, ``runtime`` a
    ``MiddlewareRuntime`` — and return None or a dict of state updates, which may hold
    ``jump_to`` (``"model"``, ``"tools"``, ``"end"``) when the method declares the target
    with ``@hook_config(can_jump_to=[...])`` or the class sets ``can_jump_to``.
    Wrappers take ``(request, handler)``: call ``handler(request)`` (awaited in an async
    wrapper; called plainly in a sync one, which then runs in a worker thread) zero or more
    times and return its result or your own. ``awrap_model_call`` / ``awrap_tool_call`` and
    ``abefore_model``-style names are accepted too, and win over the plain ones.

    Attributes:
        can_jump_to: jump targets allowed to every node hook of this class.
        name: the middleware's name (default: the class name); names must be unique
            within one agent.
        state_schema: extra state keys this middleware keeps (a TypedDict, e.g.
            extending ``AgentState``, or a Haystack-style dict); they join the agent's
            state, and ``create_agent(state_schema=...)`` wins for a key both declare.
    """

    can_jump_to: Sequence[str] = ()
    state_schema: Any = None

    @property
    def name(self) -> str:
        """The middleware's name, used in errors and to detect duplicates."""
        return type(self).__name__

    def before_agent(self, state: StateView, runtime: MiddlewareRuntime) -> dict | None:
        """Once per run, before anything else (hook point ``before_run``)."""
        return None

    def before_model(self, state: StateView, runtime: MiddlewareRuntime) -> dict | None:
        """Before each model call (hook point ``before_llm``)."""
        return None

    def after_model(self, state: StateView, runtime: MiddlewareRuntime) -> dict | None:
        """After each model call (hook point ``after_llm``)."""
        return None

    def after_agent(self, state: StateView, runtime: MiddlewareRuntime) -> dict | None:
        """Once per run, at the end (hook point ``after_run``)."""
        return None

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Surround one model call: ``request`` is a ``ModelRequest``; return an AIMessage."""
        return handler(request)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Surround one tool call: ``request`` is a ``ToolCallRequest``; return a
        ``ToolMessage`` or a ``Command``."""
        return handler(request)

    def __repr__(self) -> str:
        return f"<middleware {self.name}>"


def _positional_count(fn: Callable[..., Any]) -> int:
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _from_function(
    hook: str, fn: Callable[..., Any], can_jump_to: Iterable[str] | None, name: str | None
) -> AgentMiddleware:
    if not callable(fn):
        raise TypeError(f"@{hook} expects a function, got {fn!r}")
    wants_two = hook.startswith("wrap_") or _positional_count(fn) >= 2

    def call(self: Any, first: Any, second: Any) -> Any:
        return fn(first, second) if wants_two else fn(first)

    method: Callable[..., Any] = call
    if inspect.iscoroutinefunction(fn):
        async def acall(self: Any, first: Any, second: Any) -> Any:
            return await (fn(first, second) if wants_two else fn(first))

        method = acall
    if can_jump_to is not None:
        setattr(method, _JUMP_ATTR, _check_targets(can_jump_to, f"@{hook}"))
    cls_name = name if name else getattr(fn, "__name__", hook)
    cls = type(cls_name, (AgentMiddleware,), {
        hook: method, "__doc__": fn.__doc__, "__module__": getattr(fn, "__module__", None),
    })
    instance = cls()
    instance.__wrapped__ = fn  # type: ignore[attr-defined]
    return instance


_DECORATOR_DOC = """Make a middleware whose ``{hook}`` is the function, as LangChain's ``@{hook}``.

    Usable bare (``@{hook}``) or with keyword arguments: name: the middleware's name
    (default: the function's name){jump}.
    The function (sync or async) takes {args}.

    Returns:
        An ``AgentMiddleware`` instance, or a decorator when called without a function.

    Raises:
        ValueError: an unknown jump target. TypeError: not a function.
    """


def _decorator(hook: str, jumps: bool) -> Callable[..., Any]:
    def decorator(
        func: Callable[..., Any] | None = None, *, can_jump_to: Iterable[str] | None = None,
        name: str | None = None,
    ) -> Any:
        if not jumps and can_jump_to is not None:
            raise TypeError(f"@{hook} does not take can_jump_to")
        if func is not None:
            return _from_function(hook, func, can_jump_to, name)
        return lambda fn: _from_function(hook, fn, can_jump_to, name)

    decorator.__name__ = decorator.__qualname__ = hook
    decorator.__doc__ = _DECORATOR_DOC.format(
        hook=hook, args="(state) or (state, runtime)" if jumps else "(request, handler)",
        jump="; can_jump_to: targets it may jump to" if jumps else "")
    return decorator


before_agent = _decorator("before_agent", jumps=True)
before_model = _decorator("before_model", jumps=True)
after_model = _decorator("after_model", jumps=True)
after_agent = _decorator("after_agent", jumps=True)
wrap_model_call = _decorator("wrap_model_call", jumps=False)
wrap_tool_call = _decorator("wrap_tool_call", jumps=False)

if TYPE_CHECKING:
    from threadloom.agent.middleware_compile import compile_middleware
    from threadloom.agent.middleware_library import (
        ModelCallCacheMiddleware,
        ModelFallbackMiddleware,
        ModelRetryMiddleware,
        ToolRetryMiddleware,
    )

_LAZY = {
    "compile_middleware": "middleware_compile",
    **dict.fromkeys(("ModelCallCacheMiddleware", "ModelFallbackMiddleware",
                     "ModelRetryMiddleware", "ToolRetryMiddleware"), "middleware_library"),
}


def __getattr__(name: str) -> Any:
    # Re-exported lazily: those modules import this one.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"threadloom.agent.{module}"), name)


__all__ = [
    "JUMP_TARGETS", "NODE_HOOKS", "AgentMiddleware", "MiddlewareJumpError",
    "MiddlewareRuntime", "ModelCallCacheMiddleware", "ModelFallbackMiddleware",
    "ModelRetryMiddleware", "StateView", "ToolRetryMiddleware", "after_agent", "after_model",
    "before_agent", "before_model", "compile_middleware", "hook_config", "wrap_model_call",
    "wrap_tool_call",
]
