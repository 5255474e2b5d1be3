"""A compiled graph invoked from inside a running node (``inner.invoke(state)``).

As in LangGraph, such a graph runs on the calling run's thread and checkpointer, in the
namespace of the calling task (``node:task_id``), so it can ``interrupt()``: the pause
travels up and pauses the caller's task, and when that task runs again with an answer,
the inner graph continues from where it paused instead of starting over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import INTERRUPT
from threadloom.engine.replay import place
from threadloom.engine.runtime import GraphInterrupt, current_task
from threadloom.types import Command

if TYPE_CHECKING:
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.scheduler import RunLoop


def nested_loop(
    graph: CompiledGraph, config: dict[str, Any], same_loop: bool
) -> tuple[RunLoop, dict[str, Any]] | None:
    """The run of ``graph`` nested in the running task, with the answers the task resumes
    with, or None when it runs on its own:
    outside a node, with its own checkpointer, compiled with ``checkpointer=False``, or
    given another thread id than the caller's."""
    ctx = current_task()
    if ctx is None or ctx.run is None or graph.subgraph_persistence is False:
        return None
    parent = ctx.run
    conf = config.get("configurable") or {}
    thread = (parent.config.get("configurable") or {}).get("thread_id")
    if conf.get("thread_id", thread) != thread:  # the caller names another thread
        return None
    from threadloom.engine.subgraph import child_loop

    level = ctx.node if graph.subgraph_persistence else f"{ctx.node}:{ctx.task_id}"
    namespace = (*parent.namespace, level)
    if ctx.nested:  # the k-th graph invoked in the task: a namespace of its own, "...|k"
        namespace = (*namespace, str(ctx.nested))
    ctx.nested += 1
    loop = child_loop(parent, graph, namespace, parent.cp, same_loop=same_loop)
    return loop, dict(ctx.resume)


def streamed_here(
    nest: tuple[RunLoop, dict[str, Any]], own: RunLoop
) -> tuple[RunLoop, dict[str, Any]]:
    """A nested run that the caller streams (``inner.stream(...)`` inside a node): its
    events go to the caller's iterator, in the modes it asked for."""
    loop, answers = nest
    loop.emit, loop.modes, loop.sink = own.emit, own.modes, own.sink
    loop.message_ids = own.message_ids
    return loop, answers


async def run_nested(loop: RunLoop, answers: dict[str, Any], input: Any) -> dict[str, Any]:
    """Run a nested graph: continue its paused run when the calling task resumes.

    Raises:
        GraphInterrupt: the nested graph paused; the calling task pauses with it.
    """
    named = loop.travel is not None and await place(loop, not answers)  # replay.py
    if answers and await _paused(loop):
        input = Command(resume=answers)
    elif named:  # the config named this graph's checkpoint: it goes on from there
        input = None
    elif isinstance(input, dict) and not loop.graph.root_state:  # as a subgraph node: the
        # keys of its input schema
        keys = loop.graph.input_keys
        input = {k: v for k, v in input.items() if k in keys}
    out = await loop.run(input)
    if loop.interrupts:
        raise GraphInterrupt(loop.interrupts)
    return out


async def _paused(loop: RunLoop) -> bool:
    saved = await loop.cp_call("get_tuple", loop.config)
    return saved is not None and any(w.channel == INTERRUPT for w in saved.pending_writes)
