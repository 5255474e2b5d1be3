"""A node and a branch as the builder records them (``NodeSpec``, ``Branch``), and what
``StateGraph.add_node`` reads off a node's callable: its name, whether it is async, which
keyword arguments it takes, where its ``Command`` may route, and its retry policies.
Definition time only, as ``graph``.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadloom.errors import GraphBuildError
from threadloom.types import RetryPolicy

if TYPE_CHECKING:
    from threadloom.engine.compiled import CompiledGraph


@dataclass(slots=True)
class NodeSpec:
    """A node as the scheduler sees it.

    Attributes:
        name: unique node name.
        fn: the callable (sync or async), or a compiled graph for a subgraph.
        is_async: ``fn`` must be awaited.
        wants_config / wants_runtime / wants_writer: extra keyword arguments ``fn`` takes.
        retry: the node's retry policies, if any (the first that matches an error applies).
        input_keys: the keys the node reads (None: the whole state).
        build_input: turns a dict of values into the object the node receives.
        subgraph: the compiled graph when the node is one.
        destinations: where a ``Command``-returning node may route (for drawings and the
            unknown-node check; never required).
        destination_labels: edge labels of the destinations, when given as a dict.
        defer: the node runs only once nothing else is left to run (LangGraph's ``defer``).
        error_handler: the name of the node that handles this node's errors, if any.
        is_error_handler: this node is another node's error handler.
        wants_error: ``fn`` takes an ``error`` keyword (a ``NodeError``; handlers).
    """

    name: str
    fn: Any
    is_async: bool
    wants_config: bool = False
    wants_runtime: bool = False
    wants_writer: bool = False
    retry: tuple[RetryPolicy, ...] | None = None
    input_keys: tuple[str, ...] | None = None
    build_input: Callable[[dict[str, Any]], Any] | None = None
    subgraph: CompiledGraph | None = None
    destinations: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    destination_labels: Mapping[str, str] | None = None
    defer: bool = False
    error_handler: str | None = None
    is_error_handler: bool = False
    wants_error: bool = False

    def copy(self, update: Mapping[str, Any] | None = None) -> NodeSpec:
        """A copy with the fields in ``update`` replaced (LangGraph's ``PregelNode.copy``)."""
        return dataclasses.replace(self, **dict(update or {}))

    @property
    def runnable(self) -> NodeRunnable:
        """The node's callable as LangGraph's ``StateNodeSpec.runnable`` shows it (code
        reaches the function through ``builder.nodes[name].runnable.func``): ``func`` the
        sync callable (None for an async one), ``afunc`` the async one (None for sync)."""
        fn = self.fn
        return NodeRunnable(None, fn) if self.is_async else NodeRunnable(fn, None)


class NodeRunnable(typing.NamedTuple):
    """``NodeSpec.runnable``: LangGraph's ``RunnableCallable`` fields that name the
    node's function."""

    func: Any
    afunc: Any


@dataclass(frozen=True, slots=True)
class Branch:
    """A conditional edge: ``path(state)`` picks the next node(s).

    Attributes:
        source: the node after which the branch is evaluated.
        path: ``state -> name | list[name | Send] | Send | END`` (sync or async).
        path_map: maps the path's return values to node names; None: names as returned.
        is_async: ``path`` must be awaited.
        schema: the schema ``path``'s first parameter is annotated with, or None.
        input_keys: the keys ``path`` reads (None: the whole state; ``readers``).
        build_input: turns those values into what ``path`` receives.
    """

    source: str
    path: Callable[..., Any]
    path_map: Mapping[Hashable, str] | None
    is_async: bool
    schema: Any = None
    input_keys: tuple[str, ...] | None = None
    build_input: Callable[[dict[str, Any]], Any] | None = None


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


def node_callable(action: Any) -> Any:
    """What the engine runs for ``action``: an object whose class has ``as_graph_node()``
    (a ``Tool``, run as LangGraph runs a tool node: ``tool.invoke(state, config)``) gives
    its node function; anything else runs as it is."""
    adapt = getattr(type(action), "as_graph_node", None)
    return action.as_graph_node() if adapt is not None else action


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


DEFAULT_ERROR_HANDLER = "__default_error_handler__"
"""The node ``set_node_defaults(error_handler=...)`` adds (LangGraph's name for it)."""


def apply_node_defaults(
    nodes: dict[str, Any],
    retry: tuple[RetryPolicy, ...] | None,
    handler: NodeSpec | None = None,
) -> None:
    """Give ``retry`` to every node spec without a retry policy of its own, and make
    ``handler`` (node ``__default_error_handler__``) the error handler of every node
    without one that is no handler itself (as LangGraph applies ``set_node_defaults``
    when it compiles).

    Raises:
        GraphBuildError: a node of the graph is already named ``__default_error_handler__``.
    """
    if handler is not None:
        taken = nodes.get(DEFAULT_ERROR_HANDLER)
        if taken is not None and not taken.is_error_handler:
            raise GraphBuildError(
                f"set_node_defaults(error_handler=...) adds the node {DEFAULT_ERROR_HANDLER!r}, "
                "but the graph already has a node of that name"
            )
        nodes[DEFAULT_ERROR_HANDLER] = handler
        for spec in nodes.values():
            if spec.error_handler is None and not spec.is_error_handler:
                spec.error_handler = DEFAULT_ERROR_HANDLER
    if retry is None:
        return
    for spec in nodes.values():
        if spec.retry is None:
            spec.retry = retry


def node_list(value: Sequence[str] | str | None, nodes: Mapping[str, Any]) -> list[str]:
    """``interrupt_before``/``interrupt_after`` as a list of names (``"*"``: every node)."""
    if value is None:
        return []
    if value == "*":
        return list(nodes)
    if isinstance(value, str):
        return [value]
    return list(value)
