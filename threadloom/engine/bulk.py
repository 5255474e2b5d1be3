"""Editing a thread's state by super-steps: ``update_state`` and ``bulk_update_state``.

As LangGraph: ``bulk_update_state(config, supersteps)`` takes a list of super-steps, each
a list of ``StateUpdate(values, as_node[, task_id])`` applied together as one step and
saved as one checkpoint, the next step reading the checkpoint the last one saved.
``update_state(config, values, as_node)`` is one super-step of one update.

The writes of an update are also saved as the pending writes of the checkpoint it is
applied to, under the id of that checkpoint's next task of the same node, so its
history shows them as that task's ``result`` (as a run's own tasks show theirs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadloom.engine.routing import Planned, next_tasks, plan_from_saved
from threadloom.engine.tasks import Task, TaskResult, task_id
from threadloom.engine.writes import writes_of
from threadloom.errors import InvalidUpdateError
from threadloom.types import END, START, StateUpdate

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer, CheckpointTuple
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.scheduler import RunLoop

INPUT = "__input__"
"""``as_node`` of an update saved as a run's input (an ``"input"`` checkpoint whose next
task is START), as LangGraph's."""

COPY = "__copy__"
"""``as_node`` of a copy-fork: the checkpoint copied as a sibling, then (given a list of
``StateUpdate``) the copy updated."""


async def bulk_update(
    graph: CompiledGraph,
    cfg: dict[str, Any],
    cp: BaseCheckpointer,
    supersteps: Sequence[Sequence[Any]],
) -> dict[str, Any]:
    """Apply each super-step of updates in turn; return the config of the last checkpoint.

    Raises:
        ValueError: no super-steps, or a super-step without updates.
        InvalidUpdateError: an update the step cannot apply (see ``apply_updates``).
    """
    if len(supersteps) == 0:
        raise ValueError("No supersteps provided")
    if any(len(step) == 0 for step in supersteps):
        raise ValueError("No updates provided")
    from threadloom.engine.snapshot import update_state

    config = cfg
    for step in supersteps:
        updates = [StateUpdate(*u) for u in step]
        config = await update_state(graph, config, cp, updates)
    return config


async def apply_updates(
    graph: CompiledGraph, loop: RunLoop, cfg: dict[str, Any], cp: BaseCheckpointer,
    updates: list[StateUpdate],
) -> dict[str, Any]:
    """One super-step of ``updates`` on the checkpoint ``cfg`` names (``loop`` holds the
    thread); return the new checkpoint's config.

    Raises:
        InvalidUpdateError: several updates with one that clears, copies or is input, an
            update of several without ``as_node``, or a node the graph lacks.
    """
    from threadloom.engine.snapshot import _call

    saved = await _call(cp, "get_tuple", cfg)
    _restore(loop, saved)
    values, as_node = updates[0].values, updates[0].as_node
    several = len(updates) > 1
    if several and values is None and as_node == END:
        raise InvalidUpdateError("Cannot apply multiple updates when clearing state")
    if as_node == INPUT:
        if several:
            raise InvalidUpdateError("Cannot apply multiple updates when updating as input")
        return await _as_input(loop, saved, values)
    if as_node == COPY:
        if several:
            raise InvalidUpdateError("Cannot copy checkpoint with multiple updates")
        return await _copy(graph, loop, cp, saved, values)
    for u in updates if several else ():
        if u.as_node is None:
            raise InvalidUpdateError("as_node is required when applying multiple updates")
        if u.as_node not in graph.nodes and u.as_node != START:
            raise InvalidUpdateError(f"Node {u.as_node} does not exist")
    return await _apply(graph, loop, saved, updates)


def _restore(loop: RunLoop, saved: CheckpointTuple | None) -> None:
    from threadloom.engine.start import restore

    if saved is not None:
        loop.saved = saved
        restore(loop, saved.checkpoint)
        loop.parents = dict(saved.metadata.get("parents") or {})
    else:
        loop.step = -1  # the update is the thread's first checkpoint: step 0
    loop.checkpoint_config = loop.fenced(saved.config if saved else loop.checkpoint_config)


async def _apply(
    graph: CompiledGraph, loop: RunLoop, saved: CheckpointTuple | None,
    updates: list[StateUpdate],
) -> dict[str, Any]:
    """Apply ``updates`` as one step of their nodes' writes, route from those nodes, save
    the ``"update"`` checkpoint, and record each update's writes as the saved
    checkpoint's task result."""
    from threadloom.engine.apply import apply_writes
    from threadloom.engine.start import start_writes

    first = updates[0].as_node
    if len(updates) == 1 and first is None and (saved is None or start_writes(saved) is not None):
        updates = [updates[0]._replace(as_node=START)]  # nothing ran yet: it is the input
    elif len(updates) == 1 and first is None and saved is not None:
        if (ran := await _last_node(graph, loop, saved)) is not None:
            updates = [updates[0]._replace(as_node=ran)]
    step = loop.step + 1
    tasks: list[Task] = []
    results: list[TaskResult] = []
    writes: list[tuple[str, Any]] = []
    names: list[str] = []
    for u in updates:
        node = u.as_node or "__update__"
        done, goto = writes_of(graph, node, u.values, step) if u.values is not None else ([], [])
        tasks.append(Task(node, graph.nodes.get(node), None, "update", len(tasks), 0))
        results.append(TaskResult(done, goto))
        writes.extend(done)
        names.extend([node] * len(done))
    loop.step = step
    updated = apply_writes(loop, writes, names)
    if any(u.as_node is not None for u in updates):
        planned = _with_joined(graph, saved, await next_tasks(loop, tasks, results))
    elif saved is not None:
        kept = plan_from_saved(loop, saved)
        planned = Planned(kept.tasks, kept.sends)
    else:
        planned = Planned([], [])
    meta = [Task(t.name, None, None, "update", 0, 0, result=r) for t, r in zip(tasks, results,
                                                                             strict=True)]
    saving = loop.save("update", updated, meta, planned)
    if saving is not None:
        await saving
    if saved is not None and loop.durability != "exit":
        await _record_results(loop, saved, updates, results)
    if saved is not None and loop.config["configurable"].get("checkpoint_ns"):
        from threadloom.engine.subgraph import CARRIER, carried_through_update

        if carried := carried_through_update(saved, writes):
            await loop.cp_call("put_writes", loop.checkpoint_config, carried, CARRIER)
    return loop.checkpoint_config


def _with_joined(graph: CompiledGraph, saved: CheckpointTuple | None, planned: Planned) -> Planned:
    """``planned`` plus the saved next tasks that a completed join (``add_edge([a, b], c)``)
    triggered: as in LangGraph, an update drops the pending tasks of plain edges and Sends
    (their channels last one step) but not those of a join, whose barrier stays complete
    until its node runs, nor a deferred node's (``defer=True``), which waits to run."""
    if saved is None or not (graph.join_index or graph.deferred):
        return planned
    joined = {target for entries in graph.join_index.values() for target, _, _ in entries}
    joined.update(name for name, spec in graph.builder.nodes.items() if spec.defer)
    kept = [t for t in saved.checkpoint["next"]
            if isinstance(t, str) and t in joined and t not in planned.tasks]
    if not kept:
        return planned
    order = {name: i for i, name in enumerate(graph.nodes)}
    return Planned(sorted([*planned.tasks, *kept], key=order.__getitem__), planned.sends)


def _next_nodes(saved: CheckpointTuple) -> set[str]:
    """The nodes of a saved checkpoint's next tasks (edge tasks and Sends alike)."""
    return {t if isinstance(t, str) else t.get("node") for t in saved.checkpoint["next"]}


async def _last_node(
    graph: CompiledGraph, loop: RunLoop, saved: CheckpointTuple
) -> str | None:
    """The node an ``update_state`` without ``as_node`` is applied as, as LangGraph infers
    it: the one node whose task ran in the step that saved ``saved`` (a ``"loop"``
    checkpoint: the next tasks of its parent when that is the step before, else, under
    ``durability="exit"``, the nodes its metadata says wrote). None when several nodes ran,
    or the checkpoint is not a step's: the update then keeps the saved next tasks
    (LangGraph raises "Ambiguous update" when several ran), which also refuses a thread
    whose next tasks name nodes this graph lacks."""
    meta = saved.metadata
    pending = _next_nodes(saved)
    if meta.get("source") != "loop" or not pending <= graph.nodes.keys():
        return None
    parent = None
    if saved.parent_config is not None:
        parent = await loop.cp_call("get_tuple", saved.parent_config)
    if parent is not None and parent.metadata.get("step") == meta.get("step", 0) - 1:
        ran = _next_nodes(parent)
        ran.discard(START)
    else:
        ran = set(meta.get("writes") or ())
    return ran.pop() if len(ran) == 1 else None


async def _record_results(
    loop: RunLoop, saved: CheckpointTuple, updates: list[StateUpdate], results: list[TaskResult]
) -> None:
    """Save each update's writes against ``saved`` under the id of its next task of the
    same node (in order; or the update's own ``task_id``), as LangGraph: its history then
    shows them as that task's result. A task that has writes saved already keeps them."""
    ids = _next_task_ids(loop, saved)
    taken = {w.task_id for w in saved.pending_writes}
    for u, result in zip(updates, results, strict=True):
        queue = ids.get(u.as_node or "", [])
        tid = u.task_id or (queue.pop(0) if queue else None)
        if tid is None or tid in taken or not result.writes:
            continue
        taken.add(tid)
        await loop.cp_call("put_writes", loop.fenced(saved.config), list(result.writes), tid)


def _next_task_ids(loop: RunLoop, saved: CheckpointTuple) -> dict[str, list[str]]:
    """Node name -> the ids of ``saved``'s next tasks of that node, in task order."""
    nxt = saved.checkpoint.get("next", [])
    names = [n for n in nxt if isinstance(n, str)]
    names += [n.get("node", "") for n in nxt if isinstance(n, Mapping)]
    cid = saved.checkpoint["id"]
    step = int(saved.metadata.get("step", -1)) + 1
    out: dict[str, list[str]] = {}
    for index, name in enumerate(names):
        out.setdefault(name, []).append(task_id(cid, step, index, name))
    return out


async def _as_input(loop: RunLoop, saved: CheckpointTuple | None, values: Any) -> dict[str, Any]:
    """The update saved as a run's input: an ``"input"`` checkpoint (state unchanged, next
    task START) holding ``values`` as the START task's writes, as ``invoke`` saves one.

    Raises:
        InvalidUpdateError: ``values`` is None (no input to save).
    """
    from threadloom.engine.start import put_start_writes

    if values is None:
        raise InvalidUpdateError(f"Received no input writes for {sorted(loop.graph.specs)}")
    writes = writes_of(loop.graph, START, values, loop.step + 1, input_mode=True)
    loop.step = loop.step + 1 if saved is not None else -1
    saving = loop.save("input", set(), [], Planned([START], []))
    if saving is not None:
        await saving
    if writes and loop.durability != "exit":
        await put_start_writes(loop, writes)
    return loop.checkpoint_config


async def _copy(
    graph: CompiledGraph, loop: RunLoop, cp: BaseCheckpointer, saved: CheckpointTuple | None,
    values: Any,
) -> dict[str, Any]:
    """The copy-fork (``snapshot._copy_fork``); given a list of updates, the copy is then
    updated by them as one step, each taking the copy's next task of its node.

    Raises:
        InvalidUpdateError: an item of the list that is not an update.
    """
    from threadloom.engine.snapshot import _copy_fork

    if not isinstance(values, list) or not values:
        return await _copy_fork(loop, saved, values)
    for item in values:
        if not isinstance(item, Sequence) or isinstance(item, str):
            raise InvalidUpdateError(f"Invalid update item: {item} when copying checkpoint")
    config = await _copy_fork(loop, saved, None, copy_input=False)
    updates = [StateUpdate(*item[:2]) for item in values]
    return await apply_updates(graph, loop, config, cp, updates)
