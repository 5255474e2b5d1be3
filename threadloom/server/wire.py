"""The JSON the server sends: state values, messages, interrupts, snapshots.

Values leave the server in the shapes LangGraph's server gives them, so the official
``langgraph_sdk`` client and UIs built on it read them unchanged: a message is a flat
dict with its ``type`` (``human``, ``ai``, ``tool``, ``system``) and every field,
including those left at their default; an ``Interrupt`` is ``{"value", "id"}``; pydantic
models and dataclasses are their field dicts; tuples and sets are lists; datetimes are
ISO-8601 strings. Anything else that JSON cannot carry is sent as its ``repr`` inside
``{"__unserializable__": ...}`` rather than failing the whole response.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import json
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from threadloom.messages.types import BaseMessage
from threadloom.types import Command, Interrupt, Send


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (dict, list, str, int, float, bool, None).

    Args:
        value: a state value, an event payload or a snapshot field.

    Returns:
        A structure ``json.dumps`` writes without a ``default``.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None or kind is float:
        return value
    if kind is dict:
        return {str(k): jsonable(v) for k, v in value.items()}
    if kind is list:
        return [jsonable(v) for v in value]
    if isinstance(value, BaseMessage):
        return message_json(value)
    if isinstance(value, Interrupt):
        return {"value": jsonable(value.value), "id": value.id}
    return _other(value)


def message_json(message: BaseMessage) -> dict[str, Any]:
    """One message in LangGraph's wire shape (every field, ``type`` included).

    A streamed chunk keeps ``type: "AIMessageChunk"``, as LangGraph sends it.
    """
    data = message.model_dump(mode="json")
    data["type"] = message.type
    return data


def _other(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(mode="json"))
    if isinstance(value, Send):
        return {"node": value.node, "arg": jsonable(value.arg)}
    if isinstance(value, Command):
        return {"update": jsonable(value.update), "goto": jsonable(value.goto_list()),
                "resume": jsonable(value.resume), "graph": value.graph}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, float):  # a float subclass
        return float(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    return {"__unserializable__": repr(value)[:200]}


def dumps(value: Any) -> str:
    """Compact JSON of ``value`` (``jsonable`` first); non-finite floats become strings,
    since JSON has no ``NaN``."""
    try:
        return json.dumps(jsonable(value), separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except ValueError:  # NaN or infinity somewhere
        return json.dumps(_finite(jsonable(value)), separators=(",", ":"), ensure_ascii=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def now_iso() -> str:
    """The current UTC time as ISO-8601 with microseconds and ``+00:00``."""
    return _dt.datetime.now(_dt.UTC).isoformat()


def uuid7() -> str:
    """A new time-ordered UUID (RFC 9562 version 7): ids sort by creation time."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def checkpoint_ref(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``{"thread_id", "checkpoint_ns", "checkpoint_id"}`` of a checkpoint config."""
    if not config:
        return None
    conf = config.get("configurable") or {}
    if conf.get("checkpoint_id") is None:
        return None
    return {"thread_id": conf.get("thread_id"), "checkpoint_ns": conf.get("checkpoint_ns", ""),
            "checkpoint_id": conf.get("checkpoint_id")}


def snapshot_json(snap: Any) -> dict[str, Any]:
    """A ``StateSnapshot`` as the ``ThreadState`` body of ``GET /threads/{id}/state``."""
    checkpoint = checkpoint_ref(snap.config) if snap.created_at is not None else None
    parent = checkpoint_ref(snap.parent_config)
    tasks = [{"id": t.id, "name": t.name, "path": ["__pregel_pull", t.name],
              "error": t.error, "interrupts": [jsonable(i) for i in t.interrupts],
              "checkpoint": None, "state": None, "result": None} for t in snap.tasks]
    return {
        "values": jsonable(snap.values),
        "next": list(snap.next),
        "tasks": tasks,
        "metadata": jsonable(snap.metadata) if snap.metadata is not None else None,
        "created_at": snap.created_at,
        "checkpoint": checkpoint,
        "parent_checkpoint": parent,
        "interrupts": [jsonable(i) for i in snap.interrupts],
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
    }


def interrupts_by_task(snap: Any) -> dict[str, list[dict[str, Any]]]:
    """The thread's pending interrupts keyed by task id (the ``interrupts`` of a Thread)."""
    return {t.id: [jsonable(i) for i in t.interrupts] for t in snap.tasks if t.interrupts}
