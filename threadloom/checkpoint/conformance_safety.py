"""Conformance checks for the codec through a backend: types survive a new instance,
unsupported values fail at write time, forged rows are refused, SQL payloads are inert;
and ``put_with_writes`` saves a step's writes and checkpoint together.

Part of ``conformance.CHECKS``; see that module for how to run them.
"""

from __future__ import annotations

import datetime as dt
import enum
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel

from threadloom.checkpoint.blob_rows import BlobRow, NewBlob
from threadloom.checkpoint.conformance import (
    Backend,
    ConformanceError,
    Writer,
    cfg,
    expect,
    values_at,
)
from threadloom.checkpoint.serde import Codec
from threadloom.errors import SerializationError


class Color(enum.Enum):
    """Sample enum (H26)."""

    RED = "red"
    BLUE = "blue"


class Mode(enum.StrEnum):
    """Sample StrEnum (H26: came back as plain ``str`` in LangGraph)."""

    FAST = "fast"


class Level(enum.IntEnum):
    """Sample IntEnum."""

    HIGH = 3


class Item(BaseModel):
    """Sample pydantic model with typed fields (H26)."""

    when: dt.datetime
    color: Color
    tags: list[str]


@dataclass
class Point:
    """Sample dataclass."""

    x: int
    y: float


class SampleState(TypedDict):
    """A state schema naming the sample types, as the engine would register it."""

    mode: Mode
    item: Item
    level: Level | None
    points: Annotated[list[Point], "reduced"]


def sample_values() -> dict[str, Any]:
    """One value of every type the codec supports."""
    from threadloom.messages import AIMessage, HumanMessage, ToolMessage

    ist = dt.timezone(dt.timedelta(hours=5, minutes=30))
    return {
        "mode": Mode.FAST,
        "item": Item(when=dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC), color=Color.RED, tags=[]),
        "level": Level.HIGH,
        "points": [Point(1, 2.5)],
        "at": dt.datetime(2026, 11, 30, 12, 0, tzinfo=ist),
        "naive": dt.datetime(2026, 1, 2, 3, 4, 5, 6),
        "d": dt.date(2026, 11, 30),
        "t": dt.time(23, 59, 1, 5),
        "td": dt.timedelta(days=2, seconds=5, microseconds=7),
        "u": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "dec": Decimal("3.14159265358979323846"),
        "raw": b"\x00\xffbytes",
        "s": {3, 1, 2},
        "fs": frozenset({"a", "b"}),
        "tup": (1, ("nested", 2.0)),
        "text": "lone \ud800 surrogate and emoji \U0001f600",
        "int_keys": {1: "one", 2: "two"},
        "tag_key": {"__tl__": "model", "c": "os.system"},
        "messages": [
            HumanMessage("hi", id="h1"),
            AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c1"}]),
            ToolMessage("ok", tool_call_id="c1", id="t1"),
        ],
    }


def check_codec_round_trip(b: Backend) -> None:
    """H26: every supported type comes back with its exact type in a NEW instance."""
    codec = Codec()
    codec.register_from_annotation(SampleState)
    cp = b.make(codec=codec)
    values = sample_values()
    Writer(cp, "t1").put(**values)
    fresh = Codec()
    fresh.register_from_annotation(SampleState)
    cp2 = b.reopen(cp, fresh)
    got = values_at(cp2, cfg("t1"))
    for key, want in values.items():
        expect(got[key] == want, f"{key}: {got[key]!r} != {want!r}")
        expect(type(got[key]) is type(want), f"{key}: type {type(got[key])} != {type(want)}")
    expect(got["item"].color is Color.RED, "item.color is not Color.RED")
    expect(got["at"].utcoffset() == dt.timedelta(hours=5, minutes=30), "UTC offset lost")
    expect(type(got["messages"][1]).__name__ == "AIMessage", "message type lost")


def check_unsupported_type(b: Backend) -> None:
    """An unsupported value fails at write time naming the path and type; nothing is stored."""
    cp = b.make()
    w = Writer(cp, "t1")
    good = w.put(items=[1])
    try:
        w.put(items=[1, 2, {"when": object()}])
    except SerializationError as exc:
        expect(exc.path == "channel_values.items[2].when", f"path {exc.path!r}")
        expect(exc.type_name == "builtins.object", f"type {exc.type_name!r}")
    else:
        raise ConformanceError("an object() was stored")
    expect(cp.get_tuple(cfg("t1")).config == good, "a failed put left a checkpoint")  # type: ignore[union-attr]


def _forged(sentinel: str) -> list[bytes]:
    cmd = f"touch {sentinel}"
    return [
        b'{"__tl__":"model","c":"os.system","v":{"command":"%s"}}' % cmd.encode(),
        b'{"__tl__":"dc","c":"subprocess.Popen","v":{"args":["touch","%s"]}}' % sentinel.encode(),
        b'{"__tl__":"enum","c":"builtins.eval","v":"__import__(\'os\')"}',
        b'{"__tl__":"import","v":"os.system"}',
        b'{"__tl__":"model","c":"threadloom.checkpoint.serde.Codec","v":{}}',
    ]


def check_forged_rows(b: Backend) -> None:
    """A stored blob or record edited to name os.system/subprocess.Popen/any class is
    refused."""
    cp = b.make()
    Writer(cp, "t1").put(x=["safe"], y="inline")  # a list gets a blob, a short str none
    sentinel = os.path.join(tempfile.mkdtemp(), "pwned")
    modules = set(sys.modules)
    for data in _forged(sentinel):
        with cp._tx(True) as tx:
            keys = list(tx.blob_index("t1", ""))
            tx.delete_blobs("t1", "", keys)
            rows = [NewBlob(ch, bid, BlobRow(None, bid, -1, 0, data), None) for ch, bid in keys]
            tx.insert_blobs("t1", "", rows)
        cp2 = b.reopen(cp, Codec())
        try:
            cp2.get_tuple(cfg("t1"))
            raise ConformanceError(f"forged blob {data!r} loaded")
        except SerializationError:
            pass
    for data in _forged(sentinel):  # a value kept inline in the record, forged
        with cp._tx(True) as tx:
            row = tx.checkpoint_row("t1", "", None)
            if row is None:
                raise ConformanceError("the checkpoint vanished")
            tx.delete_checkpoints("t1", "", [row.checkpoint_id])
            tx.insert_checkpoint(row._replace(record=b'{"k":{},"r":{"y":[null,%s]}}' % data))
        try:
            b.reopen(cp, Codec()).get_tuple(cfg("t1"))
            raise ConformanceError(f"forged record value {data!r} loaded")
        except SerializationError:
            pass
    expect(not os.path.exists(sentinel), "a forged blob ran code")
    new = {m for m in set(sys.modules) - modules if m.split(".")[0] in ("subprocess", "os")}
    expect(not new, f"loading imported {new}")


INJECTION = [
    "'; DROP TABLE tl_checkpoints; --",
    "\" OR 1=1 --",
    "x') OR ('1'='1",
    "%s%s%s",
    "?",
    "\x00nul",
    "tl_blobs; DELETE FROM tl_blobs",
]


def check_injection(b: Backend) -> None:
    """SQL payloads in every query argument are stored and matched as plain data."""
    cp = b.make()
    Writer(cp, "keep").put(x=1)
    for payload in INJECTION:
        safe = payload.replace("\x00", "")
        w = Writer(cp, safe, ns=safe)
        c = w.put(**{safe: safe})
        cp.put_writes(c, [(safe, safe)], safe)
        got = cp.get_tuple(c)
        expect(got is not None and got.checkpoint["channel_values"] == {safe: safe}, payload)
        expect(list(cp.list(cfg(safe, safe), filter={safe: safe})) == [], "filter key matched")
        expect(got.pending_writes[0].value == safe, "write payload")  # type: ignore[union-attr]
        cp.get_tuple(cfg(safe, safe, checkpoint_id=safe))
        list(cp.list(cfg(safe, safe), before=cfg(safe, safe, checkpoint_id=safe)))
        cp.prune(safe, keep_last=1)
        cp.delete_thread(safe)
    expect(cp.list_threads() == ["keep"], f"threads after payloads: {cp.list_threads()}")
    expect(values_at(cp, cfg("keep")) == {"x": 1}, "data damaged by payloads")


def check_put_with_writes(b: Backend) -> None:
    """put_with_writes: the task's writes land on the parent, the checkpoint is its child,
    both or neither (a stale lease token writes nothing; a missing parent is refused)."""
    from threadloom.checkpoint.conformance import make_checkpoint, tuple_at
    from threadloom.errors import CheckpointError, ThreadBusyError

    cp = b.make()
    w = Writer(cp, "t1")
    parent = w.put(x=1)
    meta = {"step": 1, "source": "loop", "writes": {"node": ["x"]}, "parents": {}}
    child = cp.put_with_writes(parent, make_checkpoint({"x": 2}, {"x": 2}), meta, {"x": 2},
                               [("x", 2), ("__scheduled__", [])], "task-a")
    got = [(p.task_id, p.channel, p.value) for p in tuple_at(cp, parent).pending_writes]
    expect(got == [("task-a", "x", 2), ("task-a", "__scheduled__", [])], f"writes {got}")
    saved = tuple_at(cp, cfg("t1"))
    expect(saved.config == child and saved.pending_writes == [], "the child checkpoint")
    expect(saved.parent_config == parent, "the child's parent")
    try:
        cp.put_with_writes(cfg("t2"), make_checkpoint({}, {}), meta, {}, [("x", 1)], "t")
        raise ConformanceError("put_with_writes without a parent checkpoint was accepted")
    except CheckpointError:
        pass
    w.token = cp.acquire_lease("t1", "worker-1", ttl_s=0.05)
    stale = w._config()
    time.sleep(0.1)
    cp.acquire_lease("t1", "worker-2", ttl_s=5)
    try:
        cp.put_with_writes(stale, make_checkpoint({"x": 3}, {"x": 3}), meta, {"x": 3},
                           [("x", 3)], "task-b")
        raise ConformanceError("a stale lease token was allowed to write")
    except ThreadBusyError:
        pass
    expect(values_at(cp, cfg("t1")) == {"x": 2}, "stale writer changed the thread")
    expect(len(tuple_at(cp, stale).pending_writes) == 2, "stale writer saved its writes")


SAFETY_CHECKS = [check_codec_round_trip, check_unsupported_type, check_forged_rows, check_injection,
                 check_put_with_writes]
