"""Reading and editing a thread's saved state: ``get_state``, ``get_state_history``,
``update_state`` and their async twins.

A mixin of ``CompiledGraph`` (compiled.py), as LangGraph's graph methods of the same
names; the work is done in ``snapshot.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from threadloom.checkpoint.base import BaseCheckpointer
from threadloom.engine.bulk import COPY, INPUT, bulk_update
from threadloom.engine.history import history, history_sync
from threadloom.engine.replay import graph_at
from threadloom.engine.snapshot import (
    StateSnapshot,
    snapshot,
    snapshot_sync,
    update_state,
)
from threadloom.engine.subgraph_state import with_subgraph_states
from threadloom.engine.sync import run_sync
from threadloom.types import END, START, StateUpdate

if TYPE_CHECKING:
    from threadloom.engine.compiled import CompiledGraph


class ThreadState:
    """The thread-state methods of ``CompiledGraph``."""

    nodes: dict[str, Any]

    def _config(
        self, config: Mapping[str, Any] | None, thread_id: str | None, recursion_limit: int | None
    ) -> dict[str, Any]:
        raise NotImplementedError  # CompiledGraph's

    def _need_cp(self) -> BaseCheckpointer:
        raise NotImplementedError  # CompiledGraph's

    def _graph(self) -> CompiledGraph:
        return cast("CompiledGraph", self)

    def get_state(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        subgraphs: bool = False,
    ) -> StateSnapshot:
        """The state of a thread at its latest (or the named) checkpoint.

        ``subgraphs=True``: each next task that runs a subgraph carries the subgraph's
        own snapshot in ``tasks[i].state`` (as LangGraph; ``subgraph_state.py``).

        Raises:
            ValueError: when the graph has no checkpointer.
        """
        cp, cfg = self._need_cp(), self._config(config, thread_id, None)
        graph = graph_at(self._graph(), cfg)  # a subgraph's namespace: that graph's state
        if _has_sync_reads(cp) and not (graph.has_subgraphs or subgraphs):
            return snapshot_sync(graph, cfg, cp)  # no loop, no worker thread
        return run_sync(self.aget_state(config, thread_id=thread_id, subgraphs=subgraphs))

    async def aget_state(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        subgraphs: bool = False,
    ) -> StateSnapshot:
        """Async ``get_state``."""
        cp, cfg = self._need_cp(), self._config(config, thread_id, None)
        graph = graph_at(self._graph(), cfg)
        snap = await snapshot(graph, cfg, cp)
        if graph.has_subgraphs or subgraphs:
            snap = await with_subgraph_states(graph, snap, cp, subgraphs)
        return snap

    def get_state_history(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        filter: Mapping[str, Any] | None = None,
        before: Mapping[str, Any] | None = None,  # noqa: A002
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """Snapshots of a thread, newest first (time travel: pass one's ``config``).

        Lazy, as LangGraph's generator: each checkpoint is read and decoded when the
        caller gets to it (in pages of short read transactions, none held open between
        items), so ``next(iter(...))`` or ``limit=`` on a long thread decodes only what
        it returns. A checkpointer with only async reads is read whole (through them).

        Raises:
            ValueError: when the graph has no checkpointer (at the call).
        """
        cfg = self._config(config, thread_id, None)
        cp = self._need_cp()
        graph = graph_at(self._graph(), cfg)
        if _has_sync_reads(cp):
            return history_sync(graph, cfg, cp, filter, before, limit)
        return iter(run_sync(_collect(history(graph, cfg, cp, filter, before, limit))))

    async def aget_state_history(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        filter: Mapping[str, Any] | None = None,
        before: Mapping[str, Any] | None = None,  # noqa: A002
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async ``get_state_history``: ``async for snapshot in ...``, newest first, as lazy
        as the sync one (a threadloom store reads a page per worker-thread hop)."""
        cfg = self._config(config, thread_id, None)
        graph = graph_at(self._graph(), cfg)
        async for snap in history(graph, cfg, self._need_cp(), filter, before, limit):
            yield snap

    def update_state(
        self,
        config: Mapping[str, Any],
        values: Any,
        as_node: str | None = None,
    ) -> dict[str, Any]:
        """Write ``values`` into a thread as if node ``as_node`` had returned them.

        With a ``checkpoint_id`` in ``config`` this forks the thread from that checkpoint.
        Returns the config of the new checkpoint.

        Raises:
            InvalidUpdateError: for unknown keys; ``ValueError`` for an unknown ``as_node``.
        """
        return run_sync(self.aupdate_state(config, values, as_node))

    async def aupdate_state(
        self, config: Mapping[str, Any], values: Any, as_node: str | None = None
    ) -> dict[str, Any]:
        """Async ``update_state``."""
        special = (START, END, INPUT, COPY)
        cfg = self._config(config, None, None)
        nodes = graph_at(self, cfg).nodes  # a subgraph's namespace: that graph's nodes
        if as_node is not None and as_node not in nodes and as_node not in special:
            raise ValueError(f"update_state: unknown node {as_node!r}; nodes: {sorted(nodes)}")
        return await update_state(
            self._graph(), cfg, self._need_cp(), [StateUpdate(values, as_node)]
        )

    def bulk_update_state(
        self, config: Mapping[str, Any], supersteps: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        """Apply ``supersteps`` in turn, as LangGraph's ``bulk_update_state``: each a list
        of ``StateUpdate(values, as_node[, task_id])`` applied together as one super-step
        and saved as one checkpoint. Returns the config of the last checkpoint.

        Raises:
            ValueError: no super-steps, or one without updates.
            InvalidUpdateError: a super-step that cannot be applied (several updates with
                one that is input, a copy or a clear; one without ``as_node``; an
                unknown node); the super-steps before it stay saved.
        """
        return run_sync(self.abulk_update_state(config, supersteps))

    async def abulk_update_state(
        self, config: Mapping[str, Any], supersteps: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        """Async ``bulk_update_state``."""
        cfg = self._config(config, None, None)
        return await bulk_update(self._graph(), cfg, self._need_cp(), supersteps)


async def _collect(snaps: AsyncIterator[StateSnapshot]) -> list[StateSnapshot]:
    return [s async for s in snaps]


def _has_sync_reads(cp: BaseCheckpointer) -> bool:
    """Whether ``cp`` implements the sync reads (every threadloom store does; a
    checkpointer written with only the async twins is read through them)."""
    kind = type(cp)
    base = BaseCheckpointer
    return kind.get_tuple is not base.get_tuple and kind.list is not base.list
