"""What a running node can reach: its config, the stream writer, interrupts.

The scheduler sets a ``TaskContext`` in a context variable around every node call, so
``interrupt()``, ``get_stream_writer()`` and ``get_config()`` work from anywhere inside a
node, including sync nodes run in worker threads (the context is copied there) and chat
models called by the node (they feed the ``messages`` stream mode through
``emit_message_chunk``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from threadloom.types import Interrupt

Emit = Callable[[str, Any], None]


class GraphInterrupt(BaseException):  # noqa: N818 - a control-flow signal, not an error
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
    resume: list[Any] = field(default_factory=list)
    interrupt_index: int = 0
    context: Any = None
    streamed_ids: set[str] | None = None
    blocking_ok: bool = False
    chunk_metadata: dict[str, Any] | None = None  # built on the first streamed chunk


_TASK: ContextVar[TaskContext | None] = ContextVar("threadloom_task", default=None)


@dataclass(frozen=True, slots=True)
class Runtime:
    """Handed to a node that declares a ``runtime`` parameter.

    Attributes:
        config: the run config (``configurable`` holds ``thread_id`` etc.).
        node: the running node's name.
        step: the current super-step.
        remaining_steps: super-steps left before ``recursion_limit`` stops the run
            (as LangGraph's ``RemainingSteps``; counted per invocation).
        stream_writer: writes to the ``custom`` stream mode.
        context: the ``context=`` object given to ``invoke``.
    """

    config: dict[str, Any]
    node: str
    step: int
    remaining_steps: int
    stream_writer: Callable[[Any], None]
    context: Any = None


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
    call ``interrupt`` several times; resume values are matched by call order.

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
    index = ctx.interrupt_index
    ctx.interrupt_index += 1
    if index < len(ctx.resume):
        return ctx.resume[index]
    interrupt_id = hashlib.sha256(f"{ctx.task_id}:{index}".encode()).hexdigest()[:32]
    raise GraphInterrupt([Interrupt(value, interrupt_id)])


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


def message_metadata(ctx: TaskContext) -> dict[str, Any]:
    """The metadata paired with each streamed message chunk."""
    conf = ctx.config.get("configurable", {})
    return {
        "node": ctx.node,
        "step": ctx.step,
        # LangGraph's names for the same two facts, so code written for it keeps working.
        "langgraph_node": ctx.node,
        "langgraph_step": ctx.step,
        "thread_id": conf.get("thread_id"),
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
        "tags": list(ctx.config.get("tags", ())),
        "task_id": ctx.task_id,
    }


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
