"""Starting a step's tasks: a ``max_concurrency`` gate, and errors marked retrieved."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threadloom.engine.tasks import Task


def gated(
    run: Callable[[Task], Awaitable[None]], todo: list[Task], limit: int
) -> list[asyncio.Future[None]]:
    """``run`` of each task, at most ``limit`` of them at a time (``max_concurrency``)."""
    gate = asyncio.Semaphore(limit)

    async def one(task: Task) -> None:
        async with gate:
            await run(task)

    return [asyncio.ensure_future(one(t)) for t in todo]


def retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a finished task's error as retrieved (it is raised or recorded elsewhere)."""
    if not fut.cancelled():
        fut.exception()
