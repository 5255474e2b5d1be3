"""Calling a task's node, and the stream events about it (split from ``tasks.py``).

``call_node`` runs the node itself: a subgraph through ``run_subgraph``, an async node
awaited, a sync one inline or in a worker thread, with the arguments it asked for
(``config``, ``writer``, ``runtime``, ``error``). The rest emit what ``debug`` and
``messages`` modes show of a task.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from threadloom.engine.runtime import _TASK, Emit, TaskContext, _noop, task_runtime
from threadloom.workers import to_worker

if TYPE_CHECKING:
    from threadloom.engine.graph import NodeSpec
    from threadloom.engine.scheduler import RunLoop
    from threadloom.engine.tasks import Task


def task_triggers(graph: Any, task: Task) -> tuple[str, ...]:
    """What may trigger ``task``, as LangGraph names its node's triggers:
    ``("__pregel_push",)`` for a ``Send``'s, else ``"branch:to:<node>"`` and one
    ``"join:<a>+<b>:<node>"`` per join into the node (``add_edge([a, b], node)``)."""
    if task.pushed:
        return ("__pregel_push",)
    cache = graph.__dict__.setdefault("_node_triggers", {})
    found: tuple[str, ...] | None = cache.get(task.name)
    if found is None:
        joins = sorted(graph.builder.joins.get(task.name, ()))
        found = cache[task.name] = ("branch:to:" + task.name,
                                    *(f"join:{'+'.join(g)}:{task.name}" for g in joins))
    return found


def debug_event(
    debug: Emit, kind: str, step: int, task: Task, key: str, value: Any,
    interrupts: list[dict[str, Any]] | None = None, triggers: tuple[str, ...] = (),
) -> None:
    """A ``debug`` stream event about a task, as LangGraph's: ``{"type", "timestamp",
    "step", "payload"}``; ``kind`` is ``task`` (it starts: ``key`` ``"input"``; the
    payload ``{id, name, input, triggers}``, ``task_triggers``) or ``task_result``
    (``key`` ``"result"`` or ``"error"``; the payload ``{id, name, error, result,
    interrupts}``, the interrupts of a task that paused as ``{"value", "id"}`` dicts)."""
    if kind == "task":
        payload = {"id": task.id, "name": task.name, "input": value, "triggers": triggers}
    else:
        failed = key == "error"
        payload = {"id": task.id, "name": task.name, "error": value if failed else None,
                   "result": {} if failed else value, "interrupts": interrupts or []}
    debug("debug", {"type": kind, "timestamp": datetime.now(UTC).isoformat(),
                    "step": step, "payload": payload})


async def call_node(loop: RunLoop, task: Task, node: NodeSpec, ctx: TaskContext) -> Any:
    """Call ``task``'s node once with its input; return what the node returned."""
    if node.subgraph is not None:
        from threadloom.engine.subgraph import run_subgraph

        token = _TASK.set(ctx)
        try:
            return await run_subgraph(loop, task, ctx)
        finally:
            _TASK.reset(token)
    if node.wants_config or node.wants_runtime or node.wants_writer or node.wants_error:
        kwargs = node_kwargs(node, ctx)
    else:
        kwargs = None
    token = _TASK.set(ctx)
    try:
        if node.is_async:
            if kwargs is None:
                return await node.fn(task.input)
            return await node.fn(task.input, **kwargs)
        if loop.blocking_ok and loop.inline_sync:
            return node.fn(task.input, **kwargs) if kwargs else node.fn(task.input)
        if kwargs:
            return await to_worker(node.fn, task.input, **kwargs)
        return await to_worker(node.fn, task.input)
    finally:
        _TASK.reset(token)


def node_kwargs(node: NodeSpec, ctx: TaskContext) -> dict[str, Any]:
    """The keyword arguments ``node`` declared it takes, from the task context ``ctx``."""
    from threadloom.engine.runtime import get_stream_writer

    kwargs: dict[str, Any] = {}
    if node.wants_config:
        kwargs["config"] = ctx.config
    writer = None
    if node.wants_writer or node.wants_runtime:
        token = _TASK.set(ctx)
        try:
            writer = get_stream_writer()
        finally:
            _TASK.reset(token)
    if node.wants_writer:
        kwargs["writer"] = writer or _noop
    if node.wants_error:
        kwargs["error"] = ctx.failure
    if node.wants_runtime:
        kwargs["runtime"] = task_runtime(ctx, writer or _noop)
    return kwargs


def emit_unstreamed_messages(
    loop: RunLoop, ctx: TaskContext, writes: list[tuple[str, Any]]
) -> None:
    """Emit the messages a node wrote that ``messages`` mode has not sent yet: neither
    streamed nor emitted earlier in the run, nor in the input of any node of the run
    so far (``run_task`` records those, as LangGraph counts them seen)."""
    from threadloom.engine.runtime import message_metadata

    emit = loop.emit
    if emit is None:
        return
    seen = ctx.streamed_ids if ctx.streamed_ids is not None else set()
    for _, value in writes:
        items = value if isinstance(value, list) else [value]
        for item in items:
            if getattr(item, "type", None) in ("ai", "tool", "human", "system", "AIMessageChunk"):
                mid = getattr(item, "id", None)
                if mid in seen:
                    continue  # streamed token by token, or already emitted in this run
                if mid:
                    seen.add(mid)
                emit("messages", (item, message_metadata(ctx)))


def see_input_messages(seen: set[str], keys: Any, given: Any) -> None:
    """Count the messages of a node's input (a dict or a model) as sent in ``messages``
    mode, as LangGraph does when a node starts: a node returning them sends nothing."""
    for key in keys:
        value = given.get(key) if isinstance(given, dict) else getattr(given, key, None)
        for item in value if isinstance(value, list) else ():
            mid = getattr(item, "id", None)
            if mid:
                seen.add(mid)


def emit_task_end(
    loop: RunLoop, task: Task, error: BaseException | None = None, interrupts: Any = ()
) -> None:
    """The ``tasks`` stream mode's event of a task that ended, as LangGraph: its
    ``error`` (``repr``, as saved), ``result`` (its writes to the output keys, a key
    written more than once as ``{"$writes": [...]}``) and ``interrupts`` (each
    ``Interrupt`` as a ``{"value", "id"}`` dict).

    A task that paused (``interrupts`` given) also gets its ``debug`` mode
    ``task_result`` here, after the ``tasks`` one, as LangGraph sends both (a task that
    returned or failed gets it where its result or error is made)."""
    from threadloom.engine.tasks import task_result

    emit = loop.emit
    if emit is None:
        return
    modes = loop.modes
    paused = [{"value": i[0], "id": i[1]} for i in interrupts]  # an Interrupt, or its tuple
    if "tasks" in modes and not task.ended:
        task.ended = True
        keys = loop.graph.output_keys
        writes = task.result.writes if task.result is not None else []
        emit("tasks", {
            "id": task.id, "name": task.name, "error": None if error is None else repr(error),
            "result": task_result([w for w in writes if w[0] in keys]),
            "interrupts": paused,
        })
    if paused and "debug" in modes:
        debug_event(emit, "task_result", loop.step, task, "result", {}, paused)
