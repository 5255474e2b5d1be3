"""The super-step loop: one async core that every entry point drives.

A run is a sequence of super-steps (bulk-synchronous, as in Pregel and LangGraph). Each
step, in ``RunLoop._loop`` below, the whole of the loop:

1. plan: the step's tasks (``_plan``; ``planning.make_tasks``);
2. run: the tasks, concurrently (``_run``; one task: ``tasks.run_task``; several:
   ``step_run.run_many``, a fan-out of sync nodes as one batch on the workers);
3. apply: their writes, in task order, through the channels' reducers (``apply.py``),
   and route to the next step's tasks (``routing.next_tasks``);
4. save: the checkpoint (``persistence.py``, which honours the durability mode);
5. emit: the step's stream events (``_emit_step``).

How a run starts (new input, a saved checkpoint, a resume) is ``start.py``. Each fast path
lives inside the verb it speeds up: a lone task planned without the general loop
(``make_tasks``), a lone task run inline (``_run``), a checkpoint put without a coroutine
(``Persistence.save``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import fuses_writes
from threadloom.engine.apply import apply_step, default_bump
from threadloom.engine.channels import Channel
from threadloom.engine.node_call import emit_task_end
from threadloom.engine.persistence import Persistence
from threadloom.engine.planning import lone_task, make_tasks
from threadloom.engine.routing import Planned, next_tasks
from threadloom.engine.runtime import Emit, GraphInterrupt
from threadloom.engine.start import Resume, start_run
from threadloom.engine.step_run import run_many
from threadloom.engine.tasks import Task, TaskResult, run_task, writes_output
from threadloom.engine.writes import ParentCommand
from threadloom.errors import GraphDrained, GraphRecursionError
from threadloom.types import CONFIG_KEY_NODE_FINISHED, ROOT, Command, Durability, Interrupt

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer, CheckpointTuple
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.replay import Travel
    from threadloom.engine.runtime_info import RunControl
    from threadloom.engine.stream import StreamSink


_CACHED = {"__metadata__": {"cached": True}}

DEFAULT_RECURSION_LIMIT = 10007
"""Super-steps one invocation may take when the config names no ``recursion_limit``: the
default of LangGraph 1.2, so a graph that loops long on LangGraph loops as long here."""


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
        # A lone sync task runs inline on a sync run's calling thread, except when its
        # custom/messages chunks must reach the consumer while it runs (as LangGraph runs
        # it in the background then): inline, the loop could not deliver them live.
        self.inline_lone = emit is None or not ({"custom", "messages"} & modes)
        self.inline_sync = self.inline_lone
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
        self.paused = False  # stopped by interrupt_before / interrupt_after
        self.written_keys: dict[str, list[Any]] = {}
        self._unsaved_exit: tuple[Any, ...] | None = None
        self.direct_saves = self.fuses = False  # set when the run starts (_saves_directly)
        self.input_writes: list[tuple[str, Any]] | None = None  # see start._save_input
        # Task ids are plain "<step>:<index>" (no checkpointer, not a subgraph).
        self.plain_ids = checkpointer is None and not namespace
        self.plain_bump = default_bump(checkpointer)  # versions bumped by apply itself
        self.resuming = False  # the run continues a saved one (None or Command input)
        self.paused = False  # the run paused (an interrupt, or interrupt_before/after)
        self.carried: set[str] = set()  # keys a resume Command updated: in the next save
        self.paused_with: list[tuple[Interrupt, ...]] = []  # each paused task's interrupts
        self.fresh = False  # start anew, whatever its namespace holds (subgraph.py)
        self.paused_tasks: list[Task] = []  # the tasks of the step a pause cut short
        # called with each node's name as it finishes (LangGraph's config hook)
        self.node_finished = (config.get("configurable") or {}).get(CONFIG_KEY_NODE_FINISHED)
        self.travel: Travel | None = None  # a time-travelling run's, shared (replay.py)
        self.parents: dict[str, str] = {}  # enclosing namespace -> its checkpoint id
        self.control: RunControl | None = None  # asked to drain between steps (invoke's)

    async def run(self, input: Any) -> dict[str, Any]:
        """Run to the end, a pause or an error; return the output state."""
        try:
            await self._loop(input)
        except ParentCommand as pc:
            await self._save_on_exit(failed=True)
            if not self.namespace:  # as LangGraph: it leaves invoke() as it is
                pc.add_note(
                    f"a node returned Command(graph=Command.PARENT) at super-step "
                    f"{self.step}, but this graph is not running as a subgraph"
                )
            raise
        except BaseException:
            await self._save_on_exit(failed=True)
            raise
        await self._save_on_exit(failed=False)
        if self.paused_tasks and not self.namespace:
            self._apply_paused_step()
        return self.output()

    # ---------------------------------------------------------------------------------
    # This loop right here is the engine: plan -> run -> apply -> save -> emit.
    # ---------------------------------------------------------------------------------
    async def _loop(self, input: Any) -> None:
        self.direct_saves = self._saves_directly()  # constant for the run (see save())
        self.fuses = self.direct_saves and fuses_writes(self.cp)
        self.resuming = input is None or isinstance(input, Command)
        planned, resume = await start_run(self, input)
        limit = int(self.config.get("recursion_limit", DEFAULT_RECURSION_LIMIT))
        steps_done = 0
        tasks: list[Task] | None = None  # the step just run
        while planned.tasks or planned.sends:
            if self.control is not None and self.control.drain_requested:
                raise GraphDrained(self.control.drain_reason or "shutdown")
            tasks = self._plan(planned, resume, limit, steps_done, tasks)  # plan the step
            del planned  # nothing of a finished step stays referenced while this one runs
            if tasks is None:  # the run pauses here (interrupt_before / interrupt_after)
                self.paused = True
                self._emit_pause([])
                return
            # run its tasks, concurrently; a lone one right here (see _lone_failed)
            if len(tasks) == 1 and (task := tasks[0]).result is None and task.held is None and (
                    self.graph.step_timeout is None):
                self.inline_sync = self.inline_lone
                try:
                    task.result = await run_task(self, task)
                except BaseException as exc:
                    await self._lone_failed(task, exc)
                else:
                    if self.node_finished is not None:
                        self.node_finished(task.name)
                results = [task.result or TaskResult([], [])]
            else:
                results = await self._run_tasks(tasks)
            if self.paused:
                # with durability="exit" the finished tasks' writes are saved now, as
                # LangGraph saves them on exit, so the resumed step does not run them again
                await self._record_finished([t for t in tasks if not t.cached])
                self.step -= 1
                self._emit_pause(tasks)
                self.paused_tasks = tasks
                return
            updated = apply_step(self, tasks, results)  # apply their writes, in task order
            if self.carried:  # a resume Command's update, applied before this step
                updated |= self.carried
                self.carried = set()
            planned = await next_tasks(self, tasks, results)  # route: the next step's plan
            if self.cp is not None:  # save the checkpoint
                saving = self.save("loop", updated, tasks, planned)
                if saving is not None:
                    await saving
            if self.emit is not None:  # emit the step's events
                await self._emit_step(tasks, results)
            steps_done += 1
            resume = None
            del results, updated

    # -- plan ---------------------------------------------------------------------------

    def _plan(
        self,
        planned: Planned,
        resume: Resume | None,
        limit: int,
        steps_done: int,
        previous: list[Task] | None,
    ) -> list[Task] | None:
        """The tasks of the next super-step, or None when the run pauses before it: after
        a step that ran an ``interrupt_after`` node, or before one that would run an
        ``interrupt_before`` node (not before the step a resumed run starts with).

        Raises:
            GraphRecursionError: ``limit`` super-steps ran without reaching the end.
        """
        graph = self.graph
        if previous is not None and graph.interrupt_after and any(
            t.name in graph.interrupt_after for t in previous
        ):
            return None
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
        if self.plain_ids and len(planned.tasks) == 1 and not (
            planned.sends or planned.pending or resume
        ):  # one edge-triggered task, nothing saved or resumed: make_tasks's first case
            tasks = [lone_task(self, planned.tasks[0], limit - steps_done)]
        else:
            tasks = make_tasks(self, planned, limit - steps_done, resume)
        if graph.interrupt_before and (previous is not None or not self.resuming) and any(
            t.name in graph.interrupt_before for t in tasks
        ):
            self.step -= 1
            return None
        return tasks

    # -- run ----------------------------------------------------------------------------

    async def _lone_failed(self, task: Task, exc: BaseException) -> None:
        """A step's lone task, run inline by ``_loop`` (a sync node then runs on the
        calling thread of a sync run, unless it streams ``custom``/``messages`` chunks,
        which must reach the consumer live), paused or raised: record it; re-raise
        what is not a pause."""
        if isinstance(exc, GraphInterrupt):
            await self._record_interrupt(task, exc)
            emit_task_end(self, task, interrupts=exc.interrupts)
            return
        await self._record_error(task, exc)
        emit_task_end(self, task, error=exc)
        raise exc

    async def _run_tasks(self, tasks: list[Task]) -> list[TaskResult]:
        """Run a step of several tasks (or one with saved writes) concurrently; a paused
        task that a resume map left unanswered stays paused, unrun."""
        todo = []
        for t in tasks:
            if t.held is not None:
                self.interrupts.extend(t.held)
                self.paused_with.append(tuple(t.held))
                self.paused = True
                if t.held and self.emit is not None:
                    self._emit_interrupt(tuple(t.held))
            elif t.result is None:
                todo.append(t)
        self.inline_sync = False
        if self.emit is not None and "updates" in self.modes and len(todo) < len(tasks):
            for t in tasks:  # saved writes first, before any running task's, as LangGraph
                if t.cached and t.result is not None:
                    self.emit("updates", {t.name: t.result.update_view(), **_CACHED})
                    t.streamed = True
        if todo:  # every task may already have its saved writes (a crash before the save)
            await run_many(self, todo, record=len(tasks) > 1)
        return [t.result or TaskResult([], []) for t in tasks]

    # -- emit --------------------------------------------------------------

    async def _emit_step(self, tasks: list[Task], results: list[TaskResult]) -> None:
        """Send a finished step's ``updates`` and ``values`` events, and let the consumer
        of a stream catch up before the next step."""
        emit = self.emit
        if emit is None:
            return
        if "updates" in self.modes:
            for task, result in zip(tasks, results, strict=True):
                if task.streamed:  # (those of several tasks went out as they ended)
                    continue
                extra = _CACHED if task.cached else {}  # saved writes of an earlier run
                emit("updates", {task.name: result.update_view(), **extra})
                emit_task_end(self, task)
        elif "tasks" in self.modes:
            for task in tasks:
                emit_task_end(self, task)
        if "values" in self.modes and writes_output(results, self.graph.output_keys):
            emit("values", self.output())
        if self.sink is not None:
            await self.sink.drained()

    def _emit_interrupt(self, interrupts: tuple[Interrupt, ...]) -> None:
        """A task's pause, as it happens (as LangGraph): ``{"__interrupt__": (...)}`` in
        ``updates``, the state so far with its ``"__interrupt__"`` in ``values``."""
        emit = self.emit
        if emit is None:
            return
        if "updates" in self.modes:
            emit("updates", {"__interrupt__": interrupts})
        if "values" in self.modes:
            emit("values", {**self.output(), "__interrupt__": interrupts})

    def _emit_pause(self, tasks: list[Task]) -> None:
        """The ``updates`` events of a run pausing, as LangGraph: each task of the step
        that finished and was not streamed yet, then, when no task's ``interrupt()``
        paused it (it pauses before or after a node, or at a subgraph's), one empty
        ``{"__interrupt__": ()}``."""
        emit = self.emit
        if emit is None or self.namespace or "updates" not in self.modes:
            return
        for task in tasks:
            if task.result is not None and not task.streamed:
                extra = _CACHED if task.cached else {}
                emit("updates", {task.name: task.result.update_view(), **extra})
        if not any(self.paused_with):
            emit("updates", {"__interrupt__": ()})

    def _apply_paused_step(self) -> None:
        """A top-level run that paused part-way through a step: its finished tasks'
        writes applied to the state it returns (not saved), with one last ``values``
        event when they change an output key, as LangGraph."""
        tasks = [t for t in self.paused_tasks if t.result is not None]
        if not tasks:
            return
        updated = apply_step(self, tasks, [t.result for t in tasks])  # type: ignore[misc]
        if self.emit is not None and "values" in self.modes and not updated.isdisjoint(
            self.graph.output_keys
        ):
            self.emit("values", self.output())

    def output(self) -> dict[str, Any]:
        """The state restricted to the output keys (channels without a value are left out);
        a root-channel graph's bare value."""
        values = self.values
        if self.graph.root_state:
            return values.get(ROOT)  # type: ignore[return-value]
        return {key: values[key] for key in self.graph.output_keys if key in values}
