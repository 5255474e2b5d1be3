"""What a running node can reach: its config, the stream writer, interrupts.

The scheduler sets a ``TaskContext`` in a context variable around every node call, so
``interrupt()``, ``get_stream_writer()`` and ``get_config()`` work from anywhere inside a
node, including sync nodes run in worker threads (the context is copied there) and chat
models called by the node (they feed the ``messages`` stream mode through
``emit_message_chunk``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from threadloom.engine.runtime_info import ExecutionInfo, Runtime, server_info
from threadloom.types import Interrupt

Emit = Callable[[str, Any], None]
T = TypeVar("T")


class GraphBubbleUp(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """A signal that must reach the engine through every handler on its way (LangGraph's
    base of its interrupt and parent-command signals): ``ToolNode`` re-raises it whatever
    ``handle_tool_errors`` says, and no ``except Exception`` catches it."""


class GraphInterrupt(GraphBubbleUp):  # noqa: N818 - a control-flow signal, not an error
    """Raised by ``interrupt()`` to pause the run; the scheduler catches it.

    It derives from ``BaseException`` so that a node's (or a tool's) ``except Exception``
    cannot swallow the pause by accident.
    """

    def __init__(self, interrupts: list[Interrupt]) -> None:
        super().__init__(interrupts)
        self.interrupts = interrupts


@dataclass(slots=True)
class TaskContext:
    """Per-task run context (one per node call).

    ``blocking_ok`` is True when the task runs alone in its super-step on the private
    event loop of a sync entry point (``invoke``/``stream``): nothing else shares that
    loop, so the node may make a sync call on it (a lone sync tool call, say) instead of
    handing it to a worker thread. It is False in every async run.
    """

    node: str
    step: int
    task_id: str
    config: dict[str, Any]
    emit: Emit | None
    modes: frozenset[str]
    remaining_steps: int
    namespace: tuple[str, ...] = ()
    resume: dict[str, Any] = field(default_factory=dict)  # interrupt id -> its answer
    interrupt_index: int = 0
    context: Any = None
    streamed_ids: set[str] | None = None
    blocking_ok: bool = False
    index: int = 0  # the task's place in its super-step
    run: Any = None  # the RunLoop running the task (a graph invoked inside it nests there)
    nested: int = 0  # graphs invoked inside the task so far
    attempt: int = 1  # of the node's retries, 1-based
    first_attempt_time: float | None = None  # set for nodes that take a ``runtime``
    chunk_metadata: dict[str, Any] | None = None  # built on the first streamed chunk
    failure: Any = None  # the NodeError an error handler's task handles
    packet: int = -1  # the Send packet the task runs (its place in the step), or -1


_TASK: ContextVar[TaskContext | None] = ContextVar("threadloom_task", default=None)
# Set around one of several calls a node runs concurrently (ToolNode's parallel tool
# calls): [scope key, count of interrupt() calls so far in it, the task it belongs to].
_SCOPE: ContextVar[list[Any] | None] = ContextVar("threadloom_interrupt_scope", default=None)


def execution_info(ctx: TaskContext) -> ExecutionInfo:
    """The ``ExecutionInfo`` of the task running under ``ctx``."""
    conf = ctx.config.get("configurable") or {}
    run_id = ctx.config.get("run_id")
    return ExecutionInfo(
        checkpoint_id=str(conf.get("checkpoint_id") or ""),
        checkpoint_ns="|".join((*ctx.namespace, f"{ctx.node}:{ctx.task_id}")),
        task_id=ctx.task_id,
        thread_id=conf.get("thread_id"),
        run_id=None if run_id is None else str(run_id),
        node_attempt=ctx.attempt,
        node_first_attempt_time=ctx.first_attempt_time,
    )


def task_runtime(ctx: TaskContext, writer: Callable[[Any], None]) -> Runtime[Any]:
    """The ``Runtime`` handed to the node running under ``ctx``."""
    run = ctx.run
    return Runtime(
        ctx.context,
        stream_writer=writer,
        execution_info=execution_info(ctx),
        server_info=server_info(ctx.config),
        control=getattr(run, "control", None),
        config=ctx.config,
        node=ctx.node,
        step=ctx.step,
        remaining_steps=ctx.remaining_steps,
    )


def get_runtime(context_schema: Any = None) -> Runtime[Any]:
    """The running node's ``Runtime``, as LangGraph's ``get_runtime`` (``context_schema``
    only types the result).

    Raises:
        RuntimeError: outside a running node.
    """
    return task_runtime(_require_task("get_runtime()"), get_stream_writer())


def current_task() -> TaskContext | None:
    """The running task's context, or None outside a node."""
    return _TASK.get()


def _require_task(what: str) -> TaskContext:
    ctx = _TASK.get()
    if ctx is None:
        raise RuntimeError(f"{what} can only be called inside a running graph node")
    return ctx


def interrupt(value: Any) -> Any:
    """Pause the run and hand ``value`` to the caller; return the resume value later.

    As LangGraph's ``interrupt``: the first time, this raises a pause that ends the run
    with ``"__interrupt__"`` in its result (the thread's checkpoint keeps everything
    needed). When the caller invokes the graph again with ``Command(resume=x)`` on the same
    thread, the node runs again from its start and this call returns ``x``. A node may
    call ``interrupt`` several times: each call has its own id (from the task's checkpoint
    namespace ``node:task_id`` and the call's order, so ids differ across threads and
    checkpoints), and ``Command(resume={id: value, ...})`` answers each by its id.

    Args:
        value: what to show the human (any value the checkpoint codec can store).

    Returns:
        The resume value.

    Raises:
        RuntimeError: outside a running node.
        GraphRunError: (from the run) when the graph has no checkpointer, since a pause
            needs somewhere to be saved.
    """
    ctx = _require_task("interrupt()")
    scope = _SCOPE.get()
    if scope is None or scope[2] is not ctx:  # not scoped, or scoped in an outer run
        count = ctx.interrupt_index
        ctx.interrupt_index += 1
        call = str(count)
    else:
        count = scope[1]
        scope[1] += 1
        call = f"{scope[0]}:{count}"
    # As LangGraph, the id names the call by the task's checkpoint namespace
    # ("node:task_id" under the parent's) and its order: the task id comes from the
    # checkpoint the step runs from (named before the step runs, under every
    # durability), so the id is the same on every resume of this pause, and differs
    # on another thread, another checkpoint of this thread, or a fork.
    ns = "|".join((*ctx.namespace, f"{ctx.node}:{ctx.task_id}"))
    key = f"{ns}|{call}"
    interrupt_id = hashlib.sha256(key.encode()).hexdigest()[:32]
    resume = ctx.resume
    if interrupt_id in resume:
        return resume[interrupt_id]
    raise GraphInterrupt([Interrupt(value, interrupt_id)])


def is_interrupt_id(key: Any) -> bool:
    """Whether ``key`` has the shape of an interrupt id (32 lowercase hex digits)."""
    return isinstance(key, str) and len(key) == 32 and all(c in _HEX for c in key)


_HEX = frozenset("0123456789abcdef")


async def scoped_interrupts(key: str, job: Awaitable[T]) -> T:
    """Await ``job`` with its ``interrupt()`` calls numbered apart from its siblings'.

    For a node that runs several calls concurrently (ToolNode's parallel tool calls): each
    call's interrupts get ids from ``key`` (its tool call id) and their own order, so the
    ids do not depend on which call reached ``interrupt()`` first, and a resume map
    answers each call its own way (as LangGraph gives each parallel tool call its own
    interrupt id).
    """
    token = _SCOPE.set([key, 0, _TASK.get()])
    try:
        return await job
    finally:
        _SCOPE.reset(token)


def get_config() -> dict[str, Any]:
    """The config of the running node.

    Raises:
        RuntimeError: outside a running node.
    """
    return _require_task("get_config()").config


def _noop(_: Any) -> None:
    return None


def get_stream_writer() -> Callable[[Any], None]:
    """A function that writes any value to the ``custom`` stream mode.

    As LangGraph's ``get_stream_writer``. Outside a run, or when nobody streams ``custom``,
    the writer does nothing, so nodes can call it unconditionally.
    """
    ctx = _TASK.get()
    if ctx is None or ctx.emit is None or "custom" not in ctx.modes:
        return _noop
    emit = ctx.emit

    def write(chunk: Any) -> None:
        emit("custom", chunk)

    return write


def message_stream_active() -> bool:
    """Whether the running node's caller streams ``messages`` (chat models then stream)."""
    ctx = _TASK.get()
    return ctx is not None and ctx.emit is not None and "messages" in ctx.modes


# configurable keys copied into ``messages`` metadata when set (LangGraph's allowlist:
# never the rest of ``configurable``, which may hold keys and secrets)
_PROPAGATED = ("thread_id", "checkpoint_id", "checkpoint_ns", "task_id", "run_id",
               "assistant_id", "graph_id")


def propagate_metadata(config: dict[str, Any], conf: Mapping[str, Any]) -> None:
    """Copy the allowlisted ``configurable`` keys that are set into ``config["metadata"]``
    (a new dict; keys already there win), as LangGraph's ``ensure_config`` does when a
    run starts."""
    if not any(conf.get(key) for key in _PROPAGATED):
        return
    meta = dict(config.get("metadata") or ())
    for key in _PROPAGATED:
        if key not in meta and conf.get(key):
            meta[key] = conf[key]
    config["metadata"] = meta


def message_metadata(ctx: TaskContext) -> dict[str, Any]:
    """The metadata paired with each streamed message, as LangGraph's: the run's
    ``config["metadata"]`` (with the allowlisted ``configurable`` keys the run was given,
    ``propagate_metadata``; in a subgraph, its ``checkpoint_ns``), then
    ``ls_integration``, ``langgraph_step``/``_node``/``_triggers``/``_path`` and
    ``langgraph_checkpoint_ns`` (``"node:task_id"``, ``|``-joined under its parents), and
    the config's ``tags`` when there are any."""
    config = ctx.config
    meta = dict(config.get("metadata") or ())
    if ctx.namespace and "checkpoint_ns" not in meta:
        meta["checkpoint_ns"] = (config.get("configurable") or {}).get("checkpoint_ns")
    node = ctx.node
    meta["ls_integration"] = "langgraph"
    meta["langgraph_step"] = ctx.step
    meta["langgraph_node"] = node
    if ctx.packet >= 0:
        meta["langgraph_triggers"] = ("__pregel_push",)
        meta["langgraph_path"] = ("__pregel_push", ctx.packet, False)
    else:
        meta["langgraph_triggers"] = (f"branch:to:{node}",)
        meta["langgraph_path"] = ("__pregel_pull", node)
    meta["langgraph_checkpoint_ns"] = "|".join((*ctx.namespace, f"{node}:{ctx.task_id}"))
    tags = [t for t in config.get("tags", ()) if not str(t).startswith("seq:step")]
    if tags:
        meta["tags"] = tags
    return meta


def emit_message_chunk(chunk: Any) -> None:
    """Send one LLM token chunk to the ``messages`` stream mode; a no-op elsewhere.

    Chat models call this for every chunk they receive while ``message_stream_active()``.
    The chunk's ``id`` should equal the id of the final message the model returns, so the
    scheduler does not emit that message a second time.
    """
    ctx = _TASK.get()
    if ctx is None or ctx.emit is None or "messages" not in ctx.modes:
        return
    if ctx.streamed_ids is not None and getattr(chunk, "id", None):
        ctx.streamed_ids.add(chunk.id)
    meta = ctx.chunk_metadata
    if meta is None:  # one dict for every chunk of the task, as LangGraph shares one
        meta = ctx.chunk_metadata = message_metadata(ctx)
    ctx.emit("messages", (chunk, meta))
