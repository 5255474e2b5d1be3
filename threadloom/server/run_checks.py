"""Checks a run passes when it is made (422/404 rather than a run that cannot start),
and the checkpointer calls the run manager makes."""

from __future__ import annotations

from typing import Any

from threadloom.server.graphs import Assistant
from threadloom.server.http import ApiError
from threadloom.server.schemas import RunCreate


def check_interrupt_nodes(assistant: Assistant, body: RunCreate) -> None:
    """422 naming a node of ``interrupt_before``/``interrupt_after`` the graph lacks."""
    nodes = assistant.graph.nodes
    for field in ("interrupt_before", "interrupt_after"):
        names = getattr(body, field)
        if isinstance(names, list):
            unknown = [n for n in names if n not in nodes]
            if unknown:
                raise ApiError(422, f"{field}: no node named {unknown[0]!r} in graph "
                                    f"{assistant.graph_id!r} (its nodes: "
                                    f"{', '.join(n for n in nodes if not n.startswith('__'))})")


async def check_checkpoint(assistant: Assistant | None, thread_id: str,
                           body: RunCreate) -> None:
    """404 for a ``checkpoint_id`` the thread does not have (as ``GET state``); an
    unknown assistant is left to the run's transaction to answer."""
    checkpoint_id = body.checkpoint_id or (body.checkpoint.checkpoint_id
                                           if body.checkpoint else None)
    cp = assistant.graph.checkpointer if assistant is not None else None
    if not checkpoint_id or cp is None:
        return
    ns = body.checkpoint.checkpoint_ns if body.checkpoint else ""
    found = await checkpointer_call(cp, "get_tuple", {"configurable": {
        "thread_id": thread_id, "checkpoint_ns": ns or "", "checkpoint_id": checkpoint_id}})
    if found is None:
        raise ApiError(404, f"Checkpoint with ID {checkpoint_id} not found")


async def checkpointer_call(cp: Any, method: str, *args: Any) -> Any:
    """``cp.a<method>(*args)``, or its sync ``method`` on a worker thread (a
    checkpointer whose I/O is inline, or that has no async method)."""
    async_method = getattr(cp, "a" + method, None)
    if async_method is not None and not getattr(cp, "inline_io", False):
        return await async_method(*args)
    from threadloom.workers import to_worker
    return await to_worker(getattr(cp, method), *args)
