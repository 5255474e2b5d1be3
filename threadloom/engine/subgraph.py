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
    from threadloom.engine.scheduler import RunLoop
    from threadloom.engine.tasks import Task


async def run_subgraph(parent: RunLoop, task: Task, ctx: TaskContext) -> Any:
    """Run ``task``'s subgraph and return the parent update (a list of Commands).

    Raises:
        GraphInterrupt: the subgraph paused; the parent pauses with it.
    """
    from threadloom.engine.scheduler import RunLoop
    from threadloom.engine.writes import ParentCommand

    child = task.node.subgraph if task.node is not None else None
    if child is None:
        raise RuntimeError(f"task {task.name!r} is not a subgraph task")
    namespace = (*parent.namespace, f"{task.name}:{task.id}")
    conf = dict(parent.config.get("configurable") or {})
    conf.pop("checkpoint_id", None)
    conf["checkpoint_ns"] = "|".join(namespace)
    config = {**parent.config, "configurable": conf}
    checkpointer = child.checkpointer if child.checkpointer is not None else parent.cp
    if checkpointer is not None and "thread_id" not in conf:
        checkpointer = None
    emit = parent.sink.bind(namespace) if parent.sink is not None else None
    loop = RunLoop(
        child,
        config,
        checkpointer=checkpointer,
        emit=emit,
        modes=parent.modes,
        durability=parent.durability,
        blocking_ok=parent.blocking_ok,
        context=parent.context,
        namespace=namespace,
        sink=parent.sink,
    )
    if task.resume:
        child_input: Any = Command(resume=dict(task.resume))
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
    if loop.interrupts:
        raise GraphInterrupt(loop.interrupts)
    return _written_update(parent, loop)


def _written_update(parent: RunLoop, child: RunLoop) -> list[dict[str, Any]]:
    updates: list[dict[str, Any]] = []
    for key, values in child.written_keys.items():
        if key not in parent.channels:
            continue
        if isinstance(child.channels[key], Reduced):
            updates.extend({key: v} for v in values)
        elif key in child.values:
            updates.append({key: child.values[key]})
    return updates
