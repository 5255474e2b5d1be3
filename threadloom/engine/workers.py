"""Worker threads for sync work in async runs (sync nodes, sync tools).

``await to_worker(fn, *args)`` has the contract of ``asyncio.to_thread``: ``fn`` runs on
another thread with a copy of the caller's context variables, and the caller's event loop
keeps running meanwhile. It is leaner under load: ``to_thread`` makes a
``concurrent.futures.Future`` (with its own condition variable) per call and wakes the event
loop once per result, which under 500 concurrent runs costs ~150 us per call on two cores.
Here a call is a tuple on a ``SimpleQueue``; a worker that finishes a call appends the
result to its loop's inbox and wakes the loop only if no wake-up is already pending, so
results that finish together are delivered in one loop turn.

Workers are daemon threads, started on demand (while calls wait and no worker is idle)
up to ``min(32, cpu count + 4)`` (the bound of the standard thread pool) and kept for
the life of the process. A cancelled caller does not stop its call (as with ``to_thread``);
its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)


class _Inbox:
    """Finished calls of one event loop, waiting to be handed to their futures."""

    __slots__ = ("done", "wake_pending")

    def __init__(self) -> None:
        self.done: deque[tuple[asyncio.Future[Any], bool, Any]] = deque()
        self.wake_pending = False


class WorkerPool:
    """Daemon worker threads fed by one queue; see the module docstring.

    Args:
        max_workers: the most threads this pool starts (default ``MAX_WORKERS``).
    """

    def __init__(self, max_workers: int = MAX_WORKERS) -> None:
        self.max_workers = max_workers
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers = 0
        self._idle = 0
        self._inboxes: dict[asyncio.AbstractEventLoop, _Inbox] = {}

    def submit(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[[], T]
    ) -> asyncio.Future[T]:
        """Queue ``fn()`` (already bound to its context); its future belongs to ``loop``."""
        future: asyncio.Future[T] = loop.create_future()
        # Each call claims an idle worker, or starts one while under the bound, so a call
        # never waits behind a blocking one while a thread could take it; past the bound,
        # calls queue up as in the standard pool.
        with self._lock:
            if self._idle:
                self._idle -= 1
                start = False
            else:
                start = self._workers < self.max_workers
                if start:
                    self._workers += 1
        self._calls.put((loop, future, fn))
        if start:
            threading.Thread(target=self._work, name="threadloom-worker", daemon=True).start()
        return future

    def _work(self) -> None:
        calls, lock = self._calls, self._lock
        while True:
            loop, future, fn = calls.get()
            try:
                outcome: tuple[bool, Any] = (True, fn())
            except BaseException as exc:  # handed to the awaiting caller, as to_thread does
                outcome = (False, exc)
            self._deliver(loop, future, outcome)
            del loop, future, fn, outcome  # hold nothing while waiting for the next call
            with lock:
                self._idle += 1

    def _deliver(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        outcome: tuple[bool, Any],
    ) -> None:
        with self._lock:
            inbox = self._inboxes.get(loop)
            if inbox is None:
                inbox = self._inboxes[loop] = _Inbox()
            inbox.done.append((future, *outcome))
            if inbox.wake_pending:
                return
            inbox.wake_pending = True
        try:
            loop.call_soon_threadsafe(self._drain, loop)
        except RuntimeError:  # the loop was closed: nobody is waiting any more
            with self._lock:
                self._inboxes.pop(loop, None)

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            inbox = self._inboxes.pop(loop, None)
        if inbox is None:
            return
        for future, ok, value in inbox.done:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_POOL: list[WorkerPool] = []
_POOL_LOCK = threading.Lock()


def _pool() -> WorkerPool:
    if not _POOL:
        with _POOL_LOCK:
            if not _POOL:
                _POOL.append(WorkerPool())
    return _POOL[0]


def _forget_pool() -> None:
    _POOL.clear()  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_forget_pool)


def to_worker(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> asyncio.Future[T]:
    """Run ``fn(*args, **kwargs)`` on a worker thread; await the result.

    As ``asyncio.to_thread``: the call sees a copy of the caller's context variables,
    and what ``fn`` raises is raised by the await. The call is queued at once (this is a
    plain function returning a future, one coroutine layer less than ``to_thread``).

    Raises:
        RuntimeError: called with no running event loop.
    """
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return _pool().submit(asyncio.get_running_loop(), call)


__all__ = ["MAX_WORKERS", "WorkerPool", "to_worker"]
