"""What one tool call of a ``ToolNode`` is given of the run: its ``ToolRuntime`` and its
idempotency key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadloom.engine.runtime import current_task, get_stream_writer, task_runtime
from threadloom.tools import ToolRuntime


def _no_op_writer(chunk: Any) -> None:
    """Drops what it is given (a runtime without a stream)."""


def call_runtime(tools: Mapping[str, Any], state: Any, config: dict[str, Any],
                 call_id: str) -> ToolRuntime[Any, Any]:
    """The ``ToolRuntime`` of one call: context, store, stream writer, execution and
    server info of the running task's ``Runtime``, else of the one a caller put in
    ``config["configurable"]["__pregel_runtime"]`` (where LangGraph's ``ToolNode`` reads
    it when invoked by hand, outside a graph), else empty; ``tools`` are the node's."""
    task = current_task()
    base: Any = task_runtime(task, get_stream_writer()) if task is not None else (
        (config.get("configurable") or {}).get("__pregel_runtime"))
    return ToolRuntime(
        state=state, context=getattr(base, "context", None), config=config,
        stream_writer=getattr(base, "stream_writer", None) or _no_op_writer,
        tool_call_id=call_id, store=getattr(base, "store", None), tools=list(tools.values()),
        execution_info=getattr(base, "execution_info", None),
        server_info=getattr(base, "server_info", None))


def idempotency_key(
    config: dict[str, Any] | None, tool_call_id: str, task_id: str | None = None
) -> str:
    """A key stable across re-runs of the same call: ``thread:[ns:]task:call``.

    The engine's task id is derived from the checkpoint the step started from, so a step
    run again after a crash or a pause gets the same one, whether the run started from
    the thread's head or from an explicit ``checkpoint_id`` (a fork). Without a task id
    (a tool node called outside a run), the config's ``checkpoint_id`` stands in; without
    a thread, the tool call id alone.
    """
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        return tool_call_id
    step = task_id or configurable.get("checkpoint_id") or ""
    parts = [str(thread_id), configurable.get("checkpoint_ns") or "", step, tool_call_id]
    return ":".join(p for p in parts if p)


__all__ = ["call_runtime", "idempotency_key"]
