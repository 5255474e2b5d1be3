"""How ``InMemoryCheckpointer`` lays out what it keeps: one ``bytes`` object per row.

Blob data, and checkpoint rows of ``SMALL_CHECKPOINT`` bytes or more, are deflated with a
preset dictionary (``pack``; ``unpack`` reads either form, a flag byte says which). A blob
row is one bytes object holding its fields and data, so the store leaves no GC-tracked
tuple per saved blob.
"""

from __future__ import annotations

import struct
import zlib
from itertools import chain
from typing import Any

from threadloom.checkpoint.blob_rows import BlobRow
from threadloom.checkpoint.tx import WRITES_IDX
from threadloom.checkpoint.write_refs import NO_VALUE, REF, child_ref

__all__ = [
    "BATCH", "DEFLATED", "RAW", "SMALL", "SMALL_CHECKPOINT", "ZDICT", "blob_row",
    "checkpoint_lone", "kept_tuple", "kept_writes", "lone_form", "lone_write", "pack", "write_list",
    "write_slots", "pack_checkpoint", "row_bytes", "row_data_at", "row_fields", "unpack",
    "unpack_checkpoint",
]

# A preset dictionary of what checkpoint JSON is made of: small blobs compress 3-5x with it.
ZDICT = (
    b'{"step":"source":["loop",["input",["update",["fork","writes":{"parents":{}}"__start__":'
    b'{"c":{"v":1,"ts":"2026-01-01T00:00:00.000000+00:00","channel_versions":{"messages":'
    b'"versions_seen":"next":["barriers":{}},"r":{"messages":[null,{"k":{"cv":{"nx":["b":'
    b'{"__tl__":"msg","v":{"content":"id":"name":'
    b'"type":"human","ai","tool","system","tool_call_id":"status":"error","artifact":'
    b'"tool_calls":[{"name":"args":{"id":"call_","type":"tool_call"}],"usage_metadata":'
    b'{"input_tokens":"output_tokens":"total_tokens":"response_metadata":{"finish_reason":'
    b'"stop","tool_calls","model_name":"additional_kwargs":{}}]}}, the of and to in is that'
)


# Priming a compressor with the dictionary costs ~100 us; copying a primed one ~20 us.
_COMPRESSOR = zlib.compressobj(1, zlib.DEFLATED, -11, 3, zlib.Z_DEFAULT_STRATEGY, ZDICT)
SMALL = 192  # below this, deflate saves too little to pay for its time
BATCH = 32  # blobs deflated in one pass (see InMemoryCheckpointer._insert_blobs)
SMALL_CHECKPOINT = 1024  # checkpoint rows below this are kept raw (see _Ns)
RAW, DEFLATED = b"\x00", b"\x01"


def pack(data: bytes, small: int = SMALL) -> bytes:
    if len(data) < small:
        return RAW + data
    c = _COMPRESSOR.copy()
    return DEFLATED + c.compress(data) + c.flush()


def unpack(data: bytes) -> bytes:
    if data[:1] == RAW:
        return data[1:]
    d = zlib.decompressobj(-11, ZDICT)
    return d.decompress(data[1:]) + d.flush()


def pack_checkpoint(parent_id: str | None, record: bytes, metadata: bytes, lone: bytes = b""
                    ) -> bytes:
    """A checkpoint row: the parent id, ``lone`` (at most 255 bytes: the write its step's
    one task saved against the parent, see ``InMemoryCheckpointer``), record, metadata."""
    head = parent_id.encode() if parent_id else b""
    n = len(head)
    size = len(record)
    parts = (RAW, _LENGTHS[n], head, _LENGTHS[len(lone)], lone, size.to_bytes(4, "big"),
             record, metadata)
    if n + len(lone) + size + len(metadata) + 6 < SMALL_CHECKPOINT:
        return b"".join(parts)
    return pack(b"".join(parts[1:]), SMALL_CHECKPOINT)


_LENGTHS = [bytes((n,)) for n in range(256)]


# A stored blob row is one bytes object (no GC-tracked tuple per blob, see _Ns):
# n, chain, the byte lengths of base (_NO_BASE: None) and snap, then base, snap and the
# data as pack/RAW wrote it.
_ROW_HEAD = struct.Struct(">qqII")
_NO_BASE = 0xFFFFFFFF
_HEAD = _ROW_HEAD.size


def row_bytes(base: str | None, snap: str, n: int, chain: int, data: bytes) -> bytes:
    """One blob row as stored: ``data`` already carries its RAW/DEFLATED flag."""
    snap_b = snap.encode()
    if base is None:
        return b"".join((_ROW_HEAD.pack(n, chain, _NO_BASE, len(snap_b)), snap_b, data))
    base_b = base.encode()
    return b"".join((_ROW_HEAD.pack(n, chain, len(base_b), len(snap_b)), base_b, snap_b, data))


def row_data_at(row: bytes) -> int:
    """Where the data (flag byte first) of a stored row starts."""
    _, _, nb, ns = _ROW_HEAD.unpack_from(row)
    return _HEAD + (0 if nb == _NO_BASE else nb) + ns


def row_fields(row: bytes) -> tuple[str | None, str, int, int, int]:
    """``(base, snap, n, chain, data offset)`` of a stored row."""
    n, chain, nb, ns = _ROW_HEAD.unpack_from(row)
    at = _HEAD
    base = None
    if nb != _NO_BASE:
        base = row[at : at + nb].decode()
        at += nb
    return base, row[at : at + ns].decode(), n, chain, at + ns


def blob_row(row: bytes) -> BlobRow:
    """A stored row as the ``BlobRow`` it holds, data inflated."""
    base, snap, n, chain, at = row_fields(row)
    return BlobRow(base, snap, n, chain, unpack(row[at:]))


def unpack_checkpoint(data: bytes) -> tuple[str | None, bytes, bytes]:
    """``(parent id, record, metadata)`` of a row ``pack_checkpoint`` wrote."""
    raw = unpack(data)
    n = raw[0]
    parent = raw[1 : 1 + n].decode() or None
    at = 2 + n + raw[1 + n]
    size = int.from_bytes(raw[at : at + 4], "big")
    return parent, raw[at + 4 : at + 4 + size], raw[at + 4 + size :]


def checkpoint_lone(data: bytes) -> bytes:
    """The ``lone`` part of a row ``pack_checkpoint`` wrote (``b""``: none)."""
    raw = unpack(data)
    n = raw[0]
    return raw[2 + n : 2 + n + raw[1 + n]]


# The writes against a checkpoint (``_Ns.writes[cid]``) take one of three forms:
# - a str, the id of the checkpoint saved with them (``put_with_writes``) when they are one
#   write that checkpoint holds (its value, or its list's tail): its row's ``lone`` part
#   names the task, channel and reference (``lone_write``), so such a step adds no object
#   to the store;
# - a tuple ``(child id, task_id, channel, data, channel, data, ...)`` for the other lone
#   steps (``kept_writes``);
# - a dict ``(task_id, idx) -> (channel, data)``, once ``put_writes`` adds to them.

_KEPT = frozenset((int, float, bool, str, type(None)))
_STR = frozenset((str,))


def kept_writes(writes: Any, task_id: str, values: Any, child_id: str, dumps: Any,
                plain: bool) -> list[Any]:
    """A lone task's ``writes`` in the tuple form above (as a list), each ``data``: a
    reference (``write_refs``) without the child id, which the first item names; with a
    ``plain`` codec, a value kept as it is, encoded when read (an int, float, bool, str or
    None, or a copy of a dict of those under str keys: none can change meanwhile); else
    the bytes ``dumps`` wrote.

    Raises:
        SerializationError: a write the codec cannot store (path ``writes.<channel>``).
    """
    out: list[Any] = [child_id, task_id]
    get = values.get
    for ch, v in writes:
        t = type(v)
        data: Any = child_ref(v, get(ch, NO_VALUE), b"")
        if data is not None:
            pass
        elif plain and t in _KEPT:
            data = v
        elif plain and t is dict and _KEPT.issuperset(map(type, v.values())) and (
                _STR.issuperset(map(type, v))):
            data = dict(v)
        else:
            data = dumps(v, path="writes." + ch)
        out += (ch, data)
    return out


def kept_tuple(rows: Any) -> tuple[Any, ...] | None:
    """``rows`` (``write_rows``'s, of ``put_writes``) in the tuple form, or None when
    ``kept_rows`` would not read them back the same (not one task, each at its own index,
    in order)."""
    if not rows:
        return None
    task = rows[0][0]
    if not all(t == task and idx == WRITES_IDX.get(ch, i)
               for i, (t, idx, ch, _) in enumerate(rows)) or (
            len({r[1] for r in rows}) != len(rows)):
        return None
    return ("", task, *chain.from_iterable(r[2:] for r in rows))


def kept_rows(found: tuple[Any, ...], dumps: Any) -> list[tuple[str, int, str, bytes]]:
    """The rows ``(task_id, idx, channel, data)`` of a ``kept_writes`` tuple: references
    completed with the child id, kept values encoded."""
    child, task = found[0].encode(), found[1]
    rows = []
    for i in range(2, len(found), 2):
        ch, data = found[i], found[i + 1]
        if type(data) is not bytes:
            data = dumps(data, path="writes." + ch)
        elif data[:1] == REF:
            data += child
        rows.append((task, WRITES_IDX.get(ch, i // 2 - 1), ch, data))
    return rows


def lone_form(writes: Any, task_id: str, values: Any) -> tuple[str, str, bytes] | None:
    """``(task_id, channel, ref)`` when ``writes`` is one write the child checkpoint
    holding ``values`` holds too (its value, or the tail of its list): the str form above,
    ``ref`` a reference (``write_refs``) without its NUL and child id; else None."""
    if len(writes) != 1:
        return None
    channel, value = writes[0]
    ref = child_ref(value, values.get(channel, NO_VALUE), b"")
    return None if ref is None else (task_id, channel, ref[1:])


def lone_write(task_id: str, channel: str, ref: bytes) -> bytes | None:
    """The ``lone`` part naming a ``lone_form`` write, or None when it would not fit."""
    lone = b"%b\x00%b\x00%b" % (task_id.encode(), channel.encode(), ref)
    return lone if len(lone) < 256 and lone.count(0) == 2 else None


def write_list(found: Any, checkpoints: dict[str, bytes], dumps: Any
               ) -> list[tuple[str, str, bytes]]:
    """``(task_id, channel, data)`` of the writes ``found`` (any form above; ``dumps``
    encodes kept values); a child checkpoint deleted since leaves none."""
    if type(found) is str:
        row = checkpoints.get(found)
        lone = checkpoint_lone(row) if row is not None else b""
        if not lone:
            return []
        task, channel, ref = lone.split(b"\x00")
        return [(task.decode(), channel.decode(), REF + ref + found.encode())]
    if type(found) is tuple:
        return [(task, ch, data) for task, _, ch, data in kept_rows(found, dumps)]
    return [(task, ch, data) for (task, _), (ch, data) in found.items()]


def write_slots(found: Any, checkpoints: dict[str, bytes], dumps: Any
                ) -> dict[tuple[str, int], tuple[str, bytes]]:
    """The writes ``found`` as the dict form (``found`` itself if it is one)."""
    if type(found) is dict:
        return found
    if type(found) is str:
        return {(task, 0): (ch, data)
                for task, ch, data in write_list(found, checkpoints, dumps)}
    return {(task, idx): (ch, data) for task, idx, ch, data in kept_rows(found, dumps)}
