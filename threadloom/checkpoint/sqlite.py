"""``SqliteCheckpointer``: the embedded default, one file, stdlib ``sqlite3``, WAL.

Each ``put`` (checkpoint + its blobs) and each ``put_writes`` is one ``BEGIN IMMEDIATE``
transaction, so a crash leaves either all of it or none. The file runs in WAL mode with a
``busy_timeout``: readers never block, writers from other threads and processes queue
instead of failing with "database is locked". Each OS thread gets its own connection.
Async methods run the sync ones in a worker thread (``base.py``), so the event loop never
blocks. Durability: by default ``synchronous=NORMAL``, which in WAL mode survives any
process crash (kill -9 included: committed transactions sit in the WAL, which the OS
keeps) but may lose the last commits on a power cut or kernel panic, never corrupting
the file, as SQLite documents for WAL. ``durability_sync=True`` sets ``synchronous=FULL``:
every commit is fsynced and survives power loss too, at the cost of one fsync (about
2-10 ms on ordinary disks) per checkpoint.

``read_only=True`` opens an existing file with SQLite's ``mode=ro``: no table is created,
the journal mode is left as it is, and nothing is written (``threadloom threads list``,
``show`` and ``history`` open files this way, so pointing them at another application's
database changes nothing). A file without threadloom's tables is refused at once. On a
file in WAL mode SQLite may leave its ``-wal``/``-shm`` side files (empty of data) next
to it; the database file itself is not touched.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.sqlbase import SCHEMA_VERSION, SQLITE, TABLES, Sql, SqlTx
from threadloom.checkpoint.stored import StoredCheckpointer, check_schema
from threadloom.errors import CheckpointError

SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_file_problem(path: str | os.PathLike[str]) -> str | None:
    """What makes the existing file at ``path`` no SQLite database, or None.

    Reads only its 16-byte header: a missing or empty file is no problem (SQLite creates
    it), an unreadable one or another header is (the message names the file). The CLI's
    ``--db`` checks and ``SqliteCheckpointer`` both use it.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot read checkpoint database {str(path)!r}: {exc.strerror}"
    if head and head != SQLITE_MAGIC:
        return f"{str(path)!r} is not a SQLite database (unreadable or corrupt file)"
    return None


class SqliteCheckpointer(StoredCheckpointer):
    """Checkpoints in one SQLite file (as LangGraph's ``SqliteSaver``, plus deltas,
    retention, TTL and leases).

    Args:
        path: the database file (created if missing), or ``":memory:"``.
        durability_sync: fsync every commit (``synchronous=FULL``, survives power loss);
            default False (``NORMAL``, survives process crashes); see the module doc.
        keep_latest: keep only this many newest checkpoints per namespace (None: all).
        busy_timeout_ms: how long a writer waits for the file lock before failing.
        ttl_seconds: default thread time-to-live from its last write (None: forever).
        codec: the closed codec (default: a fresh ``Codec()``).
        cache_size: decoded list values kept for O(delta) reloads.
        read_only: open an existing file without ever writing to it (see the module doc).

    Raises:
        CheckpointError: the file is no SQLite database, a corrupt one (the message names
            it), or not a threadloom database of a supported version;
            with ``read_only``, also: it does not exist or holds no threadloom tables.
        ValueError: ``read_only`` with ``":memory:"``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability_sync: bool = False,
        keep_latest: int | None = None,
        busy_timeout_ms: int = 30_000,
        ttl_seconds: float | None = None,
        codec: Codec | None = None,
        cache_size: int = 256,
        read_only: bool = False,
    ) -> None:
        super().__init__(
            codec=codec, keep_latest=keep_latest, ttl_seconds=ttl_seconds, cache_size=cache_size
        )
        self.path = str(path)
        self.durability_sync = durability_sync
        self.busy_timeout_ms = int(busy_timeout_ms)
        self._sql = Sql(SQLITE)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._shared_lock = threading.RLock() if self.path == ":memory:" else None
        self._pid = os.getpid()
        self._closed = False
        # Connections left open at exit (e.g. one per worker thread) are closed then, so
        # SQLite folds the WAL into the file: the ``.db`` alone holds every thread.
        self._finalizer = weakref.finalize(self, _close_all, self._conns, self._pid)
        self.read_only = read_only
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        """Check the file (read-only) or create/migrate its tables; a file that is no
        SQLite database (or a corrupt one) raises ``CheckpointError`` naming it."""
        if self.path != ":memory:" and (problem := sqlite_file_problem(self.path)):
            raise CheckpointError(f"SqliteCheckpointer: {problem}")
        try:
            if self.read_only:
                self._check_schema()
                return
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            with self._tx(True) as tx:
                tx.migrate()
        except sqlite3.OperationalError:
            raise  # locked, cannot open...: SQLite's own error, as before
        except sqlite3.DatabaseError as exc:  # "database disk image is malformed"...
            raise CheckpointError(
                f"SqliteCheckpointer: cannot open checkpoint database {self.path!r}: {exc}"
            ) from exc

    def _check_schema(self) -> None:
        """Read-only: refuse a missing file, or one without threadloom's current tables."""
        if self.path == ":memory:":
            raise ValueError("read_only needs a file; ':memory:' starts empty")
        if not Path(self.path).is_file():
            raise CheckpointError(f"no SQLite file at {self.path!r}")
        with self._tx(False) as tx:
            names = {r[0] for r in tx.cur.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            check_schema(repr(self.path), TABLES, names, tx.schema_version, SCHEMA_VERSION,
                         "a SQLite database without threadloom's tables")

    def _connect(self) -> sqlite3.Connection:
        read_only = self.read_only
        conn = sqlite3.connect(
            Path(self.path).resolve().as_uri() + "?mode=ro" if read_only else self.path,
            timeout=self.busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
            uri=read_only,
        )
        conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms:d}")
        if not read_only:  # the journal mode is a property of the file: reading leaves it
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {'FULL' if self.durability_sync else 'NORMAL'}")
        conn.execute("PRAGMA foreign_keys = ON")
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise CheckpointError(f"SqliteCheckpointer({self.path!r}) is closed")
        if os.getpid() != self._pid:  # a forked child must not reuse the parent's handles
            self._pid = os.getpid()
            self._local = threading.local()
            with self._conns_lock:
                self._finalizer.detach()
                self._conns = []
                self._finalizer = weakref.finalize(self, _close_all, self._conns, self._pid)
        if self._shared_lock is not None:
            conn = getattr(self, "_shared_conn", None)
            if conn is None:
                conn = self._shared_conn = self._connect()
            return conn
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    @contextmanager
    def _tx(self, write: bool) -> Iterator[Any]:
        if write and self.read_only:
            raise CheckpointError(
                f"SqliteCheckpointer({self.path!r}) was opened read-only; it does not write")
        conn = self._conn()
        lock = self._shared_lock
        if lock is not None:
            lock.acquire()
        try:
            self._begin(conn, "BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield SqlTx(conn.cursor(), self._sql)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            if lock is not None:
                lock.release()

    def _begin(self, conn: sqlite3.Connection, stmt: str) -> None:
        # busy_timeout covers BEGIN IMMEDIATE; this loop only catches the rare SQLITE_BUSY
        # returned without waiting (e.g. while another connection recovers the WAL).
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        delay = 0.005
        while True:
            try:
                conn.execute(stmt)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise CheckpointError(
                        f"SQLite file {self.path!r} stayed locked for {self.busy_timeout_ms} ms"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def integrity_check(self) -> str:
        """``PRAGMA integrity_check``'s answer (``"ok"`` for a healthy file)."""
        rows = self._conn().execute("PRAGMA integrity_check").fetchall()
        return "\n".join(str(r[0]) for r in rows)

    def close(self) -> None:
        """Close every connection this checkpointer opened (in any thread)."""
        self._closed = True
        with self._conns_lock:
            _close_all(self._conns, self._pid)


def _close_all(conns: list[sqlite3.Connection], pid: int) -> None:
    """Close and forget ``conns``; in a forked child (``pid`` is the parent's), leave the
    parent's handles alone."""
    if os.getpid() != pid:
        return
    for conn in conns:
        try:
            conn.close()
        except sqlite3.Error:
            pass
    conns.clear()
