"""``threadloom threads``: list, show, history, fork and delete threads in a checkpoint
store (a SQLite file, or PostgreSQL with ``--postgres CONNINFO``).

``show`` and ``history`` read the store directly and need no graph. ``fork`` writes a new
checkpoint whose parent is the chosen one: with ``--graph MODULE:ATTR`` it goes through
``update_state`` (the graph's reducers apply, ``--as-node`` routes); without a graph the
update is written straight through the checkpointer: each key replaces the stored value,
except ``messages``, whose new messages are appended. Either way the next ``run`` of the
thread continues from the fork (the newest checkpoint).

``list``, ``show`` and ``history`` never write: the store is opened read-only (a missing
SQLite file is not created; another application's database, SQLite or PostgreSQL, is
named and left as it is, no table added). A thread whose stored data cannot be decoded is
listed as unreadable, naming the checkpoint and what is wrong, and the others are still
listed. ``fork`` and ``delete`` first check everything read-only (the thread, the
checkpoint, the update), so a refused command leaves the store as it was; only then do
they open it for writing and hold the thread's lease while they write, so no run starts
meanwhile, refusing a thread whose lease a live run holds (it would write on after them).

Every stored string shown in a table (thread ids, checkpoint ids, node and key names) is
printed literally, never as rich markup; one with a newline or another control character
is shown as its Python ``repr``.
"""

from __future__ import annotations

import copy
import datetime as _dt
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from threadloom.checkpoint.leases import LEASE_TOKEN_KEY
from threadloom.cli.common import (
    CliError,
    as_graph,
    dumps,
    friendly,
    load_target,
    parse_json_arg,
)
from threadloom.cli.common import open_checkpointer as _open
from threadloom.cli.run import DEFAULT_DB, require_thread
from threadloom.engine.errors import CheckpointError, ThreadBusyError

DEMO_DB = "threadloom-demo.db"  # the demo's default file (see cli.demo)

LEASE_S = 60.0  # how long fork/delete hold a thread (their write takes well under that)
_OWNER = f"{socket.gethostname()}:{os.getpid()}:cli-{uuid.uuid4().hex[:8]}"  # see leases.py

__all__ = ["hold_thread", "threads_app"]

threads_app = typer.Typer(help="Inspect and edit saved threads.", no_args_is_help=True,
                          add_completion=False)

DB = typer.Option(None, "--db", help=f"SQLite checkpoint file (default: {DEFAULT_DB})")
PG = typer.Option(None, "--postgres", help="PostgreSQL conninfo (instead of --db)")


def _console() -> Console:
    tty = sys.stdout.isatty()
    return Console(width=None if tty else 200, highlight=False, soft_wrap=not tty)


def _sqlite_file(db: str | None, postgres: str | None) -> str:
    """The SQLite file meant (``--db``, else the default or, right after ``threadloom
    demo``, the demo's file); refuses ``--db`` together with ``--postgres``."""
    if postgres and db is not None:
        raise CliError("give --db or --postgres, not both (--db names a SQLite file, "
                       "--postgres a PostgreSQL server)", 2)
    if db is None:
        db = DEFAULT_DB
        if not postgres and not Path(db).exists() and Path(DEMO_DB).exists():
            typer.echo(f"(no {DEFAULT_DB} here: showing the demo's {DEMO_DB})", err=True)
            db = DEMO_DB
    return db


def _where(path: str, postgres: str | None) -> str:
    """How messages name the store."""
    return "PostgreSQL" if postgres else repr(path)


@contextmanager
def _opened(path: str, postgres: str | None, *, read_only: bool) -> Iterator[Any]:
    """The SQLite file ``path`` (or PostgreSQL at ``postgres``) open for the block.

    ``read_only`` creates and changes nothing, and refuses a store without threadloom's
    tables; writing commands use it first, to check all they can before they write.
    """
    cp = _open(path, postgres, read_only=read_only)
    try:
        yield cp
    finally:
        cp.close()


@contextmanager
def _reader(db: str | None, postgres: str | None) -> Iterator[tuple[Any, str]]:
    """The store opened read-only, and how to name it."""
    path = _sqlite_file(db, postgres)
    with _opened(path, postgres, read_only=True) as cp:
        yield cp, _where(path, postgres)


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
def _reading(thread: str) -> Iterator[None]:
    """Turn a stored record that cannot be decoded into one line naming the thread."""
    try:
        yield
    except CheckpointError as exc:
        raise CliError(f"cannot read thread {thread!r}: {_why(exc)}") from exc


@contextmanager
def hold_thread(cp: Any, thread: str, refused: str = "nothing was written") -> Iterator[int | None]:
    """Hold ``thread``'s lease while a command writes it, so that no run starts meanwhile
    (a run waits, then fails with ``ThreadBusyError``). Yields the fencing token (None
    for a checkpointer without leases); the lease is given back on exit.

    Args:
        refused: what the error says was not done, e.g. ``"nothing was deleted"``.

    Raises:
        CliError: a live run (in another process, or elsewhere on PostgreSQL) holds the
            lease; a lease of a process that died on this host does not count.
    """
    if not hasattr(cp, "acquire_lease"):
        yield None
        return
    try:
        token = cp.acquire_lease(thread, _OWNER, LEASE_S)
    except ThreadBusyError as exc:
        raise CliError(f"{exc}; {refused} (wait for the run to end, then try again)") from exc
    try:
        yield token
    finally:
        cp.release_lease(thread, token)


def _config(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
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


def _find(cp: Any, thread: str, prefix: str) -> Any:
    matches = [t for t in cp.list(_config(thread))
               if t.config["configurable"]["checkpoint_id"].startswith(prefix)]
    if not matches:
        raise CliError(f"no checkpoint {prefix!r} in thread {thread!r}")
    if len(matches) > 1:
        raise CliError(f"checkpoint prefix {prefix!r} is ambiguous in thread {thread!r} "
                       f"({len(matches)} matches); give more characters")
    return matches[0]


@threads_app.command("list")
@friendly
def list_threads(db: str | None = DB, postgres: str | None = PG) -> None:
    """Every thread with its checkpoint count, last step, status and next nodes.

    A thread whose stored data cannot be decoded is listed as unreadable; the command
    then ends with one error line naming it (exit 1).
    """
    with _reader(db, postgres) as (cp, where):
        table = Table(title=Text(f"threads in {where}"))
        for col in ("thread", "checkpoints", "step", "status", "next", "updated"):
            table.add_column(col, no_wrap=col == "thread")
        unreadable: list[str] = []
        for thread in cp.list_threads():
            try:
                items = list(cp.list(_config(thread)))
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
    if not table.row_count:
        typer.echo(f"no threads in {where}")
        return
    _console().print(table)
    if len(unreadable) == 1:
        raise CliError(f"cannot read thread {unreadable[0]}")
    if unreadable:
        raise CliError(f"cannot read {len(unreadable)} threads: {' | '.join(unreadable)}")


@threads_app.command("show")
@friendly
def show(thread: str, checkpoint: str | None = typer.Option(None, "--checkpoint", "-c",
         help="checkpoint id (or a unique prefix); default: the latest"),
         db: str | None = DB, postgres: str | None = PG) -> None:
    """Print a thread's state (at its latest or the given checkpoint) as JSON."""
    with _reader(db, postgres) as (cp, where), _reading(thread):
        require_thread(cp, thread, where)
        saved = _find(cp, thread, checkpoint) if checkpoint else cp.get_tuple(_config(thread))
    if saved is None:  # its time-to-live ran out: it reads as deleted
        raise CliError(f"no thread {thread!r} in {where} (it expired)")
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


@threads_app.command("history")
@friendly
def history(thread: str, limit: int | None = typer.Option(None, "--limit", "-n", min=1,
                                                 help="newest N checkpoints"),
            db: str | None = DB, postgres: str | None = PG) -> None:
    """A thread's checkpoints, newest first: id, step, source, writes, next, time (UTC)."""
    table = Table(title=Text.assemble("history of ", _shown(thread)))
    for col in ("checkpoint", "step", "source", "wrote", "next", "created_at"):
        table.add_column(col, no_wrap=col == "checkpoint")
    with _reader(db, postgres) as (cp, where), _reading(thread):
        require_thread(cp, thread, where)
        for saved in cp.list(_config(thread), limit=limit):
            writes = saved.metadata.get("writes") or {}
            table.add_row(_shown(saved.config["configurable"]["checkpoint_id"]),
                          _shown(saved.metadata.get("step", "")),
                          _shown(saved.metadata.get("source", "")),
                          _shown(", ".join(map(str, writes)) if isinstance(writes, dict)
                                 else writes),
                          _shown(_next(saved)), _shown(_when(saved.checkpoint.get("ts"))))
    _console().print(table)


def _fork_direct(cp: Any, saved: Any, update: dict[str, Any],
                 token: int | None) -> dict[str, Any]:
    from threadloom.checkpoint.base import new_checkpoint_id
    from threadloom.messages import convert_to_messages

    ck = copy.copy(saved.checkpoint)
    values = dict(ck["channel_values"])
    versions = dict(ck["channel_versions"])
    top = max(versions.values(), default=0)
    for key, value in update.items():
        if key == "messages":
            new = [m if m.id else m.model_copy(update={"id": str(uuid.uuid4())})
                   for m in convert_to_messages(value)]
            value = list(values.get("messages") or []) + new
        values[key] = value
        versions[key] = top + 1
    ck.update(id=new_checkpoint_id(), channel_values=values, channel_versions=versions,
              ts=_dt.datetime.now(_dt.UTC).isoformat())
    meta = {"source": "fork", "step": int(saved.metadata.get("step", -1)) + 1,
            "writes": {"__fork__": update}, "parents": {}}
    config = saved.config
    if token is not None:  # the write is fenced: refused if the lease was taken meanwhile
        config = {**config, "configurable": {**config["configurable"], LEASE_TOKEN_KEY: token}}
    return cp.put(config, ck, meta, {k: versions[k] for k in update})


@threads_app.command("fork")
@friendly
def fork(thread: str,
         checkpoint: str = typer.Option(..., "--checkpoint", "-c", help="checkpoint to fork"),
         update: str = typer.Option("{}", "--update", "-u", help="JSON state update or @file"),
         graph: str | None = typer.Option(None, "--graph", metavar="MODULE:ATTR",
                                          help="apply the update with the graph's reducers"),
         as_node: str | None = typer.Option(None, "--as-node", help="with --graph: route as "
                                            "if this node wrote the update"),
         db: str | None = DB, postgres: str | None = PG) -> None:
    """Fork a thread from a past checkpoint, with a state update.

    Without --graph each key replaces the stored value; new "messages" are appended.

    With --graph the graph's reducers apply, as in update_state.

    Refused (nothing written) while a live run holds the thread's lease.
    """
    values = parse_json_arg(update, "--update")
    if not isinstance(values, dict):
        raise CliError("--update must be a JSON object of state keys", 2)
    if graph is None and as_node is not None:
        raise CliError("--as-node needs --graph (routing needs the graph)", 2)
    compiled = None if graph is None else as_graph(load_target(graph), None, graph)
    path = _sqlite_file(db, postgres)
    where = _where(path, postgres)
    with _opened(path, postgres, read_only=True) as reader, _reading(thread):
        require_thread(reader, thread, where)
        saved = _find(reader, thread, checkpoint)
    _check_update(saved, values, compiled, graph, as_node)
    cid = saved.config["configurable"]["checkpoint_id"]
    with _opened(path, postgres, read_only=False) as cp, \
            hold_thread(cp, thread, "nothing was forked") as token:
        with _reading(thread):
            saved = cp.get_tuple(saved.config)
        if saved is None:
            raise CliError(f"checkpoint {cid!r} of thread {thread!r} was removed meanwhile "
                           "(pruned, expired or deleted); nothing was forked")
        if compiled is not None:
            new = as_graph(compiled, cp, graph).update_state(saved.config, values,
                                                             as_node=as_node)
        else:
            new = _fork_direct(cp, saved, values, token)
    new_id = new["configurable"]["checkpoint_id"]
    typer.echo(f"forked thread {thread} at {cid} -> new checkpoint {new_id}")


def _check_update(saved: Any, values: dict[str, Any], compiled: Any, graph: str | None,
                  as_node: str | None) -> None:
    """Refuse, before anything is written, an update the fork cannot apply: without a
    graph, keys the checkpoint's state does not hold; with one, keys outside its schema
    or an ``--as-node`` that is not one of its nodes.

    Raises:
        CliError: (exit 2) naming the keys or the node.
    """
    from threadloom.engine.errors import InvalidUpdateError
    from threadloom.engine.types import END, START
    from threadloom.engine.writes import writes_of

    if compiled is None:
        known = set(saved.checkpoint["channel_values"])
        unknown = sorted(set(values) - known)
        if unknown:
            raise CliError(
                f"--update names key(s) {unknown} that the thread's state does not hold "
                f"(it holds {sorted(known)}); give --graph MODULE:ATTR so the graph can "
                "check the update against its schema", 2)
        return
    if as_node is not None and as_node not in compiled.nodes and as_node not in (START, END):
        raise CliError(f"--as-node {as_node!r} is not a node of {graph} (its nodes: "
                       f"{sorted(compiled.nodes)})", 2)
    unknown = sorted(set(values) - set(compiled.channels))
    if unknown:
        raise CliError(f"--update names key(s) {unknown} that the state schema of {graph} "
                       f"does not have (its keys: {sorted(compiled.channels)})", 2)
    try:  # what else the graph checks of an update (e.g. RemoveMessage needs add_messages)
        writes_of(compiled, as_node or "__update__", values, 0)
    except InvalidUpdateError as exc:
        raise CliError(f"--update does not fit {graph}: {exc}", 2) from exc


@threads_app.command("delete")
@friendly
def delete(thread: str, db: str | None = DB, postgres: str | None = PG) -> None:
    """Delete a thread and all its checkpoints.

    Refused (nothing deleted) while a live run holds the thread's lease.
    """
    path = _sqlite_file(db, postgres)
    with _opened(path, postgres, read_only=True) as reader:
        require_thread(reader, thread, _where(path, postgres))
    with _opened(path, postgres, read_only=False) as cp, \
            hold_thread(cp, thread, "nothing was deleted"):
        cp.delete_thread(thread)
    typer.echo(f"deleted thread {thread}")
