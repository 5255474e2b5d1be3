"""How the CLI opens a checkpoint store: what a refused command must leave untouched.

1. PostgreSQL read-only (``PostgresCheckpointer(read_only=True)``): ``threads list``,
   ``show``, ``history`` and the checks of ``fork``/``delete`` create no table in a
   database that holds none of threadloom's, and name it.
2. ``run``, ``resume`` and ``demo`` check the graph, the arguments and the thread before
   they open the file for writing: a refused command leaves another application's file
   (tables, journal mode) and threadloom's own file as they were, and creates no file.
3. A refused ``threads fork`` or ``delete`` takes no lease and writes nothing.
4. Stored strings (thread ids) are shown literally, never read as rich markup.
5. ``--db ""`` is named as empty.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent


def proc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
               COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``error: ...`` line a refused command prints (and no traceback)."""
    assert result.returncode != 0, result.stdout
    err = result.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("error: "), err
    return err


def sqlite_state(path: Path) -> tuple[str, list[Any], int]:
    """The file's bytes (hashed), its lease rows (if any), and the bytes a ``-wal`` file
    beside it holds: a write that stayed in the WAL shows there."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        leases = (conn.execute("SELECT * FROM tl_leases ORDER BY thread_id").fetchall()
                  if "tl_leases" in names else [])
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    return digest, leases, wal.stat().st_size if wal.exists() else 0


def journal_mode(path: Path) -> str:
    # header bytes 18-19: 1 = rollback journal, 2 = WAL (read without opening the file)
    return {1: "delete", 2: "wal"}[path.read_bytes()[18]]


def foreign(work: Path) -> Path:
    """Another application's SQLite file: a ``users`` table, rollback journal."""
    path = work / "o.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
        conn.execute("INSERT INTO users VALUES (1)")
    conn.close()
    return path


def tables(path: Path) -> list[str]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                                 "WHERE type = 'table'"))
    finally:
        conn.close()


def seed(work: Path, thread: str = "t1", db: str = "c.db") -> str:
    """Run the counter graph on ``thread``; returns its latest checkpoint id."""
    ran = proc("run", "cli_graphs:counter", "-i", '{"n": 1}', "-t", thread, "--db", db,
               cwd=work)
    assert ran.returncode == 0, ran.stderr
    shown = proc("threads", "show", thread, "--db", db, cwd=work)
    return str(json.loads(shown.stdout)["checkpoint_id"])


# -- 1. PostgreSQL, read-only ---------------------------------------------------------------

@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    """A fresh schema holding another application's ``users`` table, and a conninfo
    (with a password, which messages must mask) whose search_path is that schema only."""
    psycopg = pytest.importorskip("psycopg")
    from conftest import PG_CONNINFO

    schema = f"tl_open_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.users (id INTEGER)")
    sep = "&" if "?" in PG_CONNINFO else "?"
    try:
        yield schema, f"{PG_CONNINFO}{sep}password=s3cret&options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def pg_tables(schema: str) -> list[str]:
    import psycopg
    from conftest import PG_CONNINFO

    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        rows = conn.execute("SELECT table_name FROM information_schema.tables "
                            "WHERE table_schema = %s ORDER BY table_name", (schema,))
        return [r[0] for r in rows.fetchall()]


@pytest.mark.postgres
def test_postgres_read_only_refuses_a_database_without_threadloom_tables(pg_schema):
    from threadloom.checkpoint.postgres import PostgresCheckpointer
    from threadloom.errors import CheckpointError

    schema, conninfo = pg_schema
    with pytest.raises(CheckpointError) as err:
        PostgresCheckpointer(conninfo, read_only=True)
    text = str(err.value)
    assert "holds no threadloom checkpoints" in text and "password=***" in text, text
    assert "s3cret" not in text
    absent = f"{schema}_absent"
    with pytest.raises(CheckpointError, match=f"no threadloom tables in schema '{absent}'"):
        PostgresCheckpointer(conninfo, schema=absent, read_only=True)
    assert pg_tables(schema) == ["users"] and pg_tables(absent) == []


@pytest.mark.postgres
def test_postgres_read_only_reads_and_never_writes(pg_schema):
    from threadloom.checkpoint.postgres import PostgresCheckpointer
    from threadloom.errors import CheckpointError

    schema, conninfo = pg_schema
    writer = PostgresCheckpointer(conninfo)
    import cli_graphs

    cli_graphs.counter_builder.compile(writer).invoke({"n": 1}, thread_id="t1")
    writer.close()
    reader = PostgresCheckpointer(conninfo, read_only=True)
    try:
        assert reader.list_threads() == ["t1"]
        saved = reader.get_tuple({"configurable": {"thread_id": "t1"}})
        assert saved is not None and saved.checkpoint["channel_values"]["n"] == 4
        with reader._tx(False) as tx:  # the server refuses writes too
            tx.cur.execute("SHOW transaction_read_only")
            assert tx.cur.fetchone()[0] == "on"
        for write in (lambda: reader.acquire_lease("t1", "me", 5),
                      lambda: reader.delete_thread("t1"),
                      lambda: reader.put_writes(saved.config, [("n", 1)], "task")):
            with pytest.raises(CheckpointError, match="opened read-only"):
                write()
    finally:
        reader.close()
    assert "tl_leases" in pg_tables(schema)


@pytest.mark.postgres
@pytest.mark.parametrize("how", ["drop tl_leases", "version 99"])
def test_postgres_read_only_names_incomplete_or_other_version_tables(pg_schema, how: str):
    import psycopg

    from threadloom.checkpoint.postgres import PostgresCheckpointer
    from threadloom.errors import CheckpointError

    schema, conninfo = pg_schema
    PostgresCheckpointer(conninfo).close()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP TABLE tl_leases" if how == "drop tl_leases"
                     else "UPDATE tl_meta SET value = '99' WHERE key = 'schema_version'")
    expected = "lacks threadloom tables ['tl_leases']" if how == "drop tl_leases" else \
        "schema version 99, newer than this threadloom"
    with pytest.raises(CheckpointError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        PostgresCheckpointer(conninfo, read_only=True)


@pytest.mark.postgres
@pytest.mark.parametrize("args", [["list"], ["show", "t1"], ["history", "t1"],
                                  ["delete", "t1"], ["fork", "t1", "-c", "x"]])
def test_postgres_threads_commands_add_no_table_to_another_database(pg_schema, work,
                                                                     args: list[str]):
    schema, conninfo = pg_schema
    result = proc("threads", *args, "--postgres", conninfo, cwd=work)
    line = error_line(result)
    assert "--postgres: PostgreSQL checkpoint store at" in line, line
    assert "holds no threadloom checkpoints" in line and "s3cret" not in line, line
    assert pg_tables(schema) == ["users"]


@pytest.mark.postgres
def test_postgres_threads_commands_on_threadloom_tables(pg_schema, work):
    import psycopg

    from threadloom.checkpoint.postgres import PostgresCheckpointer

    schema, conninfo = pg_schema
    writer = PostgresCheckpointer(conninfo)
    import cli_graphs

    cli_graphs.counter_builder.compile(writer).invoke({"n": 1}, thread_id="t1")
    writer.close()
    listed = proc("threads", "list", "--postgres", conninfo, cwd=work)
    assert listed.returncode == 0 and "t1" in listed.stdout, listed.stderr

    def leases() -> list[Any]:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            return conn.execute("SELECT * FROM tl_leases ORDER BY thread_id").fetchall()

    before = leases()
    for args in (["fork", "t1", "-c", "nosuch"], ["delete", "t2"]):
        assert error_line(proc("threads", *args, "--postgres", conninfo, cwd=work))
    assert leases() == before  # no lease taken (or made) by them
    deleted = proc("threads", "delete", "t1", "--postgres", conninfo, cwd=work)
    assert deleted.returncode == 0, deleted.stderr
    assert "no threads in PostgreSQL" in proc("threads", "list", "--postgres", conninfo,
                                              cwd=work).stdout


# -- 2. run, resume and demo check before they write ----------------------------------------

REFUSED_ON_A_FOREIGN_FILE = {
    "resume (demo)": ["resume", "zz", "--approve", "--db", "o.db"],
    "resume --graph": ["resume", "zz", "--approve", "--graph", "cli_graphs:review",
                       "--db", "o.db"],
    "run: no module": ["run", "nosuch:graph", "--db", "o.db"],
    "run: not a graph": ["run", "cli_graphs:not_a_graph", "--db", "o.db"],
    "run: bad input": ["run", "cli_graphs:counter", "-i", "{nope", "--db", "o.db"],
    "demo --resume": ["demo", "--resume", "zz", "--db", "o.db"],
    "demo: bad model": ["demo", "--model", "martian:x", "--db", "o.db"],
}


@pytest.mark.parametrize("name", list(REFUSED_ON_A_FOREIGN_FILE))
def test_a_refused_command_leaves_another_apps_file_as_it_was(work: Path, name: str):
    path = foreign(work)
    before = sqlite_state(path)
    error_line(proc(*REFUSED_ON_A_FOREIGN_FILE[name], cwd=work))
    assert sqlite_state(path) == before
    assert journal_mode(path) == "delete" and tables(path) == ["users"]
    assert sorted(os.listdir(work)) == ["o.db"]


@pytest.mark.parametrize("args", [
    ["run", "nosuch:x", "--db", "new.db"],
    ["run", "cli_graphs:counter", "-i", "[1,", "--db", "new.db"],
    ["demo", "--model", "martian:x", "--db", "new.db"],
    ["demo", "--model", "openai:gpt-4o-mini", "--db", "new.db"],  # no credentials
])
def test_a_refused_command_creates_no_file(work: Path, args: list[str]):
    error_line(proc(*args, cwd=work))
    assert os.listdir(work) == []


def test_refused_run_and_resume_leave_a_threadloom_file_as_it_was(work: Path):
    seed(work)
    path = work / "c.db"
    before = sqlite_state(path)
    refused = {
        "another graph's thread": ["run", "cli_graphs:review", "-i", "{}", "-t", "t1"],
        "nothing to answer": ["resume", "t1", "--value", "1", "--graph", "cli_graphs:counter"],
        "no such thread": ["resume", "zz", "--value", "1", "--graph", "cli_graphs:counter"],
        "not a demo thread": ["resume", "t1", "--approve"],
        "demo on it": ["demo", "--resume", "t1", "--scripted"],
    }
    for name, args in refused.items():
        line = error_line(proc(*args, "--db", "c.db", cwd=work))
        assert sqlite_state(path) == before, (name, line)


def test_run_and_demo_help_say_another_apps_file_gets_tables(work: Path):
    for command in ("run", "demo"):
        shown = proc(command, "--help", cwd=work)
        text = " ".join(shown.stdout.replace("│", " ").split())
        assert "Another application's SQLite file" in text and "tl_*" in text, text


def test_a_run_on_another_apps_file_adds_its_tables_and_keeps_the_apps(work: Path):
    path = foreign(work)
    ran = proc("run", "cli_graphs:counter", "-i", '{"n": 1}', "-t", "t1", "--db", "o.db",
               cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert {"users", "tl_checkpoints"} <= set(tables(path))
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT id FROM users").fetchall() == [(1,)]
    conn.close()


def test_demo_resume_of_a_thread_waiting_for_approval_writes_nothing(work: Path):
    first = proc("demo", "--scripted", "Please cancel order 1003", cwd=work)
    assert first.returncode == 0, first.stderr
    thread = next(line.split()[1] for line in first.stdout.splitlines()
                  if line.startswith("thread: "))
    path = work / "threadloom-demo.db"
    before = sqlite_state(path)
    blocked = proc("demo", "--resume", thread, "anything else?", cwd=work)
    assert "waiting for an approval" in error_line(blocked)
    assert sqlite_state(path) == before


# -- 3. a refused fork or delete writes nothing ---------------------------------------------

def _damaged_review(work: Path) -> str:
    """``pay1``, paused in ``review``, whose latest record is not JSON; returns its id."""
    ran = proc("run", "cli_graphs:review", "-i", '{"draft": "x"}', "-t", "pay1", "--db",
               "c.db", cwd=work)
    assert ran.returncode == 0, ran.stderr
    conn = sqlite3.connect(work / "c.db")
    with conn:
        cid = conn.execute("SELECT max(checkpoint_id) FROM tl_checkpoints "
                           "WHERE thread_id = 'pay1'").fetchone()[0]
        conn.execute("UPDATE tl_checkpoints SET record = x'7b6e6f' WHERE checkpoint_id = ?",
                     (cid,))
    conn.close()
    return str(cid)


def test_a_refused_fork_or_delete_takes_no_lease_and_writes_nothing(work: Path):
    cid = seed(work)
    damaged = _damaged_review(work)
    path = work / "c.db"
    before = sqlite_state(path)
    assert dict((r[0], r[2]) for r in before[1]) == {"pay1": 1, "t1": 1}  # the runs' leases
    refused = {
        "unknown checkpoint": (["fork", "t1", "-c", "nosuch"], "no checkpoint 'nosuch'"),
        "unknown key": (["fork", "t1", "-c", cid, "-u", '{"zz": 1}'], "['zz']"),
        "unknown key, --graph": (["fork", "t1", "-c", cid, "-u", '{"zz": 1}', "--graph",
                                  "cli_graphs:counter"], "state schema of cli_graphs:counter"),
        "unknown node": (["fork", "t1", "-c", cid, "-u", '{"n": 1}', "--graph",
                          "cli_graphs:counter", "--as-node", "nope"], "--as-node 'nope'"),
        "damaged thread": (["fork", "pay1", "-c", damaged], "cannot read thread 'pay1'"),
        "missing thread": (["delete", "zz"], "no thread 'zz'"),
        "missing thread, fork": (["fork", "zz", "-c", cid], "no thread 'zz'"),
    }
    for name, (args, needle) in refused.items():
        line = error_line(proc("threads", *args, "--db", "c.db", cwd=work))
        assert needle in line, (name, line)
        assert sqlite_state(path) == before, name
    forked = proc("threads", "fork", "t1", "-c", cid, "-u", '{"n": 9}', "--graph",
                  "cli_graphs:counter", "--as-node", "inc", "--db", "c.db", cwd=work)
    assert forked.returncode == 0, forked.stderr
    assert ("t1", None, 2, 0.0) in sqlite_state(path)[1]  # taken once, then given back


# -- 4. stored strings are shown literally --------------------------------------------------

def test_thread_ids_with_markup_are_shown_literally(work: Path):
    ids = ["x[/]", "ünï [red]x[/red]", "a :smile: b", "two\nlines"]
    for thread in ids:
        seed(work, thread)
    listed = proc("threads", "list", "--db", "c.db", cwd=work)
    assert listed.returncode == 0, listed.stderr
    for thread in ids[:3]:
        assert f"│ {thread} " in listed.stdout, listed.stdout
    assert "'two\\nlines'" in listed.stdout  # one row, the newline visible
    history = proc("threads", "history", "x[/]", "--db", "c.db", cwd=work)
    assert history.returncode == 0, history.stderr
    assert "history of x[/]" in history.stdout


# -- 5. an empty --db -----------------------------------------------------------------------

@pytest.mark.parametrize("args", [["threads", "list"], ["run", "cli_graphs:counter"],
                                  ["demo", "--scripted"]])
def test_an_empty_db_path_is_named(work: Path, args: list[str]):
    line = error_line(proc(*args, "--db", "", cwd=work))
    assert "--db is empty" in line, line
    assert os.listdir(work) == []
