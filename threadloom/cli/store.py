"""Which checkpoint store a command uses (``choose_store``: ``--db``, ``--postgres``, or
the default file that holds the thread), opening it with every check that needs no
writing made first (``open_checkpointer``), and the questions commands ask of it before
they write (``require_thread``).

Without ``--db`` a command looks in the two default files of the working directory:
``threadloom.db`` (where ``run`` writes) and ``threadloom-demo.db`` (where ``demo``
writes). A command naming a thread uses the file that holds it; ``threads list`` lists
both. Every command says which file it read.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

from threadloom.cli.common import CliError, close_when_done

__all__ = ["DEFAULT_DB", "DEMO_DB", "Store", "choose_store", "default_stores",
           "open_checkpointer", "require_thread"]

DEFAULT_DB = "threadloom.db"  # run, resume --graph and threads, unless --db
DEMO_DB = "threadloom-demo.db"  # the demo's file: checkpoints and shop data
DEFAULT_FILES = (DEFAULT_DB, DEMO_DB)


@dataclasses.dataclass(frozen=True)
class Store:
    """The checkpoint store a command uses.

    Attributes:
        path: the SQLite file (ignored with ``postgres``).
        postgres: the PostgreSQL conninfo, or None.
        searched: the default files looked in (those that exist), when no ``--db`` was
            given; empty when the store was named.
    """

    path: str
    postgres: str | None = None
    searched: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """How messages name the store: ``'c.db'`` or ``PostgreSQL``."""
        return "PostgreSQL" if self.postgres else repr(self.path)

    @property
    def looked(self) -> str:
        """Where a thread was looked for: ``'threadloom.db' or 'threadloom-demo.db'``
        when both default files were searched, else ``where``."""
        if len(self.searched) > 1:
            return " or ".join(repr(f) for f in self.searched)
        return self.where

    def open(self, *, must_exist: bool = True, read_only: bool = False) -> Any:
        """``open_checkpointer`` on this store."""
        return open_checkpointer(self.path, self.postgres, must_exist=must_exist,
                                 read_only=read_only)


def _holds(path: str, thread: str) -> bool:
    """Whether the SQLite file ``path`` holds ``thread``, read without writing (a file that
    is not threadloom's holds none)."""
    try:
        reader = open_checkpointer(path, read_only=True)
    except CliError:
        return False
    try:
        return thread in reader.list_threads()
    finally:
        reader.close()


def choose_store(db: str | None, postgres: str | None = None, thread: str | None = None,
                 *, prefer: str = DEFAULT_DB, must_exist: bool = False) -> Store:
    """The store a command uses: ``--postgres``, ``--db``, else a default file.

    Without ``--db``: the default file that holds ``thread`` (``prefer`` looked in
    first); else ``prefer`` for a command that may create it (``must_exist`` False), or
    the one default file that exists.

    Raises:
        CliError: ``--db`` together with ``--postgres`` (exit 2); with ``must_exist`` and
            no ``--db``: no default file exists, or both do and neither holds ``thread``.
    """
    if postgres and db is not None:
        raise CliError("give --db or --postgres, not both (--db names a SQLite file, "
                       "--postgres a PostgreSQL server)", 2)
    if postgres or db is not None:
        return Store(db or "", postgres)
    order = (prefer, *(f for f in DEFAULT_FILES if f != prefer))
    existing = tuple(f for f in order if Path(f).is_file())
    if thread is not None:
        for path in existing:
            if _holds(path, thread):
                return Store(path, None, existing)
    if not must_exist:
        return Store(prefer, None, existing)
    if not existing:
        raise CliError(f"no checkpoint database at {' or '.join(map(repr, order))} (run a "
                       "graph or the demo first, or pass --db PATH)")
    store = Store(existing[0], None, existing)
    if thread is not None and len(existing) > 1:
        raise CliError(f"no thread {thread!r} in {store.looked}")
    return store


def default_stores(db: str | None, postgres: str | None = None) -> list[Store]:
    """The stores a command over all threads reads: the one named, else every default
    file that exists (``threadloom.db`` first).

    Raises:
        CliError: as ``choose_store``; no default file exists.
    """
    if postgres or db is not None:
        return [choose_store(db, postgres)]
    first = choose_store(None, must_exist=True)
    return [Store(path, None, first.searched) for path in first.searched]


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
    from threadloom.errors import CheckpointError

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
    from threadloom.errors import CheckpointError

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
    from threadloom.checkpoint.sqlite import sqlite_file_problem

    if problem := sqlite_file_problem(db):
        raise CliError(problem)
    if must_exist and path.stat().st_size == 0:  # reading must not make it a database
        raise CliError(f"{db!r} is empty: no checkpoint database there yet")


def require_thread(cp: Any, thread_id: str, where: str) -> None:
    """Raise ``CliError`` unless ``thread_id`` has checkpoints in ``cp``."""
    if thread_id not in cp.list_threads():
        raise CliError(f"no thread {thread_id!r} in {where}")
