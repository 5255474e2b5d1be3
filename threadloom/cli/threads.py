"""``threadloom threads list|show|history``: read the threads of a checkpoint store (a
SQLite file, or PostgreSQL with ``--postgres CONNINFO``), and the helpers the writing
commands (``threads_edit``) share with them.

They need no graph and never write: the store is opened read-only (a missing SQLite file
is not created; another application's database, SQLite or PostgreSQL, is named and left
as it is, no table added). A thread whose stored data cannot be decoded is listed as
unreadable, naming the checkpoint and what is wrong, and the others are still listed.

Every stored string shown in a table (thread ids, checkpoint ids, node and key names) is
printed literally, never as rich markup; one with a newline or another control character
is shown as its Python ``repr``.
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from threadloom.cli.common import CliError, friendly
from threadloom.cli.render import dumps
from threadloom.cli.store import DEFAULT_DB, Store, choose_store, default_stores, require_thread
from threadloom.errors import CheckpointError

__all__ = ["config_of", "find_checkpoint", "history", "list_threads", "opened", "reading",
           "show"]


DB = typer.Option(None, "--db", help=f"SQLite checkpoint file (default: {DEFAULT_DB} or the "
                                      "demo's file, whichever holds the thread)")


PG = typer.Option(None, "--postgres", help="PostgreSQL conninfo (instead of --db)")


def _console() -> Console:
    tty = sys.stdout.isatty()
    return Console(width=None if tty else 200, highlight=False, soft_wrap=not tty)


@contextmanager
def opened(store: Store, *, read_only: bool) -> Iterator[Any]:
    """The store open for the block.

    ``read_only`` creates and changes nothing, and refuses a store without threadloom's
    tables; writing commands use it first, to check all they can before they write.
    """
    cp = store.open(read_only=read_only)
    try:
        yield cp
    finally:
        cp.close()


@contextmanager
def _reader(db: str | None, postgres: str | None, thread: str) -> Iterator[tuple[Any, Store]]:
    """The store holding ``thread`` (``--db``, ``--postgres`` or the default file that
    holds it), opened read-only."""
    store = choose_store(db, postgres, thread, must_exist=True)
    with opened(store, read_only=True) as cp:
        yield cp, store


def _shown(value: object) -> Text:
    """``value`` as literal table text: no rich markup (``[red]``) or emoji code is read
    in it; a string with a newline or another control character is shown as its repr,
    so it cannot split the row."""
    text = str(value)
    return Text(text if text.isprintable() else repr(text))


def _why(exc: BaseException) -> str:
    """An exception's message with its notes (which name the checkpoint and thread)."""
    notes = [n for n in getattr(exc, "__notes__", ()) if isinstance(n, str)]
    return str(exc) + (f" ({'; '.join(notes)})" if notes else "")


@contextmanager
def reading(thread: str) -> Iterator[None]:
    """Turn a stored record that cannot be decoded into one line naming the thread."""
    try:
        yield
    except CheckpointError as exc:
        raise CliError(f"cannot read thread {thread!r}: {_why(exc)}") from exc


def config_of(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _status(saved: Any) -> str:
    if any(w.channel == "__interrupt__" for w in saved.pending_writes):
        return "interrupted"
    if any(w.channel == "__error__" for w in saved.pending_writes):
        return "error"
    return "pending" if saved.checkpoint.get("next") else "done"


def _when(ts: Any) -> str:
    """A checkpoint time to the second, with its UTC offset: ``2025-01-31 12:00:05+00:00``."""
    try:
        return _dt.datetime.fromisoformat(str(ts)).isoformat(sep=" ", timespec="seconds")
    except ValueError:
        return str(ts) if ts else "-"


def _next(saved: Any) -> str:
    items = saved.checkpoint.get("next") or []
    return ", ".join(i if isinstance(i, str) else f"Send({i.get('node')})" for i in items) or "-"


def find_checkpoint(cp: Any, thread: str, prefix: str) -> Any:
    matches = [t for t in cp.list(config_of(thread))
               if t.config["configurable"]["checkpoint_id"].startswith(prefix)]
    if not matches:
        raise CliError(f"no checkpoint {prefix!r} in thread {thread!r}")
    if len(matches) > 1:
        raise CliError(f"checkpoint prefix {prefix!r} is ambiguous in thread {thread!r} "
                       f"({len(matches)} matches); give more characters")
    return matches[0]


def _table(cp: Any, where: str, unreadable: list[str]) -> Table:
    """The ``threads list`` table of one store; a thread that cannot be decoded gets an
    ``unreadable`` row, and its error is added to ``unreadable``."""
    table = Table(title=Text(f"threads in {where}"))
    for col in ("thread", "checkpoints", "step", "status", "next", "updated"):
        table.add_column(col, no_wrap=col == "thread")
    for thread in cp.list_threads():
        try:
            items = list(cp.list(config_of(thread)))
        except CheckpointError as exc:
            unreadable.append(f"{thread!r}: {_why(exc)}")
            table.add_row(_shown(thread), "?", "?",
                          Text(f"unreadable: {' '.join(str(exc).split())}"), "-", "-")
            continue
        if not items:
            continue
        last = items[0]
        table.add_row(_shown(thread), str(len(items)),
                      _shown(last.metadata.get("step", "")), _status(last),
                      _shown(_next(last)), _shown(_when(last.checkpoint.get("ts"))))
    return table


@friendly
def list_threads(db: str | None = DB, postgres: str | None = PG) -> None:
    """Every thread with its checkpoint count, last step, status and next nodes.

    Without --db, the threads of threadloom.db and of the demo's threadloom-demo.db
    (those of the two that exist), one table each.

    A thread whose stored data cannot be decoded is listed as unreadable; the command
    then ends with one error line naming it (exit 1).
    """
    unreadable: list[str] = []
    for store in default_stores(db, postgres):
        with opened(store, read_only=True) as cp:
            table = _table(cp, store.where, unreadable)
        if table.row_count:
            _console().print(table)
        else:
            typer.echo(f"no threads in {store.where}")
    if len(unreadable) == 1:
        raise CliError(f"cannot read thread {unreadable[0]}")
    if unreadable:
        raise CliError(f"cannot read {len(unreadable)} threads: {' | '.join(unreadable)}")


@friendly
def show(thread: str, checkpoint: str | None = typer.Option(None, "--checkpoint", "-c",
         help="checkpoint id (or a unique prefix); default: the latest"),
         db: str | None = DB, postgres: str | None = PG) -> None:
    """Print a thread's state (at its latest or the given checkpoint) as JSON."""
    with _reader(db, postgres, thread) as (cp, store), reading(thread):
        require_thread(cp, thread, store.looked)
        saved = (find_checkpoint(cp, thread, checkpoint) if checkpoint
                 else cp.get_tuple(config_of(thread)))
    if saved is None:  # its time-to-live ran out: it reads as deleted
        raise CliError(f"no thread {thread!r} in {store.where} (it expired)")
    if store.searched:  # no --db: say which default file held it
        typer.echo(f"(thread {thread} is in {store.where})", err=True)
    interrupts = [w.value for w in saved.pending_writes if w.channel == "__interrupt__"]
    typer.echo(dumps({
        "thread_id": thread,
        "checkpoint_id": saved.config["configurable"]["checkpoint_id"],
        "step": saved.metadata.get("step"),
        "source": saved.metadata.get("source"),
        "created_at": saved.checkpoint.get("ts"),
        "next": saved.checkpoint.get("next") or [],
        "status": _status(saved),
        "interrupts": [{"value": i[0], "id": i[1]} for group in interrupts for i in group or []],
        "values": saved.checkpoint["channel_values"],
    }))


@friendly
def history(thread: str, limit: int | None = typer.Option(None, "--limit", "-n", min=1,
                                                 help="newest N checkpoints"),
            db: str | None = DB, postgres: str | None = PG) -> None:
    """A thread's checkpoints, newest first: id, step, source, writes, next, time (UTC)."""
    with _reader(db, postgres, thread) as (cp, store), reading(thread):
        require_thread(cp, thread, store.looked)
        table = Table(title=Text.assemble("history of ", _shown(thread), f" in {store.where}"))
        for col in ("checkpoint", "step", "source", "wrote", "next", "created_at"):
            table.add_column(col, no_wrap=col == "checkpoint")
        for saved in cp.list(config_of(thread), limit=limit):
            writes = saved.metadata.get("writes") or {}
            table.add_row(_shown(saved.config["configurable"]["checkpoint_id"]),
                          _shown(saved.metadata.get("step", "")),
                          _shown(saved.metadata.get("source", "")),
                          _shown(", ".join(map(str, writes)) if isinstance(writes, dict)
                                 else writes),
                          _shown(_next(saved)), _shown(_when(saved.checkpoint.get("ts"))))
    _console().print(table)
