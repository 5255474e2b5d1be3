"""The graph builder: ``StateGraph`` with nodes, edges, conditional edges, ``compile()``.

Definition time only: nothing here runs a graph, and the scheduler is imported by
``compile()`` alone. The API mirrors LangGraph's ``StateGraph`` so its users' habits carry
over (``add_node``, ``add_edge``, ``add_conditional_edges``, ``add_sequence``, ``START``,
``END``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadloom.engine.managed import managed_keys
from threadloom.engine.node_info import (  # NodeSpec, Branch: imported from here too
    DEFAULT_ERROR_HANDLER,
    Branch,
    NodeSpec,
    apply_node_defaults,
    command_destinations,
    is_async_callable,
    node_callable,
    node_list,
    node_name,
    param_names,
    retry_policies,
    split_destinations,
)
from threadloom.engine.schema import (
    ChannelSpec,
    channel_specs,
    hinted_input_schema,
    schema_keys,
    state_builder,
)
from threadloom.errors import GraphBuildError
from threadloom.types import END, RESERVED_NAMES, START, Durability, RetryPolicy

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.compiled import CompiledGraph

_log = logging.getLogger(__name__)


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
        self.specs: dict[str, ChannelSpec] = {}
        self.managed: dict[str, Any] = {}  # key -> manager (RemainingSteps, IsLastStep)
        for schema in (state_schema, self.input_schema, self.output_schema):
            self._add_schema(schema)
        self.nodes: dict[str, NodeSpec] = {}
        self.edges: dict[tuple[str, str], None] = {}  # insertion-ordered set
        self.joins: dict[str, set[tuple[str, ...]]] = {}
        self.branches: dict[str, list[Branch]] = {}
        self.compiled = False
        self._default_retry: tuple[RetryPolicy, ...] | None = None
        self._default_handler: Callable[..., Any] | None = None

    def _add_schema(self, schema: Any) -> None:
        """Add a schema's keys: channels (the first schema naming a key wins), managed."""
        for key, ch in channel_specs(schema, self._localns).items():
            self.specs.setdefault(key, ch)
        self.managed.update(managed_keys(schema, self._localns))

    # -- nodes ------------------------------------------------------------------------------

    def add_node(
        self,
        node: str | Callable[..., Any],
        action: Callable[..., Any] | None = None,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        input_schema: Any = None,
        destinations: Mapping[str, str] | Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        defer: bool = False,
        error_handler: Callable[..., Any] | None = None,
    ) -> StateGraph:
        """Add a node: a function, an async function, a callable object or a compiled graph.

        Args:
            node: the node's name, or the callable itself (named, as in LangGraph, after
                its ``name`` or ``__name__``, or a callable object's class).
            action: the callable when ``node`` is a name. It takes the state (or a
                ``Send`` argument) and optionally ``config``, ``runtime`` or ``writer``
                keyword parameters; it returns a partial update dict, a ``Command`` or None.
            retry_policy: how to retry the node when it raises: a ``RetryPolicy`` or a
                sequence of them (the first whose ``retry_on`` matches applies).
            input_schema: a schema narrowing the keys the node receives (its extra keys
                become private channels).
            destinations: the nodes a ``Command``-returning node may go to, a tuple or
                a dict ``{node: edge label}``; for drawings only (read from a
                ``-> Command[Literal[...]]`` annotation when not given), never required.
            metadata: free-form data kept with the node.
            defer: run the node only once nothing else is left to run (its triggers wait
                until then), as LangGraph's ``defer=True``.
            error_handler: a node function called, in the same super-step, when this node
                raises (after its retries): it gets the node's input and, if it takes an
                ``error`` parameter, a ``NodeError``; its update and ``Command`` replace
                the node's (whose own edges are not followed). It runs as node
                ``__error_handler__<name>``, as in LangGraph.

        Raises:
            GraphBuildError: for a duplicate or reserved name. A node may share its
                name with a state key, as in LangGraph.
        """
        if action is None:
            if isinstance(node, str):
                raise GraphBuildError(f"add_node({node!r}) needs a callable as its second argument")
            action = node
            node = node_name(action) or ""
            if not node:
                raise GraphBuildError(f"cannot name the node {action!r}: pass add_node('name', fn)")
        name = node
        if not isinstance(name, str):
            raise GraphBuildError(f"node name must be a string, got {type(name).__name__}")
        self._check_name(name)
        spec = self._node_spec(name, action, retry_policy, input_schema, destinations, metadata)
        spec.defer = defer
        if error_handler is not None:
            handler = f"__error_handler__{name}"
            self._check_name(handler)
            self.nodes[handler] = self._handler_spec(handler, error_handler, input_schema)
            spec.error_handler = handler
        self.nodes[name] = spec
        return self

    def _handler_spec(self, name: str, fn: Callable[..., Any], input_schema: Any) -> NodeSpec:
        """The node spec of an error handler (``add_node``/``set_node_defaults``)."""
        spec = self._node_spec(name, fn, None, input_schema, None, None)
        spec.is_error_handler = True
        spec.wants_error = "error" in param_names(fn)
        return spec

    def _check_name(self, name: str) -> None:
        if self.compiled:
            _log.warning("node %r added to a graph already compiled: graphs compiled "
                         "before do not have it (as LangGraph warns)", name)
        if name in RESERVED_NAMES:
            raise GraphBuildError(f"node name {name!r} is reserved")
        if any(ch in name for ch in "|:"):  # namespace separators (LangGraph refuses too)
            raise GraphBuildError(f"node name {name!r} may not contain '|' or ':'")
        if name in self.nodes:
            raise GraphBuildError(f"node {name!r} is already in the graph")

    def _node_spec(
        self,
        name: str,
        action: Any,
        retry: RetryPolicy | Sequence[RetryPolicy] | None,
        input_schema: Any,
        destinations: Mapping[str, str] | Sequence[str] | None,
        metadata: Mapping[str, Any] | None,
    ) -> NodeSpec:
        subgraph = action if getattr(action, "_is_compiled_graph", False) else None
        policies = retry_policies(name, retry)
        ends, labels = split_destinations(destinations)
        if destinations is None and subgraph is None:
            ends = command_destinations(action)
        input_keys = build = None
        input_schema = input_schema or hinted_input_schema(action, self.state_schema, subgraph)
        if input_schema is not None:
            self._add_schema(input_schema)
            input_keys = schema_keys(input_schema)
            build = state_builder(input_schema)
        if subgraph is not None:
            return NodeSpec(
                name,
                action,
                True,
                retry=policies,
                subgraph=subgraph,
                destinations=ends,
                metadata=dict(metadata or {}),
                destination_labels=labels,
            )
        if not callable(action):
            raise GraphBuildError(f"node {name!r}: {action!r} is not callable")
        action = node_callable(action)
        params = param_names(action)
        return NodeSpec(
            name,
            action,
            is_async_callable(action),
            wants_config="config" in params,
            wants_runtime="runtime" in params,
            wants_writer="writer" in params,
            retry=policies,
            input_keys=input_keys,
            build_input=build,
            destinations=ends,
            metadata=dict(metadata or {}),
            destination_labels=labels,
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
            self.add_node(*item) if isinstance(item, tuple) else self.add_node(item)
            name = list(self.nodes)[-1]
            if previous is not None:
                self.add_edge(previous, name)
            previous = name
        return self

    def set_node_defaults(
        self,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        error_handler: Callable[..., Any] | None = None,
        **other: Any,
    ) -> StateGraph:
        """Set the retry policy and the error handler of every node that has none of its
        own, applied at ``compile()`` (as LangGraph's ``set_node_defaults``; chainable).
        The error handler runs as node ``__default_error_handler__`` and never handles
        another handler's errors.

        Raises:
            GraphBuildError: for a default threadloom does not have (``cache_policy``,
                ``timeout``).
        """
        if other:
            raise GraphBuildError(f"set_node_defaults: threadloom has no {sorted(other)}")
        if retry_policy is not None:
            self._default_retry = retry_policies("(default)", retry_policy)
        if error_handler is not None:
            self._default_handler = error_handler
        return self

    # -- edges ------------------------------------------------------------------------------

    def add_edge(self, start: str | Sequence[str], end: str) -> StateGraph:
        """Add an edge; ``add_edge([a, b], c)`` makes ``c`` wait until both finished.

        Raises:
            GraphBuildError: for ``END`` as a start or ``START`` as an end.
        """
        if self.compiled:
            _log.warning("edge added to a graph already compiled: graphs compiled before "
                         "do not have it (as LangGraph warns)")
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
        schema = hinted_input_schema(path, None)  # the state schema counts too
        if schema is not None:
            self._add_schema(schema)
        branch = Branch(source, path, path_map, is_async_callable(path), schema)
        self.branches.setdefault(source, []).append(branch)
        return self

    def set_entry_point(self, node: str) -> StateGraph:
        """Same as ``add_edge(START, node)``."""
        return self.add_edge(START, node)

    def set_conditional_entry_point(
        self,
        path: Callable[..., Any],
        path_map: Mapping[Hashable, str] | Sequence[str] | None = None,
    ) -> StateGraph:
        """Same as ``add_conditional_edges(START, path, path_map)`` (as LangGraph's)."""
        return self.add_conditional_edges(START, path, path_map)

    def set_finish_point(self, node: str) -> StateGraph:
        """Same as ``add_edge(node, END)``."""
        return self.add_edge(node, END)

    # -- compile ----------------------------------------------------------------------------

    def compile(
        self,
        checkpointer: BaseCheckpointer | bool | None = None,
        *,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        durability: Durability = "sync",
        name: str | None = None,
        busy_timeout: float = 0.0,
    ) -> CompiledGraph:
        """Check the graph and return a runnable ``CompiledGraph``.

        Args:
            checkpointer: where to save a checkpoint per super-step (per ``thread_id``);
                for a subgraph also ``True``/``False``, as in LangGraph (subgraph.py).
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
            GraphValidationError: for an edge, path-map target, destination or interrupt
                naming an unknown node, or no edge from ``START`` (what LangGraph refuses).
                A node no static edge reaches, or a cycle with no static way out, is not
                refused: the first may be reached by ``Command``/``Send``, the second
                raises ``GraphRecursionError`` when it runs, as in LangGraph.
            TypeError: ``checkpointer`` is not a checkpointer.
            ValueError: ``durability`` none of ``"sync"``, ``"async"``, ``"exit"``.
        """
        from threadloom.engine.analysis import validate, validate_checkpointer
        from threadloom.engine.compiled import CompiledGraph
        from threadloom.engine.run_config import check_durability

        validate_checkpointer(checkpointer)
        check_durability(durability, "compile")

        before = node_list(interrupt_before, self.nodes)
        after = node_list(interrupt_after, self.nodes)
        handler = self._default_handler
        apply_node_defaults(self.nodes, self._default_retry, None if handler is None else
                            self._handler_spec(DEFAULT_ERROR_HANDLER, handler, None))
        validate(self, before + after)
        self.compiled = True
        return CompiledGraph(
            self, checkpointer=checkpointer, interrupt_before=frozenset(before),
            interrupt_after=frozenset(after), durability=durability, name=name or "graph",
            busy_timeout=busy_timeout)

