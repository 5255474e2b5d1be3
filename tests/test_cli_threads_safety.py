"""``threadloom threads``: what the commands must never do to a store.

Reading commands (list, show, history) never write: not into another application's
SQLite file, not into a missing path, not into threadloom's own file. One damaged record
does not hide the other threads, and is named (thread and checkpoint) with what is wrong.
Writing commands (delete, fork) refuse a thread whose lease a live run holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from threadloom import END, START, StateGraph, ThreadBusyError
from threadloom.checkpoint.leases import pid_space
from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.errors import CheckpointError, SerializationError

TESTS = Path(__file__).resolve().parent
READS = [["list"], ["show", "t1"], ["history", "t1"]]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(TESTS), os.environ.get("PYTHONPATH", "")]), COLUMNS="200")


def proc(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args], cwd=cwd,
                          env=_env(), capture_output=True, text=True, timeout=timeout)


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    err = result.stderr.strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: "), err
    return err


def _state(path: Path) -> tuple[str, list[str]]:
    """The file's bytes (hashed) and the names of the files next to it."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), sorted(os.listdir(path.parent))


def _journal_mode(path: Path) -> str:
    # header bytes 18-19: 1 = rollback journal, 2 = WAL (read without opening the file)
    return {1: "delete", 2: "wal"}[path.read_bytes()[18]]


def _seed(work: Path, db: str = "c.db") -> None:
    for thread, n in (("t1", 1), ("t2", 50)):
        assert proc("run", "cli_graphs:counter", "--input", json.dumps({"n": n}), "-t", thread,
                    "--db", db, cwd=work).returncode == 0


# -- 1. reading commands never write ---------------------------------------------------------

def _foreign(work: Path) -> Path:
    path = work / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
        conn.execute("INSERT INTO users VALUES (1)")
    conn.close()
    return path


@pytest.mark.parametrize("args", [*READS, ["delete", "t1"], ["fork", "t1", "-c", "x"]])
def test_a_foreign_sqlite_file_is_named_and_left_byte_identical(work: Path, args: list[str]):
    path = _foreign(work)
    before = _state(path)
    assert _journal_mode(path) == "delete"
    result = proc("threads", *args, "--db", "other.db", cwd=work)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "'other.db' holds no threadloom checkpoints" in _one_error_line(result)
    assert _state(path) == before  # same bytes, no -wal/-shm/-journal left beside it
    assert _journal_mode(path) == "delete"
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
    conn.close()
    assert tables == ["users"]


@pytest.mark.parametrize("args", [*READS, ["delete", "t1"], ["fork", "t1", "-c", "x"]])
def test_a_missing_file_is_not_created(work: Path, args: list[str]):
    result = proc("threads", *args, "--db", "absent.db", cwd=work)
    assert result.returncode == 1
    assert "no checkpoint database at 'absent.db'" in _one_error_line(result)
    assert os.listdir(work) == []


def test_reading_commands_leave_a_threadloom_file_byte_identical(work: Path):
    _seed(work)
    path = work / "c.db"
    digest = _state(path)[0]
    for args in READS:
        result = proc("threads", *args, "--db", "c.db", cwd=work)
        assert result.returncode == 0, result.stderr
    assert _state(path)[0] == digest and _journal_mode(path) == "wal"


def test_read_only_checkpointer_refuses_writes_and_does_not_expire(tmp_path: Path):
    path = tmp_path / "ttl.db"
    cp = SqliteCheckpointer(path, ttl_seconds=0.01)
    graph = _counter_graph(cp)
    graph.invoke({"n": 1}, thread_id="old")
    cp.close()
    time.sleep(0.05)
    digest = _state(path)[0]
    ro = SqliteCheckpointer(path, read_only=True)
    assert ro.list_threads() == ["old"]
    # expired: it reads as gone (as it would after a sweep), but is not deleted
    assert ro.get_tuple({"configurable": {"thread_id": "old"}}) is None
    assert list(ro.list({"configurable": {"thread_id": "old"}})) == []
    with pytest.raises(CheckpointError, match="read-only"):
        ro.delete_thread("old")
    with pytest.raises(CheckpointError, match="read-only"):
        ro.acquire_lease("old", "me", 10)
    ro.close()
    assert _state(path)[0] == digest


def test_read_only_checkpointer_names_a_foreign_or_missing_file(tmp_path: Path):
    foreign = _foreign(tmp_path)
    with pytest.raises(CheckpointError, match="holds no threadloom checkpoints"):
        SqliteCheckpointer(foreign, read_only=True)
    with pytest.raises(CheckpointError, match="no SQLite file at"):
        SqliteCheckpointer(tmp_path / "nope.db", read_only=True)
    assert sorted(os.listdir(tmp_path)) == ["other.db"]


# -- 2. a damaged record ---------------------------------------------------------------------

def _counter_graph(cp: Any) -> Any:
    import cli_graphs

    return cli_graphs.counter_builder.compile(cp)


def _seed_two(work: Path) -> None:
    """``pay1``: paused in ``review`` (a blob and a pending interrupt write); ``pay2``: done."""
    draft = json.dumps({"draft": "x" * 100})
    assert proc("run", "cli_graphs:review", "-i", draft, "-t", "pay1", "--db", "c.db",
                cwd=work).returncode == 0
    assert proc("run", "cli_graphs:counter", "-i", '{"n": 50}', "-t", "pay2", "--db", "c.db",
                cwd=work).returncode == 0


LATEST_ID = "SELECT max(checkpoint_id) FROM tl_checkpoints WHERE thread_id = 'pay1'"
LATEST = f"({LATEST_ID})"
DAMAGE = {
    "record not JSON": f"UPDATE tl_checkpoints SET record = x'7b6e6f' "
                       f"WHERE checkpoint_id = {LATEST}",
    "record as TEXT": f"UPDATE tl_checkpoints SET record = CAST(record AS TEXT) "
                      f"WHERE checkpoint_id = {LATEST}",
    "record of another shape": f"UPDATE tl_checkpoints SET record = CAST('[1, 2]' AS BLOB) "
                               f"WHERE checkpoint_id = {LATEST}",
    "metadata as TEXT": f"UPDATE tl_checkpoints SET metadata = 'oops' "
                        f"WHERE checkpoint_id = {LATEST}",
    "blob not JSON": "UPDATE tl_blobs SET data = x'00' WHERE thread_id = 'pay1'",
    "write as TEXT": "UPDATE tl_writes SET value = 'oops' WHERE thread_id = 'pay1'",
    "write as INTEGER": "UPDATE tl_writes SET value = 42 WHERE thread_id = 'pay1'",
}


def _damage(path: Path, how: str) -> str:
    with sqlite3.connect(path) as conn:
        assert conn.execute(DAMAGE[how]).rowcount >= 1
        cid = conn.execute(LATEST_ID).fetchone()[0]
    conn.close()
    return cid


@pytest.mark.parametrize("how", list(DAMAGE))
def test_one_damaged_thread_is_named_and_the_others_listed(work: Path, how: str):
    _seed_two(work)
    path = work / "c.db"
    cid = _damage(path, how)
    digest = _state(path)[0]

    listed = proc("threads", "list", "--db", "c.db", cwd=work)
    assert "Traceback" not in listed.stderr
    rows = {r.split("│")[1].strip(): [c.strip() for c in r.split("│")[2:-1]]
            for r in listed.stdout.splitlines() if r.startswith("│")}
    assert rows["pay2"][:3] == ["3", "1", "done"]  # the healthy thread, whole
    assert rows["pay1"][2].startswith("unreadable")
    assert listed.returncode == 1  # something could not be read...
    err = _one_error_line(listed)  # ... said in one line naming the thread and the record
    assert "'pay1'" in err and repr(cid) in err, err

    for args in (["show", "pay1"], ["history", "pay1"]):
        result = proc("threads", *args, "--db", "c.db", cwd=work)
        assert result.returncode == 1, result.stdout
        line = _one_error_line(result)
        assert "thread 'pay1'" in line and repr(cid) in line, line
        assert "TypeError" not in line and "AttributeError" not in line, line
    assert json.loads(proc("threads", "show", "pay2", "--db", "c.db", cwd=work).stdout)[
        "values"]["n"] == 51
    assert _state(path)[0] == digest


@pytest.mark.parametrize("how", ["record as TEXT", "metadata as TEXT", "write as TEXT",
                                 "write as INTEGER", "record of another shape"])
def test_library_load_of_a_non_blob_value_is_a_serialization_error(work: Path, how: str):
    _seed_two(work)
    cid = _damage(work / "c.db", how)
    cp = SqliteCheckpointer(work / "c.db")
    with pytest.raises(SerializationError) as err:
        cp.get_tuple({"configurable": {"thread_id": "pay1"}})
    text = str(err.value) + " ".join(getattr(err.value, "__notes__", []))
    assert repr(cid) in text and "'pay1'" in text, text
    if how.endswith("TEXT"):
        assert "TEXT" in text
    cp.close()


@pytest.mark.parametrize("value", [42, None, 1.5, ["not", "bytes"], object()])
def test_codec_loads_refuses_what_is_not_bytes_or_text(value: Any):
    with pytest.raises(SerializationError, match="not bytes"):
        Codec().loads(value)


# -- 3. leases: delete and fork wait for no one, and refuse a live run ------------------------

def _wait_for_checkpoints(path: Path, thread: str, count: int, deadline_s: float = 30) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.exists():
            try:
                with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
                    got = conn.execute("SELECT count(*) FROM tl_checkpoints WHERE thread_id = ?",
                                       (thread,)).fetchone()[0]
                conn.close()
                if got >= count:
                    return
            except sqlite3.OperationalError:
                pass
        time.sleep(0.05)
    raise AssertionError(f"no {count} checkpoints of {thread!r} in {path} in time")


def _history_is_a_chain(path: Path, thread: str) -> list[int]:
    cp = SqliteCheckpointer(path, read_only=True)
    items = list(cp.list({"configurable": {"thread_id": thread}}))
    cp.close()
    ids = {t.config["configurable"]["checkpoint_id"] for t in items}
    for t in items[:-1]:
        assert t.parent_config["configurable"]["checkpoint_id"] in ids
    assert items[-1].parent_config is None
    return [t.metadata["step"] for t in items]


def test_delete_and_fork_refuse_a_thread_a_live_run_holds(work: Path):
    path = work / "del.db"
    run = subprocess.Popen(  # saves its input checkpoint, then waits for the file "go"
        [sys.executable, "-m", "threadloom.cli", "run", "cli_graphs:ticker", "-i",
         '{"n": 0, "stop": 3, "until": "go"}', "-t", "victim", "--db", "del.db"],
        cwd=work, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_checkpoints(path, "victim", 1)
        deleted = proc("threads", "delete", "victim", "--db", "del.db", cwd=work)
        assert deleted.returncode == 1, deleted.stdout
        line = _one_error_line(deleted)
        assert "thread 'victim' is busy" in line and "nothing was deleted" in line, line
        assert re.search(r"lapses \d+s after it stops renewing", line), line
        first = _history_is_a_chain(path, "victim")
        shown = proc("threads", "show", "victim", "--db", "del.db", cwd=work)
        cid = json.loads(shown.stdout)["checkpoint_id"]
        forked = proc("threads", "fork", "victim", "-c", cid, "-u", '{"n": 9}', "--db",
                      "del.db", cwd=work)
        assert forked.returncode == 1
        assert "thread 'victim' is busy" in _one_error_line(forked)
        assert _history_is_a_chain(path, "victim") == first  # nothing written meanwhile
        (work / "go").touch()
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, (out, err)
    # whole: from the input to the end, every parent there
    assert _history_is_a_chain(path, "victim") == [3, 2, 1, 0, -1]
    assert proc("threads", "delete", "victim", "--db", "del.db", cwd=work).returncode == 0
    assert proc("threads", "list", "--db", "del.db", cwd=work).stdout.startswith("no threads")


def _hold(path: Path, thread: str, owner: str, ttl: float = 60) -> int:
    cp = SqliteCheckpointer(path)
    token = cp.acquire_lease(thread, owner, ttl)
    cp.close()
    return token


def test_delete_goes_ahead_when_the_holder_is_gone_or_its_lease_expired(work: Path):
    _seed(work)
    path = work / "c.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _hold(path, "t1", f"{socket.gethostname()}:{dead.pid}:{pid_space()}-crashed")
    _hold(path, "t2", "elsewhere:1:w", ttl=0.01)
    time.sleep(0.05)
    for thread in ("t1", "t2"):
        result = proc("threads", "delete", thread, "--db", "c.db", cwd=work)
        assert result.returncode == 0, result.stderr
    assert SqliteCheckpointer(path).list_threads() == []


def test_a_run_cannot_start_while_fork_holds_the_thread(work: Path):
    """The CLI holds the lease for the whole write: a run meanwhile gets ThreadBusyError."""
    from threadloom.cli.threads_edit import hold_thread

    _seed(work)
    cp = SqliteCheckpointer(work / "c.db")
    with hold_thread(cp, "t1"):
        with pytest.raises(ThreadBusyError, match="'t1' is busy"):
            _counter_graph(cp).invoke(None, thread_id="t1")
    _counter_graph(cp).invoke({"n": 1}, thread_id="t1")  # released afterwards
    cp.close()


def test_delete_thread_fences_off_the_run_that_held_it(tmp_path: Path):
    """A run whose thread is deleted under it fails at its next save: no partial history
    comes back."""
    cp = SqliteCheckpointer(tmp_path / "lib.db")

    deletions: list[str] = []

    def delete_me(state: dict[str, Any]) -> dict[str, Any]:
        if not deletions:  # the first run only
            deletions.append("t")
            cp.delete_thread("t")
        return {"n": state["n"] + 1}

    from typing import TypedDict

    class St(TypedDict):
        n: int

    g = StateGraph(St)
    g.add_node("first", lambda s: {"n": 1})
    g.add_node("delete_me", delete_me)
    g.add_node("after", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "first")
    g.add_edge("first", "delete_me")
    g.add_edge("delete_me", "after")
    g.add_edge("after", END)
    with pytest.raises(ThreadBusyError, match="deleted"):
        g.compile(checkpointer=cp).invoke({"n": 0}, thread_id="t")
    assert cp.list_threads() == []
    assert g.compile(checkpointer=cp).invoke({"n": 0}, thread_id="t") == {"n": 3}
    assert [t.metadata["step"] for t in cp.list({"configurable": {"thread_id": "t"}})] == [
        3, 2, 1, 0, -1]  # the new run's own history, nothing of the deleted one
    cp.close()


@pytest.mark.postgres
def test_delete_refuses_a_live_lease_on_postgres(work: Path):
    psycopg = pytest.importorskip("psycopg")
    from conftest import PG_CONNINFO

    from threadloom.checkpoint.postgres import PostgresCheckpointer

    schema = f"clisafe_{os.getpid()}_{int(time.time())}"
    cp = PostgresCheckpointer(PG_CONNINFO, schema=schema)
    try:
        _counter_graph(cp).invoke({"n": 3}, thread_id="pg-1")
        sep = "&" if "?" in PG_CONNINFO else "?"
        conninfo = f"{PG_CONNINFO}{sep}options=-csearch_path%3D{schema}"
        token = cp.acquire_lease("pg-1", f"{socket.gethostname()}:{os.getpid()}:test", 60)
        result = proc("threads", "delete", "pg-1", "--postgres", conninfo, cwd=work)
        assert result.returncode == 1
        assert "thread 'pg-1' is busy" in _one_error_line(result)
        assert cp.list_threads() == ["pg-1"]
        cp.release_lease("pg-1", token)
        assert proc("threads", "delete", "pg-1", "--postgres", conninfo,
                    cwd=work).returncode == 0
        assert cp.list_threads() == []
    finally:
        cp.close()
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# -- 4. small things -------------------------------------------------------------------------

def test_list_and_history_times_carry_their_utc_offset(work: Path):
    _seed(work)
    listed = proc("threads", "list", "--db", "c.db", cwd=work).stdout
    hist = proc("threads", "history", "t1", "--db", "c.db", cwd=work).stdout
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00"
    listed_times = re.findall(stamp, listed)
    hist_times = re.findall(stamp, hist)
    assert len(listed_times) == 2 and len(hist_times) == 4, (listed, hist)
    assert listed_times[0] == hist_times[0]  # t1's latest, written the same way


@pytest.mark.parametrize("command", [["list"], ["show", "t1"], ["history", "t1"],
                                     ["delete", "t1"], ["fork", "t1", "-c", "x"]])
def test_db_and_postgres_together_is_a_usage_error(work: Path, command: list[str]):
    result = proc("threads", *command, "--db", "x.db", "--postgres", "postgresql://nowhere",
                  cwd=work)
    assert result.returncode == 2
    assert "give --db or --postgres, not both" in _one_error_line(result)
    assert os.listdir(work) == []
