"""``CompiledGraph``: the runnable graph and its entry points.

One async core (``RunLoop.run``) serves every entry point: ``astream`` drives it with a
stream sink, ``ainvoke`` without one; the sync twins run the same coroutine on a private
event loop of the calling thread. When the caller's thread already runs an event loop
(Jupyter, an async web handler), the sync entry points run the graph on a worker thread
with its own loop instead, so they work there too (prefer ``ainvoke`` in async code).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from threadloom.engine.channels import MISSING
from threadloom.engine.drawing import DrawableGraph
from threadloom.engine.graph_api import GraphApi
from threadloom.engine.input_validation import input_validator
from threadloom.engine.lease import ThreadLease, _Claim
from threadloom.engine.lgdraw import lg_graph
from threadloom.engine.nested import nested_loop, run_nested, streamed_here
from threadloom.engine.readers import narrow_branches, narrow_nodes
from threadloom.engine.replay import root_config
from threadloom.engine.routing import edge_index
from threadloom.engine.run_config import check_durability, run_config
from threadloom.engine.runtime_info import RunControl, coerce_context
from threadloom.engine.scheduler import RunLoop
from threadloom.engine.schema import schema_kind, state_builder
from threadloom.engine.stream import StreamSink, normalize_modes, shape, values_of, with_interrupts
from threadloom.engine.sync import (
    _in_running_loop,
    iterate_on_private_loop,
    iterate_on_thread,
    run_sync,
)
from threadloom.engine.thread_state import ThreadState
from threadloom.types import Durability

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.graph import StateGraph

T = TypeVar("T")
class CompiledGraph(ThreadState, GraphApi):
    """A checked, runnable graph, as LangGraph's ``CompiledStateGraph``.

    Built by ``StateGraph.compile()``; see there for the arguments. It can itself be added
    as a node of another graph (a subgraph).
    """

    _is_compiled_graph = True

    def __init__(
        self,
        builder: StateGraph,
        *,
        checkpointer: BaseCheckpointer | bool | None,
        interrupt_before: frozenset[str],
        interrupt_after: frozenset[str],
        durability: Durability,
        name: str,
        busy_timeout: float = 0.0,
    ) -> None:
        self.builder = builder
        self.busy_timeout = busy_timeout
        self.name = name
        # True/False: how it persists as a subgraph (see StateGraph.compile)
        self.subgraph_persistence = checkpointer if isinstance(checkpointer, bool) else None
        self.checkpointer = None if isinstance(checkpointer, bool) else checkpointer
        self.interrupt_before = interrupt_before
        self.interrupt_after = interrupt_after
        self.durability = durability
        self.specs = dict(builder.specs)
        self.message_keys = frozenset(
            k
            for k, spec in self.specs.items()
            if getattr(spec.reducer, "__name__", "") == "add_messages"
        )
        self.ephemeral_keys = tuple(k for k, spec in self.specs.items() if spec.ephemeral)
        self.untracked_keys = frozenset(k for k, spec in self.specs.items() if spec.untracked)
        self.root_state = schema_kind(builder.state_schema) == "root"  # one value: __root__
        self.channels = {k: spec.make() for k, spec in self.specs.items()}
        self._initial = {
            k: spec.default
            for k, spec in self.specs.items()
            if spec.default is not MISSING and not spec.fresh_initial
        }
        self._fresh_initial = tuple(
            (k, spec) for k, spec in self.specs.items() if spec.fresh_initial
        )
        self.nodes = dict(builder.nodes)
        self.has_subgraphs = any(n.subgraph is not None for n in self.nodes.values())
        self.deferred = frozenset(name for name, n in self.nodes.items() if n.defer)
        self.branches = {k: list(v) for k, v in builder.branches.items()}
        self.build_state = state_builder(builder.state_schema)
        # nodes of a dict-like schema get a plain copy of the values (no builder call)
        self.dict_state = self.build_state is state_builder(dict)
        self.validate_input = input_validator(builder.state_schema, self.specs)
        self.input_keys = frozenset(_keys(builder.input_schema, self.specs))
        self.output_keys = tuple(_keys(builder.output_schema, self.specs))
        self.state_keys = tuple(_keys(builder.state_schema, self.specs))
        self.managed = tuple(builder.managed.items())  # engine.managed: filled per step
        self.nodes = narrow_nodes(self.nodes, self.state_keys, self.specs, self.build_state)
        self.branches = narrow_branches(self.branches, self.nodes, self.state_keys,
                                        self.specs, self.build_state)
        self.successors, self.join_index = edge_index(builder)
        self._register_types()

    def initial_values(self) -> dict[str, Any]:
        """The state a run starts with: every key that has a default (built anew if mutable)."""
        values = dict(self._initial)
        for key, spec in self._fresh_initial:
            values[key] = spec.initial_value()
        return values

    def _register_types(self) -> None:
        register = getattr(
            getattr(self.checkpointer, "codec", None), "register_from_annotation", None
        )
        if register is None:
            return
        for spec in self.specs.values():
            register(spec.annotation)

    # -- config ------------------------------------------------------------------------

    def _config(
        self,
        config: Mapping[str, Any] | None,
        thread_id: str | None,
        recursion_limit: int | None,
    ) -> dict[str, Any]:
        return run_config(self.bound_config, config, thread_id, recursion_limit,
                          self.checkpointer is not None)  # engine/run_config.py

    # -- entry points ------------------------------------------------------------------

    async def astream(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: str | Sequence[str] | None = None,
        subgraphs: bool = False,
        thread_id: str | None = None,
        recursion_limit: int | None = None,
        durability: Durability | None = None,
        context: Any = None,
        debug: bool | None = None,
        control: RunControl | None = None,
        _blocking_ok: bool = False,
        _batched: bool = False,
    ) -> AsyncGenerator[Any, None]:
        """Run the graph and yield events as they happen.

        Args:
            input: the input state (dict), ``None`` to continue a paused thread, or a
                ``Command(resume=...)``.
            config: ``{"configurable": {"thread_id": ..., "checkpoint_id": ...},
                "recursion_limit": 25, "tags": [...]}``.
            stream_mode: one mode or a list (then ``(mode, chunk)`` pairs are yielded);
                None (the default) is ``"updates"``, as for LangGraph's compiled graphs.
            subgraphs: yield ``(namespace, chunk)`` and include subgraphs' own steps.
            thread_id: shortcut for ``config["configurable"]["thread_id"]``.
            recursion_limit: shortcut for ``config["recursion_limit"]`` (default 10007,
                as LangGraph 1.2).
            durability: override the compiled durability for this run.
            context: any object; nodes see it as ``runtime.context``.
            debug: accepted as LangGraph's (which then prints each step); it changes
                nothing here: stream ``"debug"`` for the step events.
            control: a ``RunControl``; after ``request_drain()`` the run stops before its
                next super-step with ``GraphDrained`` (its checkpoint saved to continue).

        Raises:
            ValueError: ``thread_id`` and the config's ``thread_id`` are both given and
                differ, or ``durability`` is unknown (raised when the first event is asked
                for).
            TypeError: ``config`` (or its ``configurable``) not a dict, a
                ``recursion_limit`` that is no number.
            CheckpointError: a checkpointer and no thread id (or ``None``, ``""``).
            Whatever the run raises, after every event before it was yielded. Closing the
            iterator early cancels the running nodes; the thread stays resumable.
        """
        modes, single = normalize_modes("updates" if stream_mode is None else stream_mode)
        cfg = self._config(config, thread_id, recursion_limit)
        sink = StreamSink(modes, subgraphs)
        loop = self._loop(cfg, sink, frozenset(modes), durability, context, _blocking_ok)
        loop.control = control
        answers = None
        if self.checkpointer is None and (nest := nested_loop(self, cfg, not _blocking_ok)):
            loop, answers = streamed_here(nest, loop)  # streamed inside a node (nested.py)
        producer = asyncio.ensure_future(self._produce(loop, input, sink, answers))
        try:
            if _batched:  # the sync stream: every ready event per loop pass, as a list
                while (items := await sink.get_many()) is not None:
                    yield [shape(item, single, subgraphs) for item in items]
            else:
                while (item := await sink.get()) is not None:
                    yield shape(item, single, subgraphs)
            await producer
        finally:
            if not producer.done():
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)

    async def _produce(
        self, loop: RunLoop, input: Any, sink: StreamSink, answers: dict[str, Any] | None
    ) -> None:
        try:
            if answers is not None:  # nested in a running node: the caller holds the thread
                await run_nested(loop, answers, input)
            else:
                async with self._hold(loop):
                    await loop.run(input)
        except BaseException as exc:
            sink.close(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        sink.close()

    async def ainvoke(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        recursion_limit: int | None = None,
        durability: Durability | None = None,
        context: Any = None,
        stream_mode: str = "values",
        subgraphs: bool = False,
        debug: bool | None = None,
        control: RunControl | None = None,
        _blocking_ok: bool = False,
    ) -> dict[str, Any]:
        """Run the graph to its end (or a pause) and return the output state.

        Same arguments as ``astream``. A paused run's result holds ``"__interrupt__"``: a
        list of ``Interrupt(value, id)``. With ``subgraphs=True`` the run is streamed with
        its subgraphs, as LangGraph's ``invoke(..., subgraphs=True)``: another mode gives
        ``(namespace, chunk)`` pairs, ``"values"`` the last state streamed by any graph
        with the interrupts any graph reported (``stream.values_of``).

        Raises:
            GraphRecursionError, InvalidUpdateError, InvalidRouteError, CheckpointError,
            ThreadBusyError, or what a node raised (with a note naming node and step).
        """
        if stream_mode != "values" or subgraphs:
            chunks = [
                c
                async for c in self.astream(
                    input,
                    config,
                    stream_mode=["updates", "values"] if stream_mode == "values" else stream_mode,
                    subgraphs=subgraphs,
                    thread_id=thread_id,
                    recursion_limit=recursion_limit,
                    durability=durability,
                    context=context,
                    control=control,
                    _blocking_ok=_blocking_ok,
                )
            ]
            return values_of(chunks) if stream_mode == "values" else chunks  # type: ignore[return-value]
        cfg = self._config(config, thread_id, recursion_limit)
        if self.checkpointer is None and (nest := nested_loop(self, cfg, not _blocking_ok)):
            return await run_nested(*nest, input)  # invoked inside a node (nested.py)
        loop = self._loop(cfg, None, frozenset(), durability, context, _blocking_ok)
        loop.control = control
        if self.checkpointer is None:  # no thread to hold
            out = await loop.run(input)
        else:
            async with self._hold(loop):
                out = await loop.run(input)
        return with_interrupts(out, list(loop.interrupts)) if loop.interrupts else out

    def invoke(
        self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Sync ``ainvoke``; same arguments and result."""
        return run_sync(self.ainvoke(input, config, _blocking_ok=True, **kwargs))

    def stream(
        self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """Sync ``astream``; same arguments. Breaking out of the loop cancels the run."""
        if not _in_running_loop():
            yield from self._stream_private(input, config, kwargs)
            return
        yield from self._stream_threaded(input, config, kwargs)

    def _stream_private(self, input: Any, config: Any, kwargs: dict[str, Any]) -> Iterator[Any]:
        # one loop pass per burst of ready events, not per event (token chunks)
        batches = self.astream(input, config, _blocking_ok=True, _batched=True, **kwargs)
        for batch in iterate_on_private_loop(batches):
            yield from batch

    def _stream_threaded(self, input: Any, config: Any, kwargs: dict[str, Any]) -> Iterator[Any]:
        return iterate_on_thread(lambda: self._stream_private(input, config, kwargs))

    async def abatch(
        self,
        inputs: Sequence[Any],
        config: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """Run several inputs concurrently; ``config`` is one for all or one per input."""
        many = isinstance(config, Sequence) and not isinstance(config, str)  # "t1": refused
        configs: list[Any] = list(config) if many else [config] * len(inputs)  # type: ignore[arg-type]
        if len(configs) != len(inputs):
            raise ValueError(f"abatch got {len(inputs)} inputs but {len(configs)} configs")
        return list(
            await asyncio.gather(
                *(self.ainvoke(i, c, **kwargs) for i, c in zip(inputs, configs, strict=True))
            )
        )

    def batch(
        self, inputs: Sequence[Any], config: Any = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Sync ``abatch``."""
        return run_sync(self.abatch(inputs, config, **kwargs))

    def get_graph(self, config: Any = None, *, xray: int | bool = False) -> DrawableGraph:
        """A drawable view: ``get_graph().draw_mermaid()``, ``.to_json()``,
        ``.draw_png(path)``; ``xray`` draws subgraphs' nodes that many levels deep."""
        return DrawableGraph(self.builder, self.name, lg_graph(self, xray))

    # -- helpers -----------------------------------------------------------------------

    def _need_cp(self) -> BaseCheckpointer:
        if self.checkpointer is None:
            raise ValueError("this graph has no checkpointer: compile(checkpointer=...) first")
        return self.checkpointer

    def _loop(
        self,
        cfg: dict[str, Any],
        sink: StreamSink | None,
        modes: frozenset[str],
        durability: Durability | None,
        context: Any,
        blocking_ok: bool,
    ) -> RunLoop:
        cfg, travel = root_config(cfg)  # a subgraph's checkpoint named: run the root
        loop = RunLoop(
            self,
            cfg,
            checkpointer=self.checkpointer,
            emit=sink.bind(()) if sink is not None else None,
            modes=modes,
            durability=self.durability if durability is None else check_durability(
                durability, "invoke/stream"),
            blocking_ok=blocking_ok,
            context=coerce_context(self.builder.context_schema, context),
            sink=sink,
        )
        loop.travel = travel
        return loop

    @contextlib.asynccontextmanager
    async def _hold(self, loop: RunLoop) -> AsyncIterator[None]:
        """Hold the thread for one run: in this process, and across processes by lease."""
        async with _Claim(self.checkpointer, loop.config, self.busy_timeout):
            lease = await ThreadLease.acquire(self.checkpointer, loop, self.busy_timeout)
            try:
                yield
            finally:
                if lease is not None:
                    await lease.release()

    def __repr__(self) -> str:
        return f"CompiledGraph(name={self.name!r}, nodes={list(self.nodes)})"


def _keys(schema: Any, specs: Mapping[str, Any]) -> list[str]:
    from threadloom.engine.schema import schema_keys

    keys = list(schema_keys(schema))
    return keys or list(specs)
