"""The ``result`` of a history snapshot's lone task in a thread saved by an earlier
threadloom, read from the checkpoint its step saved.

Every task's writes are saved now, as LangGraph saves them (a step of several tasks as
each finishes, a step of one task with its checkpoint: ``put_with_writes``), and
``snapshot.saved_tasks`` reads them. Earlier versions saved only the checkpoint of a step
of one task; for those steps the task's result is rebuilt here, when history is read,
from that next checkpoint: its metadata ``writes`` names the keys the task wrote, and a
key without a reducer holds exactly the value written (a key with a reducer: ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from threadloom.engine.channels import LastValue

if TYPE_CHECKING:
    from threadloom.checkpoint.base import CheckpointTuple
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.snapshot import StateSnapshot


def with_step_results(
    graph: CompiledGraph, items: Sequence[CheckpointTuple], snaps: list[StateSnapshot]
) -> list[StateSnapshot]:
    """``snaps`` (of ``items``, newest first) with each lone finished task's result filled
    in from the first checkpoint its step saved, when that one is among ``items``."""
    children: dict[str, CheckpointTuple] = {}
    for item in reversed(items):  # oldest first: the step's own checkpoint, not a replay's
        parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        if parent is not None and item.metadata.get("source") in ("loop", "update"):
            children.setdefault(parent, item)
    if not children:
        return snaps
    out = []
    for item, snap in zip(items, snaps, strict=True):
        child = children.get(item.checkpoint["id"])
        if child is not None and len(snap.tasks) == 1:
            task = snap.tasks[0]
            if task.result is None and task.error is None and not task.interrupts:
                result = _result_from(graph, task.name, child)
                if result is not None:
                    snap = snap._replace(tasks=(task._replace(result=result),))
        out.append(snap)
    return out


def _result_from(graph: CompiledGraph, name: str, child: CheckpointTuple) -> Any:
    """What task ``name`` wrote, as ``child`` (the checkpoint of its step) shows it, or
    None when that cannot be told exactly (a key with a reducer, an unknown key)."""
    writes = child.metadata.get("writes")
    if not isinstance(writes, dict) or name not in writes:
        return None
    keys = writes[name]
    values = child.checkpoint["channel_values"]
    channels = graph.channels
    out: dict[str, Any] = {}
    for key in keys:
        if type(channels.get(key)) is not LastValue or key not in values:
            return None
        if key in graph.output_keys:
            out[key] = values[key]
    return out
