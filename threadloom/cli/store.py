"""Opening the checkpoint store a command names (a SQLite file, or PostgreSQL), with
every check that needs no writing made first, and the questions commands ask of it
before they write (``require_thread``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from threadloom.cli.common import CliError, close_when_done

__all__ = ["DEFAULT_DB", "DEMO_DB", "open_checkpointer", "require_thread"]

DEFAULT_DB = "threadloom.db"  # run, resume --graph and threads, unless --db
DEMO_DB = "threadloom-demo.db"  # the demo's file: checkpoints and shop data
SQLITE_MAGIC = b"SQLite format 3\x00"


def open_checkpointer(db: str, postgres: str | None = None, *, must_exist: bool = True,
                      read_only: bool = False, check_only: bool = False) -> Any:
    """Open the SQLite file ``db`` (or PostgreSQL at ``postgres``) as a checkpointer.

    A new file is made only in an existing directory: like ``draw -o``, a ``--db`` in a
    missing directory is refused rather than creating it. ``read_only`` opens an existing
    SQLite file with ``SqliteCheckpointer(read_only=True)`` (it implies ``must_exist``),
    PostgreSQL with ``PostgresCheckpointer(read_only=True)``: nothing is created or
    changed, and a store without threadloom's tables is refused ("... holds no
    threadloom checkpoints"). ``check_only`` makes the checks on the path ``db`` that
    need no opening, then returns None (PostgreSQL: None at once): a command with slow
    work to do before it opens the store (``demo`` starts a model) refuses a bad
    ``--db`` first, without creating the file.

    Raises:
        CliError: ``db`` is empty (exit 2); the file is missing (when ``must_exist``) or
            its directory is, it is a directory, is not a SQLite database, cannot be
            opened, or (``read_only``) holds no threadloom tables of this version; or
            PostgreSQL cannot be used (the message names the masked connection string
            and the reason).
    """
    if postgres:
        return None if check_only else _open_postgres(postgres, read_only)
    from threadloom.checkpoint.sqlite import SqliteCheckpointer

    _check_sqlite_path(db, must_exist or read_only)
    if check_only:
        return None
    from threadloom.engine.errors import CheckpointError

    try:
        cp = SqliteCheckpointer(Path(db), read_only=read_only)
    except CheckpointError as exc:  # read-only: no threadloom tables, or another version
        raise CliError(str(exc)) from exc
    except sqlite3.DatabaseError as exc:
        raise CliError(f"cannot open checkpoint database {db!r}: {exc}") from exc
    return close_when_done(cp)


def _open_postgres(conninfo: str, read_only: bool) -> Any:
    """``PostgresCheckpointer(conninfo)``, its failure as a ``CliError`` naming
    ``--postgres``."""
    try:
        from threadloom.checkpoint.postgres import PostgresCheckpointer
    except ImportError as exc:
        raise CliError(str(exc)) from exc
    from threadloom.engine.errors import CheckpointError

    try:
        pg = PostgresCheckpointer(conninfo, read_only=read_only)
    except CheckpointError as exc:
        raise CliError(f"--postgres: {exc}") from exc
    return close_when_done(pg)


def _check_sqlite_path(db: str, must_exist: bool) -> None:
    """The checks of ``open_checkpointer`` on the path ``db`` that need no opening: not
    empty, not a directory, there (when ``must_exist``) or in an existing directory, and
    a SQLite file (or an empty one, when it may be created)."""
    if not db:
        raise CliError("--db is empty: give the path of a SQLite checkpoint file", 2)
    path = Path(db)
    if path.is_dir():
        raise CliError(f"{db!r} is a directory, not a checkpoint database file")
    if not path.exists():
        if must_exist:
            raise CliError(f"no checkpoint database at {db!r} (run a graph first, or pass "
                           "--db PATH)")
        if not path.parent.is_dir():
            raise CliError(f"cannot create checkpoint database {db!r}: no directory "
                           f"{str(path.parent)!r}")
        return
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise CliError(f"cannot read checkpoint database {db!r}: {exc.strerror}") from exc
    if head and head != SQLITE_MAGIC:
        raise CliError(f"{db!r} is not a SQLite database (unreadable or corrupt file)")
    if not head and must_exist:  # reading must not turn an empty file into a database
        raise CliError(f"{db!r} is empty: no checkpoint database there yet")


def require_thread(cp: Any, thread_id: str, where: str) -> None:
    """Raise ``CliError`` unless ``thread_id`` has checkpoints in ``cp``."""
    if thread_id not in cp.list_threads():
        raise CliError(f"no thread {thread_id!r} in {where}")
