"""Two processes x N threads writing one SQLite file: no "database is locked" escapes."""

from __future__ import annotations

import multiprocessing as mp
import threading
import traceback
from pathlib import Path

from threadloom.checkpoint.conformance import Writer, cfg
from threadloom.checkpoint.sqlite import SqliteCheckpointer

THREADS = 6
STEPS = 25


def _worker(path: str, proc: int, errors: mp.Queue) -> None:  # type: ignore[type-arg]
    cp = SqliteCheckpointer(path, busy_timeout_ms=60_000)
    failures: list[str] = []

    def run(n: int) -> None:
        try:
            own = Writer(cp, f"p{proc}-t{n}")
            shared = Writer(cp, "shared")
            items: list[str] = []
            for step in range(STEPS):
                items = items + [f"{proc}-{n}-{step}"]
                config = own.put(items=items)
                cp.put_writes(config, [("x", step)], f"task-{step}")
                shared.put(**{f"p{proc}t{n}": step})
                cp.get_tuple(cfg("shared"))
        except BaseException:  # report every failure to the parent
            failures.append(traceback.format_exc())

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cp.close()
    errors.put(failures)


def test_two_processes_many_threads_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    SqliteCheckpointer(path).close()  # create the tables once
    ctx = mp.get_context("spawn")
    errors: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_worker, args=(path, p, errors)) for p in range(2)]
    for p in procs:
        p.start()
    reports = [errors.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    failures = [f for r in reports for f in r]
    assert failures == [], failures[0] if failures else ""

    cp = SqliteCheckpointer(path)
    assert cp.integrity_check() == "ok"
    for proc in range(2):
        for n in range(THREADS):
            history = list(cp.list(cfg(f"p{proc}-t{n}")))
            assert len(history) == STEPS
            assert history[0].checkpoint["channel_values"]["items"] == [
                f"{proc}-{n}-{step}" for step in range(STEPS)
            ]
            assert all(len(h.pending_writes) == 1 for h in history)
    assert len(list(cp.list(cfg("shared")))) == 2 * THREADS * STEPS
    cp.close()
