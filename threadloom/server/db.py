"""The server's own tables (threads, runs, stream events, assistants) on SQLite or PostgreSQL.

They sit beside the checkpointer's tables: in a second SQLite file beside ``--db``
(``x.db`` -> ``x.server.db``), or in the same PostgreSQL database and ``search_path``
(``--postgres``). They hold what the checkpoints do not: who owns a thread, its metadata
and status, the runs and their statuses, and every streamed event with its sequence
number.

``Database.run(fn)`` runs ``fn(tx)`` in one transaction; ``tx.execute(sql, params)``
takes SQL written with ``?`` placeholders for both engines. SQLite uses one connection
(WAL, ``synchronous=NORMAL``) behind a lock, on the event loop's own thread (its
transactions are shorter than a hand-off to a worker); PostgreSQL a small psycopg pool,
on worker threads.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from threadloom.workers import to_worker

T = TypeVar("T")

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS tl_srv_threads (
        thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL, state_updated_at TEXT NOT NULL, metadata TEXT NOT NULL,
        status TEXT NOT NULL, config TEXT NOT NULL, vals TEXT, interrupts TEXT NOT NULL,
        error TEXT, temporary INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS tl_srv_threads_owner ON tl_srv_threads (owner, created_at)",
    """CREATE TABLE IF NOT EXISTS tl_srv_runs (
        run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, owner TEXT NOT NULL,
        assistant_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        status TEXT NOT NULL, metadata TEXT NOT NULL, kwargs TEXT NOT NULL,
        multitask_strategy TEXT NOT NULL, ord BIGINT NOT NULL, output TEXT,
        started_from TEXT, attempt INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS tl_srv_runs_thread ON tl_srv_runs (thread_id, ord)",
    "CREATE INDEX IF NOT EXISTS tl_srv_runs_status ON tl_srv_runs (status)",
    """CREATE TABLE IF NOT EXISTS tl_srv_events (
        run_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, data TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, seq))""",
    "CREATE INDEX IF NOT EXISTS tl_srv_events_at ON tl_srv_events (at)",
    """CREATE TABLE IF NOT EXISTS tl_srv_assistants (
        assistant_id TEXT PRIMARY KEY, owner TEXT NOT NULL, system INTEGER NOT NULL,
        graph_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL, version INTEGER NOT NULL,
        config TEXT NOT NULL, context TEXT NOT NULL, metadata TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS tl_srv_assistant_versions (
        assistant_id TEXT NOT NULL, version INTEGER NOT NULL, graph_id TEXT NOT NULL,
        name TEXT NOT NULL, description TEXT, created_at TEXT NOT NULL,
        config TEXT NOT NULL, context TEXT NOT NULL, metadata TEXT NOT NULL,
        PRIMARY KEY (assistant_id, version))""",
)


class Tx:
    """One transaction: ``execute`` with ``?`` placeholders, then ``fetchone``/``fetchall``."""

    def __init__(self, cursor: Any, postgres: bool) -> None:
        self.cursor = cursor
        self.postgres = postgres

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Tx:
        """Run one statement (``?`` placeholders; rewritten to ``%s`` on PostgreSQL)."""
        self.cursor.execute(sql.replace("?", "%s") if self.postgres else sql, tuple(params))
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row."""
        self.cursor.executemany(sql.replace("?", "%s") if self.postgres else sql,
                                [tuple(r) for r in rows])

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or None."""
        row = self.cursor.fetchone()
        return tuple(row) if row is not None else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every remaining row."""
        return [tuple(r) for r in self.cursor.fetchall()]

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed."""
        return int(self.cursor.rowcount)


class Database:
    """Where the server's tables live; see the module docstring.

    Build one with ``Database.sqlite(path)`` or ``Database.postgres(conninfo)``.
    """

    postgres = False
    inline = False  # run transactions on the event loop's thread (fast local engines)

    def transaction(self) -> Any:  # pragma: no cover - each engine has its own
        raise NotImplementedError

    @staticmethod
    def sqlite(path: str | Path) -> Database:
        """The tables in the SQLite file ``path`` (created if missing)."""
        return _Sqlite(str(path))

    @staticmethod
    def postgres_db(conninfo: str, pool_size: int = 4) -> Database:
        """The tables in the PostgreSQL database of ``conninfo`` (its ``search_path``)."""
        return _Postgres(conninfo, pool_size)

    def run_sync(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` in one transaction, on this thread."""
        with self.transaction() as tx:
            return fn(tx)

    async def run(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` in one transaction: on a worker thread, or (SQLite) right here."""
        if self.inline:
            return self.run_sync(fn)
        return await to_worker(self.run_sync, fn)

    def migrate(self) -> None:
        """Create the tables that are missing."""
        def create(tx: Tx) -> None:
            for stmt in SCHEMA:
                tx.execute(stmt)
        self.run_sync(create)

    def close(self) -> None:
        """Release the connections."""


class _Sqlite(Database):
    # A local SQLite transaction (WAL, synchronous=NORMAL: no fsync per commit) takes tens
    # of microseconds; handing it to a worker thread costs more than that, in GIL
    # hand-offs that stall the event loop under load, so it runs inline.
    inline = True

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None,
                                     timeout=30.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self.migrate()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        with self._lock:
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(cur, False)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class _Postgres(Database):
    postgres = True

    def __init__(self, conninfo: str, pool_size: int) -> None:
        from psycopg_pool import ConnectionPool

        self._pool = ConnectionPool(conninfo, min_size=1, max_size=max(1, pool_size),
                                    kwargs={"autocommit": True}, open=False)
        self._pool.open(wait=True, timeout=30)
        self.migrate()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield Tx(cur, True)

    def migrate(self) -> None:
        def create(tx: Tx) -> None:
            tx.execute("SELECT pg_advisory_xact_lock(7215480019)")  # one migrator at a time
            for stmt in SCHEMA:
                tx.execute(stmt)
        self.run_sync(create)

    def close(self) -> None:
        self._pool.close()
