"""Sync entry points over the async core: a private event loop per thread.

``run_sync`` runs a coroutine from sync code; ``iterate_on_private_loop`` turns an async
iterator into a sync one, a step at a time, on the calling thread's private loop. When the
calling thread already runs an event loop (Jupyter, an async web handler), the work moves
to a worker thread with its own loop (``iterate_on_thread``), so the sync API works there
too; ``ainvoke``/``astream`` are the better choice in async code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
_local = threading.local()


class _PrivateLoop:
    """A thread's private event loop, closed when the thread ends (its locals go)."""

    __slots__ = ("loop",)

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        loop = self.loop
        try:
            if not loop.is_closed() and not loop.is_running():
                loop.close()
        except Exception:  # noqa: BLE001 - at interpreter exit asyncio may be half torn down
            pass


def _private_loop() -> asyncio.AbstractEventLoop:
    holder = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed():
        holder = _local.holder = _PrivateLoop()
    return holder.loop  # type: ignore[no-any-return]


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, inside a running loop or not."""
    if not _in_running_loop():
        return _private_loop().run_until_complete(coro)
    # the helper thread sees the caller's context variables (a graph invoked inside a
    # node finds the running task there), as asyncio.to_thread does
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="threadloom-sync") as ex:
        return ex.submit(context.run, lambda: _private_loop().run_until_complete(coro)).result()




def iterate_on_private_loop(agen: AsyncGenerator[Any, None]) -> Iterator[Any]:
    """Yield ``agen``'s items, driving it on this thread's private loop a step at a time.

    Closing the iterator early (a ``break``, an exception, Ctrl-C) cancels the step in
    flight, then closes ``agen`` so its ``finally`` blocks run now.
    """
    loop = _private_loop()
    step: asyncio.Future[Any] | None = None
    try:
        while True:
            step = asyncio.ensure_future(agen.__anext__(), loop=loop)
            try:
                item = loop.run_until_complete(step)
            except StopAsyncIteration:
                return
            yield item
    finally:
        if step is not None and not step.done():
            step.cancel()
            loop.run_until_complete(asyncio.gather(step, return_exceptions=True))
        loop.run_until_complete(agen.aclose())


def iterate_on_thread(make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """Run ``make()``'s iteration on a worker thread; yield its items here.

    For sync callers inside a running event loop. Errors reach the caller; stopping early
    makes the worker stop after its current item.
    """
    items: queue.Queue[Any] = queue.Queue(maxsize=64)
    stop = threading.Event()

    def work() -> None:
        try:
            for item in make():
                items.put(("item", item))
                if stop.is_set():
                    break
            items.put(("end", None))
        except BaseException as exc:  # handed to the consumer
            items.put(("error", exc))

    context = contextvars.copy_context()  # the caller's context variables, as run_sync
    threading.Thread(target=context.run, args=(work,), daemon=True,
                     name="threadloom-stream").start()
    try:
        while True:
            kind, value = items.get()
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        stop.set()
