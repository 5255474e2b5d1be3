"""A resume ``Command``'s ``update`` and ``goto`` as writes of a null task, as LangGraph.

``Command(resume=..., update=..., goto=...)`` on a paused thread does not make a
checkpoint of its own: its update and goto targets are saved as pending writes of the
paused checkpoint under a task id of their own (``__command__N``: LangGraph uses one
null task id; a number per command keeps a second command on the same checkpoint from
colliding with the first, since writes are idempotent per task and index). Each time
that checkpoint is loaded to run on, the writes are applied before the step and the
targets join the step's tasks; ``get_state`` shows the update applied. So an update is
kept even when the step pauses again, and a goto target that finished while another
task paused is not run twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import SCHEDULED, SPECIAL_WRITE_CHANNELS
from threadloom.engine.apply import apply_writes
from threadloom.types import Command, Send

if TYPE_CHECKING:
    from threadloom.checkpoint.base import CheckpointTuple, PendingWrite
    from threadloom.engine.scheduler import RunLoop

COMMAND_TASK = "__command__"
"""Prefix of the task ids a resume Command's writes are saved under."""
COMMAND_NODE = "__resume__"
"""The writer named in reducer errors and routing errors for a Command's writes."""


def is_command_task(task_id: str) -> bool:
    """Whether ``task_id`` holds a resume Command's writes (not a node's)."""
    return task_id.startswith(COMMAND_TASK)


def command_writes(loop: RunLoop, cmd: Command) -> list[tuple[str, Any]]:
    """``cmd``'s update as ``(key, value)`` writes, then its goto as a ``SCHEDULED`` write."""
    from threadloom.engine.writes import writes_of

    writes: list[tuple[str, Any]] = []
    if cmd.update is not None:
        writes = list(writes_of(loop.graph, COMMAND_NODE, cmd.update, loop.step)[0])
    goto = [g if isinstance(g, str) else {"node": g.node, "arg": g.arg}
            for g in cmd.goto_list()]
    writes.append((SCHEDULED, goto))
    return writes


def next_command_task(pending: Iterable[PendingWrite]) -> str:
    """A task id for one more Command on a checkpoint with these pending writes."""
    used = {w.task_id for w in pending if is_command_task(w.task_id)}
    return f"{COMMAND_TASK}{len(used)}"


def grouped(pending: Iterable[PendingWrite]) -> list[tuple[list[tuple[str, Any]], list[Any]]]:
    """The saved Commands of a checkpoint, in order: (update writes, goto targets) each."""
    found: dict[str, tuple[list[tuple[str, Any]], list[Any]]] = {}
    for w in pending:
        if not is_command_task(w.task_id):
            continue
        writes, goto = found.setdefault(w.task_id, ([], []))
        if w.channel == SCHEDULED:
            goto.extend(g if isinstance(g, str) else Send(g["node"], g.get("arg"))
                        for g in w.value or ())
        elif w.channel not in SPECIAL_WRITE_CHANNELS:
            writes.append((w.channel, w.value))
    return [found[k] for k in sorted(found, key=lambda t: int(t[len(COMMAND_TASK):] or 0))]


def apply_command(loop: RunLoop, writes: list[tuple[str, Any]]) -> None:
    """Apply one Command's update writes to the run; the keys join the next checkpoint."""
    if writes:
        loop.carried |= apply_writes(loop, writes, [COMMAND_NODE] * len(writes))


def command_view(graph: Any, saved: CheckpointTuple, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the saved Commands' updates applied (for ``get_state``)."""
    from types import SimpleNamespace

    commands = grouped(saved.pending_writes)
    if not commands:
        return values
    view = SimpleNamespace(values=dict(values), channels=graph.channels, graph=graph,
                           cp=None, step=int(saved.metadata.get("step", -1)))
    for writes, _goto in commands:
        if writes:
            apply_writes(view, writes, [COMMAND_NODE] * len(writes))  # type: ignore[arg-type]
    return {k: view.values[k] for k in graph.specs if k in view.values}
