"""``threadloom threads``: list, show, history, fork and delete threads in a checkpoint
store (a SQLite file, or PostgreSQL with ``--postgres CONNINFO``).

``show`` and ``history`` read the store directly and need no graph. ``fork`` writes a new
checkpoint whose parent is the chosen one: with ``--graph MODULE:ATTR`` it goes through
``update_state`` (the graph's reducers apply, ``--as-node`` routes); without a graph the
update is written straight through the checkpointer: each key replaces the stored value,
except ``messages``, whose new messages are appended. Either way the next ``run`` of the
thread continues from the fork (the newest checkpoint).
"""

from __future__ import annotations

import copy
import datetime as _dt
import sys
import uuid
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from threadloom.cli_common import CliError, as_graph, dumps, friendly, load_target, parse_json_arg
from threadloom.cli_common import open_checkpointer as _open
from threadloom.cli_run import DEFAULT_DB, require_thread

DEMO_DB = "threadloom-demo.db"  # the demo's default file (see cli_demo)

__all__ = ["threads_app"]

threads_app = typer.Typer(help="Inspect and edit saved threads.", no_args_is_help=True,
                          add_completion=False)

DB = typer.Option(DEFAULT_DB, "--db", help="SQLite checkpoint file")
PG = typer.Option(None, "--postgres", help="PostgreSQL conninfo (instead of --db)")


def _console() -> Console:
    tty = sys.stdout.isatty()
    return Console(width=None if tty else 200, highlight=False, soft_wrap=not tty)


def _store(db: str, postgres: str | None) -> tuple[Any, str]:
    if not postgres and db == DEFAULT_DB and not Path(db).exists() and Path(DEMO_DB).exists():
        # Right after `threadloom demo`, its file is the one a user means.
        typer.echo(f"(no {DEFAULT_DB} here: showing the demo's {DEMO_DB})", err=True)
        db = DEMO_DB
    return _open(db, postgres), ("PostgreSQL" if postgres else repr(db))


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
def list_threads(db: str = DB, postgres: str | None = PG) -> None:
    """Every thread with its checkpoint count, last step, status and next nodes."""
    cp, where = _store(db, postgres)
    table = Table(title=f"threads in {where}")
    for col in ("thread", "checkpoints", "step", "status", "next", "updated"):
        table.add_column(col, no_wrap=col == "thread")
    for thread in cp.list_threads():
        items = list(cp.list(_config(thread)))
        if not items:
            continue
        last = items[0]
        table.add_row(thread, str(len(items)), str(last.metadata.get("step", "")),
                      _status(last), _next(last), str(last.checkpoint.get("ts", ""))[:19])
    if not table.row_count:
        typer.echo(f"no threads in {where}")
        return
    _console().print(table)


@threads_app.command("show")
@friendly
def show(thread: str, checkpoint: str | None = typer.Option(None, "--checkpoint", "-c",
         help="checkpoint id (or a unique prefix); default: the latest"),
         db: str = DB, postgres: str | None = PG) -> None:
    """Print a thread's state (at its latest or the given checkpoint) as JSON."""
    cp, where = _store(db, postgres)
    require_thread(cp, thread, where)
    saved = _find(cp, thread, checkpoint) if checkpoint else cp.get_tuple(_config(thread))
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
            db: str = DB, postgres: str | None = PG) -> None:
    """A thread's checkpoints, newest first: id, step, source, writes, next, time."""
    cp, where = _store(db, postgres)
    require_thread(cp, thread, where)
    table = Table(title=f"history of {thread}")
    for col in ("checkpoint", "step", "source", "wrote", "next", "created_at"):
        table.add_column(col, no_wrap=col == "checkpoint")
    for saved in cp.list(_config(thread), limit=limit):
        writes = saved.metadata.get("writes") or {}
        table.add_row(saved.config["configurable"]["checkpoint_id"],
                      str(saved.metadata.get("step", "")), str(saved.metadata.get("source", "")),
                      ", ".join(writes) if isinstance(writes, dict) else str(writes),
                      _next(saved), str(saved.checkpoint.get("ts", "")))
    _console().print(table)


def _fork_direct(cp: Any, saved: Any, update: dict[str, Any]) -> dict[str, Any]:
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
    return cp.put(saved.config, ck, meta, {k: versions[k] for k in update})


@threads_app.command("fork")
@friendly
def fork(thread: str,
         checkpoint: str = typer.Option(..., "--checkpoint", "-c", help="checkpoint to fork"),
         update: str = typer.Option("{}", "--update", "-u", help="JSON state update or @file"),
         graph: str | None = typer.Option(None, "--graph", metavar="MODULE:ATTR",
                                          help="apply the update with the graph's reducers"),
         as_node: str | None = typer.Option(None, "--as-node", help="with --graph: route as "
                                            "if this node wrote the update"),
         db: str = DB, postgres: str | None = PG) -> None:
    """Fork a thread from a past checkpoint, with a state update."""
    values = parse_json_arg(update, "--update")
    if not isinstance(values, dict):
        raise CliError("--update must be a JSON object of state keys", 2)
    cp, where = _store(db, postgres)
    require_thread(cp, thread, where)
    saved = _find(cp, thread, checkpoint)
    if graph is not None:
        compiled = as_graph(load_target(graph), cp, graph)
        new = compiled.update_state(saved.config, values, as_node=as_node)
    else:
        if as_node is not None:
            raise CliError("--as-node needs --graph (routing needs the graph)", 2)
        known = set(saved.checkpoint["channel_values"])
        unknown = sorted(set(values) - known)
        if unknown:
            raise CliError(
                f"--update names key(s) {unknown} that the thread's state does not hold "
                f"(it holds {sorted(known)}); give --graph MODULE:ATTR so the graph can "
                "check the update against its schema", 2)
        new = _fork_direct(cp, saved, values)
    new_id = new["configurable"]["checkpoint_id"]
    typer.echo(f"forked thread {thread} at {saved.config['configurable']['checkpoint_id']} "
               f"-> new checkpoint {new_id}")


@threads_app.command("delete")
@friendly
def delete(thread: str, db: str = DB, postgres: str | None = PG) -> None:
    """Delete a thread and all its checkpoints."""
    cp, where = _store(db, postgres)
    require_thread(cp, thread, where)
    cp.delete_thread(thread)
    typer.echo(f"deleted thread {thread}")
