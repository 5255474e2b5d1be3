"""Shared pieces of the ``threadloom`` command line: one-line errors, loading a user's
graph from ``MODULE:ATTR``, opening a checkpoint store, and JSON rendering of state."""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import functools
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import sqlite3
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import typer

__all__ = [
    "CliError", "as_graph", "dumps", "friendly", "jsonable", "load_target",
    "open_checkpointer", "parse_json_arg", "printable",
]

F = TypeVar("F", bound=Callable[..., Any])
SQLITE_MAGIC = b"SQLite format 3\x00"


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
            fail(_describe(exc), 1)
        finally:
            _close_opened()
        return None

    return wrapper  # type: ignore[return-value]


def _describe(exc: Exception) -> str:
    """``Type: message`` plus the exception's notes (which name the node and super-step
    a user's code failed in), and the CLI flag where the message names a config key.
    Credentials of any URL in it are masked (``threadloom.redact.mask_urls``): a
    library's message may quote a URL with a password."""
    from threadloom.engine.errors import GraphRecursionError
    from threadloom.redact import mask_urls

    text = f"{type(exc).__name__}: {exc}"
    notes = [n for n in getattr(exc, "__notes__", ()) if isinstance(n, str)]
    if notes:
        text += " (" + "; ".join(notes) + ")"
    if isinstance(exc, GraphRecursionError):
        text += " (threadloom run: --recursion-limit N)"
    return mask_urls(text)


_OPENED: list[Any] = []  # checkpointers the running command opened; closed when it ends


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

    Raises:
        CliError: (exit 2) unreadable file, invalid JSON or one of those values, naming
            ``what`` and the value.
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
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                          parse_int=_readable_int)
    except json.JSONDecodeError as exc:
        raise CliError(f"{source} is not valid JSON ({exc.msg} at line {exc.lineno} "
                       f"column {exc.colno})", 2) from exc
    except _NotJson as exc:
        raise CliError(f"{source} is not valid JSON ({exc})", 2) from exc


# -- loading a user's graph -----------------------------------------------------------------

def _import_module(name: str) -> Any:
    if name.endswith(".py") or os.sep in name:
        path = Path(name)
        if not path.is_file():
            raise CliError(f"no Python file at {name!r}", 2)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise CliError(f"cannot load {name!r} as a Python module", 2)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise CliError(f"cannot import module {name!r}: no module named {exc.name!r} "
                           f"(run from the project directory or check PYTHONPATH)", 2) from exc
        raise CliError(f"importing module {name!r} failed: {exc}", 2) from exc
    except Exception as exc:
        raise CliError(f"importing module {name!r} failed: {type(exc).__name__}: {exc}",
                       2) from exc


def load_target(spec: str) -> Any:
    """Import ``MODULE:ATTR`` (``pkg.mod:graph``, ``path/to/file.py:graph``, ``a:obj.attr``).

    Raises:
        CliError: (exit 2) a malformed spec, a module that does not import, or a missing
            attribute.
    """
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"expected MODULE:ATTR (e.g. myapp.graphs:graph), got {spec!r}", 2)
    obj = _import_module(module_name)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CliError(f"module {module_name!r} has no attribute {attr!r}", 2)
        obj = getattr(obj, part)
    return obj


def as_graph(obj: Any, checkpointer: Any = None, spec: str | None = None) -> Any:
    """Turn a loaded object into a ``CompiledGraph`` using ``checkpointer``.

    A ``StateGraph`` is compiled with it; a ``CompiledGraph`` is compiled again from its
    builder with the same interrupts, durability and name but this checkpointer (unless
    ``checkpointer`` is None: then it is used as is); a function without required
    arguments is called and what it returns (which must be a graph) converted. ``spec``
    (``MODULE:ATTR``) names the object in messages.

    Raises:
        CliError: (exit 2) the object is none of those, or a factory returned no graph
            (the message names the factory and what it returned).
    """
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.graph import StateGraph

    if isinstance(obj, CompiledGraph):
        if checkpointer is None:
            return obj
        return obj.builder.compile(
            checkpointer, interrupt_before=sorted(obj.interrupt_before),
            interrupt_after=sorted(obj.interrupt_after), durability=obj.durability,
            name=obj.name)
    if isinstance(obj, StateGraph):
        return obj.compile(checkpointer)
    if callable(obj) and not isinstance(obj, type):
        name = spec or repr(obj)
        made = _call_factory(obj, name)
        if not isinstance(made, CompiledGraph | StateGraph):
            raise CliError(f"the factory {name!r} returned {_a(made)}, not a StateGraph or "
                           "CompiledGraph (return the graph or builder from it)", 2)
        return as_graph(made, checkpointer, spec)
    raise CliError(f"{spec or 'the target'} is {_a(obj)}, not a StateGraph or CompiledGraph",
                   2)


def _a(obj: Any) -> str:
    """``None``, or ``a``/``an`` and the name of ``obj``'s type, for messages."""
    if obj is None:
        return "None"
    kind = type(obj).__name__
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def _call_factory(factory: Callable[..., Any], name: str) -> Any:
    """``factory()``, after checking from its signature that it needs no arguments.

    Raises:
        CliError: (exit 2) it needs arguments, or calling it raised.
    """
    try:
        inspect.signature(factory).bind()
    except TypeError as exc:
        raise CliError(f"{name!r} is a function that needs arguments ({exc}); point at a "
                       "graph or a factory without arguments", 2) from exc
    except ValueError:  # no signature to read (some builtins): calling it will tell
        pass
    try:
        return factory()
    except Exception as exc:
        if os.environ.get("THREADLOOM_DEBUG"):
            raise
        raise CliError(f"the factory {name!r} raised {_describe(exc)}", 2) from exc


# -- checkpoint stores ----------------------------------------------------------------------

def open_checkpointer(db: str, postgres: str | None = None, *, must_exist: bool = True,
                      read_only: bool = False, check_only: bool = False) -> Any:
    """Open the SQLite file ``db`` (or PostgreSQL at ``postgres``) as a checkpointer.

    A new file is made only in an existing directory: like ``draw -o``, a ``--db`` in a
    missing directory is refused rather than creating it. ``read_only`` opens an existing
    SQLite file with ``SqliteCheckpointer(read_only=True)`` (it implies ``must_exist``),
    PostgreSQL with ``PostgresCheckpointer(read_only=True)``: nothing is created or
    changed, and a store without threadloom's tables is refused ("... holds no
    threadloom checkpoints"). ``check_only`` makes the checks on the path ``db`` that
    need no opening, then returns None (PostgreSQL: None at once): a command with slow
    work to do before it opens the store (``demo`` starts a model) refuses a bad
    ``--db`` first, without creating the file.

    Raises:
        CliError: ``db`` is empty (exit 2); the file is missing (when ``must_exist``) or
            its directory is, it is a directory, is not a SQLite database, cannot be
            opened, or (``read_only``) holds no threadloom tables of this version; or
            PostgreSQL cannot be used (the message names the masked connection string
            and the reason).
    """
    if postgres:
        if check_only:
            return None
        try:
            from threadloom.checkpoint.postgres import PostgresCheckpointer
        except ImportError as exc:
            raise CliError(str(exc)) from exc
        from threadloom.engine.errors import CheckpointError

        try:
            pg = PostgresCheckpointer(postgres, read_only=read_only)
        except CheckpointError as exc:
            raise CliError(f"--postgres: {exc}") from exc
        _OPENED.append(pg)
        return pg
    from threadloom.checkpoint.sqlite import SqliteCheckpointer

    if not db:
        raise CliError("--db is empty: give the path of a SQLite checkpoint file", 2)
    path = Path(db)
    if path.is_dir():
        raise CliError(f"{db!r} is a directory, not a checkpoint database file")
    must_exist = must_exist or read_only
    if not path.exists():
        if must_exist:
            raise CliError(f"no checkpoint database at {db!r} (run a graph first, or pass "
                           "--db PATH)")
        if not path.parent.is_dir():
            raise CliError(f"cannot create checkpoint database {db!r}: no directory "
                           f"{str(path.parent)!r}")
    else:
        try:
            with path.open("rb") as fh:
                head = fh.read(16)
        except OSError as exc:
            raise CliError(f"cannot read checkpoint database {db!r}: {exc.strerror}") from exc
        if head and head != SQLITE_MAGIC:
            raise CliError(f"{db!r} is not a SQLite database (unreadable or corrupt file)")
        if not head and must_exist:  # reading must not turn an empty file into a database
            raise CliError(f"{db!r} is empty: no checkpoint database there yet")
    if check_only:
        return None
    from threadloom.engine.errors import CheckpointError

    try:
        cp = SqliteCheckpointer(path, read_only=read_only)
    except CheckpointError as exc:  # read-only: no threadloom tables, or another version
        raise CliError(str(exc)) from exc
    except sqlite3.DatabaseError as exc:
        raise CliError(f"cannot open checkpoint database {db!r}: {exc}") from exc
    _OPENED.append(cp)
    return cp


# -- rendering ------------------------------------------------------------------------------

def _message(m: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": m.type, "content": m.text if isinstance(m.content, list)
                           else m.content}
    if getattr(m, "name", None):
        out["name"] = m.name
    calls = getattr(m, "tool_calls", None)
    if calls:
        out["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c.get("id")}
                             for c in calls]
    if m.type == "tool":
        out["tool_call_id"] = m.tool_call_id
        if m.status != "success":
            out["status"] = m.status
    usage = getattr(m, "usage_metadata", None)
    if usage:
        out["usage"] = {k: usage[k] for k in ("input_tokens", "output_tokens") if k in usage}
    out["id"] = m.id
    return out


def jsonable(value: Any) -> Any:
    """A JSON-able copy of a state value; messages become readable small dicts."""
    from pydantic import BaseModel

    from threadloom.messages import BaseMessage

    if isinstance(value, BaseMessage):
        return _message(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {k: jsonable(v) for k, v in zip(value._fields, value, strict=True)}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, uuid.UUID | _dt.timedelta) or not isinstance(
            value, str | int | float | bool | type(None)):
        return str(value)
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each lone surrogate (``"\\ud800"``: not valid Unicode, so a UTF-8
    output refuses it) written as its escape ``\\ud800``; other text is unchanged."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(value: Any) -> Any:
    """``jsonable``'s output with each non-finite float as the string ``"Infinity"``,
    ``"-Infinity"`` or ``"NaN"`` (the names Python's ``json`` would print unquoted)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """``json.dumps(jsonable(value))`` keeping non-ASCII text readable.

    The text is always strict JSON that any UTF-8 output can print, whatever a graph put
    in its state: a non-finite float (JSON has no such number) is shown as the string
    ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``, and a lone surrogate (a string that is
    not valid Unicode, e.g. from ``"\\ud800"`` in JSON input) as its JSON escape
    ``\\ud800``, which reads back as the same string.
    """
    plain = jsonable(value)
    try:
        text = json.dumps(plain, indent=indent, ensure_ascii=False, allow_nan=False)
    except ValueError:  # a non-finite float somewhere
        text = json.dumps(_finite(plain), indent=indent, ensure_ascii=False, allow_nan=False)
    return printable(text)
