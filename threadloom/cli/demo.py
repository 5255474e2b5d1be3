"""``threadloom demo``: the demo agent on the embedded defaults, and the demo side of
``threadloom resume`` (``continue_demo``). The model is chosen in ``demo_model``, an
approval asked in ``approval``.

A new thread whose very first model call fails (a wrong model name, no server) is
removed again rather than left behind as an ``error`` thread; a resumed thread is always
kept.

The checks come before the file is written: ``--db``'s path, then for ``--resume`` (and
``threadloom resume`` without ``--graph``), read-only, that the thread is there, was
started by the demo and is not waiting for an answer the command does not give, then the
model. A refused command leaves the file as it was, and creates none. A demo that starts
adds its tables (checkpoints ``tl_*``, shop data ``demo_*``) to ``--db``, even to another
application's SQLite file.
"""

from __future__ import annotations

import uuid
from typing import Any

import typer

from threadloom.cli.approval import answer_for
from threadloom.cli.common import CliError, friendly
from threadloom.cli.demo_model import choose_model, scripted_model
from threadloom.cli.render import dumps
from threadloom.cli.store import DEMO_DB, open_checkpointer, require_thread
from threadloom.cli.view import new_view, stream_run
from threadloom.demo import DEFAULT_QUESTION, DemoData
from threadloom.demo.data import demo_thread_model
from threadloom.engine.errors import ModelError

__all__ = ["continue_demo", "demo_command", "require_demo_thread"]


def require_demo_thread(db: str, thread: str, hint: str) -> None:
    """Raise ``CliError`` unless the demo started ``thread`` in ``db``: the demo agent
    must never run on (and overwrite) a thread of another graph. Adds nothing to ``db``.
    """
    if demo_thread_model(db, thread) is None:
        raise CliError(f"thread {thread!r} in {db!r} was not started by the demo; {hint}")


def _drive(agent: Any, thread: str, value: Any, approve: bool | None, db_flag: str) -> None:
    """Stream ``value``; answer approvals from the flag or terminal until the turn ends."""
    from threadloom.engine.types import Command

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


def _db_flag(db: str) -> str:
    return "" if db == DEMO_DB else f" --db {db}"


@friendly
def demo_command(
    question: str | None = typer.Argument(None, help=f"default: {DEFAULT_QUESTION!r}"),
    model: str | None = typer.Option(None, "--model", "-m",
                                     help="local:smollm2, openai:gpt-4o-mini, ollama:NAME, "
                                          "scripted"),
    db: str = typer.Option(DEMO_DB, "--db", help="SQLite file: checkpoints and shop data, "
                                                "in an existing directory; created when "
                                                "the demo starts. Another application's "
                                                "SQLite file gets the demo's tables (tl_*, "
                                                "demo_*) added"),
    resume: str | None = typer.Option(None, "--resume", metavar="THREAD_ID",
                                      help="continue this conversation"),
    approve: bool | None = typer.Option(None, "--approve/--reject",
                                        help="answer approvals without asking"),
    scripted: bool = typer.Option(False, "--scripted", help="use the scripted demo model"),
) -> None:
    """Run the demo shop agent: local model, SQLite checkpoints, streaming, approvals."""
    from threadloom.demo.agent import build_demo_agent

    thread = resume or f"demo-{uuid.uuid4().hex[:8]}"
    remembered = None
    if resume is None:  # a bad --db is refused before a model is fetched or started
        open_checkpointer(db, must_exist=False, check_only=True)
    else:
        pending = _waiting(db, resume, f"continue it with `threadloom run MODULE:ATTR "
                                       f"--thread {resume} --db {db}`")
        _need_answer(resume, db, pending, approve)
        remembered = demo_thread_model(db, resume)
    chat_model, label = choose_model(model, scripted, remembered)
    cp = open_checkpointer(db, must_exist=resume is not None)
    data = DemoData(db)
    data.remember_model(thread, label)
    agent = build_demo_agent(chat_model, data, cp)
    typer.echo(f"threadloom demo | model {label} | thread {thread} | db {db}")
    pending = agent.get_state(thread_id=thread).interrupts if resume else ()
    try:
        _turns(agent, thread, question, approve, db, pending)
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: thread {thread} keeps its last checkpoint; continue with: "
                   f"threadloom demo --resume {thread}{_db_flag(db)}", err=True)
        raise SystemExit(130) from None
    except ModelError as exc:
        if resume is None:
            _drop_if_unanswered(agent, cp, data, thread, exc)
        raise
    _summary(agent, data, thread, _db_flag(db))


def _waiting(db: str, thread: str, hint: str) -> tuple[Any, ...]:
    """The pending interrupts of the demo's ``thread`` in ``db``, read without writing.

    Raises:
        CliError: ``db`` holds no threadloom checkpoints or no ``thread``, or the demo did
            not start it (``hint`` says what to do then).
    """
    from threadloom.demo.agent import build_demo_agent

    reader = open_checkpointer(db, read_only=True)
    try:
        require_thread(reader, thread, repr(db))
        require_demo_thread(db, thread, hint)
        # the model is never called by get_state, and DemoData writes only when queried
        agent = build_demo_agent(scripted_model(), DemoData(db), reader)
        return tuple(agent.get_state(thread_id=thread).interrupts)
    finally:
        reader.close()


def _need_answer(thread: str, db: str, pending: Any, approve: bool | None) -> None:
    """Refuse to continue a thread that waits for an approval the command does not give."""
    if pending and approve is None:
        raise CliError(f"thread {thread} is waiting for an approval: answer it with "
                       f"`threadloom resume {thread} --approve{_db_flag(db)}` (or --reject)")


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
           pending: Any) -> None:
    from threadloom.engine.types import Command

    if pending:
        _need_answer(thread, db, pending, approve)
        _drive(agent, thread, Command(resume=answer_for(approve, list(pending))), approve,
               _db_flag(db))
    if question is not None or not pending:
        question = question or DEFAULT_QUESTION
        typer.echo(f"you: {question}")
        _drive(agent, thread, {"messages": [("user", question)]}, approve, _db_flag(db))


def continue_demo(thread: str, payload: Any, db: str, model: str | None) -> None:
    """Answer a demo thread's pending approval with ``payload`` and finish the turn.

    Raises:
        CliError: missing file or thread, or no pending interrupt.
    """
    from threadloom.demo.agent import build_demo_agent
    from threadloom.engine.types import Command

    if not _waiting(db, thread, f"answer it with `threadloom resume {thread} --graph "
                                f"MODULE:ATTR --db {db}`"):
        raise CliError(f"thread {thread!r} has no pending interrupt to answer")
    chat_model, label = choose_model(model, False, demo_thread_model(db, thread))
    data = DemoData(db)
    agent = build_demo_agent(chat_model, data, open_checkpointer(db))
    typer.echo(f"threadloom demo | model {label} | thread {thread} | answer "
               f"{dumps(payload, indent=None)}")
    _drive(agent, thread, Command(resume=payload), None, _db_flag(db))
    _summary(agent, data, thread, _db_flag(db))
