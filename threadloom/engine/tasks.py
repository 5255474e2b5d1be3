"""Running one task: call the node (with retries); ``writes`` turns what it returned into
writes.

A task is one node call in one super-step: a node triggered by edges (it receives the
state) or a ``Send`` packet (it receives the packet's argument).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from threadloom.engine.node_call import (
    call_node,
    debug_event,
    emit_unstreamed_messages,
    see_input_messages,
    task_triggers,
)
from threadloom.engine.runtime import (
    _TASK,
    Emit,
    GraphInterrupt,
    TaskContext,
)
from threadloom.engine.writes import ParentCommand, add_update, writes_of
from threadloom.errors import (
    GraphDrained,
    NodeCancelledError,
    NodeError,
    add_node_note,
)
from threadloom.types import ROOT, START, Command, Send

if TYPE_CHECKING:
    from threadloom.engine.graph import NodeSpec
    from threadloom.engine.scheduler import RunLoop


@dataclass(slots=True)
class TaskResult:
    """What a finished task wrote: ``(key, value)`` pairs and where it routed."""

    writes: list[tuple[str, Any]]
    goto: Sequence[str | Send]  # () when it routes nowhere (shared: only read)

    def goto_payload(self) -> list[Any]:
        """``goto`` in a codec-storable form."""
        return [g if isinstance(g, str) else {"node": g.node, "arg": g.arg} for g in self.goto]

    def update_view(self) -> Any:
        """The task's writes as the ``updates`` stream mode shows them, as LangGraph: one
        dict; a list of one-key dicts when a key was written more than once; the bare
        value (a list of them for several) for a root-channel graph; None for no write."""
        writes = self.writes
        if not writes:
            return None
        if writes[0][0] == ROOT:  # a root-channel graph: its only channel
            return writes[0][1] if len(writes) == 1 else [v for _, v in writes]
        out = dict(writes)
        if len(out) < len(writes):  # one key written twice: each write on its own
            return [{k: v} for k, v in writes]
        return out


def writes_output(results: list[TaskResult], output_keys: tuple[str, ...]) -> bool:
    """Whether any of ``results`` wrote one of ``output_keys``: LangGraph streams a
    ``values`` event after a step (the START step too) only then."""
    return any(key in output_keys for result in results for key, _ in result.writes)


def task_result(writes: list[tuple[str, Any]] | None) -> dict[str, Any]:
    """A finished task's writes as LangGraph's task ``result``: key -> value, a key
    written more than once -> ``{"$writes": [value, ...]}`` in write order."""
    out: dict[str, Any] = {}
    many: dict[str, list[Any]] = {}
    for key, value in writes or ():
        if key in many:
            many[key].append(value)
        elif key in out:
            many[key] = [out[key], value]
            out[key] = {"$writes": many[key]}
        else:
            out[key] = value
    return out


@dataclass(slots=True)
class Failed(TaskResult):
    """A saved task whose node failed and whose error handler is due (``record_failure``):
    ``error`` is ``{"type": ..., "message": ...}``."""

    error: dict[str, Any] | None = None


class Held:
    """A paused task that a resume map does not answer: it stays paused, unrun."""

    __slots__ = ("interrupts",)

    def __init__(self, interrupts: list[Any]) -> None:
        self.interrupts = interrupts


@dataclass(slots=True)
class Task:
    """One node call planned for a super-step."""

    name: str
    node: NodeSpec | None
    input: Any
    id: str
    index: int
    remaining: int
    resume: dict[str, Any] | None = None  # interrupt id -> answer, when resuming
    result: TaskResult | None = None
    held: list[Any] | None = None  # the interrupts of a paused task left unanswered
    cached: bool = False  # its result is writes an earlier run saved
    pushed: bool = False  # made by a Send packet (not triggered by an edge)
    streamed: bool = False  # its ``updates`` event was sent as it finished
    ended: bool = False  # its ``tasks`` end event was sent
    failure: Any = None  # a NodeError: the task runs its node's error handler for it
    packet: int = 0  # of a pushed task: its Send's place among the step's packets

    @staticmethod
    def virtual_start() -> Task:
        """The pseudo-task whose writes are the run's input."""
        return Task(START, None, None, START, -1, 0)


def task_id(checkpoint_id: str, step: int, index: int, name: str) -> str:
    """A task id that is the same when the same step is planned again from a checkpoint."""
    raw = f"{checkpoint_id}|{step}|{index}|{name}".encode()
    return hashlib.blake2b(raw, digest_size=12).hexdigest()


_NO_RESUME: dict[str, Any] = {}  # shared, only read


def task_context(loop: RunLoop, task: Task) -> TaskContext:
    """The context a task's node runs under (O(1); a batch builds it on its worker)."""
    modes = loop.modes
    # positional, in the order of TaskContext's fields: this runs per task
    ctx = TaskContext(
        task.name, loop.step, task.id, loop.config, loop.emit, modes, task.remaining,
        loop.namespace, task.resume or _NO_RESUME, 0, loop.context,
        loop.message_ids if "messages" in modes else None,
        loop.blocking_ok and loop.inline_sync, task.index, loop,
    )
    ctx.failure = task.failure
    if task.pushed:
        ctx.packet = task.packet
    return ctx


async def run_task(loop: RunLoop, task: Task) -> TaskResult:
    """Call the task's node, retrying per its ``RetryPolicy``; return its writes.

    Raises:
        GraphInterrupt: the node paused.
        Exception: what the node raised (after retries), with a note naming node and step.
    """
    node = task.node
    if node is None:
        raise RuntimeError("virtual task cannot run")
    # per task, so the usual case (no stream modes, a plain node, a dict returned) makes
    # no call that would do nothing: announce_task only with modes, plain_node inlined
    debug = announce_task(loop, task) if loop.modes else None
    ctx = task_context(loop, task)
    attempt = 0
    # A plain node (no subgraph, no injected arguments) is called right here, a coroutine
    # layer less than _call: awaited if async, else inline when _call would (or a worker).
    is_async = node.is_async
    here = node.subgraph is None and not (  # plain_node(node), inlined
        node.wants_config or node.wants_runtime or node.wants_writer or node.wants_error
    ) and (is_async or (loop.blocking_ok and loop.inline_sync))
    if node.wants_runtime:
        ctx.first_attempt_time = time.time()
    while True:
        attempt += 1
        ctx.interrupt_index = ctx.nested = 0
        ctx.attempt = attempt
        try:
            if here:
                token = _TASK.set(ctx)
                try:
                    result = await node.fn(task.input) if is_async else node.fn(task.input)
                finally:
                    _TASK.reset(token)
            else:
                result = await call_node(loop, task, node, ctx)
            break
        except ParentCommand as pc:  # from a graph invoked in the node: it routes here
            result = parent_route(pc)
            break
        except (GraphInterrupt, GraphDrained, asyncio.CancelledError) as exc:
            raise stopped(task.name, exc)  # noqa: B904 - stopped keeps the cause
        except Exception as exc:
            if not await _waited_to_retry(loop, task, exc, attempt, debug):
                if node.error_handler is None:
                    raise
                return await _to_handler(loop, task, node.error_handler, exc)
    if type(result) is dict and debug is None and ctx.streamed_ids is None and (
            not loop.graph.root_state):  # task_output's usual case, inlined
        writes: list[tuple[str, Any]] = []
        add_update(loop.graph, task.name, result.items(), loop.step, writes, False)
        return TaskResult(writes, ())
    return task_output(loop, task, ctx, result, debug)


def plain_node(node: NodeSpec) -> bool:
    """Whether ``node`` is called with its input alone: no subgraph, no injected
    ``config``, ``runtime``, ``writer`` or ``error`` argument."""
    return node.subgraph is None and not (
        node.wants_config or node.wants_runtime or node.wants_writer or node.wants_error)


def parent_route(pc: ParentCommand) -> Command:
    """What a node returns when a graph invoked in it sent a ``Command`` to its parent."""
    return Command(update=pc.command.update, goto=pc.command.goto)


def task_output(
    loop: RunLoop, task: Task, ctx: TaskContext | None, result: Any, debug: Emit | None
) -> TaskResult:
    """What the node of ``task`` returned (``result``), as its writes and routes, with
    the messages and ``debug`` events a task's end streams (``ctx``: the task's
    context, needed only in ``messages`` mode).

    Raises:
        InvalidUpdateError: ``result`` writes a key the state lacks (or is no update).
    """
    if type(result) is dict and not loop.graph.root_state:  # the usual return: two calls less
        writes: list[tuple[str, Any]] = []
        add_update(loop.graph, task.name, result.items(), loop.step, writes, False)
        out = TaskResult(writes, ())
    else:
        writes, goto = writes_of(loop.graph, task.name, result, loop.step)
        out = TaskResult(writes, goto)
    if ctx is not None and ctx.streamed_ids is not None and loop.emit is not None:
        emit_unstreamed_messages(loop, ctx, writes)
    if debug is not None:
        debug_event(debug, "task_result", loop.step, task, "result", task_result(writes))
    return out


def task_failed(loop: RunLoop, task: Task, exc: Exception, debug: Emit | None) -> Exception:
    """``exc`` (the node of ``task`` raised it and will not retry) noted with the node and
    step, its ``debug`` event sent; ``run_task`` does this before it raises."""
    add_node_note(exc, task.name, loop.step)
    if debug is not None:
        debug_event(debug, "task_result", loop.step, task, "error", repr(exc))
    return exc


def announce_task(loop: RunLoop, task: Task) -> Emit | None:
    """What a task's start streams (its input messages counted as sent, the ``debug``
    and ``tasks`` start events); returns the ``debug`` sink, None when not streamed."""
    modes = loop.modes
    if "messages" in modes and loop.graph.message_keys:
        see_input_messages(loop.message_ids, loop.graph.message_keys, task.input)
    debug = loop.emit if "debug" in modes else None
    if debug is not None:
        debug_event(debug, "task", loop.step, task, "input", task.input,
                    triggers=task_triggers(loop.graph, task))
    if "tasks" in modes:
        _emit_task_start(loop, task)
    return debug


def _emit_task_start(loop: RunLoop, task: Task) -> None:
    """The ``tasks`` stream mode's event of a task that starts, as LangGraph."""
    if loop.emit is not None:
        loop.emit("tasks", {"id": task.id, "name": task.name, "input": task.input,
                            "triggers": task_triggers(loop.graph, task)})


def stopped(node: str, exc: BaseException) -> BaseException:
    """What ``run_task`` raises for a pause or a cancellation out of node ``node``: the
    same, except a ``CancelledError`` the node raised itself (its task is not being
    cancelled), which fails the run as ``NodeCancelledError``, as in LangGraph."""
    if not isinstance(exc, asyncio.CancelledError):
        return exc
    current = asyncio.current_task()
    if current is None or current.cancelling():  # the run cancels it: not the node's doing
        return exc
    err = NodeCancelledError(node)
    err.__cause__ = exc
    return err


async def _to_handler(loop: RunLoop, task: Task, handler: str, exc: Exception) -> TaskResult:
    """Run node ``handler`` for ``task``, whose node raised ``exc``: the task becomes the
    handler's (its writes and routes are the handler's), and the failure is saved first
    so that a resume after a crash of the handler runs the handler again, not the node."""
    await loop.record_failure(task, exc)
    task.failure = NodeError(task.name, exc)
    task.name = handler
    task.node = loop.graph.nodes[handler]
    return await run_task(loop, task)


async def _waited_to_retry(
    loop: RunLoop, task: Task, exc: Exception, attempt: int, debug: Emit | None
) -> bool:
    """After failed attempt ``attempt``: wait and return True when the node's retry
    policy retries ``exc``; else note the node on ``exc`` and return False."""
    node = task.node
    delay = None if node is None else _retry_delay(node, exc, attempt)
    if delay is None:
        task_failed(loop, task, exc, debug)
        return False
    if loop.blocking_ok and loop.inline_sync:  # a lone task of a sync run
        time.sleep(delay)  # as LangGraph's sync runs wait between attempts
    else:
        await asyncio.sleep(delay)
    return True


def _retry_delay(node: NodeSpec, exc: Exception, attempt: int) -> float | None:
    """Seconds to wait before retrying ``node`` after failed attempt ``attempt`` with
    ``exc``, or None when its ``RetryPolicy`` does not retry it (or it has none)."""
    policies = node.retry
    if policies is None:
        return None
    for policy in policies:  # the first policy that retries this error applies
        if policy.should_retry(exc):
            return None if attempt >= policy.max_attempts else policy.interval(attempt)
    return None
