"""Asking for a demo approval: the answer from ``--approve``/``--reject``, or from the
person at the terminal (``y``/``n``/``e``; anything else asks again), or none when stdin
is not a terminal."""

from __future__ import annotations

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


def _ask() -> dict[str, Any]:
    """Ask on the terminal until the answer is y(es), n(o) or e(dit); a typo asks again
    (it must not reject the call by accident)."""
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
