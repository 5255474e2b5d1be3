"""How a run begins: from new input, from a thread's saved checkpoint, or resuming its
interrupts with ``Command(resume=...)``.

``start_run`` (called by ``RunLoop`` in scheduler.py) returns the plan of the first super-step
(and, when resuming, each paused task's answers), after the input has been applied and, on
a checkpointed thread, saved as the input checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import INTERRUPT, RESUME, Checkpoint
from threadloom.engine.apply import apply_from
from threadloom.engine.routing import Planned, next_tasks, plan_from_saved
from threadloom.engine.tasks import Task, TaskResult
from threadloom.engine.writes import writes_of
from threadloom.errors import CheckpointNotFoundError, EmptyInputError, GraphRunError
from threadloom.types import START, Command, Interrupt

if TYPE_CHECKING:
    from threadloom.engine.scheduler import RunLoop

Resume = dict[str, list[Any]]
"""Task id -> the answers its ``interrupt()`` calls receive, in call order."""


async def start_run(loop: RunLoop, input: Any) -> tuple[Planned, Resume | None]:
    """Load the thread's latest (or the configured) checkpoint and plan the first step.

    Raises:
        CheckpointNotFoundError: the config names a checkpoint the thread lacks.
        EmptyInputError: no input and nothing saved to continue from.
    """
    if loop.cp is not None:
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
        return plan_from_saved(loop, loop.saved), None
    return await _start_input(loop, input), None


def _start_resume(loop: RunLoop, cmd: Command) -> tuple[Planned, Resume]:
    if loop.saved is None:
        raise EmptyInputError("Command(resume=...) needs a thread with a paused run")
    planned = plan_from_saved(loop, loop.saved)
    resume: Resume = {}
    previous: Resume = {}
    pending: dict[str, list[Interrupt]] = {}
    for w in loop.saved.pending_writes:
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
            f"thread {loop.config.get('configurable', {}).get('thread_id')!r} has "
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
        planned = planned.with_command(loop, cmd)
    return planned, resume


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
