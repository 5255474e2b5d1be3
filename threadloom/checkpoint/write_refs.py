"""A lone task's writes saved with the checkpoint of its step, by reference where they can be.

``put_with_writes`` saves a step's checkpoint and, against its parent, the writes of the
step's one task (as LangGraph saves every task's writes). Most such writes are already in
the new checkpoint: a key without a reducer holds the very object written, and a list key
whose reducer appended (``add_messages``) ends with the very objects written. Storing their
bytes again cost a second encoding per step and, for a conversation, each message twice.
Such a write is stored as a reference instead, naming the new checkpoint and what to take
from its channel value; reading pending writes resolves it (an older checkpoint's writes
are read far less often than steps are saved).

A reference starts with a NUL byte, which no codec output starts with (JSON text, or the
encryption prefix). Its forms:

- ``REF_VALUE + child id``: the write is the child checkpoint's value of the channel;
- ``REF_TAIL + n + ":" + child id``: the write is a list, the last ``n`` items of it;
- ``REF_LAST + child id``: the write is one item, the last one of it.

The identity test (``is``) makes a reference as good as the bytes it replaces: both are
encodings, at the same moment, of the same objects. So a reference is resolved from the
stored bytes, never from this process's decoded values (whose list items are the run's
own objects, which a node may still edit in place).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from threadloom.checkpoint.base import PendingWrite
from threadloom.checkpoint.records import bad_shape

__all__ = ["NO_VALUE", "REF", "REF_VALUE", "child_ref", "in_list", "is_ref", "parse_ref",
           "resolve_writes", "write_rows"]

REF = b"\x00"
REF_VALUE, REF_TAIL, REF_LAST = b"\x00v", b"\x00t", b"\x00l"
NO_VALUE = object()  # a channel the checkpoint holds no value for
_INT64 = 1 << 63


def in_list(value: Any, current: list[Any], child: bytes) -> bytes | None:
    """The reference for a write of ``value`` to a list channel whose value in the child
    checkpoint ``child`` (its id) is ``current``, ``value`` not being that list itself;
    None when ``value`` is not its tail (or last item) object by object."""
    if not current:
        return None
    if type(value) is list:
        n = len(value)
        if 0 < n <= len(current) and all(map(operator.is_, value, current[-n:])):
            return b"%b%d:%b" % (REF_TAIL, n, child)
        return None
    if current[-1] is value and type(value) not in (tuple, dict):
        return REF_LAST + child
    return None


def child_ref(value: Any, current: Any, child: bytes) -> bytes | None:
    """The reference for a write of ``value`` to a channel whose value in the child
    checkpoint ``child`` (its id) is ``current``: ``REF_VALUE`` when it is that very
    object, else a list's tail (``in_list``); None when it is neither."""
    if current is value:
        return REF_VALUE + child
    return in_list(value, current, child) if type(current) is list else None


def write_rows(
    writes: Sequence[tuple[str, Any]], task_id: str, index: Mapping[str, int],
    dumps: Callable[..., bytes], values: Mapping[str, Any] | None = None,
    child_id: str = "", plain: bool = False,
) -> list[tuple[str, int, str, bytes]]:
    """``writes`` as stored rows ``(task_id, idx, channel, data)``: the special channels
    have their own (negative) index in ``index``, so saving them again overwrites. Given
    the saved checkpoint's channel ``values`` and id, a write found in them is a
    reference: ``REF_VALUE`` when it is the very object the channel holds, else a list's
    tail (``child_ref``). ``plain``: ``dumps`` writes plain JSON (no encryption), so
    ``None`` and an int are written here.

    Raises:
        SerializationError: a write the codec cannot store (path ``writes.<channel>``).
    """
    rows = []
    child = child_id.encode()
    get = (values or {}).get
    for i, (ch, v) in enumerate(writes):
        ref = child_ref(v, get(ch, NO_VALUE), child)
        if ref is not None:
            data = ref
        elif plain and v is None:
            data = b"null"
        elif plain and type(v) is int and -_INT64 <= v < _INT64:
            data = b"%d" % v
        else:
            data = dumps(v, path="writes." + ch)
        rows.append((task_id, index.get(ch, i), ch, data))
    return rows


def is_ref(data: bytes) -> bool:
    """Whether stored write ``data`` is a reference (see the module)."""
    return data[:1] == REF


def parse_ref(data: bytes) -> tuple[str, Callable[[Any], Any]]:
    """``(child checkpoint id, take)`` of a reference: ``take(channel value)`` is the
    write.

    Raises:
        ValueError: ``data`` is no reference this module writes.
    """
    kind, rest = data[:2], data[2:].decode()
    if kind == REF_VALUE:
        return rest, _same
    if kind == REF_LAST:
        return rest, _last
    if kind == REF_TAIL:
        count, _, child = rest.partition(":")
        n = int(count)
        if n <= 0 or not child:
            raise ValueError("a write reference with a bad count")
        return child, lambda value: list(value[-n:])
    raise ValueError(f"an unknown write reference {kind!r}")


def resolve_writes(
    written: Sequence[tuple[str, str, bytes]], loads: Callable[[bytes], Any],
    children: dict[str, Any], child_refs: Callable[[str], Any],
    decode: Callable[[str, Any], Any],
) -> list[PendingWrite]:
    """Stored ``(task_id, channel, data)`` writes decoded, each reference taken from the
    channel value of the child checkpoint it names: its refs from ``children`` (child id
    -> refs; those read here are added) or ``child_refs(child id)`` (None: gone), the
    value from ``decode(channel, ref)``. A reference whose child is gone (deleted by
    hand) is left out, as a write never saved.

    Raises:
        SerializationError: a reference this module does not write (a forged row).
    """
    out: list[PendingWrite] = []
    for task_id, channel, data in written:
        if not is_ref(data):
            out.append(PendingWrite(task_id, channel, loads(data)))
            continue
        try:
            child_id, take = parse_ref(data)
        except ValueError as exc:
            raise bad_shape(f"pending write {channel!r}", exc) from exc
        if child_id not in children:
            children[child_id] = child_refs(child_id)
        refs = children[child_id]
        if refs is None or channel not in refs:
            continue
        out.append(PendingWrite(task_id, channel, take(decode(channel, refs[channel]))))
    return out


def _same(value: Any) -> Any:
    return value


def _last(value: Any) -> Any:
    return value[-1]
