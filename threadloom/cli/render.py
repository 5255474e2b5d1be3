"""State as JSON text: ``jsonable`` (a readable copy: messages as small dicts, models,
dataclasses, dates...), ``dumps`` (strict JSON any UTF-8 output can print) and
``printable`` (lone surrogates escaped)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import json
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

from threadloom.checkpoint.depth import MAX_DEPTH, room

__all__ = ["dumps", "jsonable", "printable"]


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
    # A stored value may nest MAX_DEPTH levels; printing takes a few frames per level.
    with room(8 * MAX_DEPTH):
        plain = jsonable(value)
        try:
            text = json.dumps(plain, indent=indent, ensure_ascii=False, allow_nan=False)
        except ValueError:  # a non-finite float somewhere
            text = json.dumps(_finite(plain), indent=indent, ensure_ascii=False,
                              allow_nan=False)
    return printable(text)
