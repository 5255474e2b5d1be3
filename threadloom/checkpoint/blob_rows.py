"""The rows of channel blobs: what a backend stores per channel version, and the small
helpers around them (which values stay inline, an LRU, which blobs a checkpoint needs).

``blobs.py`` turns values into these rows and back (snapshots and list deltas); it
documents the scheme.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from threadloom.checkpoint.serde_builtin import TAG

Ref = str | tuple[Any]
"""Where a checkpoint's channel value is: a blob id, or ``(value,)`` for a small scalar
kept in the checkpoint's own record (no blob row)."""

INLINE_STR = 64
INLINE_KEYS = 8
_INT_BOUND = 1 << 63


def inline_scalar(value: Any) -> bool:
    """Whether ``value`` is a small scalar: None, a bool, an int within 64 bits, a finite
    float, or an ASCII str of at most ``INLINE_STR`` characters."""
    t = type(value)
    return (
        value is None
        or t is bool
        or (t is int and -_INT_BOUND < value < _INT_BOUND)
        or (t is str and len(value) <= INLINE_STR and value.isascii())
        or (t is float and math.isfinite(value))
    )


def inline_value(value: Any) -> bool:
    """Whether a channel value is kept in the checkpoint record instead of a blob row:
    a small scalar (``inline_scalar``) or a dict of at most ``INLINE_KEYS`` of them under
    short ASCII str keys (a counter, a usage tally)."""
    if type(value) is not dict:
        return inline_scalar(value)
    if len(value) > INLINE_KEYS or TAG in value:
        return False
    for k, v in value.items():
        if type(k) is not str or len(k) > INLINE_STR or not k.isascii():
            return False
        t = type(v)
        if t is int:  # the common cases first, without a call
            if not -_INT_BOUND < v < _INT_BOUND:
                return False
        elif not (v is None or t is bool or inline_scalar(v)):
            return False
    return True


MIN_CHAIN = 32
"""Deltas may hold at least this many items before a new snapshot, so short lists (a
10-message thread) are stored about once instead of as 1-, 2-, 4-, 8-item snapshots."""


class BlobRow(NamedTuple):
    """One stored channel value (or list tail).

    Fields:
        base: blob id of the value this delta appends to; None for a snapshot.
        snap: blob id of the chain's snapshot (its own id for a snapshot).
        n: length of the full list value; -1 when the value is not a list.
        chain: items stored in deltas since ``snap``, this one included (0 for snapshots).
        data: codec bytes: the whole value (snapshot) or the appended tail (delta).
    """

    base: str | None
    snap: str
    n: int
    chain: int
    data: bytes


class BlobReader(Protocol):
    """What the layer needs from a backend to load blobs of one ``(thread, ns)``."""

    def fetch_blobs(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], BlobRow]:
        """Rows for ``(channel, blob id)`` keys; missing keys are absent."""
        ...

    def fetch_chain(self, channel: str, snap: str) -> dict[str, BlobRow]:
        """Every row of ``channel`` whose chain starts at snapshot ``snap``, by blob id."""
        ...


class _Tip(NamedTuple):
    bid: str
    items: list[Any]  # the stored list itself (its first ``n`` items are what was stored)
    snap: str
    chain: int
    n: int


class NewBlob(NamedTuple):
    """A blob to insert, with what the caches learn once it is committed."""

    channel: str
    bid: str
    row: BlobRow
    value: Any


class LRU:
    """A small least-recently-used map (callers hold their own lock)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        data = self.data
        size = self.size
        if size <= 0:
            return
        data[key] = value
        data.move_to_end(key)
        while len(data) > size:
            data.popitem(last=False)

    def drop_thread(self, thread_id: str) -> None:
        for key in [k for k in list(self.data) if k[0] == thread_id]:
            self.data.pop(key, None)


def carry_refs(refs: Mapping[str, Ref]) -> dict[str, Any]:
    """What a child's record stores for each channel of ``refs`` it does not change: the
    blob id, or ``[null, value]`` for a value kept in the record."""
    return {ch: r if type(r) is str else [None, r[0]] for ch, r in refs.items()}


def reachable_blobs(
    refs_of_kept: list[Mapping[str, Ref]],
    index: Mapping[tuple[str, str], str | None],
) -> set[tuple[str, str]]:
    """The ``(channel, blob id)`` keys kept checkpoints need, delta bases included.

    Args:
        refs_of_kept: the ``refs`` of every checkpoint that stays.
        index: ``(channel, blob id) -> base blob id`` for every stored blob of the
            ``(thread, ns)``.
    """
    keep: set[tuple[str, str]] = set()
    for refs in refs_of_kept:
        for channel, bid in refs.items():
            if type(bid) is not str:
                continue  # kept in the record
            key: tuple[str, str] | None = (channel, bid)
            while key is not None and key not in keep:
                keep.add(key)
                base = index.get(key)
                key = (channel, base) if base is not None else None
    return keep
