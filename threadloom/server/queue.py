"""The run queue: which run goes next on each thread, and the means to stop one.

``RunQueue`` is the small protocol the run manager (``runs.py``) hands runs to. It
promises at most one active run per thread, runs of a thread in the order they were
submitted, and a way to cancel a run whether it still waits or already runs. The server
process's default is ``LocalRunQueue`` (asyncio tasks, one worker per busy thread); a
distributed queue (runs on PostgreSQL, several worker machines) implements the same
protocol, and the manager does not change.

The run itself is executed by the callback given to ``bind``; the queue only orders and
cancels. On top of it, each run also holds its thread's lease in the checkpointer while it
runs (the engine's ``busy_timeout``/``ThreadBusyError``), so two server processes sharing
a PostgreSQL database never run one thread twice at once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

Execute = Callable[[str], Awaitable[None]]
Cancelled = Literal["queued", "running", "unknown"]


class RunQueue(Protocol):
    """What the run manager needs from a queue of runs; see the module docstring."""

    def bind(self, execute: Execute) -> None:
        """Give the queue the coroutine function that executes one run (by run id)."""

    async def submit(self, thread_id: str, run_id: str) -> None:
        """Queue a run behind the thread's earlier runs."""

    async def cancel(self, run_id: str) -> Cancelled:
        """Stop a run: ``"queued"`` (it never started and never will), ``"running"``
        (its execution was cancelled; the execute callback sees ``CancelledError``), or
        ``"unknown"`` (this queue does not hold it: finished, or never seen)."""

    def active(self, thread_id: str) -> list[str]:
        """The thread's run ids held by the queue, the running one first."""

    async def wait_idle(self, thread_id: str) -> None:
        """Return once the thread has no run running or queued."""

    async def close(self) -> None:
        """Cancel every run and stop (the runs stay recorded as they were)."""


class LocalRunQueue:
    """``RunQueue`` on this process's event loop: one worker task per busy thread."""

    def __init__(self) -> None:
        self._execute: Execute | None = None
        self._queued: dict[str, deque[str]] = {}
        self._running: dict[str, tuple[str, asyncio.Task[None]]] = {}  # thread -> run, task
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._idle: dict[str, asyncio.Event] = {}

    def bind(self, execute: Execute) -> None:
        """See ``RunQueue.bind``."""
        self._execute = execute

    async def submit(self, thread_id: str, run_id: str) -> None:
        """See ``RunQueue.submit``."""
        if self._execute is None:
            raise RuntimeError("LocalRunQueue.submit before bind()")
        self._queued.setdefault(thread_id, deque()).append(run_id)
        self._idle.setdefault(thread_id, asyncio.Event()).clear()
        if thread_id not in self._workers:
            self._workers[thread_id] = asyncio.ensure_future(self._work(thread_id))

    async def _work(self, thread_id: str) -> None:
        execute = self._execute
        queued = self._queued[thread_id]
        try:
            while queued:
                run_id = queued.popleft()
                task = asyncio.ensure_future(execute(run_id))  # type: ignore[misc]
                self._running[thread_id] = (run_id, task)
                try:
                    await asyncio.shield(task)
                except asyncio.CancelledError:
                    if not task.done():  # the worker itself was cancelled (close)
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                        raise
                except Exception:  # noqa: S110 - the executor records its own failures
                    pass
                finally:
                    self._running.pop(thread_id, None)
        finally:
            self._workers.pop(thread_id, None)
            self._queued.pop(thread_id, None)
            idle = self._idle.pop(thread_id, None)
            if idle is not None:
                idle.set()

    async def cancel(self, run_id: str) -> Cancelled:
        """See ``RunQueue.cancel``."""
        for thread_id, queued in self._queued.items():
            if run_id in queued:
                queued.remove(run_id)
                return "queued"
            running = self._running.get(thread_id)
            if running is not None and running[0] == run_id:
                running[1].cancel()
                await asyncio.gather(running[1], return_exceptions=True)
                return "running"
        for running_id, task in self._running.values():
            if running_id == run_id:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return "running"
        return "unknown"

    def active(self, thread_id: str) -> list[str]:
        """See ``RunQueue.active``."""
        running = self._running.get(thread_id)
        head = [running[0]] if running is not None else []
        return head + list(self._queued.get(thread_id, ()))

    async def wait_idle(self, thread_id: str) -> None:
        """See ``RunQueue.wait_idle``."""
        idle = self._idle.get(thread_id)
        if idle is not None:
            await idle.wait()

    async def close(self) -> None:
        """See ``RunQueue.close``."""
        workers = list(self._workers.values())
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
