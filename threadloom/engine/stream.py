"""Stream modes: where run events go and how they are shaped for the caller.

Modes (as LangGraph's): ``values`` (the whole state after each step), ``updates``
(``{node: update}`` per task), ``messages`` (``(chunk, metadata)`` per LLM token),
``custom`` (what nodes write with ``get_stream_writer()``), ``debug`` (task starts,
results and checkpoints), ``checkpoints`` (each saved checkpoint), ``tasks`` (each task's
start ``{id, name, input, triggers}`` and end ``{id, name, error, result, interrupts}``).

Events may come from worker threads (sync nodes, chat models), so the sink hands them to
the event loop thread-safely. A run that fails or is cancelled always closes the sink
with the error, so no consumer is left waiting.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Sequence
from typing import Any

from threadloom.engine.runtime import Emit

STREAM_MODES = frozenset(
    {"values", "updates", "messages", "custom", "debug", "checkpoints", "tasks"}
)
_PASS_THROUGH = frozenset({"messages", "custom"})


class _Done:
    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def with_interrupts(out: Any, interrupts: Sequence[Any]) -> dict[str, Any]:
    """A paused run's output: the state with its ``"__interrupt__"`` (only that, as
    LangGraph, when the state is not a dict: a root-channel graph's bare value)."""
    if isinstance(out, dict):
        return {**out, "__interrupt__": interrupts}
    return {"__interrupt__": interrupts}


def values_of(chunks: Sequence[tuple[tuple[str, ...], str, Any]]) -> Any:
    """The result of ``invoke(..., subgraphs=True)`` from its ``(namespace, mode, chunk)``
    events of modes ``updates`` and ``values``, as LangGraph builds it: the last
    ``values`` chunk of any graph, with every ``"__interrupt__"`` any graph's
    ``updates`` reported (``with_interrupts``)."""
    latest: Any = None
    interrupts: list[Any] = []
    for _namespace, mode, payload in chunks:
        if mode == "values":
            latest = payload
        elif isinstance(payload, dict) and (found := payload.get("__interrupt__")) is not None:
            interrupts.extend(found)
    return with_interrupts(latest, interrupts) if interrupts else latest


def normalize_modes(stream_mode: str | Sequence[str]) -> tuple[list[str], bool]:
    """Return ``(modes, single)``; ``single`` when the caller gave one mode as a string.

    Raises:
        ValueError: for an unknown mode.
    """
    single = isinstance(stream_mode, str)
    modes = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)
    for mode in modes:
        if mode not in STREAM_MODES:
            raise ValueError(f"unknown stream mode {mode!r}; choose from {sorted(STREAM_MODES)}")
    return modes, single


class StreamSink:
    """A queue of ``(namespace, mode, payload)`` events fed from any thread.

    Args:
        modes: the modes the caller asked for.
        subgraphs: pass subgraphs' ``values``/``updates``/``debug`` events through too
            (their ``custom`` events always pass; without it a subgraph streams no
            ``messages``, its reply arrives whole from the parent's node, as LangGraph).
    """

    def __init__(self, modes: Sequence[str], subgraphs: bool) -> None:
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.modes = frozenset(modes)
        self.subgraphs = subgraphs
        self._items: collections.deque[Any] = collections.deque()  # for the consumer
        self._waiter: asyncio.Future[None] | None = None  # the consumer waits for items
        self._empty = asyncio.Event()
        self._empty.set()
        self._held: _Done | None = None  # the end, met while taking a batch
        # Put by other threads (a sync node's chat model, token by token): handed to the
        # loop in bursts, one wake-up of the loop pending at a time, not one per event.
        self._foreign: collections.deque[Any] = collections.deque()
        self._lock = threading.Lock()
        self._wake_pending = False

    def bind(self, namespace: tuple[str, ...]) -> Emit:
        """An ``emit(mode, payload)`` function for one (sub)graph namespace."""
        put = self._put

        if namespace and not self.subgraphs:

            def emit_nested(mode: str, payload: Any) -> None:
                if mode in _PASS_THROUGH:
                    put((namespace, mode, payload))

            return emit_nested

        def emit(mode: str, payload: Any) -> None:
            put((namespace, mode, payload))

        return emit

    def _put(self, item: Any) -> None:
        if threading.get_ident() == self.thread:
            self._put_here(item)
            return
        # in order with what the loop's own thread puts later: a sync graph run by a
        # node on another thread streams before that node's own update (_put_here)
        with self._lock:
            self._foreign.append(item)
            if self._wake_pending:
                return
            self._wake_pending = True
        self.loop.call_soon_threadsafe(self._take_foreign)

    def _take_foreign(self) -> None:
        with self._lock:
            self._wake_pending = False
            if not self._foreign:
                return
            taken, self._foreign = self._foreign, collections.deque()
        self._empty.clear()
        self._items.extend(taken)
        self._wake()

    def _put_here(self, item: Any) -> None:
        if self._foreign:
            self._take_foreign()
        self._empty.clear()
        self._items.append(item)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def drained(self) -> None:
        """Wait until the consumer asks for more after taking every event (backpressure).

        The run waits here after each super-step, so a consumer that stops reading stops
        the run before its next step, as a generator would.
        """
        await self._empty.wait()

    def close(self, error: BaseException | None = None) -> None:
        """End the stream, with the error that ended the run if any."""
        self._put(_Done(error))

    async def _next(self) -> Any:
        items = self._items
        while not items:
            self._waiter = waiter = self.loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return items.popleft()

    async def get(self) -> tuple[tuple[str, ...], str, Any] | None:
        """The next event, or None at the end.

        Raises:
            BaseException: the run's error, once every earlier event was read.
        """
        item: Any = self._held
        if item is None:
            if not self._items:
                self._empty.set()  # the consumer asks for more: the run may take its next step
            item = await self._next()
        if isinstance(item, _Done):
            if item.error is not None:
                raise item.error
            return None
        return item

    async def get_many(self) -> list[tuple[tuple[str, ...], str, Any]] | None:
        """``get``, plus every further event already queued (one loop pass for a burst of
        token chunks); None at the end. The end or an error met while taking the batch
        comes with the next call, after the batch's events.

        Raises:
            BaseException: the run's error, once every earlier event was read.
        """
        first = await self.get()
        if first is None:
            return None
        out = [first]
        items = self._items
        while items:
            item = items.popleft()
            if type(item) is _Done:
                self._held = item
                break
            out.append(item)
        return out


def shape(item: tuple[tuple[str, ...], str, Any], single: bool, subgraphs: bool) -> Any:
    """Format one event as the caller's ``stream_mode``/``subgraphs`` choice asks."""
    namespace, mode, payload = item
    if subgraphs:
        return (namespace, payload) if single else (namespace, mode, payload)
    return payload if single else (mode, payload)
