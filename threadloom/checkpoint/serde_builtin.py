"""The built-in (non-registered) types of the closed codec: their encoders and revivers.

Each encoder turns a value into a tagged envelope ``{"__tl__": tag, "v": ...}``; each
reviver gets the decoded ``v`` (or, for ``ENVELOPE_REVIVERS``, the whole envelope) and
builds only the type its tag stands for. See ``serde`` for the table of tags.
"""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

TAG = "__tl__"


def escape_surrogates(tree: Any) -> Any:
    """Replace strings holding surrogate code points (not valid UTF-8) by ``sur`` envelopes,
    so they come back exactly (JSON's \\u escapes would merge a pair into one character)."""
    t = type(tree)
    if t is str:
        try:
            tree.encode("utf-8")
            return tree
        except UnicodeEncodeError:
            raw = tree.encode("utf-8", "surrogatepass")
            return {TAG: "sur", "v": base64.b64encode(raw).decode("ascii")}
    if t is list:
        return [escape_surrogates(x) for x in tree]
    if t is dict:
        if all(type(escape_surrogates(k)) is str for k in tree):
            return {k: escape_surrogates(v) for k, v in tree.items()}
        pairs = [[escape_surrogates(k), escape_surrogates(v)] for k, v in tree.items()]
        return {TAG: "map", "v": pairs}
    return tree


def _rev_surrogates(v: str) -> str:
    return base64.b64decode(v.encode("ascii"), validate=True).decode("utf-8", "surrogatepass")


def _enc_datetime(v: dt.datetime) -> dict[str, Any]:
    out: dict[str, Any] = {TAG: "dt", "v": v.isoformat()}
    if isinstance(v.tzinfo, ZoneInfo):
        out["z"] = v.tzinfo.key
    if v.fold:
        out["fold"] = 1
    return out


def _rev_datetime_env(d: dict[str, Any]) -> dt.datetime:
    value = dt.datetime.fromisoformat(d["v"])
    fold = 1 if d.get("fold") else 0
    if "z" in d:
        # the same wall time in the named zone (no trip through UTC, which overflows near
        # year 1 and 9999); only if the zone's rules changed since, the same instant
        zone = ZoneInfo(str(d["z"]))
        local = value.replace(tzinfo=zone, fold=fold)
        return local if local.utcoffset() == value.utcoffset() else value.astimezone(zone)
    return value.replace(fold=1) if fold else value


BIG_INT = 1 << 14000
"""Ints at least this large (about 4,200 digits) are stored as hex (tag ``int``): Python
refuses to read decimal ints of more than 4,300 digits back (``sys.int_info``)."""


def enc_big_int(v: int) -> dict[str, Any]:
    """The ``int`` envelope of an int too large for decimal JSON (see ``BIG_INT``)."""
    return {TAG: "int", "v": format(v, "x")}


def _rev_big_int(v: str) -> int:
    if type(v) is not str:
        raise TypeError(f"an int envelope holds a {type(v).__name__}, not hex digits")
    return int(v, 16)  # linear in the length, unlike decimal


def _enc_time(v: dt.time) -> dict[str, Any]:
    out: dict[str, Any] = {TAG: "t", "v": v.isoformat()}
    if v.fold:
        out["fold"] = 1
    return out


def _rev_float(v: str) -> float:
    if v not in ("nan", "inf", "-inf"):
        raise ValueError(f"not a non-finite float: {v!r}")
    return float(v)


def _rev_timedelta(v: list[int]) -> dt.timedelta:
    days, seconds, micros = v
    return dt.timedelta(days=days, seconds=seconds, microseconds=micros)


def _rev_map(pairs: list[list[Any]]) -> dict[Any, Any]:
    return {k: v for k, v in pairs}


SIMPLE_ENCODERS: dict[type, Callable[[Any], Any]] = {
    dt.datetime: _enc_datetime,
    dt.date: lambda v: {TAG: "d", "v": v.isoformat()},
    dt.time: _enc_time,
    dt.timedelta: lambda v: {TAG: "td", "v": [v.days, v.seconds, v.microseconds]},
    uuid.UUID: lambda v: {TAG: "uuid", "v": v.hex},
    Decimal: lambda v: {TAG: "dec", "v": str(v)},
    bytes: lambda v: {TAG: "b", "v": base64.b64encode(v).decode("ascii")},
}

SIMPLE_REVIVERS: dict[str, Callable[[Any], Any]] = {
    "d": lambda v: dt.date.fromisoformat(v),
    "td": _rev_timedelta,
    "uuid": lambda v: uuid.UUID(hex=v),
    "dec": lambda v: Decimal(v),
    "b": lambda v: base64.b64decode(v.encode("ascii"), validate=True),
    "f": _rev_float,
    "int": _rev_big_int,
    "set": set,
    "fset": frozenset,
    "tup": tuple,
    "map": _rev_map,
    "sur": _rev_surrogates,
}


# datetime and time carry extra keys; they get the whole envelope.
ENVELOPE_REVIVERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "dt": _rev_datetime_env,
    "t": lambda d: dt.time.fromisoformat(d["v"]).replace(fold=1 if d.get("fold") else 0),
}
