"""The bytes of a checkpoint row: its record (checkpoint without values, plus blob refs)
and its metadata.

A record is codec JSON ``{"k": body, "r": refs}`` when the checkpoint has the engine's
plain shape (the eight ``Checkpoint`` keys, no user value in ``next``, empty
``versions_seen``). The body then keeps only what differs from the defaults, under short
names: ``v`` (absent: 1), ``ts`` (absent: derived from the id, see ``checkpoint_ts``),
``cv`` channel_versions, ``nx`` next, ``b`` barriers (absent: empty). Any other checkpoint
is written whole as ``{"c": body, "r": refs}`` (the id and the values are never in it),
through the codec's full walk when it may hold user values.

``refs`` maps each channel to where its value is: ``"<version>.<id>"`` (a blob written
by an earlier checkpoint), ``["<version>"]`` (a blob of this checkpoint) or
``[null, value]`` (a small scalar kept in the record itself, no blob row).

Engine metadata (exactly ``source``, ``step``, ``writes`` and an empty ``parents``, in
that order) is written as the list ``[source, step, writes]``; any other metadata as
the dict itself. Both forms are read back as the same dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadloom.checkpoint.base import Checkpoint, checkpoint_ts
from threadloom.checkpoint.blob_rows import Ref
from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.serde_builtin import TAG
from threadloom.checkpoint.tx import CkRow
from threadloom.errors import CheckpointError, SerializationError
from threadloom.types import Send

_CHECKPOINT_KEYS = frozenset(Checkpoint.__annotations__)
_OPTIONAL_MAPS = ("versions_seen", "barriers")
_META_ORDER = ("source", "step", "writes", "parents")
_META_KEYS = frozenset(_META_ORDER)


def encode_record(
    codec: Codec,
    checkpoint: Checkpoint,
    refs: Mapping[str, Ref],
    short: dict[str, Any] | None = None,
) -> bytes:
    """The record bytes of ``checkpoint`` whose values are at ``refs``.

    Args:
        short: ``short_refs(refs, checkpoint["id"])`` when the caller has it already
            (``BlobLayer.encode_refs`` builds it while encoding the values).

    Raises:
        SerializationError: a user value in ``next`` or a bookkeeping map the codec
            cannot store.
    """
    cid = checkpoint["id"]
    if short is None:
        short = short_refs(refs, cid)
    plain_refs = TAG not in short
    if plain_refs and checkpoint.keys() == _CHECKPOINT_KEYS:
        body = _compact_body(checkpoint, cid)
        if body is not None:
            return codec.dumps_plain({"k": body, "r": short})
    body = {
        k: v for k, v in checkpoint.items()
        if k not in ("channel_values", "id") and not (k in _OPTIONAL_MAPS and not v)
    }
    if plain_refs and _plain_record(body):
        return codec.dumps_plain({"c": body, "r": short})
    return codec.dumps({"c": body, "r": short}, path="checkpoint")


def short_refs(refs: Mapping[str, Ref], cid: str) -> dict[str, Any]:
    """``refs`` as a record stores them: ``["<version>"]`` for a blob of checkpoint
    ``cid`` itself, ``[null, value]`` for a value kept in the record, other blob ids as
    they are."""
    own = "." + cid
    cut = -len(own)
    short: dict[str, Any] = {}
    for ch, ref in refs.items():
        if type(ref) is str:
            short[ch] = [ref[:cut]] if ref.endswith(own) else ref
        else:
            short[ch] = [None, ref[0]]
    return short


def decode_record(codec: Codec, cid: str, data: bytes) -> tuple[Checkpoint, dict[str, Ref]]:
    """The checkpoint (``channel_values`` still empty) and refs stored in a record.

    Raises:
        SerializationError: bytes that are not a record this codec wrote, or a record
            whose refs or bookkeeping (``next``, versions, barriers) are not of the types
            threadloom writes.
    """
    record = codec.loads(data)
    body = record.get("k")
    checkpoint: Any
    if body is not None:
        ts = body.get("ts")
        checkpoint = {
            "v": body.get("v", 1),
            "id": cid,
            "ts": ts if ts is not None else checkpoint_ts(cid) or "",
            "channel_values": {},
            "channel_versions": body.get("cv", {}),
            "versions_seen": {},
            "next": body.get("nx", []),
            "barriers": body.get("b", {}),
        }
    else:
        checkpoint = record["c"]
        checkpoint["id"] = cid
        for key in _OPTIONAL_MAPS:
            checkpoint.setdefault(key, {})
    _check_body(checkpoint)
    own = "." + cid
    refs: dict[str, Ref] = {}
    for ch, r in record["r"].items():
        if type(r) is str:
            refs[ch] = r
        elif type(r) is list and len(r) == 1 and type(r[0]) is str:
            refs[ch] = r[0] + own
        elif type(r) is list and len(r) == 2 and r[0] is None:
            refs[ch] = (r[1],)
        else:
            raise SerializationError(
                f"the stored record refers to channel {ch!r}'s value by a "
                f"{type(r).__name__} threadloom does not write"
            )
    return checkpoint, refs


def _check_body(checkpoint: Any) -> None:
    """Refuse a decoded checkpoint whose bookkeeping is not of the types the engine
    writes (a number in ``next``, a text version...), before the engine trips on it."""
    if type(checkpoint) is not dict:
        raise SerializationError(f"the stored checkpoint is a {type(checkpoint).__name__}")
    if _usual_body(checkpoint):
        return
    wrong = [k for k, ok in (
        ("v", type(checkpoint.get("v")) is int),
        ("ts", type(checkpoint.get("ts")) is str),
        ("channel_versions", _map_of(checkpoint.get("channel_versions"), _is_version)),
        ("versions_seen", _map_of(checkpoint.get("versions_seen"),
                                  lambda m: _map_of(m, _is_version))),
        ("next", type(checkpoint.get("next")) is list
         and all(map(_is_next_item, checkpoint["next"]))),
        ("barriers", _map_of(checkpoint.get("barriers"),
                             lambda v: type(v) is list and all(type(x) is str for x in v))),
    ) if not ok]
    if wrong:
        raise SerializationError(
            f"the stored checkpoint's {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'}"
            " not of the types threadloom writes"
        )


_VERSION_TYPES = (int, str, float)


def _usual_body(checkpoint: dict[str, Any]) -> bool:
    """The checks of ``_check_body`` for the usual checkpoint in one pass (no versions
    seen, no barriers, node names in ``next``); False sends it to the general checks."""
    versions, nxt = checkpoint.get("channel_versions"), checkpoint.get("next")
    seen, barriers = checkpoint.get("versions_seen"), checkpoint.get("barriers")
    if not (type(checkpoint.get("v")) is int and type(checkpoint.get("ts")) is str
            and type(versions) is dict and type(nxt) is list and type(seen) is dict
            and not seen and type(barriers) is dict and not barriers):
        return False
    for key, version in versions.items():
        if type(key) is not str or type(version) not in _VERSION_TYPES:
            return False
    for item in nxt:
        if type(item) is not str:
            return False
    return True


def _is_next_item(x: Any) -> bool:
    """A node name, or a Send packet as the engine saves it (``{"node": name, "arg": ...}``)."""
    return type(x) is str or (type(x) is dict and type(x.get("node")) is str) or isinstance(
        x, Send)


def _is_version(v: Any) -> bool:
    return type(v) is int or type(v) is str or type(v) is float


def _map_of(m: Any, ok: Any) -> bool:
    return type(m) is dict and all(type(k) is str and ok(v) for k, v in m.items())


def encode_metadata(codec: Codec, metadata: Mapping[str, Any]) -> bytes:
    """The metadata bytes: the engine's shape as a short list, anything else as a dict.

    Raises:
        SerializationError: a metadata value the codec cannot store.
    """
    if type(metadata) is dict and len(metadata) == 4:
        source, step, writes, parents = metadata.values()
        if (
            type(source) is str
            and type(step) is int
            and type(parents) is dict
            and not parents
            and tuple(metadata) == _META_ORDER
            and type(writes) is dict
            and TAG not in writes
        ):
            for names in writes.values():
                if type(names) is not list:
                    break
                for name in names:
                    if type(name) is not str:
                        break
                else:
                    continue
                break
            else:
                return codec.dumps_plain([source, step, writes])
    if _plain_metadata(metadata):
        return codec.dumps_plain(metadata)
    return codec.dumps(dict(metadata), path="metadata")


def decode_metadata(codec: Codec, data: bytes) -> dict[str, Any]:
    """The metadata dict ``encode_metadata`` wrote.

    Raises:
        SerializationError: bytes this codec did not write.
    """
    meta = codec.loads(data)
    if type(meta) is list:
        return {"source": meta[0], "step": meta[1], "writes": meta[2], "parents": {}}
    return meta  # type: ignore[no-any-return]


# -- bookkeeping the engine writes, recognised so it skips the codec's walk --------------


def _compact_body(checkpoint: Checkpoint, cid: str) -> dict[str, Any] | None:
    """The ``"k"`` body of a checkpoint with exactly the ``Checkpoint`` keys, or None
    when one of them holds something else than the engine writes."""
    v, ts, versions = checkpoint["v"], checkpoint["ts"], checkpoint["channel_versions"]
    seen, nxt, barriers = checkpoint["versions_seen"], checkpoint["next"], checkpoint["barriers"]
    if (
        type(v) is not int
        or type(ts) is not str
        or type(seen) is not dict
        or seen
        or type(versions) is not dict
        or type(nxt) is not list
        or type(barriers) is not dict
        or TAG in versions
    ):
        return None
    for x in versions.values():
        if type(x) is not int:
            return None
    for x in nxt:
        if type(x) is not str:
            return None  # Send packets carry user values: the codec must see them
    body: dict[str, Any] = {}
    if v != 1:
        body["v"] = v
    if ts != checkpoint_ts(cid):
        body["ts"] = ts
    if versions:
        body["cv"] = versions
    if nxt:
        body["nx"] = nxt
    if barriers:
        if not _plain_writes(barriers):
            return None
        body["b"] = barriers
    return body


def _plain_writes(m: Any) -> bool:
    """Whether ``m`` is a dict of str -> list of str (metadata writes, barriers)."""
    if type(m) is not dict or TAG in m:
        return False
    for v in m.values():
        if type(v) is not list:
            return False
        for s in v:
            if type(s) is not str:
                return False
    return True


def _plain_record(body: Mapping[str, Any]) -> bool:
    """Whether a checkpoint record is the engine's plain shape (no user values inside)."""
    if type(body.get("v")) is not int or type(body.get("ts")) is not str:
        return False
    if body.get("versions_seen"):
        return False
    if any(type(x) is not str for x in body.get("next", ())):
        return False  # Send packets carry user values: the codec must see them
    versions = body.get("channel_versions", {})
    if type(versions) is not dict or TAG in versions:
        return False
    if any(type(v) is not int for v in versions.values()):
        return False
    return _plain_writes(body.get("barriers", {}))


def _plain_metadata(meta: Mapping[str, Any]) -> bool:
    """Whether metadata is exactly the engine's ``source``/``step``/``writes``/``parents``."""
    if type(meta) is not dict or not meta.keys() <= _META_KEYS:
        return False
    if type(meta.get("source", "")) is not str or type(meta.get("step", 0)) is not int:
        return False
    parents = meta.get("parents", {})  # a subgraph's: namespace -> checkpoint id
    if type(parents) is not dict or TAG in parents:
        return False
    for k, v in parents.items():
        if type(k) is not str or type(v) is not str:
            return False
    return _plain_writes(meta.get("writes", {}))


FORGED = (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError)
"""What decoding a row threadloom did not write may raise beyond its own errors
(``StoredCheckpointer``'s last net)."""


def bad_shape(what: str, exc: BaseException | None = None) -> SerializationError:
    """The error for a stored ``what`` that decodes, but not to what threadloom writes
    (the caller chains what decoding it raised as the cause)."""
    why = f" ({type(exc).__name__}: {str(exc)[:200]})" if exc is not None else ""
    return SerializationError(
        f"the stored {what} is valid JSON but not in the shape threadloom writes{why}"
    )


def name_checkpoint(exc: CheckpointError, row: CkRow) -> CheckpointError:
    """Add a note naming the checkpoint ``exc`` was raised reading (once); returns it."""
    where = f"in checkpoint {row.checkpoint_id!r} of thread {row.thread_id!r}"
    if row.checkpoint_ns:
        where += f", namespace {row.checkpoint_ns!r}"
    if where not in getattr(exc, "__notes__", ()):
        exc.add_note(where)
    return exc


def row_record(codec: Codec, row: CkRow) -> tuple[Checkpoint, dict[str, Ref]]:
    """The checkpoint (values still empty) and blob refs of a stored row's record.

    Raises:
        SerializationError: the record is not one threadloom wrote (bytes that are not
            codec JSON, or JSON of another shape); a note names the checkpoint.
    """
    return _decoding("record", row, decode_record, codec, row.checkpoint_id,  # type: ignore[no-any-return]
                     row.record)


def row_metadata(codec: Codec, row: CkRow) -> dict[str, Any]:
    """A stored row's metadata; raises ``SerializationError`` like ``row_record``."""
    meta = _decoding("metadata", row, decode_metadata, codec, row.metadata)
    if type(meta) is not dict:  # JSON of another shape
        raise name_checkpoint(bad_shape("metadata"), row)
    return meta


def _decoding(part: str, row: CkRow, decode: Any, *args: Any) -> Any:
    try:
        return decode(*args)
    except CheckpointError as exc:
        name_checkpoint(exc, row)
        raise
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise name_checkpoint(bad_shape(part), row) from exc
