"""Templates see plain data only: the variable conversion and the call allow-list.

``plain_variables`` turns each template variable into JSON-like data before a render:
``str``, ``int``, ``float``, ``bool``, ``None``, ``bytes``, lists, tuples, sets and dicts
of those (subclasses become the base type), and the immutable value types ``datetime``,
``date``, ``time``, ``timedelta`` and ``Decimal``. Messages become their dict
(``message_to_dict``, plus ``text``), pydantic models their ``model_dump()``, dataclasses
and named tuples a dict of their fields; ``IntEnum``/``StrEnum`` members their value,
other enums and UUIDs their text. Anything else
(modules, functions, classes, tools, paths, ``SecretStr``, ``os.environ``, open files...)
raises ``SecurityError`` naming the variable, so nothing a template can reach runs code.

``call_allowed`` is the second layer: at render time a template may call only its own
macros, ``loop.cycle``/``loop.changed``, the globals ``range``, ``dict`` and
``namespace``, and the methods in ``SAFE_METHODS`` of the plain types above.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from typing import Any

from jinja2.ext import Extension
from jinja2.runtime import LoopContext, Macro, Undefined
from jinja2.utils import Namespace
from pydantic import BaseModel

from threadloom.errors import SecurityError
from threadloom.messages import BaseMessage, message_to_dict

MAX_DEPTH = 100
"""Deepest nesting of a template variable."""

_VALUE_TYPES = (datetime.date, datetime.time, datetime.timedelta, decimal.Decimal)
_TEXT = frozenset({
    "capitalize", "casefold", "center", "count", "endswith", "expandtabs", "find", "format",
    "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "islower", "isnumeric", "isspace", "istitle", "isupper", "join", "ljust", "lower",
    "lstrip", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex",
    "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip",
    "swapcase", "title", "upper", "zfill"})
_DATES = frozenset({"isoformat", "strftime", "weekday", "isoweekday", "date", "time",
                    "timestamp", "total_seconds", "is_integer"})
SAFE_METHODS: dict[type, frozenset[str]] = {
    str: _TEXT,
    bytes: frozenset({"decode", "count", "startswith", "endswith", "find"}),
    dict: frozenset({"get", "items", "keys", "values"}),
    list: frozenset({"count", "index"}),
    tuple: frozenset({"count", "index"}),
    int: frozenset({"bit_length"}),
    float: frozenset({"is_integer"}),
    datetime.date: _DATES,
    datetime.time: _DATES,
    datetime.timedelta: _DATES,
}
"""The methods a template may call, by the type of the object they belong to."""


def plain_variables(variables: dict[str, Any]) -> dict[str, Any]:
    """Return ``variables`` with each value converted to plain data (see the module doc).

    Raises:
        SecurityError: a value (or a part of it, named by its path) is not plain data, or
            is nested deeper than ``MAX_DEPTH``.
    """
    return {name: _plain(value, name, 0) for name, value in variables.items()}


def _plain(value: Any, path: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise SecurityError(f"template variable {path!r} is nested deeper than {MAX_DEPTH}")
    kind = type(value)
    if value is None or kind in (bool, int, float, bytes):
        return value
    if isinstance(value, enum.Enum) and not isinstance(value, int | str):
        return str(value)  # as it renders; int and str enums go on as their value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, _VALUE_TYPES):
        return value
    if isinstance(value, dict):
        return {_key(k, path, depth): _plain(v, f"{path}.{k}", depth + 1)
                for k, v in dict.items(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return _plain(dict(zip(value._fields, value, strict=True)), path, depth)
    if isinstance(value, list | tuple | set | frozenset):
        base = next(t for t in (list, tuple, set, frozenset) if isinstance(value, t))
        return base(_plain(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
    return _plain_object(value, path, depth)


def _plain_object(value: Any, path: str, depth: int) -> Any:
    if isinstance(value, BaseMessage):
        fields = message_to_dict(value)
        fields["text"] = value.text
        return _plain(fields, path, depth)
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(), path, depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _plain(fields, path, depth)
    raise SecurityError(
        f"template variable {path!r} is a {type(value).__module__}.{type(value).__qualname__}"
        " object; templates see plain data only (str, int, float, bool, None, lists, dicts, "
        "dates, messages and pydantic models as their fields): pass the values it needs")


def _key(key: Any, path: str, depth: int) -> Any:
    plain = _plain(key, f"{path} key", depth + 1)
    if isinstance(plain, list | dict | set):
        raise SecurityError(f"template variable {path!r} has an unhashable key")
    return plain


def call_allowed(obj: Any) -> bool:
    """Whether a template may call ``obj`` (see the module doc)."""
    if isinstance(obj, Macro | LoopContext | Undefined) or obj is dict or obj is Namespace:
        return True
    if getattr(obj, "threadloom_safe_call", False):
        return True
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", "")
    if isinstance(owner, Extension):
        return True
    if isinstance(owner, LoopContext):
        return name in ("cycle", "changed")
    for kind, names in SAFE_METHODS.items():
        if isinstance(owner, kind) and not isinstance(owner, type):
            return name in names
    return False


def describe_callable(obj: Any) -> str:
    """A short name of ``obj`` for a refusal message (never its repr)."""
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", None) or type(obj).__name__
    if owner is not None and not isinstance(owner, type):
        return f"method {name!r} of a {type(owner).__name__!r} value"
    return f"{name!r} ({type(obj).__name__})"


__all__ = ["MAX_DEPTH", "SAFE_METHODS", "call_allowed", "describe_callable", "plain_variables"]
