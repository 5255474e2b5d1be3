"""Starting a step's tasks: a ``max_concurrency`` gate, and errors marked retrieved."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
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


def bounded(jobs: Sequence[Awaitable[Any]], limit: int | None) -> Sequence[Awaitable[Any]]:
    """``jobs`` wrapped so that at most ``limit`` of them run at a time once gathered
    (``None``: no limit, ``jobs`` unchanged); as Haystack's ``tool_concurrency_limit``."""
    if limit is None or len(jobs) <= limit:
        return jobs
    gate = asyncio.Semaphore(limit)

    async def one(job: Awaitable[Any]) -> Any:
        async with gate:
            return await job

    return [one(j) for j in jobs]


def retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a finished task's error as retrieved (it is raised or recorded elsewhere)."""
    if not fut.cancelled():
        fut.exception()
