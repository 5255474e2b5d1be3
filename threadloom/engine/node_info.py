"""What ``StateGraph.add_node`` reads off a node's callable: its name, whether it is
async, which keyword arguments it takes, where its ``Command`` may route, and its retry
policies. Definition time only, as ``graph``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from threadloom.errors import GraphBuildError
from threadloom.types import RetryPolicy


def node_name(action: Any) -> str | None:
    """The name ``add_node(action)`` gives a node, as LangGraph: a ``name`` attribute
    (a compiled graph, a tool), else ``__name__`` (a function, ``"<lambda>"`` included),
    else the class name of a callable object. None when nothing names it."""
    name = getattr(action, "name", None)
    if isinstance(name, str) and name:
        return name
    name = getattr(action, "__name__", None)
    if isinstance(name, str) and name:
        return name
    return type(action).__name__ if callable(action) else None


def is_async_callable(fn: Any) -> bool:
    """``fn`` (a function or a callable object) must be awaited."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def param_names(fn: Any) -> set[str]:
    """The names of ``fn``'s parameters (empty when it has no inspectable signature)."""
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def command_destinations(fn: Any) -> tuple[str, ...]:
    """Node names read from a ``-> Command[Literal["a", "b"]]`` return annotation (also
    inside a union, and on a callable object's ``__call__``), as LangGraph reads them for
    drawings. Empty when there is none: destinations are never required."""
    hint = None
    for target in (fn, getattr(fn, "__call__", None)):  # noqa: B004
        try:
            hint = typing.get_type_hints(target).get("return")
        except Exception:  # noqa: S112 - an unresolvable annotation only loses a drawing
            continue
        if hint is not None:
            break
    found: list[str] = []

    def walk(tp: Any) -> None:
        if typing.get_origin(tp) is typing.Literal:
            found.extend(a for a in typing.get_args(tp) if isinstance(a, str))
        for arg in typing.get_args(tp):
            walk(arg)

    if hint is not None and "Command" in getattr(hint, "__qualname__", repr(hint)):
        walk(hint)
    return tuple(found)


def split_destinations(
    destinations: Mapping[str, str] | Sequence[str] | None,
) -> tuple[tuple[str, ...], dict[str, str] | None]:
    """``add_node(..., destinations=...)`` as names and edge labels: a tuple of names,
    or a dict ``{node: label}`` as LangGraph accepts."""
    if destinations is None:
        return (), None
    if isinstance(destinations, Mapping):
        return tuple(destinations), {str(k): str(v) for k, v in destinations.items()}
    if isinstance(destinations, str):
        return (destinations,), None
    return tuple(destinations), None


def retry_policies(
    name: str, retry: RetryPolicy | Sequence[RetryPolicy] | None
) -> tuple[RetryPolicy, ...] | None:
    """``add_node(..., retry_policy=...)`` as a tuple: one policy or a sequence of them
    (the first whose ``retry_on`` matches an error applies, as in LangGraph).

    Raises:
        GraphBuildError: an item is not a ``RetryPolicy``.
    """
    if retry is None:
        return None
    policies = (retry,) if isinstance(retry, RetryPolicy) else tuple(retry)
    for policy in policies:
        if not isinstance(policy, RetryPolicy):
            raise GraphBuildError(
                f"node {name!r}: retry_policy takes RetryPolicy objects, got {policy!r}"
            )
    return policies or None
