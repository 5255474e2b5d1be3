"""The event log: every streamed event of every run, with a sequence number.

A run appends its events here (``append``: the next number of that run, starting at 1);
every SSE client reads them back with ``read(run_id, after=N)``, which yields each event
whose number is above ``N`` exactly once and in order, then waits for more until the run
is closed. The number is the SSE ``id``, so a client that reconnects with
``Last-Event-ID: N`` gets the rest with no gap and no duplicate, whether the run is still
going or long over (``join``).

Why no duplicate: a reader never subscribes to a separate live channel; it walks one
ordered sequence (the rows already stored, then the tail kept in memory for a running
run) by number, and waits only when it has caught up. The tail of a running run stays in
memory until it is written, so a live client is served without waiting for the disk;
rows are written in batches (``flush_interval_s``) and pruned by age (``prune``).
A server killed with SIGKILL loses at most the last batch of events (not the run: see
``runs.py``).

Ids are never reused across a restart: each attempt of a run numbers its events in a
range of its own (attempt ``k`` from ``(k - 1) * ATTEMPT_SPAN + 1``), so the events an
attempt sent but had not yet written when the server was killed keep ids the next
attempt never gives again, and a client resuming with one of them gets every event of
the next attempt. ``open(fresh=False)`` picks the attempt after the last one stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

from threadloom.server.db import Database, Tx

DEFAULT_MAX_EVENT_BYTES = 1024 * 1024
ATTEMPT_SPAN = 1_000_000_000  # ids of one attempt of a run: a range this long


def attempt_of(seq: int) -> int:
    """The attempt (1, 2, ...) whose range holds event id ``seq`` (0 for none)."""
    return (seq - 1) // ATTEMPT_SPAN + 1 if seq > 0 else 0


class Event(NamedTuple):
    """One stored event: its number in the run, the SSE event name, the JSON data text."""

    seq: int
    event: str
    data: str


class _Live:
    """The in-memory tail of one running run's events."""

    __slots__ = ("base", "events", "done", "waiters", "flushed")

    def __init__(self, base: int) -> None:
        self.base = base  # seq of events[0]
        self.events: list[Event] = []
        self.done = False
        self.waiters: list[asyncio.Future[None]] = []
        self.flushed = base - 1

    @property
    def last(self) -> int:
        return self.base + len(self.events) - 1

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)


class EventLog:
    """The server's event log over ``db``; see the module docstring.

    Args:
        db: where events are stored.
        max_event_bytes: an event whose data is longer is replaced by an
            ``{"error": "EventTooLarge", ...}`` body of the same event name.
        flush_interval_s: how long an event may wait in memory before it is written.
    """

    def __init__(self, db: Database, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                 flush_interval_s: float = 0.05) -> None:
        self.db = db
        self.max_event_bytes = max_event_bytes
        self.flush_interval_s = flush_interval_s
        self._live: dict[str, _Live] = {}
        self._pending: list[tuple[str, int, str, str, float]] = []
        self._kick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # -- writing -----------------------------------------------------------------------

    async def open(self, run_id: str, *, fresh: bool = True) -> int:
        """Start a run's log (when the run is made, so readers of a pending run wait);
        ``fresh=False`` continues the stored one after a restart, as a new attempt whose
        ids start past every id the earlier ones could have sent (write its first event
        at once with ``flush`` so that a later restart sees it). Returns the attempt."""
        attempt = 1
        if not fresh:
            row = await self.db.run(lambda tx: tx.execute(
                "SELECT MAX(seq) FROM tl_srv_events WHERE run_id = ?", (run_id,)).fetchone())
            last = int(row[0]) if row and row[0] is not None else 0
            attempt = max(attempt_of(last), 1) + 1  # nothing stored: attempt 1 ran
        self._live[run_id] = _Live((attempt - 1) * ATTEMPT_SPAN + 1)
        if self._task is None:
            self._stopping = False
            self._task = asyncio.ensure_future(self._flush_loop())
        return attempt

    def append(self, run_id: str, event: str, data: str) -> int:
        """Add one event to an open run's log; returns its sequence number."""
        live = self._live[run_id]
        if len(data) > self.max_event_bytes:
            data = (f'{{"error":"EventTooLarge","message":"event of {len(data)} characters '
                    f'over the limit of {self.max_event_bytes}"}}')
        seq = live.base + len(live.events)
        live.events.append(Event(seq, event, data))
        self._pending.append((run_id, seq, event, data, time.time()))
        if live.waiters:
            live.wake()
        if len(self._pending) >= 512:
            self._kick.set()
        return seq

    def close(self, run_id: str) -> None:
        """The run ended: readers stop after its last event; its tail is written soon."""
        live = self._live.get(run_id)
        if live is not None:
            live.done = True
            live.wake()
            self._kick.set()

    def discard(self, run_id: str) -> None:
        """Forget a run's log opened for a run that was then not made (nothing of it is
        written); its readers stop."""
        live = self._live.pop(run_id, None)
        if live is not None:
            live.done = True
            live.wake()
            self._pending = [row for row in self._pending if row[0] != run_id]

    def is_live(self, run_id: str) -> bool:
        """Whether the run's log is open in this process."""
        live = self._live.get(run_id)
        return live is not None and not live.done

    async def _flush_loop(self) -> None:
        # Ends when ``stop()`` sets ``_stopping``, never by cancellation: on Python 3.11 a
        # cancel that lands as the wait wakes up can be lost, and the loop would run on.
        while not self._stopping:
            try:
                async with asyncio.timeout(self.flush_interval_s):
                    await self._kick.wait()
            except TimeoutError:
                pass
            self._kick.clear()
            try:
                await self.flush()
            except Exception:  # the database is briefly unavailable: keep the rows, retry
                if not self._stopping:
                    await asyncio.sleep(self.flush_interval_s)

    async def flush(self) -> None:
        """Write every pending event now."""
        rows, self._pending = self._pending, []
        if rows:
            try:
                await self.db.run(lambda tx: tx.executemany(
                    "INSERT INTO tl_srv_events (run_id, seq, event, data, at) VALUES "
                    "(?, ?, ?, ?, ?)", rows))
            except BaseException:
                self._pending[:0] = rows
                raise
            for run_id, seq, *_ in rows:
                live = self._live.get(run_id)
                if live is not None and seq > live.flushed:
                    live.flushed = seq
        for run_id in [r for r, live in self._live.items() if live.done
                       and live.flushed >= live.last]:
            del self._live[run_id]

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Write what is pending and stop the writer (cancelled only if it has not ended
        within ``timeout_s`` seconds, a database that does not answer)."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True
            self._kick.set()
            done, _ = await asyncio.wait({task}, timeout=timeout_s)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.flush()

    # -- reading -----------------------------------------------------------------------

    async def read(self, run_id: str, after: int = 0) -> AsyncIterator[Event]:
        """Every event of the run numbered above ``after``, in order, each once; waits for
        more while the run is open here, and ends when it is closed (or not running)."""
        last = after
        while True:
            live = self._live.get(run_id)
            if live is None or last < live.base - 1:
                upto = live.base if live is not None else None
                rows = await self._stored(run_id, last, upto)
                for event in rows:
                    yield event
                    last = event.seq
                if live is None:
                    if run_id not in self._live:
                        return
                elif last < live.base - 1:
                    last = live.base - 1  # pruned rows: go on from the memory tail
                continue
            index = last - live.base + 1
            while index < len(live.events):
                event = live.events[index]
                yield event
                last = event.seq
                index += 1
            if live.done:
                return
            waiter = asyncio.get_running_loop().create_future()
            live.waiters.append(waiter)
            await waiter

    async def _stored(self, run_id: str, after: int, before: int | None) -> list[Event]:
        def query(tx: Tx) -> list[Event]:
            if before is None:
                tx.execute("SELECT seq, event, data FROM tl_srv_events WHERE run_id = ? AND "
                           "seq > ? ORDER BY seq", (run_id, after))
            else:
                tx.execute("SELECT seq, event, data FROM tl_srv_events WHERE run_id = ? AND "
                           "seq > ? AND seq < ? ORDER BY seq", (run_id, after, before))
            return [Event(int(s), e, d) for s, e, d in tx.fetchall()]
        stored = await self.db.run(query)
        pending = [Event(s, e, d) for r, s, e, d, _ in self._pending
                   if r == run_id and s > after and (before is None or s < before)]
        if pending:  # written between two flushes of a run that has since closed
            seen = {e.seq for e in stored}
            stored = sorted(stored + [e for e in pending if e.seq not in seen])
        return stored

    async def prune(self, max_age_s: float) -> int:
        """Delete stored events older than ``max_age_s`` seconds of runs no longer open;
        returns how many."""
        cutoff = time.time() - max_age_s
        open_runs = list(self._live)

        def drop(tx: Tx) -> int:
            tx.execute("DELETE FROM tl_srv_events WHERE at < ?", (cutoff,))
            return tx.rowcount

        if open_runs:
            def drop_closed(tx: Tx) -> int:
                marks = ", ".join("?" for _ in open_runs)
                tx.execute(f"DELETE FROM tl_srv_events WHERE at < ? AND run_id NOT IN ({marks})",
                           (cutoff, *open_runs))
                return tx.rowcount
            return await self.db.run(drop_closed)
        return await self.db.run(drop)


def sse_frame(event: str, data: str, event_id: int | str | None) -> bytes:
    """One SSE message: ``event:``, ``data:`` (the JSON has no newlines), optional ``id:``."""
    head = f"event: {event}\ndata: {data}\n"
    if event_id is not None:
        head += f"id: {event_id}\n"
    return (head + "\n").encode("utf-8")


def parse_last_event_id(value: Any) -> int:
    """The sequence number a ``Last-Event-ID`` header names (0 for none or garbage)."""
    if not value:
        return 0
    text = str(value).strip()
    return int(text) if text.isdigit() and len(text) < 19 else 0
