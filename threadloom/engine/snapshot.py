"""Reading and editing a thread's saved state: ``get_state``, history, ``update_state``."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from threadloom.checkpoint.base import (
    ERROR,
    INTERRUPT,
    RESUME,
    SCHEDULED,
    SPECIAL_WRITE_CHANNELS,
    CheckpointTuple,
    shown_metadata,
)
from threadloom.engine.command_writes import command_view
from threadloom.engine.replay import graph_at, with_checkpoint_map
from threadloom.engine.results import result_from, step_children
from threadloom.engine.routing import Planned, plan_from_saved
from threadloom.engine.tasks import task_id, task_result
from threadloom.errors import InvalidUpdateError
from threadloom.types import ROOT, START, Interrupt

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.scheduler import RunLoop


class StateTask(NamedTuple):
    """A task of the snapshot's ``next`` step, as LangGraph's ``PregelTask``.

    ``path``: ``(PULL, name)`` for a task an edge triggered, ``(PUSH, index, False)`` for one a
    ``Send`` made. ``error``/``interrupts``: what it saved when it failed or paused.
    ``state``, for a task that runs a subgraph (or a graph invoked inside its node), as
    LangGraph's ``PregelTask.state``: with ``get_state(subgraphs=True)`` the subgraph's
    own ``StateSnapshot``, else (a subgraph node) the config naming its namespace.
    ``result``: once the task has finished (its writes saved), its writes as a dict (a key
    it wrote more than once maps to ``{"$writes": [...]}``); None before.
    """

    id: str
    name: str
    path: tuple[Any, ...] = ()
    error: str | None = None
    interrupts: tuple[Interrupt, ...] = ()
    state: Any = None
    result: Any = None


PULL = "__pregel_pull"
"""``StateTask.path[0]`` of a task an edge triggered (LangGraph's constant of that name)."""

PUSH = "__pregel_push"
"""``StateTask.path[0]`` of a task a ``Send`` made."""


class StateSnapshot(NamedTuple):
    """A thread's state at one checkpoint, as LangGraph's ``StateSnapshot``.

    Attributes:
        values: the state's keys and values (a root-channel graph's bare value).
        next: names of the nodes that run next (empty when the run finished).
        config: the config naming this checkpoint (pass it to ``invoke`` to time-travel).
        metadata: ``source`` (input/loop/update/fork), ``step``, ``parents``.
        created_at: ISO-8601 UTC time of the checkpoint.
        parent_config: the config of the parent checkpoint, or None.
        tasks: the next step's tasks with their saved errors and interrupts.
        interrupts: every pending interrupt.
    """

    values: Any
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


def saved_tasks(
    cid: str, step: int, names: list[str], pulled: int, pending: list[Any],
    keys: tuple[str, ...] | frozenset[str],
) -> list[StateTask]:
    """The ``StateTask``s of checkpoint ``cid``'s next step (``names``, the first
    ``pulled`` triggered by edges, the rest made by sends), each with what its saved
    ``pending`` writes tell: its error, interrupts, and (once finished) its result, its
    writes to the output ``keys``."""
    if not pending:  # the usual checkpoint of history: nothing saved for its next step
        made = [StateTask(task_id(cid, step, index, name), name,
                          (PULL, name) if index < pulled else (PUSH, index - pulled, False),
                          None, (), None, None) for index, name in enumerate(names)]
        return made[pulled:] + made[:pulled] if pulled < len(made) else made
    errors: dict[str, str] = {}
    interrupts: dict[str, tuple[Interrupt, ...]] = {}
    written: dict[str, list[tuple[str, Any]]] = {}
    done: set[str] = set()
    for w in pending:
        if w.channel == ERROR:
            errors[w.task_id] = str(w.value)
        elif w.channel == INTERRUPT:
            interrupts[w.task_id] = tuple(Interrupt(*i) for i in w.value)
        elif w.channel == SCHEDULED:
            done.add(w.task_id)
        elif w.channel != RESUME:
            wrote = written.setdefault(w.task_id, [])
            if w.channel in keys:
                wrote.append((w.channel, w.value))
    finished = done.union(written)
    if any(tid not in finished for tid in interrupts):  # a step still paused on some: the
        for tid in finished:  # interrupts of tasks resumed and finished since are answered
            interrupts.pop(tid, None)
    tasks = []
    for index, name in enumerate(names):
        tid = task_id(cid, step, index, name)
        path = (PULL, name) if index < pulled else (PUSH, index - pulled, False)
        writes = written.get(tid)
        result = task_result(writes) if writes is not None or tid in done else None
        tasks.append(StateTask(tid, name, path, errors.get(tid), interrupts.get(tid, ()),
                               None, result))
    return tasks[pulled:] + tasks[:pulled]  # as LangGraph lists them: sends first


def to_snapshot(
    graph: CompiledGraph, saved: CheckpointTuple, child: CheckpointTuple | None = None
) -> StateSnapshot:
    """Build a ``StateSnapshot`` from a stored checkpoint; ``child``: the checkpoint its
    next step saved, when known (history), which gives a lone finished task's result."""
    cp = saved.checkpoint
    held = cp["channel_values"]
    values = {k: held[k] for k in graph.specs if k in held}  # schema order, in any process
    names: list[str] = []
    pushed: list[str] = []
    for item in cp.get("next", []):
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, Mapping):
            pushed.append(item.get("node", ""))
    pulled = len(names)
    if pushed:
        names += pushed
    step = int(saved.metadata.get("step", -1)) + 1
    tasks = saved_tasks(cp["id"], step, names, pulled, saved.pending_writes,
                        tuple(getattr(graph, "output_keys", graph.specs)))
    if child is not None and len(tasks) == 1:
        task = tasks[0]
        if task.result is None and task.error is None and not task.interrupts:
            result = result_from(graph, task.name, child)
            if result is not None:
                tasks[0] = task._replace(result=result)
    if len(tasks) > 1 and pulled > 1:  # edge tasks in node order, as LangGraph lists them
        order = {name: i for i, name in enumerate(graph.nodes)}
        tasks.sort(key=lambda t: (t.path[0] == PULL, order.get(t.name, -1) if t.path[0] == PULL
                                  else t.path[1]))
    metadata = saved.metadata
    return StateSnapshot(
        values=values,
        next=tuple(t.name for t in tasks),
        config=with_checkpoint_map(saved.config, metadata),  # type: ignore[arg-type]
        metadata=shown_metadata(metadata),
        created_at=cp.get("ts"),
        parent_config=with_checkpoint_map(saved.parent_config, metadata),
        tasks=tuple(tasks),
        interrupts=tuple(i for t in tasks for i in t.interrupts) if saved.pending_writes
        else (),
    )


async def snapshot(
    graph: CompiledGraph, cfg: dict[str, Any], cp: BaseCheckpointer
) -> StateSnapshot:
    """The snapshot ``cfg`` names (latest checkpoint of its thread by default)."""
    return latest_view(graph, cfg, await _call(cp, "get_tuple", cfg))


def latest_view(
    graph: CompiledGraph, cfg: dict[str, Any], saved: CheckpointTuple | None
) -> StateSnapshot:
    """The snapshot of ``saved`` (what ``cfg`` named), an empty one when there is none;
    for the latest checkpoint, with its finished tasks' writes applied."""
    if saved is None:
        return StateSnapshot({}, (), cfg, None, None, None, (), ())
    snap = to_snapshot(graph, saved)
    if saved.pending_writes and not cfg["configurable"].get("checkpoint_id"):
        snap = snap._replace(values=command_view(graph, saved, snap.values))
        snap = with_finished_tasks(graph, saved, snap)
    return shown(graph, snap)


def shown(graph: CompiledGraph, snap: StateSnapshot) -> StateSnapshot:
    """``snap`` as callers see it: a root-channel graph's ``values``, and its tasks'
    results, are the bare values (as LangGraph's single output channel)."""
    if graph.root_state:
        tasks = tuple(t._replace(result=t.result.get(ROOT)) if isinstance(t.result, dict)
                      else t for t in snap.tasks)
        return snap._replace(values=snap.values.get(ROOT), tasks=tasks)
    return snap


def with_finished_tasks(
    graph: CompiledGraph, saved: CheckpointTuple, snap: StateSnapshot
) -> StateSnapshot:
    """The latest state of a thread whose last step stopped part-way, as LangGraph's
    ``get_state``: the saved writes of the next step's finished tasks applied (in task
    order, through the reducers) and those tasks left out of ``next``."""
    from types import SimpleNamespace

    from threadloom.engine.apply import apply_writes

    ran = sorted(snap.tasks, key=lambda t: t.path[:1] != (PULL,))  # the engine's order
    order = {t.id: i for i, t in enumerate(ran)}
    done: set[str] = set()
    found: list[tuple[int, int, str, Any]] = []
    for n, w in enumerate(saved.pending_writes):
        if w.task_id not in order or w.channel in (ERROR, INTERRUPT, RESUME):
            continue
        done.add(w.task_id)
        if w.channel not in SPECIAL_WRITE_CHANNELS and w.channel in graph.channels:
            found.append((order[w.task_id], n, w.channel, w.value))
    if not done:
        return snap
    found.sort(key=lambda f: f[:2])
    names = [ran[f[0]].name for f in found]
    view = SimpleNamespace(values=dict(snap.values), channels=graph.channels, graph=graph,
                           cp=None, step=int(saved.metadata.get("step", -1)) + 1)
    try:
        apply_writes(view, [(f[2], f[3]) for f in found], names)  # type: ignore[arg-type]
    except InvalidUpdateError:  # writes the step could not commit (LangGraph raises here)
        return snap
    values = {k: view.values[k] for k in graph.specs if k in view.values}
    left = tuple(t.name for t in snap.tasks if t.id not in done)
    return snap._replace(values=values, next=left)


def snapshot_sync(graph: CompiledGraph, cfg: dict[str, Any], cp: BaseCheckpointer) -> StateSnapshot:
    """``snapshot`` for sync callers: the checkpointer's own sync ``get_tuple``, on this
    thread, without an event loop or a worker thread (as LangGraph's ``get_state``)."""
    return latest_view(graph, cfg, cp.get_tuple(cfg))


def history_of(graph: CompiledGraph, items: list[CheckpointTuple]) -> list[StateSnapshot]:
    """The snapshots of ``items`` (a thread's checkpoints, newest first), each lone
    finished task's result read from the checkpoint its step saved (``results.py``)."""
    children = step_children(items)
    snaps = [to_snapshot(graph, t, children.get(t.checkpoint["id"])) for t in items]
    return [shown(graph, s) for s in snaps] if graph.root_state else snaps


def _without_id(cfg: dict[str, Any]) -> dict[str, Any]:
    return {
        **cfg,
        "configurable": {k: v for k, v in cfg["configurable"].items() if k != "checkpoint_id"},
    }


async def update_state(
    graph: CompiledGraph,
    cfg: dict[str, Any],
    cp: BaseCheckpointer,
    updates: list[Any],
) -> dict[str, Any]:
    """Apply one super-step of ``updates`` (``StateUpdate``s) and save a new checkpoint;
    see ``update_state`` and ``bulk.apply_updates``.

    Raises:
        ThreadBusyError: another run (or update) holds the thread past ``busy_timeout``.
    """
    from threadloom.engine.bulk import apply_updates
    from threadloom.engine.scheduler import RunLoop

    target = graph_at(graph, cfg)  # a subgraph's checkpoint: updated as that graph's
    loop = RunLoop(
        target,
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
        config = await apply_updates(target, loop, cfg, cp, updates)
    conf = {k: v for k, v in config["configurable"].items() if k != "__lease_token"}
    return with_checkpoint_map({**config, "configurable": conf}, {"parents": loop.parents})  # type: ignore[return-value]


COPY = "__copy__"
"""``update_state(config, None, as_node=COPY)``: copy a checkpoint as a sibling fork."""


async def _copy_fork(loop: RunLoop, saved: CheckpointTuple | None, values: Any,
                     *, copy_input: bool = True) -> dict[str, Any]:
    """LangGraph's copy-fork: a ``"fork"`` checkpoint with ``saved``'s state and next tasks,
    saved beside it (under the same parent), one step on; the copy of an input checkpoint
    keeps its input (the START task's writes) unless ``copy_input`` is False (the copy is
    then updated as LangGraph's copy-and-update does, the update being the new input).

    Raises:
        InvalidUpdateError: ``values`` given, or no checkpoint to copy.
    """
    if values is not None:
        raise InvalidUpdateError(
            "update_state(..., as_node='__copy__') copies a checkpoint as it is: pass "
            "values=None, then update the copy with a second update_state call"
        )
    if saved is None:
        raise InvalidUpdateError(
            "update_state(..., as_node='__copy__'): the config names no saved checkpoint "
            "to copy"
        )
    from threadloom.engine.start import put_start_writes, start_writes

    pending = start_writes(saved)
    kept = plan_from_saved(loop, saved) if pending is None else Planned([START], [])
    pending = pending if copy_input else None
    conf = saved.config["configurable"]
    ns = conf.get("checkpoint_ns", "")
    loop.checkpoint_config = saved.parent_config or {
        "configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": ns}
    }
    loop.step += 1
    saving = loop.save("fork", set(loop.versions), [], Planned(kept.tasks, kept.sends))
    if saving is not None:
        await saving
    if pending:
        await put_start_writes(loop, pending)
    return loop.checkpoint_config


def now_iso() -> str:
    """The current UTC time, ISO-8601."""
    return _dt.datetime.now(_dt.UTC).isoformat()
