"""The graph builder: ``StateGraph`` with nodes, edges, conditional edges, ``compile()``.

Definition time only: nothing here runs a graph, and the scheduler is imported by
``compile()`` alone. The API mirrors LangGraph's ``StateGraph`` so its users' habits carry
over (``add_node``, ``add_edge``, ``add_conditional_edges``, ``add_sequence``, ``START``,
``END``).
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadloom.engine.schema import (
    ChannelSpec,
    channel_specs,
    hinted_input_schema,
    merge_specs,
    schema_keys,
    state_builder,
)
from threadloom.errors import GraphBuildError
from threadloom.types import END, RESERVED_NAMES, START, Durability, RetryPolicy

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.compiled import CompiledGraph


@dataclass(slots=True)
class NodeSpec:
    """A node as the scheduler sees it.

    Attributes:
        name: unique node name.
        fn: the callable (sync or async), or a compiled graph for a subgraph.
        is_async: ``fn`` must be awaited.
        wants_config / wants_runtime / wants_writer: extra keyword arguments ``fn`` takes.
        retry: the node's retry policy, if any.
        input_keys: the keys the node reads (None: the whole state).
        build_input: turns a dict of values into the object the node receives.
        subgraph: the compiled graph when the node is one.
        destinations: where a ``Command``-returning node may route (for checks/drawing).
    """

    name: str
    fn: Any
    is_async: bool
    wants_config: bool = False
    wants_runtime: bool = False
    wants_writer: bool = False
    retry: RetryPolicy | None = None
    input_keys: tuple[str, ...] | None = None
    build_input: Callable[[dict[str, Any]], Any] | None = None
    subgraph: CompiledGraph | None = None
    destinations: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Branch:
    """A conditional edge: ``path(state)`` picks the next node(s).

    Attributes:
        source: the node after which the branch is evaluated.
        path: ``state -> name | list[name | Send] | Send | END`` (sync or async).
        path_map: maps the path's return values to node names; None: names as returned.
        is_async: ``path`` must be awaited.
    """

    source: str
    path: Callable[..., Any]
    path_map: Mapping[Hashable, str] | None
    is_async: bool


def _is_async_callable(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _command_destinations(fn: Any) -> tuple[str, ...]:
    """Node names read from a ``-> Command[Literal["a", "b"]]`` return annotation."""
    try:
        hint = typing.get_type_hints(fn).get("return")
    except Exception:
        return ()
    found: list[str] = []

    def walk(tp: Any) -> None:
        if typing.get_origin(tp) is typing.Literal:
            found.extend(a for a in typing.get_args(tp) if isinstance(a, str))
        for arg in typing.get_args(tp):
            walk(arg)

    if hint is not None and "Command" in getattr(hint, "__qualname__", repr(hint)):
        walk(hint)
    return tuple(found)


def _param_names(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


class StateGraph:
    """Builds a graph of nodes over a typed state, as LangGraph's ``StateGraph``.

    Args:
        state_schema: a TypedDict, dataclass or pydantic model; each field is a channel
            (``Annotated[T, reducer]`` for reduced ones).
        context_schema: the type of the ``context=`` object runs receive (documentation only).
        input_schema: narrows which keys ``invoke`` accepts (others are ignored).
        output_schema: narrows which keys a run returns.

    Raises:
        GraphBuildError: for an unsupported schema.
    """

    def __init__(
        self,
        state_schema: Any,
        context_schema: Any = None,
        *,
        input_schema: Any = None,
        output_schema: Any = None,
    ) -> None:
        # Schemas defined inside a function may name local reducers in string annotations.
        caller = sys._getframe(1)  # noqa: SLF001
        self._localns = {**caller.f_globals, **caller.f_locals}
        self.state_schema = state_schema
        self.context_schema = context_schema
        self.input_schema = input_schema or state_schema
        self.output_schema = output_schema or state_schema
        self.specs: dict[str, ChannelSpec] = merge_specs(
            channel_specs(state_schema, self._localns),
            channel_specs(self.input_schema, self._localns),
            channel_specs(self.output_schema, self._localns),
        )
        self.nodes: dict[str, NodeSpec] = {}
        self.edges: dict[tuple[str, str], None] = {}  # insertion-ordered set
        self.joins: dict[str, set[tuple[str, ...]]] = {}
        self.branches: dict[str, list[Branch]] = {}
        self.compiled = False

    # -- nodes ------------------------------------------------------------------------------

    def add_node(
        self,
        node: str | Callable[..., Any],
        action: Callable[..., Any] | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        input_schema: Any = None,
        destinations: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> StateGraph:
        """Add a node: a function, an async function, a callable object or a compiled graph.

        Args:
            node: the node's name, or the callable itself (named after ``__name__``).
            action: the callable when ``node`` is a name. It takes the state (or a
                ``Send`` argument) and optionally ``config``, ``runtime`` or ``writer``
                keyword parameters; it returns a partial update dict, a ``Command`` or None.
            retry_policy: how to retry the node when it raises.
            input_schema: a schema narrowing the keys the node receives (its extra keys
                become private channels).
            destinations: the nodes a ``Command``-returning node may go to (drawing and
                reachability checks).
            metadata: free-form data kept with the node.

        Raises:
            GraphBuildError: for a duplicate, reserved or state-key name.
        """
        if action is None:
            if isinstance(node, str):
                raise GraphBuildError(f"add_node({node!r}) needs a callable as its second argument")
            action = node
            node = getattr(action, "name", None) or getattr(action, "__name__", None) or ""
            if not isinstance(node, str) or not node or node == "<lambda>":
                raise GraphBuildError(f"cannot name the node {action!r}: pass add_node('name', fn)")
        name = node
        if not isinstance(name, str):
            raise GraphBuildError(f"node name must be a string, got {type(name).__name__}")
        self._check_name(name)
        spec = self._node_spec(name, action, retry_policy, input_schema, destinations, metadata)
        self.nodes[name] = spec
        return self

    def _check_name(self, name: str) -> None:
        if self.compiled:
            raise GraphBuildError(f"cannot add node {name!r}: the graph is already compiled")
        if name in RESERVED_NAMES:
            raise GraphBuildError(f"node name {name!r} is reserved")
        if any(ch in name for ch in "|:") or not name.strip():
            raise GraphBuildError(f"node name {name!r} may not be blank or contain '|' or ':'")
        if name in self.nodes:
            raise GraphBuildError(f"node {name!r} is already in the graph")
        if name in self.specs:
            raise GraphBuildError(
                f"node name {name!r} is already used as a state key; rename the node"
            )

    def _node_spec(
        self,
        name: str,
        action: Any,
        retry: RetryPolicy | None,
        input_schema: Any,
        destinations: Sequence[str] | None,
        metadata: Mapping[str, Any] | None,
    ) -> NodeSpec:
        subgraph = action if getattr(action, "_is_compiled_graph", False) else None
        input_keys = build = None
        input_schema = input_schema or hinted_input_schema(action, self.state_schema, subgraph)
        if input_schema is not None:
            extra = channel_specs(input_schema, self._localns)
            for key, ch in extra.items():
                self.specs.setdefault(key, ch)
            input_keys = schema_keys(input_schema)
            build = state_builder(input_schema)
        if subgraph is not None:
            return NodeSpec(
                name,
                action,
                True,
                retry=retry,
                subgraph=subgraph,
                destinations=tuple(destinations or ()),
                metadata=dict(metadata or {}),
            )
        if not callable(action):
            raise GraphBuildError(f"node {name!r}: {action!r} is not callable")
        params = _param_names(action)
        destinations = tuple(destinations or ()) or _command_destinations(action)
        return NodeSpec(
            name,
            action,
            _is_async_callable(action),
            wants_config="config" in params,
            wants_runtime="runtime" in params,
            wants_writer="writer" in params,
            retry=retry,
            input_keys=input_keys,
            build_input=build,
            destinations=destinations,
            metadata=dict(metadata or {}),
        )

    def add_sequence(
        self, nodes: Sequence[Callable[..., Any] | tuple[str, Callable[..., Any]]]
    ) -> StateGraph:
        """Add nodes joined one after the other by edges (as LangGraph's ``add_sequence``).

        Args:
            nodes: callables (named after ``__name__``) or ``(name, callable)`` pairs.

        Raises:
            GraphBuildError: when the sequence is empty or a name is taken.
        """
        if not nodes:
            raise GraphBuildError("add_sequence needs at least one node")
        previous: str | None = None
        for item in nodes:
            if isinstance(item, tuple):
                name, fn = item
                self.add_node(name, fn)
            else:
                self.add_node(item)
                name = list(self.nodes)[-1]
            if previous is not None:
                self.add_edge(previous, name)
            previous = name
        return self

    # -- edges ------------------------------------------------------------------------------

    def add_edge(self, start: str | Sequence[str], end: str) -> StateGraph:
        """Add an edge; ``add_edge([a, b], c)`` makes ``c`` wait until both finished.

        Raises:
            GraphBuildError: for ``END`` as a start or ``START`` as an end.
        """
        if self.compiled:
            raise GraphBuildError("cannot add an edge: the graph is already compiled")
        if isinstance(start, str):
            if start == END:
                raise GraphBuildError("END cannot be the start of an edge")
            if end == START:
                raise GraphBuildError("START cannot be the end of an edge")
            self.edges[(start, end)] = None
            return self
        sources = tuple(start)
        if not sources:
            raise GraphBuildError(f"add_edge([...], {end!r}) needs at least one start node")
        if len(sources) == 1:
            return self.add_edge(sources[0], end)
        if END in sources or end == START:
            raise GraphBuildError("a join edge cannot start at END or end at START")
        self.joins.setdefault(end, set()).add(tuple(sorted(set(sources))))
        return self

    def add_conditional_edges(
        self,
        source: str,
        path: Callable[..., Any],
        path_map: Mapping[Hashable, str] | Sequence[str] | None = None,
    ) -> StateGraph:
        """Route after ``source`` by calling ``path(state)``.

        Args:
            source: the node after which to route (or ``START``).
            path: returns a node name, a list of names, ``Send`` packets, or ``END``.
            path_map: maps what ``path`` returns to node names (a list maps names to
                themselves). Without it, ``path``'s return values are node names.

        Raises:
            GraphBuildError: when ``source`` is ``END``.
        """
        if source == END:
            raise GraphBuildError("END cannot be the source of a conditional edge")
        if path_map is not None and not isinstance(path_map, Mapping):
            path_map = {name: name for name in path_map}
        branch = Branch(source, path, path_map, _is_async_callable(path))
        self.branches.setdefault(source, []).append(branch)
        return self

    def set_entry_point(self, node: str) -> StateGraph:
        """Same as ``add_edge(START, node)``."""
        return self.add_edge(START, node)

    def set_finish_point(self, node: str) -> StateGraph:
        """Same as ``add_edge(node, END)``."""
        return self.add_edge(node, END)

    # -- compile ----------------------------------------------------------------------------

    def compile(
        self,
        checkpointer: BaseCheckpointer | None = None,
        *,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        durability: Durability = "sync",
        name: str | None = None,
        busy_timeout: float = 0.0,
    ) -> CompiledGraph:
        """Check the graph and return a runnable ``CompiledGraph``.

        Args:
            checkpointer: where to save a checkpoint per super-step (per ``thread_id``).
            interrupt_before: nodes (or ``"*"``) to pause before.
            interrupt_after: nodes (or ``"*"``) to pause after.
            durability: ``"sync"`` (default: each checkpoint is written before the next
                step starts), ``"async"`` (written while the next step runs; a crash may
                lose the last step) or ``"exit"`` (written only when the run ends, pauses
                or fails; a crash loses the whole run).
            name: the graph's name (used in drawings and traces).
            busy_timeout: seconds a run waits for a thread that another run (here or in
                another process) holds; 0 (default) raises ``ThreadBusyError`` at once.

        Raises:
            GraphValidationError: for edges to unknown nodes, nodes unreachable from
                ``START``, nodes from which ``END`` cannot be reached, and the like.
        """
        from threadloom.engine.analysis import validate
        from threadloom.engine.compiled import CompiledGraph

        before = _node_list(interrupt_before, self.nodes)
        after = _node_list(interrupt_after, self.nodes)
        validate(self, before + after)
        self.compiled = True
        return CompiledGraph(
            self,
            checkpointer=checkpointer,
            interrupt_before=frozenset(before),
            interrupt_after=frozenset(after),
            durability=durability,
            name=name or "graph",
            busy_timeout=busy_timeout,
        )


def _node_list(value: Sequence[str] | str | None, nodes: Mapping[str, Any]) -> list[str]:
    if value is None:
        return []
    if value == "*":
        return list(nodes)
    if isinstance(value, str):
        return [value]
    return list(value)
