"""Load: 8 worker processes x 50 threads x 10 turns on one SQLite file / one PostgreSQL
database, then every thread holds exactly its turns in one unbroken checkpoint chain.

Each turn is one ``invoke`` of a one-node chat graph (a user message in, an ``echo``
reply out): two checkpoints (input and step) plus the lease taken and given back. A
second test makes the workers contend for the SAME threads with ``busy_timeout``: each
turn must land exactly once and whole (its reply right after its message).

Turns per thread: 10 on SQLite, 5 on PostgreSQL by default (a minute at most on 2 cores);
the contention test runs half as many per worker. Scale with ``THREADLOOM_LOAD_TURNS`` /
``THREADLOOM_LOAD_THREADS`` for a benchmark run. The throughput (checkpoints per second)
is printed (``pytest -s`` shows it).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import PG_CONNINFO
from crash_worker import load_worker, open_backend

pytestmark = pytest.mark.slow

WORKERS = 8
THREADS = int(os.environ.get("THREADLOOM_LOAD_THREADS", "50"))
# 10 turns as the issue asks; PostgreSQL (an fsync'd commit per write, ~3 ms here) runs 5
# by default to stay under a minute on 2 cores: THREADLOOM_LOAD_TURNS=10 for the full run.
DEFAULT_TURNS = {"sqlite": 10, "postgres": 5}
SHARED_THREADS = 8


def turns_for(kind: str) -> int:
    """Turns per thread for a backend (``THREADLOOM_LOAD_TURNS`` overrides)."""
    return int(os.environ.get("THREADLOOM_LOAD_TURNS", DEFAULT_TURNS[kind]))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """One SQLite file or one PostgreSQL schema, its tables created before the workers."""
    if request.param == "sqlite":
        s: dict[str, Any] = {"kind": "sqlite", "path": str(tmp_path / "load.db")}
    else:
        pytest.importorskip("psycopg")
        s = {"kind": "postgres", "conninfo": PG_CONNINFO,
             "schema": f"tl_load_{uuid.uuid4().hex[:10]}"}
    open_backend(s).close()
    yield s
    if request.param == "postgres":
        import psycopg

        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {s['schema']} CASCADE")  # ours, ^tl_load_


def run_workers(s: dict[str, Any], threads_of: list[list[str]], turns: int,
                busy_timeout: float) -> float:
    """Run one ``load_worker`` process per entry of ``threads_of``; returns the seconds
    from the common start to the last worker's end."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=load_worker, args=(s, w, tids, turns, busy_timeout, go, out))
             for w, tids in enumerate(threads_of)]
    for p in procs:
        p.start()
    try:
        for _ in procs:  # every worker imported and connected: start the clock
            msg = out.get(timeout=180)
            assert msg[0] == "ready", msg
        go.set()
        reports = [out.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    errors = [r[3] for r in reports if r[3]]
    assert errors == [], errors[0] if errors else ""
    assert all(p.exitcode == 0 for p in procs)
    return max(r[2] for r in reports) - min(r[1] for r in reports)


def chain_rows(s: dict[str, Any]) -> dict[str, list[tuple[str, str | None]]]:
    """thread id -> [(checkpoint id, parent id)] oldest first, read with plain SQL."""
    sql = "SELECT thread_id, checkpoint_id, parent_id FROM {t} ORDER BY thread_id, checkpoint_id"
    if s["kind"] == "sqlite":
        conn = sqlite3.connect(s["path"])
        rows = conn.execute(sql.format(t="tl_checkpoints")).fetchall()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(s["conninfo"]) as pg:
            rows = pg.execute(sql.format(t=f"{s['schema']}.tl_checkpoints")).fetchall()
    out: dict[str, list[tuple[str, str | None]]] = {}
    for tid, cid, parent in rows:
        out.setdefault(tid, []).append((cid, parent))
    return out


def check_threads(s: dict[str, Any], expected: dict[str, list[str]]) -> int:
    """Each thread holds exactly the expected user messages, each followed by its echo, in
    one chain of three checkpoints per turn (input, START step, node: as LangGraph);
    returns the number of checkpoints."""
    chains = chain_rows(s)
    assert sorted(chains) == sorted(expected)
    cp = open_backend(s)
    try:
        for tid, users in expected.items():
            chain = chains[tid]
            assert len(chain) == 3 * len(users), (tid, len(chain))
            assert [p for _, p in chain] == [None, *[c for c, _ in chain[:-1]]], tid
            msgs = cp.get_tuple({"configurable": {"thread_id": tid}}).checkpoint[
                "channel_values"]["messages"]
            texts = [m.content for m in msgs]
            assert Counter(texts[0::2]) == Counter(users), tid
            assert texts[1::2] == [f"echo {t}" for t in texts[0::2]], tid
            assert len({m.id for m in msgs}) == len(msgs)
    finally:
        cp.close()
    if s["kind"] == "sqlite":
        conn = sqlite3.connect(s["path"])
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.close()
    return sum(len(c) for c in chains.values())


def report(label: str, checkpoints: int, seconds: float) -> None:
    print(f"\n[load] {label}: {checkpoints} checkpoints in {seconds:.2f} s = "
          f"{checkpoints / seconds:.0f} checkpoints/s")


def test_workers_on_their_own_threads(spec: dict[str, Any]) -> None:
    turns = turns_for(spec["kind"])
    threads_of = [[f"w{w}-t{i}" for i in range(THREADS)] for w in range(WORKERS)]
    seconds = run_workers(spec, threads_of, turns, busy_timeout=0.0)
    expected = {tid: [f"w{w} turn {k}" for k in range(turns)]
                for w, tids in enumerate(threads_of) for tid in tids}
    checkpoints = check_threads(spec, expected)
    assert checkpoints == WORKERS * THREADS * turns * 3
    report(f"{spec['kind']}, {WORKERS} workers x {THREADS} threads x {turns} turns",
           checkpoints, seconds)


def test_workers_contending_for_the_same_threads(spec: dict[str, Any]) -> None:
    shared = [f"shared-{i}" for i in range(SHARED_THREADS)]
    turns = max(1, turns_for(spec["kind"]) // 2)
    started = time.monotonic()
    seconds = run_workers(spec, [shared] * WORKERS, turns, busy_timeout=60.0)
    expected = {tid: [f"w{w} turn {k}" for w in range(WORKERS) for k in range(turns)]
                for tid in shared}
    checkpoints = check_threads(spec, expected)
    assert checkpoints == SHARED_THREADS * WORKERS * turns * 3
    report(f"{spec['kind']}, {WORKERS} workers sharing {SHARED_THREADS} threads x "
           f"{turns} turns each", checkpoints, seconds)
    assert time.monotonic() - started < 600
