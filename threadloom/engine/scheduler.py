"""The super-step loop: one async core that every entry point drives.

A run is a sequence of super-steps (bulk-synchronous, as in Pregel and LangGraph). Each
step: plan the tasks -> run them concurrently -> apply their writes in task order ->
save the checkpoint -> emit events -> route to the next tasks. ``RunLoop.run`` below is
that loop, and it is the whole of it; the pieces it calls live in ``tasks.py`` (running
one node) and ``routing.py`` (turning writes into the next tasks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import (
    INTERRUPT,
    RESUME,
    Checkpoint,
    CheckpointTuple,
)
from threadloom.engine.channels import MISSING, Channel
from threadloom.engine.persistence import Persistence
from threadloom.engine.routing import Planned, next_tasks, plan_from_saved
from threadloom.engine.runtime import Emit, GraphInterrupt
from threadloom.engine.tasks import Task, TaskResult, lone_task, make_tasks, run_task
from threadloom.engine.writes import ParentCommand, writes_of
from threadloom.errors import (
    EmptyInputError,
    GraphRecursionError,
    GraphRunError,
    InvalidUpdateError,
)
from threadloom.types import START, Command, Durability, Interrupt

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.stream import StreamSink


_KEY = itemgetter(0)  # the key of a (key, value) write


class RunLoop(Persistence):
    """One invocation of a compiled graph on one thread (and namespace).

    Args:
        graph: the compiled graph.
        config: the run config; ``configurable`` holds ``thread_id`` etc.
        checkpointer: where to save, or None.
        emit: event sink ``(mode, payload)`` or None when nobody streams.
        modes: the stream modes requested.
        durability: when checkpoints are written (see ``StateGraph.compile``).
        blocking_ok: call the checkpointer's sync methods directly (the loop is private).
        context: the user's ``context=`` object, handed to nodes through ``Runtime``.
    """

    def __init__(
        self,
        graph: CompiledGraph,
        config: dict[str, Any],
        *,
        checkpointer: BaseCheckpointer | None,
        emit: Emit | None,
        modes: frozenset[str],
        durability: Durability,
        blocking_ok: bool,
        context: Any = None,
        namespace: tuple[str, ...] = (),
        sink: StreamSink | None = None,
    ) -> None:
        self.graph = graph
        self.config = config
        self.cp = checkpointer
        self.emit = emit
        self.modes = modes
        self.durability = durability
        self.blocking_ok = blocking_ok
        self.context = context
        self.namespace = namespace
        self.sink = sink
        self.inline_sync = True
        self.lease: Any = None
        self.message_ids: set[str] = set()  # messages already sent to the messages mode
        self.channels: dict[str, Channel] = graph.channels
        # The run's state: key -> value for every key that has one (channels merge into it).
        self.values: dict[str, Any] = graph.initial_values()
        self.versions: dict[str, int] = {}
        self.barriers: dict[str, set[str]] = {}
        self.step = -2  # the input step of a new thread is -1, its first loop step 0
        self.saved: CheckpointTuple | None = None
        self.checkpoint_config: dict[str, Any] = config
        self.pending_put: asyncio.Task[Any] | None = None
        self.interrupts: list[Interrupt] = []
        self.written_keys: dict[str, list[Any]] = {}
        self._unsaved_exit: tuple[Any, ...] | None = None
        self.direct_saves = False  # set when the run starts (_saves_directly)

    # ---------------------------------------------------------------------------------
    # This loop right here is the engine: plan -> run -> apply -> save -> emit -> route.
    # ---------------------------------------------------------------------------------
    async def run(self, input: Any) -> dict[str, Any]:
        """Run to the end, a pause or an error; return the output state."""
        try:
            await self._loop(input)
        except ParentCommand as pc:
            await self._save_on_exit(failed=True)
            if self.namespace:
                raise
            raise InvalidUpdateError(
                f"a node returned Command(graph=Command.PARENT) at super-step {self.step}, "
                "but this graph is not running as a subgraph"
            ) from pc
        except BaseException:
            await self._save_on_exit(failed=True)
            raise
        await self._save_on_exit(failed=False)
        return self.output()

    async def _loop(self, input: Any) -> None:
        # Saves that are a plain put (no lease, nothing awaited) skip _save's coroutine.
        self.direct_saves = self._saves_directly()
        planned, resume = await self._start(input)
        limit = int(self.config.get("recursion_limit", 25))
        steps_done = 0
        skip_before = input is None or isinstance(input, Command)
        # Read once: what each step checks (the saves, events and pauses are no-ops
        # without a checkpointer, an event sink and interrupt_before/after names).
        saving = self.cp is not None
        direct = self.direct_saves
        emitting = self.emit is not None
        pausing_before = bool(self.graph.interrupt_before)
        pausing_after = bool(self.graph.interrupt_after)
        # Task ids are plain "<step>:<index>" (no checkpointer, not a subgraph): a step of
        # one edge-triggered task with nothing saved or resumed is make_tasks's first case.
        plain_ids = not saving and not self.namespace
        while planned.tasks or planned.sends:
            if steps_done >= limit:
                names = tuple(dict.fromkeys(planned.node_names()))
                raise GraphRecursionError(
                    f"recursion limit of {limit} super-steps reached without hitting END "
                    f"(at step {self.step + 1}, next nodes {list(names)}). Raise it with "
                    f"config={{'recursion_limit': N}} or make the graph stop earlier.",
                    limit=limit,
                    step=self.step + 1,
                    nodes=names,
                )
            self.step += 1
            triggered = planned.tasks
            if plain_ids and len(triggered) == 1 and not (
                planned.sends or planned.pending or resume
            ):
                tasks = [lone_task(self, triggered[0], limit - steps_done)]
            else:
                tasks = make_tasks(self, planned, limit - steps_done, resume)
            # nothing of a finished step stays referenced while this one runs
            del planned, triggered
            if pausing_before and not skip_before and self._pause_before(tasks):
                self.step -= 1
                return
            skip_before = False
            if len(tasks) == 1 and tasks[0].result is None:  # a lone task runs inline
                task = tasks[0]
                self.inline_sync = True
                try:
                    task.result = await run_task(self, task)
                except GraphInterrupt as gi:
                    await self._record_interrupt(task, gi)
                except BaseException as exc:
                    await self._record_error(task, exc)
                    raise
                results = [task.result or TaskResult([], [])]
            else:
                results = await self._run_tasks(tasks)
            if self.interrupts:
                self.step -= 1
                return
            updated = self._apply(tasks, results)
            planned = await next_tasks(self, tasks, results)
            if direct:
                self._save_direct("loop", updated, tasks, planned)
            elif saving:
                await self._save("loop", updated, tasks, planned)
            if emitting:
                self._emit_step(tasks, results)
            if self.sink is not None:
                await self.sink.drained()
            steps_done += 1
            resume = None
            del results, updated
            if pausing_after and self._pause_after(tasks):
                return

    # -- start --------------------------------------------------------------------------

    async def _start(self, input: Any) -> tuple[Planned, dict[str, list[Any]] | None]:
        if self.cp is not None:
            self.saved = await self._cp_call("get_tuple", self.config)
            if self.saved is None and self._config_id():
                from threadloom.errors import CheckpointNotFoundError

                raise CheckpointNotFoundError(
                    f"checkpoint {self._config_id()!r} not found in thread "
                    f"{self.config['configurable'].get('thread_id')!r}"
                )
        if self.saved is not None:
            self._restore(self.saved.checkpoint)
            self.checkpoint_config = self._own(self.saved.config)
        if isinstance(input, Command) and input.resume is None and input.goto == ():
            input = input.update
        if isinstance(input, Command):
            return self._start_resume(input)
        if input is None:
            if self.saved is None:
                raise EmptyInputError(
                    "invoke(None) needs a thread with a saved checkpoint to continue from; "
                    "this thread has none. Pass an input."
                )
            return plan_from_saved(self, self.saved), None
        return await self._start_input(input), None

    def _start_resume(self, cmd: Command) -> tuple[Planned, dict[str, list[Any]] | None]:
        if self.saved is None:
            raise EmptyInputError("Command(resume=...) needs a thread with a paused run")
        planned = plan_from_saved(self, self.saved)
        resume: dict[str, list[Any]] = {}
        previous: dict[str, list[Any]] = {}
        pending: dict[str, list[Interrupt]] = {}
        for w in self.saved.pending_writes:
            if w.channel == RESUME:
                previous[w.task_id] = list(w.value)
            elif w.channel == INTERRUPT:
                pending[w.task_id] = [
                    Interrupt(*i) if not isinstance(i, Interrupt) else i for i in w.value
                ]
        value = cmd.resume
        ids = [i.id for interrupts in pending.values() for i in interrupts]
        if len(pending) > 1 and not (isinstance(value, Mapping) and any(i in value for i in ids)):
            # As LangGraph 1.x: which interrupt one value answers would depend on task order.
            raise GraphRunError(
                f"thread {self.config.get('configurable', {}).get('thread_id')!r} has "
                f"{len(pending)} pending interrupts; resume with a dict mapping interrupt ids "
                f"to values, e.g. Command(resume={{id: value, ...}}) (ids: {ids}; see "
                "get_state(...).interrupts)"
            )
        for tid, interrupts in pending.items():
            value = cmd.resume
            if isinstance(value, Mapping) and any(i.id in value for i in interrupts):
                matched = [value[i.id] for i in interrupts if i.id in value]
                if not matched:
                    continue
                value = matched[0]
            resume[tid] = previous.get(tid, []) + [value]
        if cmd.update is not None or cmd.goto:
            planned = planned.with_command(self, cmd)
        return planned, resume

    async def _start_input(self, input: Any) -> Planned:
        writes = writes_of(self.graph, START, input, self.step + 1, input_mode=True)
        if self.graph.validate_input is not None:
            present = set(self.values)
            writes = self.graph.validate_input(writes, present)
        updated = self._apply_from(writes, START, self.step + 1)
        self.step += 1
        planned = await next_tasks(self, [Task.virtual_start()], [TaskResult(writes, [])])
        if self.direct_saves:
            self._save_direct("input", updated, [], planned)
        elif self.cp is not None:
            await self._save("input", updated, [], planned)
        if "values" in self.modes and self.emit is not None:
            self.emit("values", self.output())
        return planned

    def _restore(self, cp: Checkpoint) -> None:
        channels = self.channels
        values = self.values
        for key, value in cp["channel_values"].items():
            if key in channels:
                values[key] = value
        self.versions = dict(cp["channel_versions"])
        self.barriers = {k: set(v) for k, v in cp.get("barriers", {}).items()}
        self.step = int(self.saved.metadata.get("step", -1)) if self.saved else -2

    # -- run ----------------------------------------------------------------------------

    async def _run_tasks(self, tasks: list[Task]) -> list[TaskResult]:
        """Run a step of several tasks (or one with saved writes) concurrently.

        A step of one task that still has to run never comes here: ``_loop`` runs it
        inline (and lets a sync node or tool run on the calling thread of a sync run).
        """
        todo = [t for t in tasks if t.result is None]
        self.inline_sync = False
        if todo:  # every task may already have its saved writes (a crash before the save)
            await self._run_many(todo, record=len(tasks) > 1)
        return [t.result or TaskResult([], []) for t in tasks]

    async def _run_many(self, todo: list[Task], *, record: bool) -> None:
        async def one(task: Task) -> None:
            try:
                task.result = await run_task(self, task)
            except GraphInterrupt as gi:
                await self._record_interrupt(task, gi)
                return
            if record:
                await self._record_writes(task)

        running = [asyncio.ensure_future(one(t)) for t in todo]
        try:
            done, pending = await asyncio.wait(running, return_when=asyncio.FIRST_EXCEPTION)
        except BaseException:
            for fut in running:
                fut.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        for fut in pending:
            fut.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for task, fut in zip(todo, running, strict=True):
            if fut.done() and not fut.cancelled() and fut.exception() is not None:
                error = fut.exception()
                await self._record_error(task, error)  # type: ignore[arg-type]
                raise error  # type: ignore[misc]

    # -- apply --------------------------------------------------------------------------

    def _apply(self, tasks: list[Task], results: list[TaskResult]) -> set[str]:
        if len(tasks) == 1:  # a lone task: its writes, each tagged with its name
            writes = results[0].writes
            updated = self._apply_from(writes, tasks[0].name, self.step)
        else:
            writes = []
            nodes = []
            for task, result in zip(tasks, results, strict=True):
                for write in result.writes:
                    writes.append(write)
                    nodes.append(task.name)
            updated = self._apply_writes(writes, nodes)
        if self.namespace:
            for key, value in writes:
                self.written_keys.setdefault(key, []).append(value)
        return updated

    def _apply_writes(self, writes: list[tuple[str, Any]], nodes: list[str]) -> set[str]:
        step = self.step + 1 if nodes and nodes[0] == START else self.step
        values = self.values
        written = set(map(_KEY, writes))
        if len(written) == len(writes):
            # The usual step: every key is written once. Merging one key at a time, in
            # write order, equals the grouped merge below with one-item groups
            # (``merge_one`` is ``merge`` of one value, exceptions included).
            channels = self.channels
            for (key, value), node in zip(writes, nodes, strict=True):
                merged = channels[key].merge_one(values.get(key, MISSING), value, node, step)
                if merged is MISSING:
                    values.pop(key, None)
                else:
                    values[key] = merged
        else:
            self._apply_grouped(writes, nodes, step)
        return self._applied(written)

    def _apply_from(self, writes: list[tuple[str, Any]], node: str, step: int) -> set[str]:
        """``_apply_writes(writes, [node] * len(writes))``: the writes of one node."""
        values = self.values
        written = set(map(_KEY, writes))
        if len(written) == len(writes):  # each key once: as in _apply_writes
            channels = self.channels
            for key, value in writes:
                merged = channels[key].merge_one(values.get(key, MISSING), value, node, step)
                if merged is MISSING:
                    values.pop(key, None)
                else:
                    values[key] = merged
        else:
            self._apply_grouped(writes, [node] * len(writes), step)
        return self._applied(written)

    def _applied(self, written: set[str]) -> set[str]:
        """End a step's writes: clear ephemeral keys nobody wrote; bump versions. Returns
        the keys that changed (``written`` itself, grown by the cleared keys)."""
        values = self.values
        for key in self.graph.ephemeral_keys:
            if key not in written and key in values:
                del values[key]  # seen by one super-step: cleared
                written.add(key)
        if self.cp is not None:  # versions feed checkpoints only
            versions = self.versions
            for key in written:
                versions[key] = versions.get(key, 0) + 1
        return written

    def _apply_grouped(self, writes: list[tuple[str, Any]], nodes: list[str], step: int) -> None:
        """Apply writes where some key is written more than once: each key's writes merge
        together, in write order (a ``LastValue`` key then raises, naming every writer)."""
        channels = self.channels
        values = self.values
        grouped: dict[str, tuple[list[Any], list[str]]] = {}
        for (key, value), node in zip(writes, nodes, strict=True):
            entry = grouped.get(key)
            if entry is None:
                grouped[key] = ([value], [node])
            else:
                entry[0].append(value)
                entry[1].append(node)
        for key, (written, who) in grouped.items():
            merged = channels[key].merge(values.get(key, MISSING), written, who, step)
            if merged is MISSING:
                values.pop(key, None)
            else:
                values[key] = merged

    # -- pauses and events --------------------------------------------------------------

    def _pause_before(self, tasks: list[Task]) -> bool:
        names = self.graph.interrupt_before
        return bool(names) and any(t.name in names for t in tasks)

    def _pause_after(self, tasks: list[Task]) -> bool:
        names = self.graph.interrupt_after
        return bool(names) and any(t.name in names for t in tasks)

    def _emit_step(self, tasks: list[Task], results: list[TaskResult]) -> None:
        emit = self.emit
        if emit is None:
            return
        if "updates" in self.modes:
            for task, result in zip(tasks, results, strict=True):
                emit("updates", {task.name: result.update_view()})
        if "values" in self.modes:
            emit("values", self.output())

    def output(self) -> dict[str, Any]:
        """The state restricted to the output keys (channels without a value are left out)."""
        values = self.values
        return {key: values[key] for key in self.graph.output_keys if key in values}
