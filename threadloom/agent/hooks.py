"""Agent hook points, the ``@hook`` marker, and running hooks in order.

Hooks follow Haystack's agent hook points: each is ``fn(state)`` or ``fn(state,
context)``, sync or async, and reads/writes the live ``State``. ``context`` is the run's
``hook_context`` (request-scoped objects the caller passed).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, TypeVar, overload

from threadloom.agent.state import State

HOOK_POINTS = (
    "before_run", "before_llm", "after_llm", "before_tool", "after_tool", "on_exit", "after_run",
)
"""Where hooks run, in the order of one agent run (``before_llm``..``after_tool`` repeat)."""

HOOK_ATTR = "__threadloom_hook__"
"""Attribute ``@hook`` sets on a function: its hook point, or None."""

F = TypeVar("F", bound=Callable[..., Any])


def _check_point(point: Any) -> str:
    if point not in HOOK_POINTS:
        raise ValueError(f"unknown hook point {point!r}; valid points: {', '.join(HOOK_POINTS)}")
    return point


@overload
def hook(fn: F, /) -> F: ...
@overload
def hook(point: str | None = None, /) -> Callable[[F], F]: ...


def hook(arg: Any = None, /) -> Any:
    """Mark a function as an agent hook, optionally for one hook point.

    Usable bare (``@hook``; the point then comes from the ``hooks={point: [...]}`` key)
    or with a point (``@hook("before_llm")``; such hooks may be passed as a plain list).
    The function is returned unchanged apart from the mark.

    Args:
        arg: the function, or a hook point name (see ``HOOK_POINTS``).

    Raises:
        ValueError: an unknown hook point.
    """
    if callable(arg):
        setattr(arg, HOOK_ATTR, getattr(arg, HOOK_ATTR, None))
        return arg
    point = None if arg is None else _check_point(arg)

    def mark(fn: F) -> F:
        setattr(fn, HOOK_ATTR, point)
        return fn

    return mark


def normalize_hooks(hooks: Any) -> dict[str, list[Callable[..., Any]]]:
    """Turn the ``hooks=`` argument into ``{point: [fn, ...]}`` for every point.

    Args:
        hooks: None; a dict ``{point: fn | [fn, ...]}``; or a list of functions marked
            with ``@hook("point")``. List order is kept (hooks run in that order).

    Returns:
        A dict with every name of ``HOOK_POINTS`` as a key (empty lists where none).

    Raises:
        ValueError: an unknown point (the message lists the valid ones), an unmarked
            function in a list, or a function whose ``@hook`` point differs from its key.
        TypeError: a hook that is not callable.
    """
    result: dict[str, list[Callable[..., Any]]] = {point: [] for point in HOOK_POINTS}
    if hooks is None:
        return result
    if isinstance(hooks, Mapping):
        for point, fns in hooks.items():
            _check_point(point)
            for fn in [fns] if callable(fns) else list(fns):
                result[point].append(_checked(fn, point))
        return result
    for fn in _iter_hooks(hooks):
        point = getattr(fn, HOOK_ATTR, None)
        if point is None:
            raise ValueError(
                f"hook {_name(fn)} has no hook point: mark it @hook('<point>') or pass "
                f"hooks={{point: [...]}}; valid points: {', '.join(HOOK_POINTS)}")
        result[point].append(_checked(fn, point))
    return result


def _iter_hooks(hooks: Any) -> Iterable[Any]:
    if callable(hooks):
        return [hooks]
    if isinstance(hooks, str | bytes) or not isinstance(hooks, Iterable):
        raise TypeError(f"hooks must be a dict or a list of @hook functions, got {hooks!r}")
    return hooks


class ObjectHook:
    """A Haystack-style hook object (``run(state)``, optionally ``run_async``,
    ``allowed_hook_points``, ``warm_up``/``close``) as a hook function; the object is
    kept as ``hook_object`` for the agent's lifecycle methods."""

    def __init__(self, obj: Any) -> None:
        self.hook_object = obj
        self.__qualname__ = type(obj).__qualname__

    def __call__(self, state: State) -> Any:
        runner = getattr(self.hook_object, "run_async", None)
        if not callable(runner):
            runner = self.hook_object.run
        return runner(state)


def _checked(fn: Any, point: str) -> Callable[..., Any]:
    if not callable(fn) and callable(getattr(fn, "run", None)):
        allowed = getattr(fn, "allowed_hook_points", None)
        if allowed is not None and point not in allowed:
            raise ValueError(f"hook {type(fn).__name__} may run only at {tuple(allowed)}, "
                             f"not at {point!r}")
        return ObjectHook(fn)
    if not callable(fn):
        raise TypeError(f"hook for {point!r} must be a function, or an object that must "
                        f"have a callable 'run' method; got {fn!r}")
    marked = getattr(fn, HOOK_ATTR, None)
    if marked is not None and marked != point:
        raise ValueError(f"hook {_name(fn)} is marked @hook({marked!r}) but given for {point!r}")
    return fn


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _takes_context(fn: Callable[..., Any]) -> bool:
    try:
        return _takes_context_cached(fn)
    except TypeError:  # an unhashable callable object
        return _inspect_takes_context(fn)


def _inspect_takes_context(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


_takes_context_cached = lru_cache(maxsize=4096)(_inspect_takes_context)


async def run_hooks(
    point: str, fns: Iterable[Callable[..., Any]], state: State, context: Any = None
) -> None:
    """Run ``fns`` in order on ``state``, awaiting async ones.

    A hook taking two positional parameters gets ``(state, context)``, else ``(state)``.
    A hook may also return a dict of updates, applied with ``state.set`` key by key.
    Sync hooks run on the event loop thread: keep them short.

    Args:
        point: the hook point (used in error messages).
        fns: hooks, as ``normalize_hooks(...)[point]``.
        state: the live state.
        context: the run's ``hook_context``.

    Raises:
        TypeError: a hook returned something other than None or a dict.
        Whatever a hook raises, with a note naming the hook and the point.
    """
    for fn in fns:
        try:
            result = fn(state, context) if _takes_context(fn) else fn(state)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            exc.add_note(f"in {point} hook {_name(fn)}")
            raise
        if isinstance(result, Mapping):
            for key, value in result.items():
                state.set(key, value)
        elif result is not None:
            raise TypeError(
                f"{point} hook {_name(fn)} returned {type(result).__name__}; "
                "return None or a dict of state updates")


__all__ = ["HOOK_ATTR", "HOOK_POINTS", "hook", "normalize_hooks", "run_hooks"]
