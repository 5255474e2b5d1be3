"""``threadloom run`` (any user graph, streamed) and ``threadloom resume`` (answer a
pending interrupt).

Both check all they can before the checkpoint file is opened for writing: the JSON
arguments, the graph (imported, built and compiled), and, read-only, the thread (for
``resume`` that it exists and waits for an answer; for ``run --thread`` that another graph
did not make it). A command refused on the way leaves the file as it was, and creates none.
A ``run`` that starts adds threadloom's tables to the file, even one of another
application (``--db`` says so).
"""

from __future__ import annotations

import asyncio
import enum
import sys
import uuid
from pathlib import Path
from typing import Any

import typer

from threadloom.cli.common import (
    CliError,
    as_graph,
    dumps,
    friendly,
    load_target,
    open_checkpointer,
    parse_json_arg,
)
from threadloom.cli.view import RunView

__all__ = ["DEFAULT_DB", "require_thread", "resume_command", "run_command", "stream_run"]

DEFAULT_DB = "threadloom.db"


class StreamMode(enum.StrEnum):
    """What ``threadloom run`` prints in full besides node names and tokens (the graph's
    stream modes of the same names; ``custom`` events are always printed)."""

    updates = "updates"
    values = "values"
    messages = "messages"
    custom = "custom"
    debug = "debug"
    checkpoints = "checkpoints"


def stream_run(graph: Any, value: Any, thread_id: str, view: RunView,
               extra_modes: tuple[str, ...] = (), config: dict[str, Any] | None = None) -> None:
    """Stream one run of ``graph`` on ``thread_id`` into ``view`` (updates, messages and
    debug, whose task events give the view each node's super-step).

    The run goes through ``astream`` under ``asyncio.run``, so Ctrl-C cancels the running
    nodes cleanly (the thread keeps its last checkpoint) and then raises
    ``KeyboardInterrupt`` here.
    """
    base = ("updates", "messages", "debug")
    modes = [*base, *[m for m in extra_modes if m not in base]]

    async def consume() -> None:
        with view:
            async for mode, chunk in graph.astream(value, config, thread_id=thread_id,
                                                   stream_mode=modes):
                view.handle(mode, chunk)

    asyncio.run(consume())


def require_thread(cp: Any, thread_id: str, where: str) -> None:
    """Raise ``CliError`` unless ``thread_id`` has checkpoints in ``cp``."""
    if thread_id not in cp.list_threads():
        raise CliError(f"no thread {thread_id!r} in {where}")


def _require_waiting_thread(graph: Any, cp: Any, thread_id: str, where: str) -> None:
    """Raise ``CliError`` unless ``thread_id`` is in ``cp`` (open read-only, so a refused
    ``resume`` writes nothing) and waits for an answer to an interrupt of ``graph``."""
    require_thread(cp, thread_id, where)
    if not graph.get_state(thread_id=thread_id).interrupts:
        raise CliError(f"thread {thread_id!r} has no pending interrupt to answer")


def new_view(show: str = "messages") -> RunView:
    """A ``RunView`` on stdout (progress redrawn in place on a terminal)."""
    tty = sys.stdout.isatty()
    return RunView(sys.stdout, show=show, tty=tty, quiet_s=2.0 if tty else 5.0)


def _report(graph: Any, thread_id: str, resume_hint: str) -> None:
    state = graph.get_state(thread_id=thread_id)
    if state.interrupts:
        typer.echo(f"thread {thread_id} is waiting; answer with: {resume_hint}")
        return
    if state.next:
        typer.echo(f"thread {thread_id} stopped before: {', '.join(state.next)}")
        return
    typer.echo(f"final state: {dumps(state.values, indent=None)}")
    count = len(list(graph.get_state_history(thread_id=thread_id)))
    typer.echo(f"thread {thread_id} finished ({count} checkpoints)")


@friendly
def run_command(
    target: str = typer.Argument(..., metavar="MODULE:ATTR",
                                 help="a StateGraph or CompiledGraph, e.g. app.graphs:graph"),
    input_: str = typer.Option("{}", "--input", "-i",
                               help="JSON input, @file.json, or null to continue the thread"),
    thread: str | None = typer.Option(None, "--thread", "-t", help="thread id (default: new)"),
    stream_mode: StreamMode = typer.Option(
        StreamMode.updates, "--stream-mode", "-s",
        help="what to print in full besides steps/tokens: updates (each node's update), "
             "values (the state after each step), messages (tokens only), custom, debug "
             "(task starts/results and checkpoints), checkpoints (each saved checkpoint)"),
    db: str = typer.Option(DEFAULT_DB, "--db",
                           help="SQLite checkpoint file, in an existing directory; created "
                                "when the run starts. Another application's SQLite file "
                                "is used too: threadloom adds its tables (tl_*) to it"),
    recursion_limit: int | None = typer.Option(None, "--recursion-limit", min=1),
) -> None:
    """Run a graph with SQLite checkpoints, streaming its steps and tokens."""
    value = parse_json_arg(input_, "--input")
    graph = as_graph(load_target(target), None, target)  # all of it before the store
    thread_id = thread or f"run-{uuid.uuid4().hex[:8]}"
    looked = thread is not None and _check_own_thread(graph, thread_id, db)
    cp = open_checkpointer(db, must_exist=False)
    graph = as_graph(graph, cp, target)
    if thread is not None and not looked:
        _require_own_thread(graph, cp, thread_id, db)
    typer.echo(f"thread {thread_id} | db {db}")
    config = {"recursion_limit": recursion_limit} if recursion_limit else None
    try:
        stream_run(graph, value, thread_id, new_view(stream_mode.value), (stream_mode.value,),
                   config)
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: thread {thread_id} keeps its last checkpoint; continue "
                   f"with: threadloom run {target} --thread {thread_id} --input null "
                   f"--db {db}", err=True)
        raise SystemExit(130) from None
    _report(graph, thread_id,
            f"threadloom resume {thread_id} --value JSON --graph {target} --db {db}")


def _check_own_thread(graph: Any, thread_id: str, db: str) -> bool:
    """``_require_own_thread`` on ``db`` opened read-only, before the run opens it for
    writing. Returns False when it could not look: no file yet, or one that cannot be
    read-only opened as threadloom's (another application's, an older schema version,
    damaged), which the run's own opening then adds tables to, upgrades or reports.
    """
    if not db or not Path(db).is_file():
        return False
    try:
        reader = open_checkpointer(db, read_only=True)
    except CliError:
        return False
    try:
        _require_own_thread(graph, reader, thread_id, db)
    finally:
        reader.close()
    return True


def _require_own_thread(graph: Any, cp: Any, thread_id: str, db: str) -> None:
    """Raise ``CliError`` when ``thread_id`` was made by another graph: its latest
    checkpoint holds state keys this graph does not have, or waits for a node it does not
    have. Running on it would drop that state (and a pending interrupt) from the thread's
    latest checkpoint.
    """
    saved = cp.get_tuple({"configurable": {"thread_id": thread_id}})
    if saved is None:
        return
    state = saved.checkpoint.get("channel_values", {})
    keys = sorted(k for k in state if k not in graph.channels)
    waiting = [n if isinstance(n, str) else n.get("node") for n in saved.checkpoint.get("next", [])]
    nodes = sorted({str(n) for n in waiting if n not in graph.nodes})
    if not keys and not nodes:
        return
    what = f"state keys {keys}" if keys else f"node(s) {nodes} to run next"
    raise CliError(f"thread {thread_id!r} in {db!r} was made by another graph (it holds "
                   f"{what}, which this graph does not have); use another --thread, or "
                   f"delete it first: threadloom threads delete {thread_id} --db {db}")


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
        from threadloom.cli.demo import DEMO_DB, continue_demo

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
    _report(compiled, thread, f"threadloom resume {thread} --value JSON --graph {graph} --db {db}")
