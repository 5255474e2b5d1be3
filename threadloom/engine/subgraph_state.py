"""``get_state(subgraphs=True)``: the state of each subgraph a paused step runs.

A task of a snapshot's next step that runs a subgraph (a compiled graph as its node, or a
graph invoked inside its node function) saved its own checkpoints in the namespace
``node:task_id`` (``node`` for a subgraph compiled with ``checkpointer=True``) of the same
thread; as in LangGraph, ``StateSnapshot.tasks[i].state`` is then that subgraph's
snapshot, found recursively.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from threadloom.engine.snapshot import StateSnapshot, _call, to_snapshot

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.compiled import CompiledGraph


async def with_subgraph_states(
    graph: Any, snap: StateSnapshot, cp: BaseCheckpointer, recurse: bool
) -> StateSnapshot:
    """``snap`` with ``tasks[i].state`` filled for its subgraph tasks.

    ``recurse``: the subgraphs' snapshots (``get_state(subgraphs=True)``); else the
    config naming a subgraph node's namespace, as LangGraph gives without it.
    """
    conf = (snap.config or {}).get("configurable") or {}
    thread, parent_ns = conf.get("thread_id"), conf.get("checkpoint_ns", "")
    if thread is None or not snap.tasks:
        return snap
    nodes = getattr(graph, "nodes", {})
    tasks = []
    for task in snap.tasks:
        node = nodes.get(task.name)
        child: CompiledGraph | None = getattr(node, "subgraph", None)
        level = task.name if child is not None and child.subgraph_persistence else (
            f"{task.name}:{task.id}")
        ns = f"{parent_ns}|{level}" if parent_ns else level
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        if not recurse:
            tasks.append(task._replace(state=config) if child is not None else task)
            continue
        saved = await _call(cp, "get_tuple", config)
        if saved is None and child is None:  # a checkpointer=True graph invoked in a node
            ns = f"{parent_ns}|{task.name}" if parent_ns else task.name
            saved = await _call(cp, "get_tuple", {"configurable": {
                "thread_id": thread, "checkpoint_ns": ns}})
        if saved is None:
            tasks.append(task)
            continue
        shape = child if child is not None else _generic(saved.checkpoint["channel_values"])
        state = await with_subgraph_states(shape, to_snapshot(shape, saved), cp, True)
        tasks.append(task._replace(state=state))
    return snap._replace(tasks=tuple(tasks))


def _generic(values: dict[str, Any]) -> Any:
    """The shape ``to_snapshot`` needs of a graph it does not know (one invoked inside a
    node): every saved key is a state key."""
    return SimpleNamespace(specs=dict.fromkeys(values), nodes={})
