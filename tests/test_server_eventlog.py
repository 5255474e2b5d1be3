"""The event log on its own: readers that join at any point, while events are appended
and written in batches, get every later event exactly once and in order; pruning by age
leaves open runs alone."""

from __future__ import annotations

import asyncio
import random

from threadloom.server.db import Database
from threadloom.server.eventlog import ATTEMPT_SPAN, EventLog, parse_last_event_id, sse_frame


async def _read(log: EventLog, run_id: str, after: int) -> list[int]:
    return [e.seq async for e in log.read(run_id, after)]


async def test_readers_joining_anywhere_get_no_gap_and_no_duplicate(tmp_path):
    db = Database.sqlite(tmp_path / "ev.db")
    log = EventLog(db, flush_interval_s=0.001)
    await log.open("r1")
    readers = []
    rng = random.Random(7)
    for n in range(1, 301):
        log.append("r1", "updates", f'{{"n":{n}}}')
        if n % 37 == 0:
            await log.flush()  # some rows stored, the rest still in memory
        if n % 25 == 0:
            after = rng.randrange(0, n + 1)
            readers.append((after, asyncio.ensure_future(_read(log, "r1", after))))
        if n % 10 == 0:
            await asyncio.sleep(0)
    log.close("r1")
    for after, reader in readers:
        assert await reader == list(range(after + 1, 301))
    await log.stop()
    assert not log.is_live("r1")
    assert await _read(log, "r1", 150) == list(range(151, 301))  # from the table now
    again = EventLog(db)
    # a restarted server goes on numbering in the next attempt's range, past every id the
    # killed one could have sent without writing it
    assert await again.open("r1", fresh=False) == 2
    assert again.append("r1", "metadata", "{}") == ATTEMPT_SPAN + 1
    await again.flush()
    again.close("r1")
    assert await _read(again, "r1", 300) == [ATTEMPT_SPAN + 1]
    await again.stop()
    third = EventLog(db)
    assert await third.open("r1", fresh=False) == 3
    assert third.append("r1", "metadata", "{}") == 2 * ATTEMPT_SPAN + 1
    third.close("r1")
    await third.stop()
    assert await _read(third, "r1", 299) == [300, ATTEMPT_SPAN + 1, 2 * ATTEMPT_SPAN + 1]
    db.close()


async def test_prune_by_age_spares_open_runs(tmp_path):
    db = Database.sqlite(tmp_path / "ev.db")
    log = EventLog(db)
    for run in ("done", "open"):
        await log.open(run)
        log.append(run, "values", "{}")
    log.close("done")
    await log.flush()
    await log.flush()
    assert await log.prune(0.0) == 1
    assert await _read(log, "done", 0) == []
    assert [e.seq for e in log._live["open"].events] == [1]  # noqa: SLF001
    log.close("open")
    await log.stop()
    db.close()


def test_event_size_limit_and_frames(tmp_path):
    async def go() -> str:
        db = Database.sqlite(tmp_path / "ev.db")
        log = EventLog(db, max_event_bytes=10)
        await log.open("big")
        log.append("big", "values", '{"x":"' + "y" * 50 + '"}')
        log.close("big")
        events = [e async for e in log.read("big", 0)]
        await log.stop()
        db.close()
        return events[0].data

    assert "EventTooLarge" in asyncio.run(go())
    assert sse_frame("values", "{}", 3) == b"event: values\ndata: {}\nid: 3\n\n"
    assert parse_last_event_id("12") == 12
    assert parse_last_event_id("1796161188372-0") == 0 and parse_last_event_id(None) == 0


async def test_stop_ends_the_writer_even_when_it_lands_as_the_writer_wakes(tmp_path):
    # On Python 3.11 a cancel that arrives as asyncio.wait_for's wait completes is lost;
    # stop() used to cancel the flush loop and then waited for it forever.
    db = Database.sqlite(tmp_path / "ev.db")
    for n in range(200):
        log = EventLog(db, flush_interval_s=0.0005)
        await log.open(f"r{n}")
        log.append(f"r{n}", "values", "{}")
        for _ in range(n % 4):
            await asyncio.sleep(0)
        log.close(f"r{n}")  # wakes the writer in the same turn as stop() below
        await asyncio.wait_for(log.stop(), 5)
        assert log._task is None  # noqa: SLF001
        assert await _read(log, f"r{n}", 0) == [1]
    db.close()
