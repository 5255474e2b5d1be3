"""What every ``threadloom`` command shares: one-line errors (``CliError``, the
``friendly`` decorator), closing the stores a command opened when it ends, and JSON
arguments (``parse_json_arg``, strict JSON or ``@file``).

The rest of the shared layer sits beside it: ``target`` (loading ``MODULE:ATTR``),
``store`` (opening a checkpoint store), ``render`` (state as JSON), ``view`` (a run's
live output). Nothing here imports a command module.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

__all__ = ["CliError", "close_when_done", "describe", "fail", "friendly", "parse_json_arg"]

F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    """An error the CLI reports as one line on stderr, exiting with ``code``.

    Args:
        message: what went wrong and, where useful, what to do.
        code: the exit status: 2 for a usage problem (bad arguments, a module path that
            does not import), 1 for everything else.
    """

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def fail(message: str, code: int) -> None:
    """Print ``error: <message>`` as one line on stderr and exit with ``code``."""
    typer.echo(f"error: {_one_line(message)}", err=True)
    raise SystemExit(code)


def friendly(fn: F) -> F:
    """Decorate a command so that errors become one line on stderr (no traceback).

    ``CliError`` keeps its exit code; ``sqlite3`` errors, threadloom errors and any other
    exception exit with 1. Set ``THREADLOOM_DEBUG=1`` to see the traceback instead.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (SystemExit, typer.Exit, typer.Abort, typer.TyperException):
            raise
        except CliError as exc:
            fail(str(exc), exc.code)
        except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(0) from None
        except sqlite3.DatabaseError as exc:
            if os.environ.get("THREADLOOM_DEBUG"):
                raise
            fail(f"cannot read the SQLite database: {exc}", 1)
        except Exception as exc:
            if os.environ.get("THREADLOOM_DEBUG"):
                raise
            fail(describe(exc), 1)
        finally:
            _close_opened()
        return None

    return wrapper  # type: ignore[return-value]


def describe(exc: Exception) -> str:
    """``Type: message`` plus the exception's notes (which name the node and super-step
    a user's code failed in), and the CLI flag where the message names a config key.
    Credentials of any URL in it are masked (``threadloom.redact.mask_urls``): a
    library's message may quote a URL with a password."""
    from threadloom.errors import GraphRecursionError
    from threadloom.redact import mask_urls

    text = f"{type(exc).__name__}: {exc}"
    notes = [n for n in getattr(exc, "__notes__", ()) if isinstance(n, str)]
    if notes:
        text += " (" + "; ".join(notes) + ")"
    if isinstance(exc, GraphRecursionError):
        text += " (threadloom run: --recursion-limit N)"
    return mask_urls(text)


_OPENED: list[Any] = []  # checkpointers the running command opened; closed when it ends


def close_when_done(store: Any) -> Any:
    """Register ``store`` (a checkpointer) to be closed when the running command ends
    (``friendly`` closes it, whatever the outcome); returns ``store``."""
    _OPENED.append(store)
    return store


def _close_opened() -> None:
    """Close what ``open_checkpointer`` opened, so SQLite folds its WAL into the file
    (a copy of the ``.db`` alone then holds every thread, paused ones included)."""
    while _OPENED:
        close = getattr(_OPENED.pop(), "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - closing must not hide the command's result
                pass

# -- arguments ------------------------------------------------------------------------------


class _NotJson(ValueError):
    """A value Python's ``json`` would accept but that cannot be stored and shown as JSON
    again: a constant (``NaN``, ``Infinity``, ``-Infinity``), a number that overflows to
    infinity (``1e999``), an integer too long to convert. The message says why."""


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON value; use a number, a string or null")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
        raise _NotJson(f"the number {shown} overflows to infinity; use a smaller number or "
                       "a string")
    return value


def _readable_int(text: str) -> int:
    try:
        return int(text)
    except ValueError as exc:  # longer than sys.get_int_max_str_digits()
        raise _NotJson(f"an integer of {len(text.lstrip('-'))} digits is too long to read; "
                       "use a string") from exc


def parse_json_arg(text: str, what: str) -> Any:
    """Parse a JSON argument, or ``@path`` to read it from a file.

    Strict JSON: ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's ``json`` takes by
    default), numbers that overflow a float to infinity (``1e999``) and integers longer
    than Python converts (``sys.get_int_max_str_digits()``) are refused, since they cannot
    be stored or shown as JSON again. Numbers that underflow (``1e-999``) read as 0.0.

    Values nested deeper than ``MAX_JSON_DEPTH`` are refused too (a nesting bomb would
    otherwise end in a ``RecursionError``).

    Raises:
        CliError: (exit 2) unreadable file, invalid JSON, one of those values or too deep a
            nesting, naming ``what`` and the value.
    """
    source = what
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text("utf-8")
        except OSError as exc:
            raise CliError(f"{what}: cannot read {str(path)!r}: {exc.strerror}", 2) from exc
        except UnicodeDecodeError as exc:
            raise CliError(f"{what}: {str(path)!r} is not UTF-8 text", 2) from exc
        source = f"{what} file {str(path)!r}"
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                           parse_int=_readable_int)
    except RecursionError:  # the decoder recurses once per level
        raise CliError(f"{source} is nested too deeply (more than {MAX_JSON_DEPTH} levels)",
                       2) from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{source} is not valid JSON ({exc.msg} at line {exc.lineno} "
                       f"column {exc.colno})", 2) from exc
    except _NotJson as exc:
        raise CliError(f"{source} is not valid JSON ({exc})", 2) from exc
    if _depth_over(value, MAX_JSON_DEPTH):
        raise CliError(f"{source} is nested too deeply (more than {MAX_JSON_DEPTH} levels)", 2)
    return value


MAX_JSON_DEPTH = 100
"""Deepest nesting of lists/objects a JSON argument may have (deeper values could not be
stored and shown again without hitting Python's recursion limit)."""


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/dicts deeper than ``limit`` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
