"""A compiled graph used as a node of another graph.

The subgraph runs in its own checkpoint namespace (``parent_ns|node:task_id``) on the
parent's thread and checkpointer, streams through the parent's sink, pauses the parent
when it pauses, takes as input the keys of its own input schema that the parent's state
holds (the others are left out, as in LangGraph), and sends back only the keys it actually
wrote (so a sibling's write to
a key the subgraph merely carried is not a clash).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.engine.channels import Reduced
from threadloom.engine.runtime import GraphInterrupt, TaskContext
from threadloom.engine.schema import update_from_object
from threadloom.types import Command

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.scheduler import RunLoop
    from threadloom.engine.tasks import Task


async def run_subgraph(parent: RunLoop, task: Task, ctx: TaskContext) -> Any:
    """Run ``task``'s subgraph and return the parent update (a list of Commands).

    Where it saves, as in LangGraph: a subgraph compiled without a checkpointer saves in
    its parent's, in the namespace ``node:task_id`` (one history per call); compiled with
    ``checkpointer=True``, in the namespace ``node`` (one history across calls, so it
    remembers its state from call to call); with ``checkpointer=False``, nowhere.

    Raises:
        GraphInterrupt: the subgraph paused (an ``interrupt()``, or before or after a node
            it was compiled to pause at); the parent pauses with it.
    """
    from threadloom.engine.writes import ParentCommand

    child = task.node.subgraph if task.node is not None else None
    if child is None:
        raise RuntimeError(f"task {task.name!r} is not a subgraph task")
    persistence = child.subgraph_persistence
    level = task.name if persistence else f"{task.name}:{task.id}"
    checkpointer = child.checkpointer
    if checkpointer is None and persistence is not False:
        checkpointer = parent.cp
    loop = child_loop(parent, child, (*parent.namespace, level), checkpointer)
    if task.resume is None and loop.cp is not None and parent.config_id() is not None:
        await _as_at_replayed_checkpoint(parent, loop)
    if task.resume is not None:  # the task paused before: the subgraph continues
        child_input: Any = Command(resume=dict(task.resume)) if task.resume else None
    else:
        child_input = task.input
        if not isinstance(child_input, dict):
            child_input = update_from_object(child_input) or child_input
        if isinstance(child_input, dict):
            # As in LangGraph, the subgraph reads the keys of its input schema that the
            # parent state holds; the parent's other keys are not its input.
            keys = child.input_keys
            child_input = {k: v for k, v in child_input.items() if k in keys}
    try:
        await loop.run(child_input)
    except ParentCommand as pc:
        return Command(update=pc.command.update, goto=pc.command.goto)
    if task.resume is not None:
        _carry_over(loop)
    if loop.interrupts or (loop.paused and loop.cp is not None):
        if loop.cp is not None and loop.written_keys:
            # what it wrote before pausing, for the parent update when it ends later
            carried = [[k, v] for k, v in loop.written_keys.items()]
            await loop.cp_call("put_writes", loop.checkpoint_config,
                               [(_WRITTEN, carried)], _CARRIER)
        raise GraphInterrupt(loop.interrupts)
    return _written_update(parent, loop)


async def _as_at_replayed_checkpoint(parent: RunLoop, loop: RunLoop) -> None:
    """A replay of a parent checkpoint (time travel) runs the subgraph from its state at
    that checkpoint, as in LangGraph: its newest checkpoint older than the parent's, or
    none (it starts anew), not what a later run of the same step left there."""
    at = (parent.checkpoint_config.get("configurable") or {}).get("checkpoint_id")
    if at != parent.config_id():  # a later step of the replay: a namespace of its own
        return
    before = {"configurable": {**loop.config["configurable"], "checkpoint_id": at}}
    cp = loop.cp
    if loop.blocking_ok or getattr(cp, "inline_io", False):
        older = list(cp.list(loop.config, before=before, limit=1))  # type: ignore[union-attr]
    else:
        older = [t async for t in cp.alist(loop.config, before=before, limit=1)]  # type: ignore[union-attr]
    found = older[0] if older else None
    if found is None:
        loop.fresh = True
    else:
        conf = {**loop.config["configurable"]}
        conf["checkpoint_id"] = found.config["configurable"]["checkpoint_id"]
        loop.config = {**loop.config, "configurable": conf}


_CARRIER = "__subgraph__"  # the pseudo task id of a paused subgraph's carried writes
_WRITTEN = "__written__"


def _carry_over(loop: RunLoop) -> None:
    """Put the writes a continued subgraph made before it paused ahead of its new ones."""
    saved = loop.saved
    if saved is None:
        return
    for w in saved.pending_writes:
        if w.task_id == _CARRIER and w.channel == _WRITTEN:
            merged: dict[str, list[Any]] = {k: list(v) for k, v in w.value}
            for key, values in loop.written_keys.items():
                merged.setdefault(key, []).extend(values)
            loop.written_keys = merged


def child_loop(
    parent: RunLoop,
    child: CompiledGraph,
    namespace: tuple[str, ...],
    checkpointer: BaseCheckpointer | None,
    *,
    same_loop: bool = True,
) -> RunLoop:
    """The run of ``child`` inside ``parent``'s running task, in ``namespace`` of the
    parent's thread (the thread's lease is the parent's; its events go to the parent's
    stream: with ``subgraphs=True`` its own messages-mode chunks, else none). With
    ``same_loop=False`` it runs on another event loop (a sync ``invoke``
    inside a node), so it does not wait for the stream's consumer."""
    from threadloom.engine.scheduler import RunLoop

    conf = dict(parent.config.get("configurable") or {})
    conf.pop("checkpoint_id", None)
    conf["checkpoint_ns"] = "|".join(namespace)
    config = {**parent.config, "configurable": conf}
    if checkpointer is not None and "thread_id" not in conf:
        checkpointer = None
    sink = parent.sink
    modes = parent.modes
    subgraphs = sink is not None and sink.subgraphs
    if "messages" in modes and not subgraphs:
        # As LangGraph: without subgraphs=True its reply reaches the messages mode once,
        # whole, as the parent node's write; no token chunks from inside.
        modes = modes - {"messages"}
    loop = RunLoop(
        child,
        config,
        checkpointer=checkpointer,
        emit=sink.bind(namespace) if sink is not None else None,
        modes=modes,
        durability=parent.durability,
        blocking_ok=parent.blocking_ok if same_loop else True,
        context=parent.context,
        namespace=namespace,
        sink=sink if same_loop else None,
    )
    if subgraphs:  # what it streamed token by token, the parent does not send again
        loop.message_ids = parent.message_ids
    return loop


def _written_update(parent: RunLoop, child: RunLoop) -> list[Any]:
    updates: list[dict[str, Any]] = []
    for key, values in child.written_keys.items():
        if key not in parent.channels:
            continue
        if isinstance(child.channels[key], Reduced) and isinstance(parent.channels[key], Reduced):
            updates.extend({key: v} for v in values)  # each write, reduced once above
        elif key in child.values:
            updates.append({key: child.values[key]})
    if parent.graph.root_state:  # a bare-value parent takes keyed updates in Commands
        return [Command(update=u) for u in updates]
    return updates
