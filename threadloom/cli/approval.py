"""Asking for a demo approval: the answer from ``--approve``/``--reject``, or from the
person at the terminal (``y``/``n``/``e``; anything else asks again), or none when stdin
is not a terminal.

The terminal is read so that Ctrl-C stops the prompt at once: the process has worker
threads by then, and a SIGINT the kernel hands to one of them would not interrupt a main
thread blocked in ``input()`` until Enter was pressed.
"""

from __future__ import annotations

import os
import select
import sys
from typing import Any

import typer

from threadloom.cli.common import CliError, parse_json_arg
from threadloom.cli.render import dumps

__all__ = ["answer_for"]


_ANSWERS = {"y": "approve", "yes": "approve", "n": "reject", "no": "reject", "e": "edit",
            "edit": "edit"}


def answer_for(approve: bool | None, pending: list[Any]) -> Any | None:
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


def _prompt(text: str, default: str | None = None) -> str:
    """``typer.prompt(text, default=default)``, reading the terminal in short waits so a
    pending Ctrl-C is seen within a quarter second whichever thread received it.

    Raises:
        typer.Abort: end of input (Ctrl-D).
    """
    if os.name == "nt":  # no select() on a console: typer's own prompt
        return str(typer.prompt(text, default=default))
    shown = f"{text} [{default}]: " if default is not None else f"{text}: "
    while True:
        typer.echo(shown, nl=False)
        while not select.select([sys.stdin.fileno()], [], [], 0.25)[0]:
            pass  # each wake-up lets the main thread raise a pending KeyboardInterrupt
        data = os.read(sys.stdin.fileno(), 65536)  # a terminal hands over one line per read
        if not data:
            raise typer.Abort()
        answer = data.decode(sys.stdin.encoding or "utf-8", "replace").rstrip("\r\n")
        if answer or default is not None:
            return answer or str(default)


def _ask() -> dict[str, Any]:
    """Ask on the terminal until the answer is y(es), n(o) or e(dit); a typo asks again
    (it must not reject the call by accident)."""
    while True:
        answer = _prompt("approve? [y]es / [n]o / [e]dit arguments", default="n")
        choice = _ANSWERS.get(answer.strip().lower())
        if choice is not None:
            break
        typer.echo(f"please answer y, n or e (got {answer.strip()!r})", err=True)
    if choice == "approve":
        return {"approve": True}
    if choice == "edit":
        while True:  # a typo should not end the demo: ask again
            try:
                return {"edit": parse_json_arg(_prompt("new arguments (JSON)"), "edit")}
            except CliError as exc:
                typer.echo(f"{exc} - try again", err=True)
    return {"reject": _prompt("reason", default="rejected by the user")}
