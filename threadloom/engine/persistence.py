"""How a run writes to its checkpointer: checkpoints, pending writes, interrupts, errors.

A mixin of ``RunLoop`` (scheduler.py), kept apart so the loop reads as the loop. It honours
the durability mode: ``"sync"`` writes each checkpoint before the next step, ``"async"``
while the next step runs (one save in flight at most; pending writes wait for it), and
``"exit"`` only when the run ends, pauses or fails. Every write carries the run's lease
token, so a run that lost its thread can write nothing more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import (
    ERROR,
    FAILED,
    INTERRUPT,
    RESUME,
    SCHEDULED,
    fuses_writes,
    make_config,
    new_checkpoint_id_ts,
)
from threadloom.engine.checkpoint_body import checkpoint_body, checkpoint_metadata
from threadloom.engine.checkpoint_events import emit_checkpoint
from threadloom.engine.routing import Planned
from threadloom.engine.runtime import GraphInterrupt
from threadloom.engine.tasks import Task, task_id
from threadloom.engine.untracked import tracked_writes
from threadloom.errors import GraphRunError, ParentCommand, SerializationError
from threadloom.redact import mask_urls
from threadloom.types import START

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.channels import Channel
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.types import Durability, Interrupt


class Persistence:
    """The checkpointer side of a run (mixed into ``RunLoop``)."""

    cp: BaseCheckpointer | None
    graph: CompiledGraph
    config: dict[str, Any]
    checkpoint_config: dict[str, Any]
    durability: Durability
    blocking_ok: bool
    pending_put: asyncio.Task[Any] | None
    interrupts: list[Interrupt]
    channels: dict[str, Channel]
    values: dict[str, Any]
    versions: dict[str, int]
    barriers: dict[str, set[str]]
    step: int
    lease: Any
    emit: Any
    modes: frozenset[str]
    _unsaved_exit: tuple[Any, ...] | None
    direct_saves: bool
    fuses: bool  # direct_saves, and the checkpointer has put_with_writes (fuses_writes)
    input_writes: list[tuple[str, Any]] | None  # saved with the input checkpoint
    paused: bool
    namespace: tuple[str, ...]
    paused_with: list[tuple[Interrupt, ...]]
    parents: dict[str, str]

    def output(self) -> dict[str, Any]:
        raise NotImplementedError

    async def _save_on_exit(self, *, failed: bool) -> None:
        """Finish pending writes; with ``durability="exit"`` write the last checkpoint.

        As LangGraph, a subgraph run in a per-call namespace (a level ``node:task_id``)
        that finished writes no exit checkpoint: nothing will continue it. It does when
        it failed or paused, and a ``checkpointer=True`` subgraph always does."""
        if self.cp is None:
            return
        try:
            await self._flush_pending_put()
        finally:
            if self._unsaved_exit is not None and (
                failed or self.paused or all(":" not in level for level in self.namespace)
            ):
                await self._put_now(self._unsaved_exit)


    async def _record_writes(self, task: Task) -> None:
        if self.cp is None or self.durability == "exit" or task.result is None:
            return
        await self._flush_pending_put()
        await self.cp_call("put_writes", self.checkpoint_config, self._writes_of(task), task.id)

    def _writes_of(self, task: Task) -> list[tuple[str, Any]]:
        """The writes saved for a finished ``task``, as LangGraph's: its channel writes
        (tracked ones only), and ``__scheduled__`` when it routed (a ``Command``'s goto,
        ``Send``s) or wrote nothing (LangGraph's ``__no_writes__``): a task with saved
        writes is done."""
        result: Any = task.result
        writes = result.writes
        if result.goto or not writes:
            writes = [*writes, (SCHEDULED, result.goto_payload())]
        if self.graph.untracked_keys:
            writes = tracked_writes(self.graph.untracked_keys, writes) or [(SCHEDULED, [])]
        return writes  # type: ignore[no-any-return]  # only read by the checkpointer

    def _with_lone_writes(self, source: str, tasks: list[Task], args: tuple[Any, ...]
                          ) -> tuple[Any, ...]:
        """A put's ``args`` plus, for a step whose one task finished (not START, whose
        writes the input checkpoint saved), its writes and id: saved against the step's
        checkpoint with the new one (``put_with_writes``), as LangGraph saves them all."""
        if source != "loop" or len(tasks) != 1 or tasks[0].result is None or (
                tasks[0].cached or tasks[0].name == START):
            return args
        return (*args, self._writes_of(tasks[0]), tasks[0].id)

    def start_writes(self, cid: str, writes: list[tuple[str, Any]]
                     ) -> tuple[list[tuple[str, Any]], str]:
        """The input's ``writes`` as saved against input checkpoint ``cid`` (tracked keys
        only), and the id of the START task they belong to."""
        if self.graph.untracked_keys:
            writes = tracked_writes(self.graph.untracked_keys, writes)
        return list(writes), task_id(cid, self.step + 1, 0, START)

    def _input_args(self, *args: Any) -> tuple[Any, ...]:
        """A put's ``args`` for the input checkpoint plus its START task's writes and id
        (``put_with_own_writes``)."""
        writes, self.input_writes = self.input_writes, None
        return (*args, *self.start_writes(args[1]["id"], writes or []))

    def _put_sync(self, args: tuple[Any, ...]) -> dict[str, Any]:
        """``cp.put(*args)``, or ``put_with_writes`` for the args of ``_with_lone_writes``
        (a checkpointer without it: ``put_writes`` then ``put``). A task's write the codec
        cannot store (a reducer's own marker object, say) leaves its writes unsaved: the
        checkpoint is saved alone, as before threadloom kept a lone task's writes."""
        cp: Any = self.cp
        if len(args) == 4:
            return cp.put(*args)  # type: ignore[no-any-return]
        try:
            if fuses_writes(cp):
                return cp.put_with_writes(*args)  # type: ignore[no-any-return]
            cp.put_writes(args[0], args[4], args[5])
        except SerializationError:
            pass
        return cp.put(*args[:4])  # type: ignore[no-any-return]

    async def _record_finished(self, tasks: list[Task]) -> None:
        """With ``durability="exit"``, when a step fails or pauses: save the writes of its
        tasks that finished (LangGraph saves them on exit), so a retry or a resume does not
        run them again."""
        if self.cp is None or self.durability != "exit":
            return
        for task in tasks:
            if task.result is not None:
                await self._save_unsaved_for(task)
                await self.cp_call("put_writes", self.checkpoint_config, self._writes_of(task),
                                   task.id)

    async def _record_interrupt(self, task: Task, gi: GraphInterrupt) -> None:
        if self.cp is None:
            raise GraphRunError(
                f"node {task.name!r} called interrupt() at super-step {self.step}, but the "
                "graph has no checkpointer to keep the paused run: compile it with one, e.g. "
                "compile(checkpointer=InMemoryCheckpointer()), and pass a thread_id"
            )
        self.interrupts.extend(gi.interrupts)
        self.paused_with.append(tuple(gi.interrupts))
        self.paused = True
        if self.durability == "exit":
            await self._save_unsaved_for(task)
        await self._flush_pending_put()
        writes: list[tuple[str, Any]] = [(INTERRUPT, [tuple(i) for i in gi.interrupts])]
        if task.resume:
            writes.append((RESUME, dict(task.resume)))
        await self.cp_call("put_writes", self.checkpoint_config, writes, task.id)
        if gi.interrupts and self.emit is not None:
            self._emit_interrupt(tuple(gi.interrupts))

    def _emit_interrupt(self, interrupts: tuple[Interrupt, ...]) -> None:
        raise NotImplementedError

    async def _save_unsaved_for(self, task: Task) -> None:
        """With ``durability="exit"``: save the checkpoint held back so far, and re-id
        ``task`` under it, so a write of the task can be saved against it."""
        if self._unsaved_exit is not None:
            await self._put_now(self._unsaved_exit)
        base = (self.checkpoint_config.get("configurable") or {}).get("checkpoint_id", "")
        task.id = task_id(base, self.step, task.index, task.name)

    async def record_failure(self, task: Task, exc: BaseException) -> None:
        """Save that ``task``'s node failed with ``exc`` and its error handler runs for it
        (before the handler starts, as LangGraph), so a resume runs the handler again."""
        if self.cp is None:
            return
        if self.durability == "exit":
            await self._save_unsaved_for(task)
        await self._flush_pending_put()
        value = {"type": type(exc).__name__, "message": mask_urls(str(exc))}
        await self.cp_call("put_writes", self.checkpoint_config, [(FAILED, value)], task.id)

    async def _record_error(self, task: Task, exc: BaseException) -> None:
        if self.cp is None or isinstance(exc, asyncio.CancelledError | ParentCommand):
            return  # (a parent command is control flow, not saved: as LangGraph)
        # repr form, as LangGraph saves it; no credential is ever stored
        text = mask_urls(repr(exc))
        try:
            if self.durability == "exit":  # as LangGraph: the error is saved on exit too
                await self._save_unsaved_for(task)
            await self._flush_pending_put()
            await self.cp_call(
                "put_writes", self.checkpoint_config, [(ERROR, text)], task.id
            )
        except Exception as save_exc:  # the original error matters more
            why = " for the same reason" if str(save_exc) == str(exc) else f": {save_exc}"
            exc.add_note(f"(the error could not be recorded in the checkpoint{why})")


    # -- save ---------------------------------------------------------------------------

    def _saves_directly(self) -> bool:
        """Whether every save of this run is a plain ``cp.put`` call: nothing to await.

        That is ``_save``'s own direct branch (a private loop, or a checkpointer doing no
        I/O under ``"sync"`` durability) with no lease to renew; no save is ever left
        pending then either. Constant for a run: the lease is taken before it starts.
        """
        cp, durability = self.cp, self.durability
        return cp is not None and self.lease is None and durability != "exit" and (
            self.blocking_ok or (durability != "async" and getattr(cp, "inline_io", False)))

    def save(
        self, source: str, updated: set[str], tasks: list[Task], planned: Planned
    ) -> Awaitable[None] | None:
        """Save the checkpoint of the state now, ``planned`` as its next tasks.

        Returns None when the save is done (no checkpointer, or a plain ``cp.put`` that
        needs nothing awaited: the loop's hot path, without a coroutine per step), else
        the awaitable that does it, which the caller awaits before the next step.
        ``tests/test_save_paths.py`` checks that both paths store and stream the same.
        """
        if self.direct_saves:
            self._save_direct(source, updated, tasks, planned)
            return None
        if self.cp is None:
            return None
        return self._save(source, updated, tasks, planned)

    def _save_direct(
        self, source: str, updated: set[str], tasks: list[Task], planned: Planned
    ) -> None:
        """``_save`` when ``_saves_directly()``: the same put, config and events."""
        cid, ts = new_checkpoint_id_ts()
        versions = self.versions
        checkpoint = checkpoint_body(self, cid, ts, planned)
        metadata = checkpoint_metadata(self, source, tasks)
        parent = self.checkpoint_config
        if len(updated) == 1:  # the usual step: one key, without a comprehension call
            (key,) = updated
            new = {key: versions[key]}
        else:
            new = {k: versions[k] for k in updated}
        task = tasks[0] if len(tasks) == 1 else None  # _with_lone_writes, inlined
        if self.input_writes is not None:  # the input checkpoint with its START writes
            config = self.cp.put_with_own_writes(  # type: ignore[union-attr]
                *self._input_args(parent, checkpoint, metadata, new))
        elif task is None or task.result is None or task.cached or source != "loop" or (
                task.name == START):
            config = self.cp.put(parent, checkpoint, metadata, new)  # type: ignore[union-attr]
        elif self.fuses and (result := task.result).writes and not result.goto and (
                not self.graph.untracked_keys):  # _put_sync of the usual step, inlined
            try:
                config = self.cp.put_with_writes(  # type: ignore[union-attr]
                    parent, checkpoint, metadata, new, result.writes, task.id)
            except SerializationError:
                config = self.cp.put(parent, checkpoint, metadata, new)  # type: ignore[union-attr]
        else:
            config = self._put_sync((parent, checkpoint, metadata, new, self._writes_of(task),
                                     task.id))
        self.checkpoint_config = self.fenced(config)
        self._unsaved_exit = None
        if self.emit is not None:
            emit_checkpoint(self, cid, metadata, planned, parent)

    async def _save(
        self, source: str, updated: set[str], tasks: list[Task], planned: Planned
    ) -> None:
        cp = self.cp
        if cp is None:
            return
        cid, ts = new_checkpoint_id_ts()
        versions = self.versions
        checkpoint = checkpoint_body(self, cid, ts, planned)
        metadata = checkpoint_metadata(self, source, tasks)
        new_versions = {k: versions[k] for k in updated}
        durability = self.durability
        if durability == "exit":
            merged = dict(self._unsaved_exit[3]) if self._unsaved_exit else {}
            merged.update(new_versions)
            parent = self._unsaved_exit[0] if self._unsaved_exit else self.checkpoint_config
            self._unsaved_exit = (parent, checkpoint, metadata, merged)
            # Name the coming checkpoint now, as "async" does: the next step's task ids
            # are then those a resume from it computes (a paused subgraph's namespace too).
            conf = self.config["configurable"]
            self.checkpoint_config = self.fenced(
                make_config(conf["thread_id"], conf.get("checkpoint_ns", ""), cid)
            )
            if self.emit is not None:  # streamed although not saved yet, as LangGraph
                emit_checkpoint(self, cid, metadata, planned, parent)
            return
        if self.pending_put is not None:
            await self._flush_pending_put()
        if self.lease is not None:
            await self.lease.renew_if_due()
        parent = self.checkpoint_config
        args = self._with_lone_writes(source, tasks, (parent, checkpoint, metadata, new_versions))
        if self.input_writes is not None:  # "sync": the input checkpoint with its writes
            config = await self.cp_call("put_with_own_writes", *self._input_args(*args))
            self.checkpoint_config = self.fenced(config)
            self._unsaved_exit = None
        elif durability == "async" and not self.blocking_ok:
            # Name the new checkpoint at once: writes of the next step belong to it, and
            # are saved only after it (every put_writes waits for the pending put).
            conf = self.config["configurable"]
            self.checkpoint_config = self.fenced(
                make_config(conf["thread_id"], conf.get("checkpoint_ns", ""), cid)
            )
            self.pending_put = asyncio.ensure_future(self._put_now(args))
        elif self.blocking_ok or getattr(cp, "inline_io", False):
            self.checkpoint_config = self.fenced(self._put_sync(args))
            self._unsaved_exit = None
        else:
            await self._put_now(args)
        if self.emit is not None:
            emit_checkpoint(self, cid, metadata, planned, parent)

    async def _put_now(self, args: tuple[Any, ...]) -> None:
        config = None
        try:  # as _put_sync
            if len(args) == 4 or fuses_writes(self.cp):
                config = await self.cp_call("put" if len(args) == 4 else "put_with_writes",
                                            *args)
            else:
                await self.cp_call("put_writes", args[0], args[4], args[5])
        except SerializationError:
            if len(args) == 4:
                raise
        if config is None:
            config = await self.cp_call("put", *args[:4])
        self.checkpoint_config = self.fenced(config)
        self._unsaved_exit = None

    def fenced(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` carrying this run's lease token, so every write is fenced."""
        token = (self.config.get("configurable") or {}).get("__lease_token")
        if token is None:
            return config
        conf = config.get("configurable") or {}
        if conf.get("__lease_token") == token:
            return config
        return {**config, "configurable": {**conf, "__lease_token": token}}

    async def _flush_pending_put(self) -> None:
        if self.pending_put is not None:
            put, self.pending_put = self.pending_put, None
            await put

    async def cp_call(self, method: str, *args: Any) -> Any:
        cp = self.cp
        if self.blocking_ok or getattr(cp, "inline_io", False):
            return getattr(cp, method)(*args)
        return await getattr(cp, "a" + method)(*args)

    def config_id(self) -> str | None:
        return (self.config.get("configurable") or {}).get("checkpoint_id")
