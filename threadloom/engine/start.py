"""How a run begins: from new input, from a thread's saved checkpoint, or resuming its
interrupts with ``Command(resume=...)``.

``start_run`` (called by ``RunLoop`` in scheduler.py) returns the plan of the first super-step
(and, when resuming, each paused task's answers), after the input has been applied and, on
a checkpointed thread, saved as the input checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import INTERRUPT, RESUME, SCHEDULED, Checkpoint, CheckpointTuple
from threadloom.engine.apply import apply_from
from threadloom.engine.routing import Planned, next_tasks, plan_from_saved
from threadloom.engine.runtime import is_interrupt_id
from threadloom.engine.tasks import Held, Task, TaskResult
from threadloom.engine.writes import writes_of
from threadloom.errors import CheckpointNotFoundError, EmptyInputError, ResumeError
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
        restore(loop, loop.saved.checkpoint)
        loop.checkpoint_config = loop.fenced(loop.saved.config)
    if isinstance(input, Command) and input.resume is None and input.goto == ():
        input = input.update
    if isinstance(input, Command):
        return _start_resume(loop, input)
    if input is None:
        if loop.saved is None:
            raise EmptyInputError(
                "invoke(None) needs a thread with a saved checkpoint to continue from; "
                "this thread has none. Pass an input."
            )
        # a replay (a checkpoint_id named) runs the step anew, its saved writes unused
        replay = loop.config_id() is not None
        return plan_from_saved(loop, loop.saved), None if replay else _continued(loop.saved)
    return await _start_input(loop, input), None


def _start_resume(loop: RunLoop, cmd: Command) -> tuple[Planned, Resume]:
    if loop.saved is None:
        raise EmptyInputError("Command(resume=...) needs a thread with a paused run")
    planned = plan_from_saved(loop, loop.saved)
    previous, pending = paused_tasks(loop.saved)
    resume: Resume = {}
    value = cmd.resume
    ids = [i.id for interrupts in pending.values() for i in interrupts]
    thread = loop.config.get("configurable", {}).get("thread_id")
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
            # a task paused by its subgraph's interrupt_before has no interrupt to answer
            resume[tid] = {**answers, interrupts[0].id: value} if interrupts else answers
    if cmd.update is not None or cmd.goto:
        planned = planned.with_command(loop, cmd)
    return planned, resume


def _continued(saved: CheckpointTuple) -> Resume | None:
    """``invoke(None)`` on a paused thread: each paused task keeps the answers it had, so
    a paused subgraph continues where it stopped instead of starting over."""
    previous, pending = paused_tasks(saved)
    if not pending:
        return None
    return {tid: previous.get(tid, {}) for tid in pending}


def paused_tasks(
    saved: CheckpointTuple,
) -> tuple[dict[str, dict[str, Any]], dict[str, list[Interrupt]]]:
    """A checkpoint's paused tasks: task id -> answers its interrupts already had, and
    task id -> its pending interrupts (a task whose writes were saved since is done)."""
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
        elif w.channel == SCHEDULED:
            done.add(w.task_id)
    for tid in done:
        pending.pop(tid, None)
    return previous, pending


async def _start_input(loop: RunLoop, input: Any) -> Planned:
    writes = writes_of(loop.graph, START, input, loop.step + 1, input_mode=True)
    if loop.graph.validate_input is not None:
        present = set(loop.values)
        writes = loop.graph.validate_input(writes, present)
    updated = apply_from(loop, writes, START, loop.step + 1)
    loop.step += 1
    planned = await next_tasks(loop, [Task.virtual_start()], [TaskResult(writes, [])])
    saving = loop.save("input", updated, [], planned)
    if saving is not None:
        await saving
    if "values" in loop.modes and loop.emit is not None:
        loop.emit("values", loop.output())
    return planned


def restore(loop: RunLoop, cp: Checkpoint) -> None:
    """Set the run's values, versions and join barriers to a saved checkpoint's."""
    channels = loop.channels
    values = loop.values
    for key, value in cp["channel_values"].items():
        if key in channels:
            values[key] = value
    loop.versions = dict(cp["channel_versions"])
    loop.barriers = {k: set(v) for k, v in cp.get("barriers", {}).items()}
    loop.step = int(loop.saved.metadata.get("step", -1)) if loop.saved else -2
