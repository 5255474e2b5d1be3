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

from threadloom.engine.replay import place
from threadloom.engine.runtime import GraphInterrupt, TaskContext
from threadloom.engine.schema import update_from_object
from threadloom.types import Command

if TYPE_CHECKING:
    from threadloom.checkpoint.base import BaseCheckpointer, CheckpointTuple
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
    # a time-travelling run: where the subgraph's own run starts (replay.py)
    named = loop.travel is not None and await place(loop, task.resume is None)
    if task.resume is not None:  # the task paused before: the subgraph continues
        child_input: Any = Command(resume=dict(task.resume)) if task.resume else None
    elif named:  # the config named this subgraph's checkpoint: it goes on from there
        child_input = None
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
    if task.resume is not None or named:  # what it wrote before the pause counts too
        _carry_over(loop)
    if loop.interrupts or (loop.paused and loop.cp is not None):
        if loop.cp is not None and loop.written_keys:
            # what it wrote before pausing, for the parent update when it ends later
            carried = [[k, v] for k, v in loop.written_keys.items()]
            await loop.cp_call("put_writes", loop.checkpoint_config,
                               [(_WRITTEN, carried)], _CARRIER)
        raise GraphInterrupt(loop.interrupts)
    return _written_update(parent, loop)


CARRIER = _CARRIER = "__subgraph__"  # the pseudo task id of a paused subgraph's carried writes
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


def carried_through_update(
    saved: CheckpointTuple, writes: list[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """The pending write that carries, onto an ``update_state`` fork of a subgraph's
    checkpoint, what the subgraph wrote before it and the update's own writes: the
    parent gets them when the subgraph, continued from the fork, ends."""
    merged: dict[str, list[Any]] = {}
    for w in saved.pending_writes:
        if w.task_id == _CARRIER and w.channel == _WRITTEN:
            merged = {k: list(v) for k, v in w.value}
    for key, value in writes:
        merged.setdefault(key, []).append(value)
    return [(_WRITTEN, [[k, v] for k, v in merged.items()])] if merged else []


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
        # a subgraph run beside other tasks must not block their loop with a sync node
        blocking_ok=(parent.blocking_ok and parent.inline_sync) if same_loop else True,
        context=parent.context,
        namespace=namespace,
        sink=sink if same_loop else None,
    )
    if subgraphs:  # what it streamed token by token, the parent does not send again
        loop.message_ids = parent.message_ids
    loop.travel = parent.travel
    at = (parent.checkpoint_config.get("configurable") or {}).get("checkpoint_id")
    if at is not None and loop.cp is not None:  # its checkpoints name where the parents stood
        loop.parents = {**parent.parents, "|".join(parent.namespace): at}
    loop.control = parent.control  # a drain asked of the parent stops the child too
    return loop


def _written_update(parent: RunLoop, child: RunLoop) -> Any:
    """The subgraph node's update: the final value of each key of the parent's state the
    subgraph wrote, as LangGraph (whose subgraph returns its final state, so a reduced
    key's value, input included, goes through the parent's reducer); a key it only
    carried is left out, so a sibling's write to it is no clash. A bare-value (root
    channel) parent takes the keyed update in a Command."""
    values = child.values
    output = child.graph.output_keys
    update = {
        key: values[key]
        for key in child.written_keys
        if key in parent.channels and key in values and key in output
    }
    if parent.graph.root_state:
        return [Command(update={k: v}) for k, v in update.items()]
    return update
