"""``threadloom demo``: the demo agent on the embedded defaults, and the demo side of
``threadloom resume`` (``continue_demo``). The model is chosen in ``demo_model``, an
approval asked in ``approval``.

A new thread whose very first model call fails (a wrong model name, no server) is
removed again rather than left behind as an ``error`` thread; a resumed thread is always
kept.

``--resume`` of a thread whose turn was cut short (Ctrl-C, a failed model call)
continues that turn first; a question, when given, then starts the next one. Without
``--db`` the thread is looked for in the demo's file, then in ``threadloom.db``.

The checks come before the file is written: ``--db``'s path, then for ``--resume`` (and
``threadloom resume`` without ``--graph``), read-only, that the thread is there, was
started by the demo and is not waiting for an answer the command does not give, then the
model; a refusal says the thread's state and what to type. A refused command leaves the
file as it was, and creates none. A demo that starts adds its tables (checkpoints
``tl_*``, shop data ``demo_*``) to ``--db``, even to another application's SQLite file.
"""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

import typer

from threadloom.cli.approval import answer_for
from threadloom.cli.common import CliError, friendly
from threadloom.cli.demo_model import choose_model, scripted_model
from threadloom.cli.render import dumps
from threadloom.cli.status import ThreadState, next_command
from threadloom.cli.store import DEMO_DB, Store, choose_store, open_checkpointer, require_thread
from threadloom.cli.view import new_view, stream_run
from threadloom.demo import DEFAULT_QUESTION, DemoData
from threadloom.demo.data import demo_thread_model
from threadloom.errors import ModelError

__all__ = ["continue_demo", "demo_command"]


def _db_flag(db: str) -> str:
    return "" if db == DEMO_DB else f" --db {db}"


def _read_state(db: str, thread: str, looked: str) -> tuple[ThreadState, bool]:
    """The state of ``thread`` in ``db``, read without writing, and whether the demo
    started it (the demo agent must never run on, and overwrite, a thread of another
    graph: such a thread's state is read from its checkpoint alone).

    Raises:
        CliError: ``db`` holds no threadloom checkpoints, or no ``thread`` (``looked``
            names where it was looked for).
    """
    from threadloom.demo.agent import build_demo_agent

    reader = open_checkpointer(db, read_only=True)
    try:
        require_thread(reader, thread, looked)
        if demo_thread_model(db, thread) is None:
            saved = reader.get_tuple({"configurable": {"thread_id": thread}})
            return ThreadState.of_saved(saved), False
        # the model is never called by get_state, and DemoData writes only when queried
        agent = build_demo_agent(scripted_model(), DemoData(db), reader)
        return ThreadState.of_snapshot(agent.get_state(thread_id=thread)), True
    finally:
        reader.close()


def _not_the_demos(thread: str, db: str, state: ThreadState) -> CliError:
    return CliError(f"thread {thread!r} in {db!r} was not started by the demo: it {state}; "
                    f"{next_command(state, thread, f' --db {db}')}")


@friendly
def demo_command(
    question: str | None = typer.Argument(None, help=f"default: {DEFAULT_QUESTION!r}"),
    model: str | None = typer.Option(None, "--model", "-m",
                                     help="local:smollm2, openai:gpt-4o-mini, ollama:NAME, "
                                          "scripted"),
    db: str | None = typer.Option(
        None, "--db", show_default=False,
        help=f"SQLite file: checkpoints and shop data (default: {DEMO_DB}; with --resume, "
             "the default file that holds the thread), in an existing directory; created "
             "when the demo starts. Another application's SQLite file gets the demo's "
             "tables (tl_*, demo_*) added"),
    resume: str | None = typer.Option(None, "--resume", metavar="THREAD_ID",
                                      help="continue this conversation (an interrupted "
                                           "turn first)"),
    approve: bool | None = typer.Option(None, "--approve/--reject",
                                        help="answer approvals without asking"),
    scripted: bool = typer.Option(False, "--scripted", help="use the scripted demo model"),
) -> None:
    """Run the demo shop agent: local model, SQLite checkpoints, streaming, approvals."""
    from threadloom.demo.agent import build_demo_agent

    store = choose_store(db, None, resume, prefer=DEMO_DB, must_exist=resume is not None)
    path, thread = store.path, resume or f"demo-{uuid.uuid4().hex[:8]}"
    state, remembered = ThreadState("unknown"), None
    if resume is None:  # a bad --db is refused before a model is fetched or started
        open_checkpointer(path, must_exist=False, check_only=True)
    else:
        state, ours = _read_state(path, resume, store.looked)
        if not ours:
            raise _not_the_demos(resume, path, state)
        _need_answer(resume, path, state, approve)
        remembered = demo_thread_model(path, resume)
    chat_model, label = choose_model(model, scripted, remembered)
    cp = open_checkpointer(path, must_exist=resume is not None)
    data = DemoData(path)
    data.remember_model(thread, label)
    agent = build_demo_agent(chat_model, data, cp)
    typer.echo(f"threadloom demo | model {label} | thread {thread} | db {path}")
    try:
        _turns(agent, thread, question, approve, path, state)
    except (KeyboardInterrupt, typer.Abort):  # Abort: Ctrl-C at the approval prompt
        _interrupted(agent, thread, path)
    except ModelError as exc:
        if resume is None:
            _drop_if_unanswered(agent, cp, data, thread, exc)
        raise
    _summary(agent, data, thread, _db_flag(path))


def _need_answer(thread: str, db: str, state: ThreadState, approve: bool | None) -> None:
    """Refuse to continue a thread that waits for an approval the command does not give."""
    if state.kind == "paused" and approve is None:
        raise CliError(f"thread {thread} is waiting for an approval: answer it with "
                       f"`threadloom resume {thread} --approve{_db_flag(db)}` (or --reject)")


def _interrupted(agent: Any, thread: str, db: str) -> NoReturn:
    """After Ctrl-C: say where the thread stands and the command that goes on from there
    (continue the cut turn, answer the approval, or ask the next question); exit 130."""
    state = ThreadState.of_snapshot(agent.get_state(thread_id=thread))
    if state.kind == "unknown":
        typer.echo(f"\ninterrupted: nothing of thread {thread} was saved yet", err=True)
    else:
        typer.echo(f"\ninterrupted: thread {thread} keeps its last checkpoint; "
                   f"{next_command(state, thread, _db_flag(db), demo=True)}", err=True)
    raise SystemExit(130)


def _drop_if_unanswered(agent: Any, cp: Any, data: DemoData, thread: str,
                        exc: ModelError) -> None:
    """Delete a new thread whose very first model call failed (a wrong model name, no
    key, no server): it holds only the question, and would stay behind as an ``error``
    thread. Says so in a note on ``exc``. A thread the model answered is kept."""
    messages = agent.get_state(thread_id=thread).values.get("messages") or []
    if any(getattr(m, "type", "") == "ai" for m in messages):
        return
    cp.delete_thread(thread)
    data.forget_thread(thread)
    exc.add_note(f"nothing was saved: the new thread {thread} was removed")


def _turns(agent: Any, thread: str, question: str | None, approve: bool | None, db: str,
           state: ThreadState) -> None:
    """Finish what ``thread`` left open (answer its approval, or continue a turn cut
    short), then ask ``question``: the default one on a new or finished thread, none
    after an open turn unless given. A turn left waiting for an approval no one answered
    here gets no new question."""
    from threadloom.types import Command

    if state.kind == "paused":
        _need_answer(thread, db, state, approve)
        pending = list(agent.get_state(thread_id=thread).interrupts)
        _drive(agent, thread, Command(resume=answer_for(approve, pending)), approve)
    elif state.kind in ("stopped", "failed"):
        typer.echo(f"continuing the interrupted turn of thread {thread} (it {state})")
        _drive(agent, thread, None, approve)
    elif question is None:
        question = DEFAULT_QUESTION
    if question is None or agent.get_state(thread_id=thread).interrupts:
        return
    typer.echo(f"you: {question}")
    _drive(agent, thread, {"messages": [("user", question)]}, approve)


def _drive(agent: Any, thread: str, value: Any, approve: bool | None) -> None:
    """Stream ``value``; answer approvals from the flag or terminal until the turn ends."""
    from threadloom.types import Command

    steps = 0
    while True:
        view = new_view()
        view.steps = steps
        stream_run(agent, value, thread, view)
        steps = view.steps
        pending = list(agent.get_state(thread_id=thread).interrupts)
        if not pending:
            return
        decision = answer_for(approve, pending)
        if decision is None:
            typer.echo(f"thread {thread} is waiting for a human approval (stdin is not a "
                       "terminal, so it was not asked here)")
            return
        typer.echo(f"answer: {dumps(decision, indent=None)}")
        value = Command(resume=decision)


def _summary(agent: Any, data: DemoData, thread: str, db_flag: str) -> None:
    state = agent.get_state(thread_id=thread)
    values = state.values
    usage = values.get("token_usage") or {}
    counts = values.get("tool_call_counts") or {}
    tools = ", ".join(f"{name} x{n}" for name, n in counts.items()) or "none"
    typer.echo("--- summary ---")
    reason = "(paused for approval)" if state.interrupts else values.get("exit_reason")
    typer.echo(f"exit reason: {reason} | agent steps (model calls): {values.get('step_count')} | "
               f"tokens: in {usage.get('input_tokens', 0)} / out {usage.get('output_tokens', 0)}"
               f" / total {usage.get('total_tokens', 0)}")
    typer.echo(f"tool calls: {tools}")
    entries = len(data.audit_rows(thread))
    typer.echo(f"audit log: {entries} {'entry' if entries == 1 else 'entries'} for this thread")
    typer.echo(f"thread: {thread}")
    if state.interrupts:
        typer.echo(f"answer it: threadloom resume {thread} --approve{db_flag}  (or --reject "
                   "\"reason\")")
    else:
        typer.echo(f"resume it: threadloom demo --resume {thread}{db_flag} \"next question\"")
    typer.echo(f"history:   threadloom threads history {thread} --db {data.path}")


def continue_demo(thread: str, payload: Any, store: Store, model: str | None) -> None:
    """Answer a demo thread's pending approval with ``payload`` and finish the turn.

    Raises:
        CliError: missing file or thread, no pending interrupt (the message says the
            thread's state and what to type), or a thread the demo did not start.
    """
    from threadloom.demo.agent import build_demo_agent
    from threadloom.types import Command

    db = store.path
    state, ours = _read_state(db, thread, store.looked)
    if state.kind != "paused":
        hint = next_command(state, thread, _db_flag(db) if ours else f" --db {db}", demo=ours)
        raise CliError(f"thread {thread!r} has no pending interrupt to answer: it {state}; "
                       f"{hint}")
    if not ours:
        raise _not_the_demos(thread, db, state)
    chat_model, label = choose_model(model, False, demo_thread_model(db, thread))
    data = DemoData(db)
    agent = build_demo_agent(chat_model, data, open_checkpointer(db))
    typer.echo(f"threadloom demo | model {label} | thread {thread} | db {db} | answer "
               f"{dumps(payload, indent=None)}")
    _drive(agent, thread, Command(resume=payload), None)
    _summary(agent, data, thread, _db_flag(db))
