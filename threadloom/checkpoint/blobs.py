"""Channel blobs: what every backend stores per channel version, and how lists become deltas.

A checkpoint does not hold its channel values; it holds ``refs``: channel -> blob id. A
blob id is ``"<version>.<checkpoint id that wrote it>"``, so two forks that both reach
version 5 of a channel write two different blobs and can never mix. Only the channels in
``new_versions`` get a new blob; the others keep the parent's ref. A small value (see
``inline_value``) gets no blob: its ref is ``(value,)`` and it is stored in the
checkpoint's own record.

A list value is stored as a *delta* when it starts with exactly the same item objects
(``is``) as the value this process last stored or loaded for that channel: only the
appended tail is written, with a pointer to the base blob. Otherwise, and whenever the
items stored in deltas since the last snapshot reach the snapshot's own length, a full
snapshot is written (but not before ``MIN_CHAIN`` items). Snapshots therefore at least
double in length, so a thread's total
bytes stay linear in what was appended (LangGraph's savers rewrite the whole list each
step: quadratic). Loading concatenates from the nearest snapshot, or from a cached
decoded ancestor, so a second load in the same process costs only the new tail.

Finding the shared prefix needs no item-by-item compare when the reducer noted the
append (``operator.add``, ``add_messages``: ``reducers/appends.py``) and the list it extends
is the very list stored last: the cache keeps that list itself, not a copy, so a step on a
100k-item list costs what its appended tail costs. Other lists are compared by identity.

Caveat, as with every engine in this family: state values must be replaced, not mutated
in place. Lists and their items are shared between the in-process cache and the running
graph (the cache remembers each list's stored length, so an in-place append is never
stored twice); lists read back (``get_state``) are copies.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Mapping
from typing import Any

from threadloom.checkpoint.blob_rows import (
    _INT_BOUND,
    LRU,
    MIN_CHAIN,
    BlobReader,
    BlobRow,
    NewBlob,
    Ref,
    _Tip,
    inline_value,
)
from threadloom.checkpoint.serde import Codec
from threadloom.errors import CheckpointError, SerializationError
from threadloom.reducers.appends import appended_from

_new = tuple.__new__  # builds a NamedTuple without its Python-level __new__

class BlobLayer:
    """Encodes changed channels into blob rows and rebuilds values from them.

    Args:
        codec: the codec blobs are written with.
        cache_size: how many decoded list values (and per-channel delta tips) to keep in
            this process; 0 disables deltas and caching (every write is a snapshot).
    """

    def __init__(self, codec: Codec, cache_size: int = 256) -> None:
        self.codec = codec
        self.cache_size = cache_size
        self._values = LRU(cache_size)
        self._tips = LRU(cache_size)
        self._lock = threading.Lock()

    # -- writing --------------------------------------------------------------------------

    def encode(
        self,
        thread_id: str,
        ns: str,
        checkpoint: Mapping[str, Any],
        new_versions: Mapping[str, Any],
        parent_refs: Mapping[str, Ref],
    ) -> tuple[dict[str, Ref], list[NewBlob]]:
        """Refs for every channel with a value, and the new blobs to insert.

        A changed small value (``inline_value``) gets the ref ``(value,)`` and no blob.

        Raises:
            SerializationError: a value the codec cannot store (path names the channel).
        """
        refs, _, _, new = self.encode_refs(thread_id, ns, checkpoint, new_versions, parent_refs)
        return refs, new

    def encode_refs(
        self,
        thread_id: str,
        ns: str,
        checkpoint: Mapping[str, Any],
        new_versions: Mapping[str, Any],
        parent_refs: Mapping[str, Ref],
        parent_carry: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Ref], dict[str, Any], dict[str, Any], list[NewBlob]]:
        """``encode``, plus the refs in the two short forms a record stores them in.

        Returns ``(refs, short, carry, new)``: ``short`` is ``records.short_refs(refs,
        checkpoint["id"])``, built in the same pass; ``carry`` is what a child's record
        stores for each channel the child does not change (``carry_refs(refs)``). Given
        the parent's ``carry`` and the same channels in the same order, only the changed
        channels are visited: the others are copied over at C speed. (A carried blob id
        is then written whole even if a reused checkpoint id makes it this checkpoint's
        own; both forms read back as the same id.)

        Raises:
            SerializationError: a value the codec cannot store (path names the channel).
        """
        values = checkpoint["channel_values"]
        own = "." + checkpoint["id"]
        new: list[NewBlob] = []
        if parent_carry is not None and list(values) == list(parent_refs):
            refs: dict[str, Ref] = dict(parent_refs)
            short = parent_carry.copy()
            carry = parent_carry.copy()
            changed: Any = [(ch, v) for ch, v in values.items() if ch in new_versions]
        else:
            refs, short, carry = {}, {}, {}
            changed = values.items()
        versions = checkpoint.get("channel_versions", {})
        for channel, value in changed:
            if channel not in new_versions:
                ref = parent_refs.get(channel)
                if ref is not None:
                    refs[channel] = ref
                    if type(ref) is not str:
                        short[channel] = carry[channel] = [None, ref[0]]
                    else:
                        carry[channel] = ref
                        short[channel] = [ref[: -len(own)]] if ref.endswith(own) else ref
                    continue
            t = type(value)
            if t is int:  # the common cases of inline_value first, without a call
                inline = -_INT_BOUND < value < _INT_BOUND
            elif value is None or t is bool:
                inline = True
            else:
                inline = (t is str or t is float or t is dict) and inline_value(value)
            if inline:  # a private copy: the caller's dict may change later
                kept = dict(value) if t is dict else value
                refs[channel] = (kept,)
                short[channel] = carry[channel] = [None, kept]
                continue
            version = f"{new_versions.get(channel, versions.get(channel, 0))}"
            bid = version + own
            refs[channel] = carry[channel] = bid
            short[channel] = [version]
            row = self._encode_value(thread_id, ns, channel, bid, value)
            new.append(_new(NewBlob, (channel, bid, row, value)))
        return refs, short, carry, new

    def snapshot(self, blob: NewBlob) -> NewBlob:
        """The same blob written as a full snapshot (when a delta's base has vanished)."""
        value = blob.value
        n = len(value) if type(value) is list else -1
        data = self.codec.dumps(value, path=f"channel_values.{blob.channel}")
        return blob._replace(row=BlobRow(None, blob.bid, n, 0, data))

    def _encode_value(self, thread_id: str, ns: str, channel: str, bid: str, value: Any) -> BlobRow:
        path = f"channel_values.{channel}"
        if type(value) is not list:
            return BlobRow(None, bid, -1, 0, self.codec.dumps(value, path=path))
        with self._lock:  # no LRU bump: committed() moves the tip to the end
            tip: _Tip | None = self._tips.data.get((thread_id, ns, channel))
        n = len(value)
        if tip is not None:
            items = tip.items
            base_len = tip.n
            if n >= base_len and (
                    (appended_from(value) is items and len(items) == base_len)
                    or all(map(operator.is_, items[:base_len] if len(items) != base_len
                                                                 else items, value))):
                chain = tip.chain + n - base_len
                if chain < max(base_len - tip.chain, MIN_CHAIN):  # still shorter than the snapshot
                    try:
                        data = self.codec.dumps(value[base_len:], path=path)
                    except SerializationError:
                        self.codec.dumps(value, path=path)  # re-raise with the right index
                        raise
                    return _new(BlobRow, (tip.bid, tip.snap, n, chain, data))
        return _new(BlobRow, (None, bid, n, 0, self.codec.dumps(value, path=path)))

    def committed(self, thread_id: str, ns: str, blobs: list[NewBlob]) -> None:
        """Record blobs that are now durably stored (their values become delta bases)."""
        tips, values = self._tips, self._values
        with self._lock:
            for channel, bid, row, value in blobs:
                key = (thread_id, ns, channel)
                if row.n < 0:
                    tips.data.pop(key, None)
                    continue
                tip = _new(_Tip, (bid, value, row.snap, row.chain, row.n))
                tips.put(key, tip)
                values.put((thread_id, ns, channel, bid), tip)

    def forget_thread(self, thread_id: str) -> None:
        """Drop every cached value and tip of a deleted thread."""
        with self._lock:
            self._values.drop_thread(thread_id)
            self._tips.drop_thread(thread_id)

    # -- reading --------------------------------------------------------------------------

    def decode(
        self,
        thread_id: str,
        ns: str,
        refs: Mapping[str, Ref],
        reader: BlobReader,
        *,
        seed: bool = False,
    ) -> dict[str, Any]:
        """Rebuild the channel values a checkpoint's ``refs`` name.

        Args:
            seed: make the loaded list values this process's delta bases (set when
                loading a thread's latest checkpoint, which the next write extends).

        Raises:
            CheckpointError: a referenced blob is missing (the store was edited or pruned
                by hand).
            SerializationError: a blob the codec refuses (a note names blob and channel).
        """
        out: dict[str, Any] = {}
        tips: dict[str, _Tip] = {}
        missing: list[tuple[str, str]] = []
        with self._lock:
            for channel, bid in refs.items():
                if type(bid) is not str:  # kept in the record; a dict is copied
                    value = bid[0]
                    out[channel] = dict(value) if type(value) is dict else value
                    continue
                hit = self._values.get((thread_id, ns, channel, bid))
                if hit is not None:
                    tips[channel] = hit
                else:
                    missing.append((channel, bid))
        rows = reader.fetch_blobs(missing) if missing else {}
        for channel, bid in missing:
            row = rows.get((channel, bid))
            if row is None:
                raise CheckpointError(
                    f"blob {bid!r} of channel {channel!r} (thread {thread_id!r}) is missing"
                )
            try:
                value = self._build(thread_id, ns, channel, bid, row, reader)
            except SerializationError as exc:  # the checkpoint and thread are noted above
                exc.add_note(f"in blob {bid!r} of channel {channel!r}")
                raise
            if row.n < 0:
                out[channel] = value
            else:
                tips[channel] = _Tip(bid, value, row.snap, row.chain, len(value))
        with self._lock:
            for channel, tip in tips.items():
                out[channel] = tip.items[:tip.n]
                if seed:
                    self._tips.put((thread_id, ns, channel), tip)
        return out

    def _build(
        self, thread_id: str, ns: str, channel: str, bid: str, row: BlobRow, reader: BlobReader
    ) -> Any:
        loads = self.codec.loads
        parts: list[bytes] = []
        chain: dict[str, BlobRow] | None = None
        cur_bid, cur = bid, row
        base: _Tip | None = None
        walked: list[tuple[str, BlobRow]] = []  # the deltas passed, nearest first
        while cur.base is not None:
            parts.append(cur.data)
            with self._lock:
                base = self._values.get((thread_id, ns, channel, cur.base))
            if base is not None:
                break
            if chain is None:
                chain = reader.fetch_chain(channel, cur.snap)
            nxt = chain.get(cur.base)
            if nxt is None:
                raise CheckpointError(
                    f"delta base {cur.base!r} of channel {channel!r} (thread {thread_id!r}) "
                    "is missing"
                )
            if len(parts) > len(chain):  # more links than rows: the chain loops
                raise SerializationError(
                    f"the delta chain of blob {bid!r} of channel {channel!r} (thread "
                    f"{thread_id!r}) loops back on itself: threadloom did not write it"
                )
            cur_bid, cur = cur.base, nxt
            walked.append((cur_bid, cur))
        if base is None:
            value = loads(cur.data)
            if cur.n < 0:
                return value
            if type(value) is not list:
                raise CheckpointError(f"list blob {cur_bid!r} of {channel!r} is not a list")
            base = self._remember(thread_id, ns, channel,
                                  _Tip(cur_bid, value, cur.snap, 0, len(value)))
            if not parts:
                return value
        value = base.items[:base.n]
        for data in reversed(parts):
            tail = loads(data)
            if type(tail) is not list:
                raise CheckpointError(f"delta of channel {channel!r} is not a list")
            value.extend(tail)
        # an older value is a prefix of this one: its nearest ancestors share the list, so
        # reading a history newest first walks a long chain once per half cache, not each time
        keep = walked[:self._values.size // 2]
        with self._lock:
            for abid, arow in reversed(keep):
                if arow.n >= 0 and (thread_id, ns, channel, abid) not in self._values.data:
                    self._values.put((thread_id, ns, channel, abid),
                                     _Tip(abid, value, arow.snap, arow.chain, arow.n))
        self._remember(thread_id, ns, channel, _Tip(bid, value, row.snap, row.chain, len(value)))
        return value

    def _remember(self, thread_id: str, ns: str, channel: str, tip: _Tip) -> _Tip:
        with self._lock:
            self._values.put((thread_id, ns, channel, tip.bid), tip)
        return tip
