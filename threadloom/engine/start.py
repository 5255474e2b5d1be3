"""How a run begins: from new input, from a thread's saved checkpoint, or resuming its
interrupts with ``Command(resume=...)``.

``start_run`` (called by ``RunLoop`` in scheduler.py) returns the plan of the first super-step
(and, when resuming, each paused task's answers), after the input has been applied and, on
a checkpointed thread, saved as the input checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import (
    INTERRUPT,
    RESUME,
    SCHEDULED,
    SPECIAL_WRITE_CHANNELS,
    Checkpoint,
    CheckpointTuple,
    fuses_own_writes,
)
from threadloom.engine.apply import apply_from
from threadloom.engine.command_writes import command_writes, next_command_task
from threadloom.engine.replay import begin as begin_travel
from threadloom.engine.routing import Planned, next_tasks, plan_from_saved
from threadloom.engine.runtime import is_interrupt_id
from threadloom.engine.tasks import Held, Task, TaskResult, task_id, writes_output
from threadloom.engine.writes import writes_of
from threadloom.errors import (
    CheckpointNotFoundError,
    EmptyInputError,
    GraphRunError,
    ResumeError,
    SerializationError,
)
from threadloom.types import START, Command, Interrupt

if TYPE_CHECKING:
    from threadloom.engine.scheduler import RunLoop

Resume = dict[str, "dict[str, Any] | Held"]
"""Task id -> the answers its ``interrupt()`` calls receive (interrupt id -> value), or
``Held`` for a paused task left unanswered."""


async def start_run(loop: RunLoop, input: Any) -> tuple[Planned, Resume | None]:
    """Load the thread's latest (or the configured) checkpoint and plan the first step.

    Raises:
        CheckpointNotFoundError: the config names a checkpoint the thread lacks.
        EmptyInputError: no input and nothing saved to continue from.
    """
    if loop.cp is not None and not loop.fresh:
        loop.saved = await loop.cp_call("get_tuple", loop.config)
        if loop.saved is None and loop.config_id():
            raise CheckpointNotFoundError(
                f"checkpoint {loop.config_id()!r} not found in thread "
                f"{loop.config['configurable'].get('thread_id')!r}"
            )
    if loop.saved is not None:
        _refuse_foreign_state(loop, loop.saved)
        restore(loop, loop.saved.checkpoint)
        loop.checkpoint_config = loop.fenced(loop.saved.config)
        begin_travel(loop, input, loop.saved)
    if isinstance(input, Command) and input.resume is None and input.goto == ():
        input = input.update
    if isinstance(input, Command):
        started = await _start_resume(loop, input)
        _emit_resumed_values(loop)
        return started
    if input is None:
        if loop.saved is None:
            raise EmptyInputError(
                "invoke(None) needs a thread with a saved checkpoint to continue from; "
                "this thread has none. Pass an input."
            )
        # a replay (a checkpoint_id named) runs the step anew, its saved writes unused
        replay = loop.config_id() is not None
        planned = await _continue(loop, loop.saved)
        return planned, None if replay else _continued(loop.saved)
    return await _start_input(loop, input), None


def _emit_resumed_values(loop: RunLoop, before_start: bool = False) -> None:
    """A run that continues a saved state (``None`` or a ``Command`` as input) streams
    that state first in ``values`` mode, as LangGraph (``before_start``: the saved state
    holds only a START step's input, still to apply, so nothing may be versioned yet)."""
    if loop.emit is not None and "values" in loop.modes and (loop.versions or before_start):
        loop.emit("values", loop.output())


async def _continue(loop: RunLoop, saved: CheckpointTuple) -> Planned:
    """``invoke(None)``: go on from ``saved``. Replaying a checkpoint named in the config
    first saves a ``"fork"`` copy of it, as LangGraph, so the replay is a new branch; a
    checkpoint whose next task is START runs the START step with its saved input. The
    saved state streams first (``values``), before that START step applies the input:
    ``{}`` for a thread's input checkpoint, as LangGraph."""
    pending = start_writes(saved)
    if loop.config_id() and saved.metadata.get("source") not in ("update", "fork"):
        await _save_fork(loop, saved, pending)
    _emit_resumed_values(loop, pending is not None)
    if pending is not None:
        return await run_start_step(loop, pending)
    return plan_from_saved(loop, saved)


async def _save_fork(
    loop: RunLoop, saved: CheckpointTuple, pending: list[tuple[str, Any]] | None
) -> None:
    """The replay's ``"fork"`` checkpoint: ``saved``'s state and next tasks, one step on."""
    kept = plan_from_saved(loop, saved) if pending is None else Planned([START], [])
    loop.step += 1
    saving = loop.save("fork", set(), [], Planned(kept.tasks, kept.sends))
    if saving is not None:
        await saving
    if pending and loop.durability != "exit":
        await put_start_writes(loop, pending)


async def _start_resume(loop: RunLoop, cmd: Command) -> tuple[Planned, Resume | None]:
    if loop.saved is None:
        if cmd.resume is None:  # update and goto on a new thread: its first input, as LangGraph
            return await _start_input(loop, cmd.update or {}, cmd.goto_list()), None
        raise EmptyInputError(
            f"Command(resume=...) on thread {_thread(loop)!r}, which has no checkpoint: it "
            "needs a thread with a paused run (check the thread id, or start the thread "
            "with an input)")
    if cmd.resume is not None and not loop.saved.checkpoint.get("next") and not any(
        w.channel == INTERRUPT for w in loop.saved.pending_writes
    ):
        raise EmptyInputError(
            f"Command(resume=...) on thread {_thread(loop)!r}, which has no pending "
            f"interrupt: its run finished at step {loop.step} ({_holds(loop.saved)}); "
            "start a new run on it with an input instead"
        )
    planned = plan_from_saved(loop, loop.saved)
    # a replay runs the named checkpoint's tasks again (plan_from_saved): one that
    # finished after its interrupt since is paused again, here
    previous, pending = paused_tasks(loop.saved, replay=loop.config_id() is not None)
    resume: Resume = {}
    value = cmd.resume
    ids = [i.id for interrupts in pending.values() for i in interrupts]
    thread = loop.config.get("configurable", {}).get("thread_id")
    if loop.namespace:
        value = _as_answered_here(value, ids)
    if isinstance(value, Mapping) and value and all(is_interrupt_id(k) for k in value):
        # A resume map: each named interrupt gets its answer; a paused task none of whose
        # interrupts is named stays paused (it does not run), as in LangGraph.
        if pending and not any(i in value for i in ids):
            raise ResumeError(
                f"the resume map names none of the pending interrupts of thread "
                f"{thread!r} (given: {sorted(value)}; pending: {ids}; see "
                "get_state(...).interrupts)"
            )
        for tid, interrupts in pending.items():
            answered = {i.id: value[i.id] for i in interrupts if i.id in value}
            if answered:
                resume[tid] = {**previous.get(tid, {}), **answered}
            else:
                resume[tid] = Held(interrupts)
    elif len(ids) > 1:
        # As LangGraph 1.x: which interrupt one value answers would depend on task order.
        raise ResumeError(
            "When there are multiple pending interrupts, you must specify the interrupt id "
            f"when resuming: thread {thread!r} has {len(ids)} pending interrupts; resume "
            f"with a dict mapping interrupt ids to values, e.g. Command(resume={{id: value, "
            f"...}}) (ids: {ids}; see get_state(...).interrupts)"
        )
    else:
        for tid, interrupts in pending.items():
            answers = previous.get(tid, {})
            # a task paused by its subgraph's interrupt_before has no interrupt to answer;
            # a Command without resume (update/goto only) answers none: the task asks again
            answering = bool(interrupts) and cmd.resume is not None
            resume[tid] = {**answers, interrupts[0].id: value} if answering else answers
    if cmd.update is not None or cmd.goto:
        planned = await _with_command(loop, planned, cmd)
    return planned, resume


def _as_answered_here(value: Any, ids: list[str]) -> Any:
    """A subgraph's resume from its parent task: the parent's one answer names the
    interrupt the parent recorded; after time travel the subgraph may wait on that same
    question under another id (a fork, a replay since). As LangGraph's resume value, the
    lone answer then answers the lone question."""
    if len(ids) == 1 and isinstance(value, Mapping) and len(value) == 1 and ids[0] not in value:
        return {ids[0]: next(iter(value.values()))}
    return value


async def _with_command(loop: RunLoop, planned: Planned, cmd: Command) -> Planned:
    """Save ``cmd``'s update and goto as writes of the paused checkpoint (so a step that
    pauses again keeps them, as LangGraph's null-task writes), then apply them."""
    writes = command_writes(loop, cmd)
    if loop.cp is not None and loop.durability != "exit" and loop.saved is not None:
        await loop._flush_pending_put()  # noqa: SLF001
        await loop.cp_call("put_writes", loop.checkpoint_config, writes,
                           next_command_task(loop.saved.pending_writes))
    return planned.with_command_writes(loop, writes[:-1], cmd.goto_list())


def _continued(saved: CheckpointTuple) -> Resume | None:
    """``invoke(None)`` on a paused thread: each paused task keeps the answers it had, so
    a paused subgraph continues where it stopped instead of starting over."""
    previous, pending = paused_tasks(saved)
    if not pending:
        return None
    return {tid: previous.get(tid, {}) for tid in pending}


def paused_tasks(
    saved: CheckpointTuple, *, replay: bool = False
) -> tuple[dict[str, dict[str, Any]], dict[str, list[Interrupt]]]:
    """A checkpoint's paused tasks: task id -> answers its interrupts already had, and
    task id -> its pending interrupts (a task whose writes were saved since is done,
    unless ``replay``: a replay runs it again)."""
    previous: dict[str, dict[str, Any]] = {}
    pending: dict[str, list[Interrupt]] = {}
    done: set[str] = set()
    for w in saved.pending_writes:
        if w.channel == RESUME:
            # interrupt id -> answer (a list, the call-order form of earlier versions,
            # matches no id: that node asks again)
            if isinstance(w.value, Mapping):
                previous[w.task_id] = dict(w.value)
        elif w.channel == INTERRUPT:
            pending[w.task_id] = [
                Interrupt(*i) if not isinstance(i, Interrupt) else i for i in w.value
            ]
        elif w.channel == SCHEDULED or w.channel not in SPECIAL_WRITE_CHANNELS:
            done.add(w.task_id)  # a task's writes are saved when it finished
    for tid in () if replay else done:
        pending.pop(tid, None)
    return previous, pending


async def _start_input(loop: RunLoop, input: Any, goto: list[Any] | None = None) -> Planned:
    writes = writes_of(loop.graph, START, input, loop.step + 1, input_mode=True)
    if loop.graph.validate_input is not None:
        present = set(loop.values)
        writes = loop.graph.validate_input(writes, present)
    loop.step += 1
    if loop.cp is not None:
        await _save_input(loop, writes)
    return await run_start_step(loop, writes, goto)


async def _save_input(loop: RunLoop, writes: list[tuple[str, Any]]) -> None:
    """Save the input checkpoint, as LangGraph: the state before the input, ``next`` the
    START task, the input kept as that task's pending writes (a replay of this checkpoint
    runs it again). With ``"sync"`` durability both are one transaction, where LangGraph
    makes two (a crash between them left the checkpoint without its input)."""
    fused = loop.durability == "sync" and bool(writes) and fuses_own_writes(loop.cp)
    if fused:  # saved with the checkpoint, one transaction (put_with_own_writes)
        loop.input_writes = list(writes)
    saving = loop.save("input", set(), [], Planned([START], []))
    if saving is not None:
        await saving
    if not fused and loop.durability != "exit" and writes:
        await put_start_writes(loop, writes)


async def put_start_writes(loop: RunLoop, writes: list[tuple[str, Any]]) -> None:
    """Save ``writes`` as the pending writes of the START task of the last checkpoint."""
    await loop._flush_pending_put()  # noqa: SLF001
    cid = (loop.checkpoint_config.get("configurable") or {}).get("checkpoint_id", "")
    await loop.cp_call("put_writes", loop.checkpoint_config, *loop.start_writes(cid, writes))


async def run_start_step(loop: RunLoop, writes: list[tuple[str, Any]],
                         goto: list[Any] | None = None) -> Planned:
    """The START step (LangGraph's ``__start__`` task): apply the input ``writes``, route
    from START, save the step's ``"loop"`` checkpoint; return the first node step's plan."""
    loop.step += 1
    updated = apply_from(loop, writes, START, loop.step)
    start = Task.virtual_start()
    start.result = TaskResult(writes, list(goto or ()))
    planned = await next_tasks(loop, [start], [start.result])
    if loop.cp is not None:
        saving = loop.save("loop", updated, [start], planned)
        if saving is not None:
            await saving
    if "values" in loop.modes and loop.emit is not None and writes_output(
            [start.result], loop.graph.output_keys):
        loop.emit("values", loop.output())
    return planned


def start_writes(saved: CheckpointTuple) -> list[tuple[str, Any]] | None:
    """The input writes of a saved checkpoint whose next task is START, else None."""
    if list(saved.checkpoint.get("next", ())) != [START]:
        return None
    tid = task_id(saved.checkpoint["id"], int(saved.metadata.get("step", -1)) + 1, 0, START)
    return [(w.channel, w.value) for w in saved.pending_writes if w.task_id == tid]


def _thread(loop: RunLoop) -> Any:
    return (loop.config.get("configurable") or {}).get("thread_id")


def _holds(saved: CheckpointTuple) -> str:
    """What a saved checkpoint holds, for an error message: keys, next nodes, interrupts."""
    cp = saved.checkpoint
    keys = sorted(k for k in cp["channel_values"] if not k.startswith("__"))
    nxt = [n if isinstance(n, str) else n.get("node") for n in cp.get("next", ())]
    pending = sum(len(w.value) for w in saved.pending_writes if w.channel == INTERRUPT)
    return f"state keys {keys}, next nodes {nxt}, {pending} pending interrupt(s)"


def _refuse_foreign_state(loop: RunLoop, saved: CheckpointTuple) -> None:
    """Refuse to run on a thread saved by a graph with other state keys: this graph would
    drop the values of the keys it lacks from the thread's next checkpoint.

    Raises:
        GraphRunError: naming the thread, what it holds and the keys this graph lacks.
    """
    channels = loop.channels
    foreign = sorted(
        k for k in saved.checkpoint["channel_values"] if k not in channels and k[:2] != "__"
    )
    if foreign:
        raise GraphRunError(
            f"thread {_thread(loop)!r} was saved by a graph with other state keys: it holds "
            f"{_holds(saved)}, and this graph's state has no key {foreign} (its keys: "
            f"{sorted(channels)}); running would lose those values. Continue the thread "
            "with the graph that made it, or use a new thread_id"
        )


def restore(loop: RunLoop, cp: Checkpoint) -> None:
    """Set the run's values, versions and join barriers to a saved checkpoint's."""
    channels = loop.channels
    values = loop.values
    for key, value in cp["channel_values"].items():
        if key in channels:
            values[key] = value
    loop.versions = dict(cp["channel_versions"])
    bad = {k: v for k, v in loop.versions.items() if type(v) is not int}
    step = loop.saved.metadata.get("step", -1) if loop.saved else -2
    if bad or type(step) is not int:  # threadloom writes integers only: a forged row
        cid = (loop.saved.config.get("configurable") or {}).get("checkpoint_id") \
            if loop.saved else None
        raise SerializationError(
            f"checkpoint {cid!r} of thread {_thread(loop)!r} holds channel versions or a "
            f"step that are not integers (versions {bad}, step {step!r}): threadloom did "
            "not write it"
        )
    loop.barriers = {k: set(v) for k, v in cp.get("barriers", {}).items()}
    loop.step = step
