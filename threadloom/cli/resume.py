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
from threadloom.cli.status import ThreadState, next_command
from threadloom.cli.store import DEMO_DB, Store, choose_store, open_checkpointer, require_thread
from threadloom.cli.target import as_graph, load_target
from threadloom.cli.view import new_view, stream_run

__all__ = ["resume_command", "resume_payload"]


def _require_waiting_thread(graph: Any, cp: Any, thread_id: str, store: Store,
                            target: str) -> None:
    """Raise ``CliError`` unless ``thread_id`` is in ``cp`` (open read-only, so a refused
    ``resume`` writes nothing) and waits for an answer to an interrupt of ``graph``
    (``target``); else the message says the thread's state and what to type."""
    require_thread(cp, thread_id, store.looked)
    state = ThreadState.of_snapshot(graph.get_state(thread_id=thread_id))
    if state.kind != "paused":
        hint = next_command(state, thread_id, f" --db {store.path}", graph=target)
        raise CliError(f"thread {thread_id!r} has no pending interrupt to answer: it "
                       f"{state}; {hint}")


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
    db: str | None = typer.Option(None, "--db", help="checkpoint file (default: the demo's "
                                  "file, or threadloom.db, whichever holds the thread)"),
    graph: str | None = typer.Option(None, "--graph", metavar="MODULE:ATTR",
                                     help="the graph (default: the demo agent)"),
    model: str | None = typer.Option(None, "--model", help="demo only: model spec"),
) -> None:
    """Answer a pending interrupt (e.g. a tool approval) and continue the run."""
    payload = resume_payload(approve, reject, reason, edit, value)
    if graph is None:
        store = choose_store(db, None, thread, prefer=DEMO_DB, must_exist=True)
        continue_demo(thread, payload, store, model)
        return
    loaded = as_graph(load_target(graph), None, graph)  # all of it before the store
    store = choose_store(db, None, thread, must_exist=True)
    reader = open_checkpointer(store.path, read_only=True)
    try:
        _require_waiting_thread(as_graph(loaded, reader, graph), reader, thread, store, graph)
    finally:
        reader.close()
    compiled = as_graph(loaded, open_checkpointer(store.path), graph)
    from threadloom.types import Command

    typer.echo(f"thread {thread} | db {store.path}")
    stream_run(compiled, Command(resume=payload), thread, new_view())
    report(compiled, thread,
           f"threadloom resume {thread} --value JSON --graph {graph} --db {store.path}")
