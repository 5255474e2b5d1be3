"""Concurrent writers against real SQLite and PostgreSQL (issue 17, "Leases").

- ``update_state`` from another process during a live run takes the thread like a run:
  refused at once with ``busy_timeout=0``, applied after the run with a longer wait,
  never a fork that silently loses the update.
- A lease holder in another PID namespace with the same hostname (two containers on one
  database) is not judged dead by a PID check: its lease lasts until it expires.
- On PostgreSQL a writer stalled inside its transaction does not block the others
  without bound: a waiter gets ``ThreadBusyError`` within its ``busy_timeout``.
- A PostgreSQL connection lost mid-run (the server restarting; simulated by terminating
  this test's own backends) is a ``CheckpointError``, and the thread resumes afterwards.
"""

from __future__ import annotations

import operator
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import END, START, StateGraph, ThreadBusyError
from threadloom.checkpoint.leases import pid_space
from threadloom.errors import CheckpointError

TESTS = Path(__file__).resolve().parent


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def _mark(path: str, text: str) -> None:
    """Write ``path`` whole at once: the test polls for it from another process."""
    Path(path + ".tmp").write_text(text)
    os.replace(path + ".tmp", path)


def _builder(marker: str | None = None, seconds: float = 0.0,
             during: Callable[[], None] | None = None) -> StateGraph:
    def slow(state: Log) -> dict[str, Any]:
        if marker:
            _mark(marker, "started")
        if during is not None:
            during()
        time.sleep(seconds)
        return {"log": ["run"]}

    def after(state: Log) -> dict[str, Any]:
        return {"log": ["after"]}

    builder = StateGraph(Log)
    builder.add_node("slow", slow)
    builder.add_node("after", after)
    builder.add_edge(START, "slow")
    builder.add_edge("slow", "after")
    builder.add_edge("after", END)
    return builder


def _open(kind: str, where: str, **kw: Any) -> Any:
    if kind == "sqlite":
        from threadloom.checkpoint.sqlite import SqliteCheckpointer

        return SqliteCheckpointer(where)
    from conftest import PG_CONNINFO

    from threadloom.checkpoint.postgres import PostgresCheckpointer

    return PostgresCheckpointer(PG_CONNINFO, schema=where, pool_size=2, **kw)


def child_run(kind: str, where: str, thread: str, marker: str, seconds: str) -> None:
    """Entry point of the other process: one run whose first node takes ``seconds``."""
    cp = _open(kind, where)
    graph = _builder(marker, float(seconds)).compile(checkpointer=cp)
    graph.invoke({"log": ["in"]}, {"configurable": {"thread_id": thread}})
    cp.close()


def _spawn(*args: str, prefix: list[str] | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get(
        "PYTHONPATH", "")]))
    code = f"import test_lease_attacks as t; t.{args[0]}(*{list(args[1:])!r})"
    return subprocess.Popen([*(prefix or []), sys.executable, "-c", code], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``(kind, where)``: a SQLite path, or a fresh PostgreSQL schema (dropped after)."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "c.db")
        return
    psycopg = pytest.importorskip("psycopg")
    from conftest import PG_CONNINFO

    schema = f"sb_lease_{uuid.uuid4().hex[:10]}"
    try:
        yield "postgres", schema
    finally:
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _chain(cp: Any, thread: str) -> list[list[str]]:
    """The thread's history (newest first) as its ``log`` values, checking it is one chain."""
    items = list(cp.list({"configurable": {"thread_id": thread}}))
    for newer, older in zip(items, items[1:], strict=False):
        assert newer.parent_config["configurable"]["checkpoint_id"] == \
            older.config["configurable"]["checkpoint_id"], "the history forked"
    return [t.checkpoint["channel_values"].get("log", []) for t in items]


def test_update_state_waits_for_a_live_run_in_another_process(backend, tmp_path):
    kind, where = backend
    cp = _open(kind, where)  # creates the tables before the child races to
    marker = tmp_path / "started"
    child = _spawn("child_run", kind, where, "t", str(marker), "3")
    _wait_for(marker, child)

    refused = _builder().compile(checkpointer=cp)
    with pytest.raises(ThreadBusyError):
        refused.update_state({"configurable": {"thread_id": "t"}}, {"log": ["update"]})
    waiting = _builder().compile(checkpointer=cp, busy_timeout=60)
    started = time.monotonic()
    config = waiting.update_state({"configurable": {"thread_id": "t"}}, {"log": ["update"]})
    assert time.monotonic() - started > 0.5  # it waited for the run
    assert child.wait(30) == 0, child.communicate()
    assert "__lease_token" not in config["configurable"]
    assert waiting.get_state({"configurable": {"thread_id": "t"}}).values["log"] == [
        "in", "run", "after", "update"]
    assert _chain(cp, "t")[0] == ["in", "run", "after", "update"]
    cp.close()


# -- another PID namespace, same hostname ---------------------------------------------------

def child_hold(where: str, thread: str, marker: str, pid: str, ttl: str) -> None:
    """In a fresh PID namespace: fork until a child has PID ``pid`` (free in the test's
    namespace), which takes the thread's lease as the engine would and sleeps."""
    while True:
        child = os.fork()
        if child == 0:
            if os.getpid() != int(pid):
                os._exit(0)
            from threadloom.engine.lease import OWNER

            cp = _open("sqlite", where)
            cp.acquire_lease(thread, OWNER, float(ttl))
            _mark(marker, OWNER)
            time.sleep(60)
            os._exit(0)
        os.waitpid(child, 0)
        if child >= int(pid):
            return


def _free_pid() -> int:
    """A small PID no process of this namespace has."""
    taken = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    return next(p for p in range(20, 5000) if p not in taken)


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True)
    return probe.returncode == 0


def test_a_holder_in_another_pid_namespace_keeps_its_lease(tmp_path):
    if not _can_unshare():
        pytest.skip("needs unshare --pid (root, or user namespaces)")
    path = str(tmp_path / "c.db")
    cp = _open("sqlite", path)
    marker = tmp_path / "held"
    pid = _free_pid()
    holder = _spawn("child_hold", path, "t", str(marker), str(pid), "4",
                    prefix=["unshare", "--pid", "--fork", "--mount-proc"])
    try:
        _wait_for(marker, holder)
        owner = marker.read_text()
        assert owner.split(":")[1] == str(pid)  # a PID that means nothing here...
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        graph = _builder().compile(checkpointer=cp)
        with pytest.raises(ThreadBusyError, match="is using it"):  # ... yet it holds
            graph.invoke({"log": ["in"]}, {"configurable": {"thread_id": "t"}})
    finally:
        holder.kill()
        holder.wait()
    time.sleep(4.2)  # its lease expires; then the thread is free
    graph = _builder().compile(checkpointer=cp)
    assert graph.invoke({"log": ["in"]}, {"configurable": {"thread_id": "t"}})["log"][-1] == \
        "after"
    cp.close()


def test_only_an_owner_of_this_pid_space_is_judged_by_its_pid(tmp_path):
    import socket

    from threadloom.checkpoint.leases import owner_is_dead

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    assert owner_is_dead(f"{host}:{dead.pid}:{pid_space()}-abcd1234")
    for owner in (f"{host}:{dead.pid}:0123456789ab-abcd1234",  # another container
                  f"{host}:{dead.pid}:abcd1234",  # the old format: cannot tell
                  f"elsewhere:{dead.pid}:{pid_space()}-abcd1234"):
        assert not owner_is_dead(owner), owner


def test_a_forked_worker_is_an_owner_of_its_own():
    from threadloom.engine import lease

    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.write(write, lease.OWNER.encode())
        os._exit(0)
    os.waitpid(child, 0)
    theirs = os.read(read, 200).decode()
    os.close(read)
    os.close(write)
    assert theirs != lease.OWNER and theirs.split(":")[1] == str(child)


# -- PostgreSQL: a stalled writer, a lost connection ---------------------------------------

@pytest.mark.postgres
def test_a_stalled_writer_does_not_block_waiters_without_bound(backend):
    kind, schema = backend
    if kind != "postgres":
        return  # SQLite's waiters are bounded by its own busy timeout
    import psycopg
    from conftest import PG_CONNINFO

    cp = _open(kind, schema, lock_timeout_s=1.0)
    graph = _builder().compile(checkpointer=cp)
    graph.invoke({"log": ["in"]}, {"configurable": {"thread_id": "t"}})
    stalled = psycopg.connect(PG_CONNINFO)  # a transaction left open, holding the rows
    try:
        stalled.execute(f"SELECT * FROM {schema}.tl_leases WHERE thread_id = 't' FOR UPDATE")
        for busy_timeout, bound in ((0.0, 1.0), (1.5, 3.0)):
            waiting = _builder().compile(checkpointer=cp, busy_timeout=busy_timeout)
            started = time.monotonic()
            with pytest.raises(ThreadBusyError, match="'t' is busy"):
                waiting.invoke({"log": ["x"]}, {"configurable": {"thread_id": "t"}})
            took = time.monotonic() - started
            assert busy_timeout <= took < bound, took
        started = time.monotonic()
        with pytest.raises(ThreadBusyError, match="stalled"):
            cp.delete_thread("t")  # any other write: bounded by lock_timeout_s
        assert time.monotonic() - started < 3
    finally:
        stalled.rollback()
        stalled.close()
    assert graph.invoke({"log": ["x"]}, {"configurable": {"thread_id": "t"}})["log"][-1] == \
        "after"
    cp.close()


@pytest.mark.postgres
def test_a_lost_connection_mid_run_is_a_checkpoint_error_and_the_run_resumes(backend):
    kind, schema = backend
    if kind != "postgres":
        return  # a SQLite file has no server to lose
    import psycopg
    from conftest import PG_CONNINFO

    from threadloom.checkpoint.postgres import PostgresCheckpointer

    app = f"sb_restart_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in PG_CONNINFO else "?"
    cp = PostgresCheckpointer(f"{PG_CONNINFO}{sep}application_name={app}", schema=schema,
                              pool_size=2)
    killed: list[int] = []

    def terminate_our_backends() -> None:  # what a server restart does to this run
        if killed:
            return
        with psycopg.connect(PG_CONNINFO, autocommit=True) as admin:
            rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE application_name = %s", (app,)).fetchall()
        killed.append(len(rows))

    graph = _builder(during=terminate_our_backends).compile(checkpointer=cp)
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(CheckpointError) as caught:
        graph.invoke({"log": ["in"]}, config)
    assert killed and killed[0] >= 1
    assert not isinstance(caught.value, psycopg.Error)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)
    assert "PostgreSQL checkpoint store" in str(caught.value)
    assert "password" not in str(caught.value).lower()
    done = graph.invoke(None, config)  # resuming works once the server is back
    assert done["log"][-1] == "after"
    cp.close()


def test_a_live_run_keeps_its_lease_through_a_node_longer_than_the_ttl(backend, monkeypatch):
    import threading

    from threadloom.engine import lease

    kind, where = backend
    monkeypatch.setattr(lease, "LEASE_TTL_S", 0.6)
    monkeypatch.setattr(lease, "HEARTBEAT_S", 0.1)
    cp = _open(kind, where)
    inside = threading.Event()
    graph = _builder(seconds=2.0, during=inside.set).compile(checkpointer=cp)
    outcome: list[Any] = []
    runner = threading.Thread(target=lambda: outcome.append(graph.invoke(
        {"log": ["in"]}, {"configurable": {"thread_id": "t"}})))
    runner.start()
    assert inside.wait(30)
    time.sleep(1.2)  # twice the TTL into the node: only the heartbeat kept the lease
    with pytest.raises(ThreadBusyError, match="is using it"):
        cp.acquire_lease("t", "another-host:1:elsewhere-0000", 5)
    runner.join(30)
    assert outcome and outcome[0]["log"] == ["in", "run", "after"]  # never fenced off
    cp.close()
