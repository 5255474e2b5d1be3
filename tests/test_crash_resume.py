"""kill -9 in the middle of a run, then resume the thread in a new process.

A child process (``tests/crash_worker.py``) runs a graph against a SQLite file or a
PostgreSQL schema; the parent SIGKILLs it mid-step and resumes the thread with
``invoke(None, thread_id=...)`` in another child. What must hold: finished sibling tasks
are not run again, no message is lost or duplicated, the store is intact (``PRAGMA
integrity_check``, one unbroken checkpoint chain) and the final state equals that of an
uninterrupted run.
"""

from __future__ import annotations

import asyncio
import operator
import os
import random
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from conftest import PG_CONNINFO
from crash_worker import (
    FAST,
    chain_ids,
    kill9,
    lines,
    loop_graph,
    open_backend,
    parallel_graph,
    plain,
    run_job,
    spawn,
    wait_until,
)

from threadloom import START, HumanMessage, StateGraph, ThreadBusyError
from threadloom.checkpoint.leases import pid_space
from threadloom.checkpoint.memory import InMemoryCheckpointer
from threadloom.checkpoint.sqlite import SqliteCheckpointer


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A backend spec for the children: a fresh SQLite file or PostgreSQL schema."""
    if request.param == "sqlite":
        yield {"kind": "sqlite", "path": str(tmp_path / "crash.db")}
        return
    psycopg = pytest.importorskip("psycopg")
    schema = f"tl_crash_{uuid.uuid4().hex[:10]}"
    yield {"kind": "postgres", "conninfo": PG_CONNINFO, "schema": schema}
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # our own name, ^tl_crash_


def assert_intact(spec: dict[str, Any], thread_id: str) -> list[str]:
    """The store is healthy and the thread's checkpoints form one chain; returns its ids."""
    if spec["kind"] == "sqlite":
        conn = sqlite3.connect(spec["path"])
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            conn.close()
    cp = open_backend(spec)
    try:
        return chain_ids(cp, thread_id)
    finally:
        cp.close()


def reference(graph: Any, inp: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The final state of the same graph run without a crash (in memory, in process)."""
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    inp = {**inp, "messages": [HumanMessage(m) for m in inp["messages"]]}
    return plain(app.invoke(inp, thread_id="reference", **kw))


def pending_tasks(spec: dict[str, Any], thread_id: str) -> set[str]:
    """Task ids with saved writes against the thread's latest checkpoint."""
    cp = open_backend(spec)
    try:
        tup = cp.get_tuple({"configurable": {"thread_id": thread_id}})
        return {w.task_id for w in tup.pending_writes} if tup else set()
    finally:
        cp.close()


@pytest.mark.slow
@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_kill_mid_parallel_step_keeps_finished_siblings(
    backend: dict[str, Any], tmp_path: Path, use_async: bool
) -> None:
    effects, markers = str(tmp_path / "effects"), str(tmp_path / "marker")
    inp = {"messages": ["hello"], "done": []}
    job = {"graph": "parallel", "backend": backend, "thread_id": "crash-1", "input": inp,
           "effects": effects, "markers": markers, "slow_s": 120, "use_async": use_async}
    child = spawn(job)
    # the fast siblings finished and their writes are committed; `slow` is still asleep
    wait_until(lambda: all(Path(f"{markers}.{n}").exists() for n in FAST), child)
    wait_until(lambda: len(pending_tasks(backend, "crash-1")) == 2, child)
    kill9(child)
    assert sorted(lines(effects)) == sorted(["plan", "slow-start", *FAST])
    assert_intact(backend, "crash-1")

    final = run_job({**job, "input": None, "slow_s": 0, "result": str(tmp_path / "out.json")})

    runs = Counter(lines(effects))
    assert runs == {"plan": 1, "fast_a": 1, "fast_b": 1, "slow": 1, "join": 1, "slow-start": 2}
    contents = [m["content"] for m in final["messages"]]
    assert contents == ["hello", "plan saw 1", "fast_a saw 2", "fast_b saw 2", "slow saw 2",
                        "join saw 5"]
    assert final == reference(parallel_graph(None, None, 0), inp)
    ids = assert_intact(backend, "crash-1")
    assert len(ids) == 5  # input, START, plan, the parallel step, join


def _kill_loop_at_random_step(
    backend: dict[str, Any], tmp_path: Path, durability: str, seed: int
) -> tuple[list[str], dict[str, Any], int]:
    turns = 30
    effects = str(tmp_path / "effects")
    inp = {"messages": ["go"], "n": 0}
    kill_after = random.Random(seed).randint(2, turns - 5)
    job = {"graph": "loop", "backend": backend, "thread_id": "loop-1", "input": inp,
           "effects": effects, "turns": turns, "delay_s": 0.02, "durability": durability,
           "use_async": durability == "async", "recursion_limit": turns + 5}
    child = spawn(job)
    wait_until(lambda: len(lines(effects)) >= kill_after, child)
    kill9(child)  # somewhere in step kill_after+1: in the node, or saving its checkpoint
    killed_at = len(lines(effects))
    assert killed_at < turns, "the child finished before it was killed"
    assert_intact(backend, "loop-1")
    final = run_job({**job, "input": None, "result": str(tmp_path / "out.json")})
    assert final == reference(loop_graph(None, turns, 0), inp, recursion_limit=turns + 5)
    contents = [m["content"] for m in final["messages"]]
    assert contents == ["go", *[f"step {i}" for i in range(1, turns + 1)]]
    ids = assert_intact(backend, "loop-1")
    assert len(ids) == turns + 2  # the input checkpoint, START and one per step, no fork
    return lines(effects), final, killed_at


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("seed", [1, 2])
def test_kill_at_a_random_step_of_a_loop(
    backend: dict[str, Any], tmp_path: Path, durability: str, seed: int
) -> None:
    effects, final, killed_at = _kill_loop_at_random_step(backend, tmp_path, durability, seed)
    assert final["n"] == 30
    # side effects: every step ran; only the last steps before the kill ran twice (their
    # checkpoint was not committed yet): at most one in sync mode, two in async mode
    counts = Counter(effects)
    assert set(counts) == {f"step {i}" for i in range(1, 31)}
    again = sorted(int(k.split()[1]) for k, c in counts.items() if c > 1)
    assert all(c <= 2 for c in counts.values())
    assert len(again) <= (1 if durability == "sync" else 2)
    assert all(killed_at - len(again) < s <= killed_at for s in again), (again, killed_at)


class _SlowPutSqlite(SqliteCheckpointer):
    """SQLite whose async ``aput`` takes 0.3 s, as a busy disk or a remote server would."""

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        await asyncio.sleep(0.3)
        return await super().aput(config, checkpoint, metadata, new_versions)


async def test_async_durability_keeps_siblings_that_finished_while_a_put_was_in_flight(
    tmp_path: Path,
) -> None:
    """durability="async": the checkpoint of step N is written while step N+1 runs. Writes of
    step N+1 tasks that finish before that write lands must still count on resume."""
    runs: Counter[str] = Counter()
    fail = {"on": True}

    def node(name: str) -> Any:
        def run(state: dict[str, Any]) -> dict[str, Any]:
            runs[name] += 1
            if name == "slow":
                time.sleep(0.6)
                if fail["on"]:
                    raise RuntimeError("slow node crashed")
            return {"done": [name]}

        return run

    class St(TypedDict):
        done: Annotated[list, operator.add]

    g = StateGraph(St)
    for name in ("plan", "fast_a", "fast_b", "slow"):
        g.add_node(name, node(name))
    g.add_edge(START, "plan")
    for name in ("fast_a", "fast_b", "slow"):
        g.add_edge("plan", name)
    cp = _SlowPutSqlite(str(tmp_path / "async.db"))
    app = g.compile(checkpointer=cp, durability="async")
    with pytest.raises(RuntimeError, match="slow node crashed"):
        await app.ainvoke({"done": []}, thread_id="t")
    fail["on"] = False
    out = await app.ainvoke(None, thread_id="t")
    assert out["done"] == ["plan", "fast_a", "fast_b", "slow"]
    assert runs == {"plan": 1, "fast_a": 1, "fast_b": 1, "slow": 2}
    cp.close()


def test_a_run_whose_lease_was_taken_cannot_save_later_steps(tmp_path: Path) -> None:
    """Fencing holds for every write of a run, not only its first checkpoint."""
    cp = SqliteCheckpointer(str(tmp_path / "fence.db"))

    def steal(state: dict[str, Any]) -> dict[str, Any]:
        cp.break_lease("t")  # an operator (or an expired lease) hands the thread over
        cp.acquire_lease("t", "other-worker", 60)
        return {"n": 99}

    class St(TypedDict):
        n: int

    g = StateGraph(St)
    g.add_node("first", lambda s: {"n": 1})
    g.add_node("steal", steal)
    g.add_edge(START, "first")
    g.add_edge("first", "steal")
    with pytest.raises(ThreadBusyError, match="stale"):
        g.compile(checkpointer=cp).invoke({"n": 0}, thread_id="t")
    assert cp.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint[
        "channel_values"]["n"] == 1
    cp.close()


def test_a_lease_of_a_dead_process_on_this_host_is_free(tmp_path: Path) -> None:
    cp = SqliteCheckpointer(str(tmp_path / "dead.db"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    space = pid_space()  # an owner of this PID namespace (see test_lease_attacks.py)
    cp.acquire_lease("a", f"{host}:{dead.pid}:{space}-cafe", 300)
    assert cp.acquire_lease("a", "me", 300) == 2  # taken over at once, with a new token
    cp.acquire_lease("b", f"{host}:{os.getppid()}:{space}-cafe", 300)  # alive
    cp.acquire_lease("c", f"elsewhere.example:{dead.pid}:cafe", 300)  # another machine
    for tid in ("b", "c"):
        with pytest.raises(ThreadBusyError, match="busy"):
            cp.acquire_lease(tid, "me", 300)
    cp.close()
