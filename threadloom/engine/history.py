"""``get_state_history``'s snapshots, read lazily: each checkpoint is decoded and becomes
its ``StateSnapshot`` when the caller gets to it (``checkpoint/listing.py``), so the first
snapshot of a long thread, or ``limit=``, decodes only what is asked for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import CheckpointTuple
from threadloom.checkpoint.stored import StoredCheckpointer
from threadloom.engine.snapshot import StateSnapshot, _without_id, history_of, shown, to_snapshot

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.compiled import CompiledGraph


def history_sync(
    graph: CompiledGraph,
    cfg: dict[str, Any],
    cp: BaseCheckpointer,
    filter: Mapping[str, Any] | None,  # noqa: A002
    before: Mapping[str, Any] | None,
    limit: int | None,
) -> Iterator[StateSnapshot]:
    """The snapshots of ``cfg``'s thread (and namespace), newest first, for sync callers:
    the checkpointer's sync ``list`` on this thread, one checkpoint decoded per snapshot
    the caller takes (a store's own ``list``; a subclass's ``list()`` is read whole)."""
    cfg = _without_id(cfg)
    if type(cp).list is StoredCheckpointer.list:  # (not a subclass's own list())
        convert = snapshots_as_read(graph)
        snaps = cp.list_as(cfg, convert, filter=filter,  # type: ignore[attr-defined]
                           before=before, limit=limit)
        if graph.root_state:
            return (shown(graph, s) for s in snaps)
        return snaps  # type: ignore[no-any-return]
    return iter(history_of(graph, list(cp.list(cfg, filter=filter, before=before,
                                               limit=limit))))


async def history(
    graph: CompiledGraph,
    cfg: dict[str, Any],
    cp: BaseCheckpointer,
    filter: Mapping[str, Any] | None,  # noqa: A002
    before: Mapping[str, Any] | None,
    limit: int | None,
) -> AsyncIterator[StateSnapshot]:
    """Async ``history_sync``: the checkpointer's ``alist``, each tuple becoming its
    snapshot as it arrives (a threadloom store reads a page per worker hop)."""
    cfg = _without_id(cfg)
    if isinstance(cp, StoredCheckpointer) and type(cp).list is StoredCheckpointer.list:
        snaps: AsyncIterator[Any] = cp.alist_as(cfg, snapshots_as_read(graph),
                                                filter=filter, before=before, limit=limit)
        async for snap in snaps:
            yield shown(graph, snap) if graph.root_state else snap
        return
    if getattr(cp, "inline_io", False):
        for snap in history_sync(graph, cfg, cp, filter, before, limit):
            yield snap
        return
    convert = snapshots_as_read(graph)
    async for item in cp.alist(cfg, filter=filter, before=before, limit=limit):
        snap = convert(item)
        yield shown(graph, snap) if graph.root_state else snap


def snapshots_as_read(graph: CompiledGraph) -> Any:
    """``checkpoint tuple -> StateSnapshot`` for a thread's checkpoints read newest first:
    ``history_of`` one at a time. A checkpoint's children are all newer, so each is met
    before it; the oldest child its step saved (``step_children``'s) is the last one met."""
    children: dict[str, CheckpointTuple] = {}

    def convert(item: CheckpointTuple) -> StateSnapshot:
        snap = to_snapshot(graph, item, children.pop(item.checkpoint["id"], None))
        parent = item.parent_config
        if parent is not None and item.metadata.get("source") in ("loop", "update"):
            parent_id = parent.get("configurable", {}).get("checkpoint_id")
            if parent_id is not None:
                children[parent_id] = item
        return snap

    return convert
