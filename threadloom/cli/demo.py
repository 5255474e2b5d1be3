"""``threadloom demo``: the demo agent on the embedded defaults, and the demo side of
``threadloom resume``.

Model choice, in order: ``--scripted``; ``--model SPEC`` (``local:smollm2``,
``openai:gpt-4o-mini``, ``ollama:llama3.2``, ``scripted``); the model a resumed thread
used before; ``openai:gpt-4o-mini`` when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set;
else the local model (pulled first, with a progress bar, when it is not cached). When the
local model cannot be had (``xllamacpp`` missing, no file and no network, or the server
does not start), a one-line notice says so and the scripted demo model is used instead.

An OpenAI-compatible model's client is made before the thread starts, so missing
credentials are refused at once; with ``OPENAI_BASE_URL`` set, errors name that URL. A new
thread whose very first model call fails (a wrong model name, no server) is removed again
rather than left behind as an ``error`` thread; a resumed thread is always kept.

The checks come before the file is written: ``--db``'s path, then for ``--resume`` (and
``threadloom resume`` without ``--graph``), read-only, that the thread is there, was
started by the demo and is not waiting for an answer the command does not give, then the
model. A refused command leaves the file as it was, and creates none. A demo that starts
adds its tables (checkpoints ``tl_*``, shop data ``demo_*``) to ``--db``, even to another
application's SQLite file.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from typing import Any

import typer
from rich.console import Console

from threadloom.cli.common import CliError, dumps, friendly, open_checkpointer
from threadloom.cli.run import new_view, require_thread, stream_run
from threadloom.demo import DEFAULT_QUESTION, DemoData, demo_brain
from threadloom.demo.data import demo_thread_model
from threadloom.engine.errors import ModelError

__all__ = ["DEMO_DB", "choose_model", "continue_demo", "demo_command", "require_demo_thread"]

DEMO_DB = "threadloom-demo.db"
LOCAL_DEFAULT = "local:smollm2"
# Generation defaults; they land in LocalChatModel's ``**generation_kwargs``.
LOCAL_KWARGS: dict[str, Any] = {"temperature": 0.2, "max_tokens": 256, "seed": 7}


def _scripted() -> Any:
    from threadloom.models import ScriptedChatModel

    return ScriptedChatModel(demo_brain, name="threadloom-demo-scripted")


def _local(name: str) -> tuple[Any, str | None]:
    """A started ``LocalChatModel``, or ``(None, why not)``."""
    from threadloom.engine.errors import ModelError

    if importlib.util.find_spec("xllamacpp") is None:
        return None, "xllamacpp is not installed (pip install 'threadloom[local]')"
    from threadloom.models.local import LOCAL_MODELS, LocalChatModel, resolve_model

    try:
        resolve_model(name)
    except ModelError as exc:
        if name.lower() not in LOCAL_MODELS:
            return None, str(exc)
        from threadloom.cli import pull_with_progress

        try:
            pull_with_progress(name, Console(stderr=True))
        except ModelError as pull_exc:
            return None, f"model {name!r} is not cached and could not be fetched ({pull_exc})"
    model = LocalChatModel(name, **LOCAL_KWARGS)
    try:
        _ = model.base_url  # starts the llama.cpp server now, not mid-run
    except ModelError as exc:
        return None, f"the llama.cpp server did not start ({exc})"
    return model, None


def choose_model(spec: str | None, scripted: bool = False,
                 remembered: str | None = None) -> tuple[Any, str]:
    """Pick the demo's chat model (see the module doc for the order).

    Returns:
        ``(model, spec)`` where ``spec`` is what was used (``"scripted"`` after a fallback).

    Raises:
        CliError: an explicitly requested local model cannot be had, or a bad spec.
    """
    explicit = "scripted" if scripted else spec
    chosen = explicit or remembered
    if chosen is None:
        env = os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
        chosen = "openai:gpt-4o-mini" if env else LOCAL_DEFAULT
    if chosen == "scripted":
        return _scripted(), "scripted"
    if chosen.startswith("local:"):
        model, why = _local(chosen.partition(":")[2] or "smollm2")
        if model is not None:
            return model, chosen
        if explicit:
            raise CliError(f"{chosen} is not available: {why}")
        typer.echo(f"notice: local model unavailable ({why}); using the scripted demo model",
                   err=True)
        return _scripted(), "scripted"
    return _remote(chosen), chosen


def _remote(spec: str) -> Any:
    """An OpenAI-compatible model for ``spec``, its client made now (no request is sent):
    missing credentials fail here, before a thread is started. With ``OPENAI_BASE_URL``
    set, an ``openai:`` model gets that URL explicitly, so errors name it.

    Raises:
        CliError: an unknown provider or empty name (exit 2), or the client cannot be made.
    """
    from threadloom.engine.errors import ModelError
    from threadloom.models import init_chat_model

    provider, sep, _ = spec.partition(":")
    kwargs: dict[str, Any] = {}
    if (provider == "openai" or not sep) and os.environ.get("OPENAI_BASE_URL"):
        kwargs["base_url"] = os.environ["OPENAI_BASE_URL"]
    try:
        model = init_chat_model(spec, **kwargs)
    except ValueError as exc:
        raise CliError(str(exc), 2) from exc
    try:
        _ = model.client
    except ModelError as exc:
        raise CliError(f"cannot use --model {spec}: {exc}") from exc
    return model


def require_demo_thread(db: str, thread: str, hint: str) -> None:
    """Raise ``CliError`` unless the demo started ``thread`` in ``db``: the demo agent
    must never run on (and overwrite) a thread of another graph. Adds nothing to ``db``.
    """
    if demo_thread_model(db, thread) is None:
        raise CliError(f"thread {thread!r} in {db!r} was not started by the demo; {hint}")


_ANSWERS = {"y": "approve", "yes": "approve", "n": "reject", "no": "reject", "e": "edit",
            "edit": "edit"}


def _decision(approve: bool | None, pending: list[Any]) -> Any | None:
    """The answer to a pending approval: from the flag, the terminal, or None."""
    if approve is True:
        return {"approve": True}
    if approve is False:
        return {"reject": "rejected on the command line"}
    if not sys.stdin.isatty():
        return None
    for item in pending:
        value = getattr(item, "value", item)
        calls = value.get("tool_calls", []) if isinstance(value, dict) else []
        for call in calls:
            args = ", ".join(f"{k}={v!r}" for k, v in call.get("args", {}).items())
            typer.echo(f"approval needed: {call.get('name')}({args})")
        if not calls:
            typer.echo(f"approval needed: {dumps(value, indent=None)}")
    return _ask()


def _ask() -> dict[str, Any]:
    """Ask on the terminal until the answer is y(es), n(o) or e(dit); a typo asks again
    (it must not reject the call by accident)."""
    from threadloom.cli.common import parse_json_arg

    while True:
        answer = typer.prompt("approve? [y]es / [n]o / [e]dit arguments", default="n")
        choice = _ANSWERS.get(answer.strip().lower())
        if choice is not None:
            break
        typer.echo(f"please answer y, n or e (got {answer.strip()!r})", err=True)
    if choice == "approve":
        return {"approve": True}
    if choice == "edit":
        while True:  # a typo should not end the demo: ask again
            try:
                return {"edit": parse_json_arg(typer.prompt("new arguments (JSON)"), "edit")}
            except CliError as exc:
                typer.echo(f"{exc} - try again", err=True)
    return {"reject": typer.prompt("reason", default="rejected by the user")}


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
        decision = _decision(approve, pending)
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
        agent = build_demo_agent(_scripted(), DemoData(db), reader)
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
        _drive(agent, thread, Command(resume=_decision(approve, list(pending))), approve,
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
