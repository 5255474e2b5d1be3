"""``threadloom resume``: answer a thread's pending interrupt (``--approve``,
``--reject [REASON]``, ``--edit JSON``, ``--value JSON``) and continue the run.

Without ``--graph`` the thread is the demo's (see ``threadloom.cli.demo``); with it, any
graph's. Everything is checked, read-only, before the file is opened for writing: the
answer, the graph, and that the thread exists and waits for an answer.
"""

from __future__ import annotations

from typing import Any

import typer

from threadloom.cli.common import CliError, friendly, parse_json_arg
from threadloom.cli.demo import continue_demo
from threadloom.cli.run import report
from threadloom.cli.store import DEFAULT_DB, DEMO_DB, open_checkpointer, require_thread
from threadloom.cli.target import as_graph, load_target
from threadloom.cli.view import new_view, stream_run

__all__ = ["resume_command", "resume_payload"]


def _require_waiting_thread(graph: Any, cp: Any, thread_id: str, where: str) -> None:
    """Raise ``CliError`` unless ``thread_id`` is in ``cp`` (open read-only, so a refused
    ``resume`` writes nothing) and waits for an answer to an interrupt of ``graph``."""
    require_thread(cp, thread_id, where)
    if not graph.get_state(thread_id=thread_id).interrupts:
        raise CliError(f"thread {thread_id!r} has no pending interrupt to answer")


def resume_payload(approve: bool, reject: bool, reason: str | None, edit: str | None,
                   value: str | None) -> Any:
    """The ``Command(resume=...)`` value for the chosen answer (exactly one is allowed).

    Raises:
        CliError: (exit 2) none or several answers, or invalid JSON.
    """
    chosen = [n for n, on in (("--approve", approve), ("--reject", reject),
                              ("--edit", edit is not None), ("--value", value is not None)) if on]
    if len(chosen) != 1:
        raise CliError("give exactly one of --approve, --reject [REASON], --edit JSON, "
                       f"--value JSON (got {', '.join(chosen) or 'none'})", 2)
    if reason is not None and not reject:
        raise CliError(f"unexpected argument {reason!r} (a REASON goes with --reject)", 2)
    if approve:
        return {"approve": True}
    if reject:
        return {"reject": reason or "rejected by the user"}
    if edit is not None:
        return {"edit": parse_json_arg(edit, "--edit")}
    return parse_json_arg(value or "null", "--value")


@friendly
def resume_command(
    thread: str = typer.Argument(..., help="the paused thread"),
    reason: str | None = typer.Argument(None, help="why, with --reject"),
    approve: bool = typer.Option(False, "--approve", help="approve the pending tool calls"),
    reject: bool = typer.Option(False, "--reject", help="reject them (REASON optional)"),
    edit: str | None = typer.Option(None, "--edit", help="JSON: run with these arguments"),
    value: str | None = typer.Option(None, "--value", help="JSON answer for any interrupt"),
    db: str | None = typer.Option(None, "--db", help="checkpoint file (default: the demo's)"),
    graph: str | None = typer.Option(None, "--graph", metavar="MODULE:ATTR",
                                     help="the graph (default: the demo agent)"),
    model: str | None = typer.Option(None, "--model", help="demo only: model spec"),
) -> None:
    """Answer a pending interrupt (e.g. a tool approval) and continue the run."""
    payload = resume_payload(approve, reject, reason, edit, value)
    if graph is None:
        continue_demo(thread, payload, db or DEMO_DB, model)
        return
    db = db or DEFAULT_DB
    loaded = as_graph(load_target(graph), None, graph)  # all of it before the store
    reader = open_checkpointer(db, read_only=True)
    try:
        _require_waiting_thread(as_graph(loaded, reader, graph), reader, thread, repr(db))
    finally:
        reader.close()
    compiled = as_graph(loaded, open_checkpointer(db), graph)
    from threadloom.engine.types import Command

    stream_run(compiled, Command(resume=payload), thread, new_view())
    report(compiled, thread, f"threadloom resume {thread} --value JSON --graph {graph} --db {db}")
