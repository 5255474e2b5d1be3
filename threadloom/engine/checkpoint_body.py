"""What a run's checkpoint holds: its body (``checkpoint_body``) and its metadata
(``checkpoint_metadata``), as LangGraph's ``Checkpoint`` and ``CheckpointMetadata``; the
saving itself is ``persistence.py``'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.engine.routing import Planned, saved_next
from threadloom.engine.run_metadata import run_metadata
from threadloom.engine.untracked import tracked_next, tracked_values

if TYPE_CHECKING:
    from threadloom.checkpoint.base import Checkpoint
    from threadloom.engine.tasks import Task

__all__ = ["checkpoint_body", "checkpoint_metadata"]


def checkpoint_body(loop: Any, cid: str, ts: str, planned: Planned) -> Checkpoint:
    """The checkpoint ``cid`` (made at ``ts``, ISO 8601) of the state of ``loop`` (a
    ``RunLoop``) now, with ``planned`` as its ``next``; untracked keys left out."""
    barriers = loop.barriers
    checkpoint: Checkpoint = {
        "v": 1,
        "id": cid,
        "ts": ts,  # the id's own time: a store need not keep it
        "channel_values": dict(loop.values),
        "channel_versions": dict(loop.versions),
        "versions_seen": {},  # routing is explicit in "next"; kept for the format
        "next": saved_next(planned) if planned.sends else list(planned.tasks),
        "barriers": {k: sorted(v) for k, v in barriers.items() if v} if barriers else {},
    }
    if untracked := loop.graph.untracked_keys:  # values of the run only: not saved
        checkpoint["channel_values"] = tracked_values(untracked, loop.values)
        checkpoint["next"] = tracked_next(untracked, checkpoint["next"])
    return checkpoint


def checkpoint_metadata(loop: Any, source: str, tasks: list[Task]) -> dict[str, Any]:
    """A checkpoint's metadata: what saved it (``source``), the step, each task's written
    keys, the enclosing graphs' checkpoints, and the run's own keys (``run_metadata``)."""
    meta = {
        "source": source,
        "step": loop.step,
        "writes": ({tasks[0].name: _written(tasks[0])} if len(tasks) == 1 else
                   {t.name: _written(t) for t in tasks}),
        "parents": dict(loop.parents) if loop.parents else {},
    }
    extra = loop.__dict__.get("_run_meta")
    if extra is None:
        extra = loop.__dict__["_run_meta"] = {
            k: v for k, v in run_metadata(loop.config).items() if k not in meta}
    if extra:
        meta.update(extra)
    return meta


def _written(task: Task) -> list[str]:
    """The sorted channels a task wrote (its metadata ``writes`` entry)."""
    result = task.result
    if result is None or not result.writes:
        return []
    writes = result.writes
    if len(writes) == 1:
        return [writes[0][0]]
    return sorted({k for k, _ in writes})
