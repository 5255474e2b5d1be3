"""Reading and editing a thread's saved state: ``get_state``, history, ``update_state``."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from threadloom.checkpoint.base import ERROR, INTERRUPT, SCHEDULED, CheckpointTuple
from threadloom.engine.routing import Planned, next_tasks, plan_from_saved
from threadloom.engine.tasks import Task, TaskResult, task_id
from threadloom.engine.writes import writes_of
from threadloom.types import Interrupt

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.compiled import CompiledGraph


class StateTask(NamedTuple):
    """A task the snapshot's ``next`` step will run, with its saved error/interrupts.

    ``state``, for a task that runs a subgraph (or a graph invoked inside its node), as
    LangGraph's ``PregelTask.state``: with ``get_state(subgraphs=True)`` the subgraph's
    own ``StateSnapshot``, else (a subgraph node) the config naming its namespace.
    """

    id: str
    name: str
    error: str | None
    interrupts: tuple[Interrupt, ...]
    state: Any = None


class StateSnapshot(NamedTuple):
    """A thread's state at one checkpoint, as LangGraph's ``StateSnapshot``.

    Attributes:
        values: the state's keys and values.
        next: names of the nodes that run next (empty when the run finished).
        config: the config naming this checkpoint (pass it to ``invoke`` to time-travel).
        metadata: ``source`` (input/loop/update/fork), ``step``, ``writes``.
        created_at: ISO-8601 UTC time of the checkpoint.
        parent_config: the config of the parent checkpoint, or None.
        tasks: the next step's tasks with their saved errors and interrupts.
        interrupts: every pending interrupt.
    """

    values: dict[str, Any]
    next: tuple[str, ...]
    config: dict[str, Any]
    metadata: dict[str, Any] | None
    created_at: str | None
    parent_config: dict[str, Any] | None
    tasks: tuple[StateTask, ...]
    interrupts: tuple[Interrupt, ...]


async def _call(cp: BaseCheckpointer, method: str, *args: Any, **kwargs: Any) -> Any:
    if getattr(cp, "inline_io", False):
        return getattr(cp, method)(*args, **kwargs)
    return await getattr(cp, "a" + method)(*args, **kwargs)


def to_snapshot(graph: CompiledGraph, saved: CheckpointTuple) -> StateSnapshot:
    """Build a ``StateSnapshot`` from a stored checkpoint."""
    cp = saved.checkpoint
    held = cp["channel_values"]
    values = {k: held[k] for k in graph.specs if k in held}  # schema order, in any process
    planned = Planned([], [])
    for item in cp.get("next", []):
        if isinstance(item, str):
            planned.tasks.append(item)
        elif isinstance(item, Mapping):
            from threadloom.types import Send

            planned.sends.append(Send(item.get("node", ""), item.get("arg")))
    names = planned.node_names()
    step = int(saved.metadata.get("step", -1)) + 1
    errors: dict[str, str] = {}
    interrupts: dict[str, tuple[Interrupt, ...]] = {}
    done: set[str] = set()
    for w in saved.pending_writes:
        if w.channel == ERROR:
            errors[w.task_id] = str(w.value)
        elif w.channel == INTERRUPT:
            interrupts[w.task_id] = tuple(Interrupt(*i) for i in w.value)
        elif w.channel == SCHEDULED:
            done.add(w.task_id)
    for tid in done:  # resumed since, and finished: its interrupt is answered
        interrupts.pop(tid, None)
    tasks = []
    for index, name in enumerate(names):
        tid = task_id(cp["id"], step, index, name)
        tasks.append(StateTask(tid, name, errors.get(tid), interrupts.get(tid, ())))
    return StateSnapshot(
        values=values,
        next=tuple(names),
        config=saved.config,
        metadata=dict(saved.metadata),
        created_at=cp.get("ts"),
        parent_config=saved.parent_config,
        tasks=tuple(tasks),
        interrupts=tuple(i for t in tasks for i in t.interrupts),
    )


async def snapshot(
    graph: CompiledGraph, cfg: dict[str, Any], cp: BaseCheckpointer
) -> StateSnapshot:
    """The snapshot ``cfg`` names (latest checkpoint of its thread by default)."""
    saved = await _call(cp, "get_tuple", cfg)
    if saved is None:
        return StateSnapshot({}, (), cfg, None, None, None, (), ())
    return to_snapshot(graph, saved)


def snapshot_sync(graph: CompiledGraph, cfg: dict[str, Any], cp: BaseCheckpointer) -> StateSnapshot:
    """``snapshot`` for sync callers: the checkpointer's own sync ``get_tuple``, on this
    thread, without an event loop or a worker thread (as LangGraph's ``get_state``)."""
    saved = cp.get_tuple(cfg)
    if saved is None:
        return StateSnapshot({}, (), cfg, None, None, None, (), ())
    return to_snapshot(graph, saved)


def history_sync(
    graph: CompiledGraph,
    cfg: dict[str, Any],
    cp: BaseCheckpointer,
    filter: Mapping[str, Any] | None,
    before: Mapping[str, Any] | None,
    limit: int | None,  # noqa: A002
) -> list[StateSnapshot]:
    """``history`` for sync callers: the checkpointer's sync ``list``, on this thread."""
    items = cp.list(_without_id(cfg), filter=filter, before=before, limit=limit)
    return [to_snapshot(graph, t) for t in items]


def _without_id(cfg: dict[str, Any]) -> dict[str, Any]:
    return {
        **cfg,
        "configurable": {k: v for k, v in cfg["configurable"].items() if k != "checkpoint_id"},
    }


async def history(
    graph: CompiledGraph,
    cfg: dict[str, Any],
    cp: BaseCheckpointer,
    filter: Mapping[str, Any] | None,
    before: Mapping[str, Any] | None,
    limit: int | None,  # noqa: A002
) -> list[StateSnapshot]:
    """Every snapshot of a thread (and namespace), newest first."""
    cfg = _without_id(cfg)
    if getattr(cp, "inline_io", False):
        items = list(cp.list(cfg, filter=filter, before=before, limit=limit))
    else:
        items = [t async for t in cp.alist(cfg, filter=filter, before=before, limit=limit)]
    return [to_snapshot(graph, t) for t in items]


async def update_state(
    graph: CompiledGraph,
    cfg: dict[str, Any],
    cp: BaseCheckpointer,
    values: Any,
    as_node: str | None,
) -> dict[str, Any]:
    """Apply ``values`` as ``as_node``'s writes and save a new checkpoint; see ``update_state``.

    Raises:
        ThreadBusyError: another run (or update) holds the thread past ``busy_timeout``.
    """
    from threadloom.engine.scheduler import RunLoop

    loop = RunLoop(
        graph,
        cfg,
        checkpointer=cp,
        emit=None,
        modes=frozenset(),
        durability="sync",
        blocking_ok=False,
    )
    loop._unsaved_exit = None  # noqa: SLF001
    # Like a run, hold the thread (in this process, and by lease across processes, waiting
    # up to busy_timeout) from the read to the write: an update racing a live run in
    # another process would otherwise fork the chain and be lost.
    async with graph._hold(loop):  # noqa: SLF001
        config = await _update_held(graph, loop, cfg, cp, values, as_node)
    conf = {k: v for k, v in config["configurable"].items() if k != "__lease_token"}
    return {**config, "configurable": conf}


async def _update_held(
    graph: CompiledGraph,
    loop: Any,
    cfg: dict[str, Any],
    cp: BaseCheckpointer,
    values: Any,
    as_node: str | None,
) -> dict[str, Any]:
    from threadloom.engine.apply import apply_writes
    from threadloom.engine.start import restore

    saved = await _call(cp, "get_tuple", cfg)
    forked = bool(cfg["configurable"].get("checkpoint_id"))
    if saved is not None:
        loop.saved = saved
        restore(loop, saved.checkpoint)
    loop.checkpoint_config = loop.fenced(saved.config if saved else loop.checkpoint_config)
    node = as_node or "__update__"
    writes = writes_of(graph, node, values, loop.step + 1)[0] if values is not None else []
    loop.step += 1
    updated = apply_writes(loop, writes, [node] * len(writes))
    if as_node is not None:
        task = Task(as_node, graph.nodes.get(as_node), None, "update", 0, 0)
        planned = await next_tasks(loop, [task], [TaskResult(writes, [])])
    elif saved is not None:
        kept = plan_from_saved(loop, saved)
        planned = Planned(kept.tasks, kept.sends)
    else:
        planned = Planned([], [])
    meta_task = Task(node, None, None, "update", 0, 0, result=TaskResult(writes, []))
    saving = loop.save("fork" if forked else "update", updated, [meta_task], planned)
    if saving is not None:
        await saving
    return loop.checkpoint_config


def now_iso() -> str:
    """The current UTC time, ISO-8601."""
    return _dt.datetime.now(_dt.UTC).isoformat()
