"""``threadloom run``: any user graph (``MODULE:ATTR``), streamed, with SQLite
checkpoints.

It checks all it can before the checkpoint file is opened for writing: the JSON input,
the graph (imported, built and compiled), and, read-only, that another graph did not
make the ``--thread`` it names. A command refused on the way leaves the file as it was,
and creates none. A run that starts adds threadloom's tables to the file, even one of
another application (``--db`` says so).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from pathlib import Path
from typing import Any

import typer

from threadloom.cli.common import CliError, friendly, parse_json_arg
from threadloom.cli.render import dumps
from threadloom.cli.status import ThreadState, next_command
from threadloom.cli.store import DEFAULT_DB, choose_store, open_checkpointer
from threadloom.cli.target import as_graph, load_target
from threadloom.cli.view import new_view, stream_run

__all__ = ["StreamMode", "report", "run_command"]


class StreamMode(enum.StrEnum):
    """What ``threadloom run`` prints in full besides node names and tokens (the graph's
    stream modes of the same names; ``custom`` events are always printed)."""

    updates = "updates"
    values = "values"
    messages = "messages"
    custom = "custom"
    debug = "debug"
    checkpoints = "checkpoints"


def report(graph: Any, thread_id: str, resume_hint: str) -> None:
    """Print how a run of ``graph`` on ``thread_id`` ended: waiting for an answer (with
    ``resume_hint``, the command that gives it), stopped before nodes, or finished (its
    final state and checkpoint count)."""
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
    target: str = typer.Argument(
        ..., metavar="MODULE:ATTR",
        help="a StateGraph or CompiledGraph, e.g. app.graphs:graph. MODULE is imported "
             "(its top-level code runs) and the graph's nodes run: name only code you trust"),
    input_: str | None = typer.Option(
        None, "--input", "-i", show_default=False,
        help="JSON input or @file.json (default {}: a new run), or null to continue the "
             "thread; needed on a thread that is paused or has not finished"),
    thread: str | None = typer.Option(None, "--thread", "-t", help="thread id (default: new)"),
    stream_mode: StreamMode = typer.Option(
        StreamMode.updates, "--stream-mode", "-s",
        help="what to print in full besides steps/tokens: updates (each node's update), "
             "values (the state after each step), messages (tokens only), custom, debug "
             "(task starts/results and checkpoints), checkpoints (each saved checkpoint)"),
    db: str | None = typer.Option(
        None, "--db", show_default=False,
        help=f"SQLite checkpoint file, in an existing directory; created when the run "
             f"starts (default: {DEFAULT_DB}, or the demo's file when it holds --thread). "
             "Another application's SQLite file is used too: threadloom adds its tables "
             "(tl_*) to it"),
    recursion_limit: int | None = typer.Option(None, "--recursion-limit", min=1),
) -> None:
    """Run a graph with SQLite checkpoints, streaming its steps and tokens.

    This imports MODULE and runs your code: its top-level statements, a factory ATTR
    names, and every node of the graph. Use it only on code you trust.
    """
    value = {} if input_ is None else parse_json_arg(input_, "--input")
    graph = as_graph(load_target(target), None, target)  # all of it before the store
    thread_id = thread or f"run-{uuid.uuid4().hex[:8]}"
    path = choose_store(db, None, thread).path
    check = _ThreadCheck(target, thread_id, path, input_ is not None)
    looked = thread is not None and check.read_only(graph)
    cp = open_checkpointer(path, must_exist=False)
    graph = as_graph(graph, cp, target)
    if thread is not None and not looked:
        check.on(graph, cp)
    typer.echo(f"thread {thread_id} | db {path}")
    config = {"recursion_limit": recursion_limit} if recursion_limit else None
    try:
        stream_run(graph, value, thread_id, new_view(stream_mode.value), (stream_mode.value,),
                   config)
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: thread {thread_id} keeps its last checkpoint; continue "
                   f"with: threadloom run {target} --thread {thread_id} --input null "
                   f"--db {path}", err=True)
        raise SystemExit(130) from None
    report(graph, thread_id,
           f"threadloom resume {thread_id} --value JSON --graph {target} --db {path}")


@dataclasses.dataclass(frozen=True)
class _ThreadCheck:
    """What ``run --thread`` checks of an existing thread before it runs: that this graph
    made it (``_require_own_thread``) and, without ``--input``, that it is not paused or
    unfinished (a new run would leave that behind without a word)."""

    target: str
    thread_id: str
    db: str
    input_given: bool

    def read_only(self, graph: Any) -> bool:
        """The checks on ``db`` opened read-only, before the run opens it for writing.
        Returns False when it could not look: no file yet, or one that cannot be
        read-only opened as threadloom's (another application's, an older schema
        version, damaged), which the run's own opening then adds tables to, upgrades or
        reports.
        """
        if not self.db or not Path(self.db).is_file():
            return False
        try:
            reader = open_checkpointer(self.db, read_only=True)
        except CliError:
            return False
        try:
            self.on(as_graph(graph, reader, self.target), reader)
        finally:
            reader.close()
        return True

    def on(self, graph: Any, cp: Any) -> None:
        """The checks with ``graph`` compiled on the open store ``cp``.

        Raises:
            CliError: another graph made the thread; or, without ``--input``, it is
                paused, failed or stopped (the message says which, and what to type).
        """
        _require_own_thread(graph, cp, self.thread_id, self.db)
        if self.input_given:
            return
        state = ThreadState.of_snapshot(graph.get_state(thread_id=self.thread_id))
        if state.kind == "finished":
            typer.echo(f"(thread {self.thread_id} {state}: this run starts on its state "
                       "with input {})", err=True)
        elif state.kind != "unknown":
            hint = next_command(state, self.thread_id, f" --db {self.db}", graph=self.target)
            raise CliError(f"thread {self.thread_id!r} {state}: {hint} (or give --input "
                           "JSON to start a new run on it)")


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
