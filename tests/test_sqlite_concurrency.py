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


_PAUSE_AND_EXIT = """
import sys, threading, time
from typing import TypedDict
from threadloom import END, START, SqliteCheckpointer, StateGraph, interrupt

class S(TypedDict, total=False):
    item: str
    ok: str

def ask(state):
    return {"ok": str(interrupt("buy " + state["item"] + "?"))}

g = StateGraph(S)
g.add_node("ask", ask)
g.add_edge(START, "ask")
g.add_edge("ask", END)
paused = threading.Event()

def serve(app):  # a daemon thread still holding the graph (and its checkpointer) at exit
    app.invoke({"item": "x"}, thread_id="t")
    paused.set()
    time.sleep(600)

threading.Thread(target=serve, args=(g.compile(checkpointer=SqliteCheckpointer(sys.argv[1])),),
                 daemon=True).start()
paused.wait(30)
"""


def test_a_process_that_exits_without_close_leaves_no_wal(tmp_path: Path) -> None:
    # Reported from the CLI: a paused run left its checkpoints in the -wal file (a
    # connection still referenced at exit was never closed), so a copy of the .db alone
    # lost the thread. Connections still open at exit are now closed, folding the WAL in.
    import subprocess
    import sys

    script = tmp_path / "pause.py"
    script.write_text(_PAUSE_AND_EXIT)
    for attempt in range(2):
        db = tmp_path / f"p{attempt}.db"
        done = subprocess.run([sys.executable, str(script), str(db)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        wal = tmp_path / f"p{attempt}.db-wal"
        assert not wal.exists() or wal.stat().st_size == 0
        copy = tmp_path / "copy.db"
        copy.write_bytes(db.read_bytes())
        saved = SqliteCheckpointer(copy)
        try:
            assert saved.list_threads() == ["t"]
        finally:
            saved.close()
        copy.unlink()


def test_close_then_use_is_a_clear_error_and_close_twice_is_fine(tmp_path: Path) -> None:
    import pytest

    from threadloom.errors import CheckpointError

    cp = SqliteCheckpointer(tmp_path / "c.db")
    cp.close()
    cp.close()
    with pytest.raises(CheckpointError, match="is closed"):
        cp.list_threads()
