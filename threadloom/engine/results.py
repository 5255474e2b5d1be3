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


def step_children(items: Sequence[CheckpointTuple]) -> dict[str, CheckpointTuple]:
    """Checkpoint id -> the first checkpoint its next step saved, of ``items`` (a
    thread's checkpoints, newest first): where a lone finished task's result is read."""
    children: dict[str, CheckpointTuple] = {}
    for item in reversed(items):  # oldest first: the step's own checkpoint, not a replay's
        parent = item.parent_config
        if parent is not None and item.metadata.get("source") in ("loop", "update"):
            parent_id = parent.get("configurable", {}).get("checkpoint_id")
            if parent_id is not None and parent_id not in children:
                children[parent_id] = item
    return children


def result_from(graph: CompiledGraph, name: str, child: CheckpointTuple) -> Any:
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
