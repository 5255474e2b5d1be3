"""Worker threads for sync work in async runs (sync nodes, sync tools).

``await to_worker(fn, *args)`` has the contract of ``asyncio.to_thread``: ``fn`` runs on
another thread with a copy of the caller's context variables, and the caller's event loop
keeps running meanwhile. As with ``to_thread`` (the loop's default executor), each event
loop has its own pool, bounded at ``min(32, cpu count + 4)`` threads, so a sync node that
runs another graph (its own loop, its own pool) can never wait for a thread held by its
caller, and threads running their own loops never share threads.

It is leaner under load: ``to_thread`` makes a ``concurrent.futures.Future`` (with its own
condition variable) per call and wakes the event loop once per result, which under 500
concurrent runs costs ~150 us per call on two cores. Here a call is a tuple on a
``SimpleQueue``; a worker that finishes a call appends the result to its pool's inbox and
wakes the loop only if no wake-up is already pending, so results that finish together are
delivered in one loop turn.

Workers are daemon threads, started while queued calls outnumber the waiting workers (so a
call never waits behind a blocking one below the bound) and ended after ``IDLE_TIMEOUT_S``
without work, or within a second once their loop is closed (``asyncio.run`` returned).
A cancelled caller does not stop its call (as with ``to_thread``); its result is dropped.
A call that raises ``StopIteration`` (which cannot travel through a future) raises
``RuntimeError`` from it instead, as PEP 479 does for generators.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)
IDLE_TIMEOUT_S = 30.0
_TICK_S = 1.0  # how often an idle worker checks that its loop still runs


class WorkerPool:
    """The worker threads of one event loop; see the module docstring.

    Args:
        max_workers: the most threads this pool runs at once (default ``MAX_WORKERS``).
        idle_timeout_s: seconds a worker waits for a call before it ends.
    """

    def __init__(
        self, max_workers: int = MAX_WORKERS, idle_timeout_s: float = IDLE_TIMEOUT_S
    ) -> None:
        self.max_workers = max_workers
        self.idle_timeout_s = idle_timeout_s
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers = 0
        self._waiting = 0  # workers in (or about to enter) _calls.get()
        self._queued = 0  # calls put and not yet taken
        self._done: deque[tuple[asyncio.Future[Any], bool, Any]] = deque()
        self._wake_pending = False
        self.loop: weakref.ref[asyncio.AbstractEventLoop] | None = None  # set by pool_of

    def _loop_gone(self) -> bool:
        """Whether the loop this pool serves was closed or collected (``asyncio.run``
        returned): its idle workers then end at once, not after ``idle_timeout_s``."""
        loop = self.loop() if self.loop is not None else None
        return self.loop is not None and (loop is None or loop.is_closed())

    def submit(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Queue ``fn()`` (already bound to its context); its future belongs to ``loop``
        (the pool's own loop: one pool serves one loop)."""
        future: asyncio.Future[T] = loop.create_future()
        self.put(future, fn)
        return future

    def put(self, future: asyncio.Future[Any] | None, fn: Callable[[], Any]) -> None:
        """Queue ``fn()``; its outcome goes to ``future``, or nowhere when that is None
        (``fn`` hands its results over itself, as a ``Batch``'s workers do)."""
        with self._lock:
            self._queued += 1
            self._calls.put((future, fn))
            start = self._queued > self._waiting and self._workers < self.max_workers
            if start:
                self._workers += 1
                self._waiting += 1
        if start:
            threading.Thread(target=self._work, name="threadloom-worker", daemon=True).start()

    def _work(self) -> None:
        calls, lock = self._calls, self._lock
        tick = min(self.idle_timeout_s, _TICK_S)
        idle = 0.0
        while True:
            try:
                future, fn = calls.get(timeout=tick)
            except queue.Empty:
                idle += tick
                if idle < self.idle_timeout_s and not self._loop_gone():
                    continue
                with lock:
                    if self._queued > self._waiting - 1:
                        continue  # calls are queued that the other waiting workers can't take
                    self._waiting -= 1
                    self._workers -= 1
                    return
            idle = 0.0
            with lock:
                self._waiting -= 1
                self._queued -= 1
            if future is None:  # a batch's drainer: it hands its results over itself
                fn()
                del fn
                with lock:
                    self._waiting += 1
                continue
            try:
                outcome: tuple[bool, Any] = (True, fn())
            except BaseException as exc:  # handed to the awaiting caller, as to_thread does
                outcome = (False, exc)
            self._deliver(future, outcome)
            del future, fn, outcome  # hold nothing while waiting for the next call
            with lock:
                self._waiting += 1

    def _deliver(self, future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
        with self._lock:
            self._done.append((future, *outcome))
            if self._wake_pending:
                return
            self._wake_pending = True
        try:
            future.get_loop().call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop was closed: nobody is waiting any more
            with self._lock:
                self._done.clear()
                self._wake_pending = False

    def _drain(self) -> None:
        with self._lock:
            done, self._done = self._done, deque()
            self._wake_pending = False
        for future, ok, value in done:
            if future.done():  # the caller was cancelled
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(_raisable(value))


class Batch:
    """Calls ``run(0)``, ``run(1)``, ... ``run(count - 1)`` on at most ``width`` workers of
    ``pool``, each worker taking the next index as it finishes one (so blocking calls run
    ``width`` at a time, as that many ``to_worker`` calls would), with one queued call per
    worker instead of one per index; ``outcomes()`` hands the results to ``loop`` as they
    finish, a burst of them per loop wake-up.

    ``run`` is called as is: bind the context it needs itself. ``stop()`` ends the batch:
    no worker starts another index (a call under way finishes, its outcome dropped). A
    call raising an exception for which ``halts(exc)`` is true ends it too, from its
    worker, at once: its outcome and those of calls under way are still handed over.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, pool: WorkerPool,
                 run: Callable[[int], Any], count: int, width: int,
                 halts: Callable[[BaseException], bool] | None = None) -> None:
        self._loop = loop
        self._run = run
        self._halts = halts
        self._count = count
        self._next = 0
        self._lock = threading.Lock()
        self._done: list[tuple[int, bool, Any]] = []
        self._waiter: asyncio.Future[None] | None = None
        self._wake_pending = False
        self._stopped = False
        for _ in range(max(1, min(width, count))):
            pool.put(None, self._drain)

    def stop(self) -> None:
        """Start no further index (see the class docstring)."""
        with self._lock:
            self._stopped = True
            self._next = self._count
            self._done = []

    async def outcomes(self) -> list[tuple[int, bool, Any]]:
        """``(index, True, result)`` or ``(index, False, exception)`` of the calls that
        finished since the last call, in the order they finished (waits for one)."""
        while True:
            with self._lock:
                self._waiter = None
                if self._done:
                    done, self._done = self._done, []
                    return done
                self._waiter = waiter = self._loop.create_future()
            await waiter

    def _drain(self) -> None:
        run, lock = self._run, self._lock
        with lock:
            index = self._next
            self._next += 1
        while index < self._count:
            try:
                outcome = (index, True, run(index))
            except BaseException as exc:  # handed to the loop with the others
                outcome = (index, False, exc)
                if self._halts is not None and self._halts(exc):
                    with lock:
                        self._next = self._count
            with lock:
                if not self._stopped:
                    self._done.append(outcome)
                wake = self._waiter is not None and not self._wake_pending
                if wake:
                    self._wake_pending = True
                index = self._next
                self._next += 1
            del outcome
            if wake:
                try:
                    self._loop.call_soon_threadsafe(self._wake)
                except RuntimeError:  # the loop was closed: nobody is waiting any more
                    return

    def _wake(self) -> None:
        with self._lock:
            self._wake_pending = False
            waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _raisable(exc: BaseException) -> BaseException:
    if isinstance(exc, StopIteration):  # a future refuses it (it would end a coroutine)
        error = RuntimeError(f"a sync call raised StopIteration: {exc!r}")
        error.__cause__ = exc
        return error
    return exc


_POOL_ATTR = "_threadloom_worker_pool"
# For loops that take no attributes. A pool holds no reference to its loop (a result
# reaches the loop through its future), so the entry goes with the loop.
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WorkerPool] = (
    weakref.WeakKeyDictionary()
)
_POOLS_LOCK = threading.Lock()


def pool_of(loop: asyncio.AbstractEventLoop) -> WorkerPool:
    """The worker pool of ``loop`` (made on first use)."""
    pool = getattr(loop, _POOL_ATTR, None)
    if pool is not None:
        return pool  # type: ignore[no-any-return]
    with _POOLS_LOCK:
        pool = getattr(loop, _POOL_ATTR, None) or _POOLS.get(loop)
        if pool is None:
            pool = WorkerPool()
            pool.loop = weakref.ref(loop)
            try:
                setattr(loop, _POOL_ATTR, pool)  # lives and dies with its loop
            except AttributeError:
                _POOLS[loop] = pool
    return pool


def to_worker(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> asyncio.Future[T]:
    """Run ``fn(*args, **kwargs)`` on a worker thread of the running loop; await the result.

    As ``asyncio.to_thread``: the call sees a copy of the caller's context variables,
    and what ``fn`` raises is raised by the await. The call is queued at once (this is a
    plain function returning a future, one coroutine layer less than ``to_thread``).

    Raises:
        RuntimeError: called with no running event loop.
    """
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    loop = asyncio.get_running_loop()
    return pool_of(loop).submit(loop, call)


__all__ = ["Batch", "IDLE_TIMEOUT_S", "MAX_WORKERS", "WorkerPool", "pool_of", "to_worker"]
