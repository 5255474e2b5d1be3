"""Running a super-step of several tasks (the *run* verb of ``RunLoop._loop`` when a step
has more than one task, or saved writes).

Each task runs as its own asyncio task (``_each_in_a_task``), except in a step whose
every task calls a plain sync node (no subgraph, no injected argument, no retry policy,
no error handler), as a ``Send`` fan-out usually is: those run as one ``workers.Batch``
(``_as_a_batch``): a few workers call the nodes one after another, each packet in a copy
of the step's context, and the loop takes their results in bursts. Per packet that is
one node call and O(1) work on each side, instead of an asyncio task, a worker hop and a
loop wake-up.

Both ways mean the same run: every task starts (its ``debug``/``tasks`` events) before
any ends; a finished task's ``updates`` event, node-finished hook, ``tasks`` end event
and saved writes follow in the order tasks finish (writes are applied in task order
later, never in this order); an interrupt pauses its task only; the first error ends
the step (tasks not yet started do not start, those under way are dropped), every
failed task's error is saved, and the first failed task in task order raises.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING, Any

from threadloom.engine.concurrency import gated, retrieve
from threadloom.engine.node_call import emit_task_end
from threadloom.engine.runtime import _TASK, GraphInterrupt, TaskContext
from threadloom.engine.tasks import (
    announce_task,
    parent_route,
    plain_node,
    run_task,
    stopped,
    task_context,
    task_failed,
    task_output,
)
from threadloom.errors import GraphDrained, ParentCommand
from threadloom.workers import Batch, pool_of

if TYPE_CHECKING:
    from threadloom.engine.runtime import Emit
    from threadloom.engine.scheduler import RunLoop
    from threadloom.engine.tasks import Task

async def run_many(loop: RunLoop, todo: list[Task], *, record: bool) -> None:
    """Run ``todo`` (tasks of one step, in task order) concurrently, setting each
    ``task.result``; ``record``: save each finished task's writes as it ends.

    Raises:
        Exception: the first failed task's error, in task order (after every failed
            task's error is saved).
    """
    if len(todo) > 1 and loop.graph.step_timeout is None and all(_batchable(t) for t in todo):
        errors = await _as_a_batch(loop, todo, record)
    else:
        errors = await _each_in_a_task(loop, todo, record)
    for task, error in errors:  # every failed task's error is saved (as LangGraph)
        await loop._record_error(task, error)
        emit_task_end(loop, task, error=error)
    if errors or loop.paused:  # (durability "exit": the finished tasks' writes kept)
        await loop._record_finished(todo)
    if errors:
        raise errors[0][1]  # the first in task order

def _batchable(task: Task) -> bool:
    node = task.node
    return (
        node is not None and not node.is_async and plain_node(node) and node.retry is None
        and node.error_handler is None and task.failure is None
    )

def _finished(loop: RunLoop, task: Task, live: Emit | None) -> None:
    """What follows a task's success, before its writes are saved."""
    if loop.node_finished is not None:
        loop.node_finished(task.name)
    if live is not None:
        live("updates", {task.name: task.result.update_view()})  # type: ignore[union-attr]
        task.streamed = True
    emit_task_end(loop, task)

async def _each_in_a_task(
    loop: RunLoop, todo: list[Task], record: bool
) -> list[tuple[Task, BaseException]]:
    """Each task of ``todo`` as an asyncio task; the failed ones with their errors."""
    live = loop.emit if "updates" in loop.modes else None  # as each task ends, as LangGraph

    async def one(task: Task) -> None:
        try:
            task.result = await run_task(loop, task)
        except GraphInterrupt as gi:
            await loop._record_interrupt(task, gi)
            emit_task_end(loop, task, interrupts=gi.interrupts)
            return
        _finished(loop, task, live)
        if record:
            await loop._record_writes(task)

    limit = loop.config.get("max_concurrency")
    if limit and len(todo) > limit:  # as LangGraph's config: at most that many at once
        running = gated(one, todo, limit)
    else:
        running = [asyncio.ensure_future(one(t)) for t in todo]
    for fut in running:  # no task's error goes unretrieved, whatever ends the wait
        fut.add_done_callback(retrieve)
    timeout = loop.graph.step_timeout
    try:
        done, pending = await asyncio.wait(running, timeout=timeout,
                                           return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        for fut in running:
            fut.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        raise
    timed_out = bool(pending) and timeout is not None and not any(
        f.exception() for f in done if not f.cancelled())
    if pending and not timed_out:  # a sibling failed: sync nodes already on a worker
        # thread cannot be stopped; as LangGraph's thread pool, let them end (their error
        # handlers run, their errors are saved) and cancel the rest
        running_sync = {f for f, t in zip(running, todo, strict=True)
                        if f in pending and t.node is not None and not t.node.is_async}
        for fut in pending - running_sync:
            fut.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        done = done | running_sync  # the cancelled ones did not fail on their own
        pending = set()
    for fut in pending:
        fut.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
        if timed_out:
            raise TimeoutError(f"super-step {loop.step} took longer than the graph's "
                               f"step_timeout ({timeout} s); its running tasks were cancelled")
    return [  # of the tasks that failed on their own (not those cancelled here)
        (task, fut.exception())  # type: ignore[misc]
        for task, fut in zip(todo, running, strict=True)
        if fut in done and not fut.cancelled() and fut.exception() is not None
    ]

def _call(loop: RunLoop, task: Task) -> Any:
    """A node call on a worker, in the packet's own copy of the step's context."""
    _TASK.set(task_context(loop, task))
    return task.node.fn(task.input)  # type: ignore[union-attr]  # batchable: a node


def _call_keeping(loop: RunLoop, task: Task) -> tuple[TaskContext, Any]:
    """``_call``, also returning the context (the ``messages`` mode reads it after)."""
    ctx = task_context(loop, task)
    _TASK.set(ctx)
    return ctx, task.node.fn(task.input)  # type: ignore[union-attr]


async def _as_a_batch(
    loop: RunLoop, todo: list[Task], record: bool
) -> list[tuple[Task, BaseException]]:
    """``todo`` (plain sync nodes) as one ``Batch`` on the loop's workers, as wide as
    the pool (or ``max_concurrency``); the failed tasks with their errors.

    Each packet's context is built on its worker and dropped with its call (outside
    ``messages`` mode), so what stays alive through the step per packet is its task,
    its result and its writes: fewer objects reach the GC's oldest generation, whose
    full collections (a pass over the whole heap each time it grew by a quarter) cost
    more than the rest of a packet's work on a large heap.
    """
    debug = loop.emit if "debug" in loop.modes else None  # as announce_task's
    if loop.modes:  # every start event first, as asyncio tasks send them
        for task in todo:
            announce_task(loop, task)
    keep = "messages" in loop.modes
    base = contextvars.copy_context()
    call_one = _call_keeping if keep else _call

    def call(i: int) -> Any:
        return base.copy().run(call_one, loop, todo[i])

    running = asyncio.get_running_loop()
    pool = pool_of(running)
    width = min(pool.max_workers, loop.config.get("max_concurrency") or pool.max_workers)
    batch = Batch(running, pool, call, len(todo), width, _halts)
    live = loop.emit if "updates" in loop.modes else None
    errors: list[tuple[int, Task, BaseException]] = []
    left = len(todo)
    try:
        while left and not errors:
            for i, ok, value in await batch.outcomes():
                left -= 1
                task = todo[i]
                ctx = None
                if ok and keep:
                    ctx, value = value
                try:
                    if ok and ctx is None:  # the usual packet: its end, without a coroutine
                        task.result = task_output(loop, task, None, value, debug)
                        _finished(loop, task, live)
                        if record:
                            await loop._record_writes(task)
                    else:
                        await _take(loop, task, ctx, debug, ok, value, live, record)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:  # the task's error, as an asyncio task's
                    errors.append((i, task, exc))
    finally:
        batch.stop()
    errors.sort(key=lambda e: e[0])
    return [(task, exc) for _, task, exc in errors]


def _halts(exc: BaseException) -> bool:
    """Whether a node raising ``exc`` fails the step (not a pause, not a parent route)."""
    return not isinstance(exc, GraphInterrupt | ParentCommand)


async def _take(
    loop: RunLoop, task: Task, ctx: TaskContext | None, debug: Emit | None, ok: bool,
    value: Any, live: Emit | None, record: bool,
) -> None:
    """One finished call of a batch: what ``run_task`` and ``_each_in_a_task``'s ``one``
    make of the node's return value or exception (raised: the task failed)."""
    if not ok:
        if isinstance(value, ParentCommand):  # from a graph invoked in the node
            value = parent_route(value)
        elif isinstance(value, GraphInterrupt):
            await loop._record_interrupt(task, value)
            emit_task_end(loop, task, interrupts=value.interrupts)
            return
        elif isinstance(value, GraphDrained | asyncio.CancelledError):
            raise stopped(task.name, value)
        elif isinstance(value, Exception):
            raise task_failed(loop, task, value, debug)
        else:
            raise value
    task.result = task_output(loop, task, ctx, value, debug)
    _finished(loop, task, live)
    if record:
        await loop._record_writes(task)
