"""``InMemoryCheckpointer``: checkpoints kept in this process, as codec bytes.

As LangGraph's ``InMemorySaver``, but values are stored serialized by the closed codec
(so every value that works here also works in SQLite and PostgreSQL), lists are stored as
deltas, and it has the same retention (``prune``, ``keep_latest``, TTL) and leases as the
durable backends. As with every backend, decoded list items are shared with this process's
cache: replace state values, never mutate them in place (docs/persistence.md).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from threadloom.checkpoint.blob_rows import BlobRow, NewBlob
from threadloom.checkpoint.leases import Lease
from threadloom.checkpoint.memory_rows import (
    BATCH,
    RAW,
    SMALL,
    blob_row,
    kept_rows,
    kept_tuple,
    kept_writes,
    lone_form,
    lone_write,
    pack,
    pack_checkpoint,
    row_bytes,
    row_data_at,
    row_fields,
    unpack,
    unpack_checkpoint,
    write_list,
    write_slots,
)
from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.stored import CkRow, OwnWrites, StoredCheckpointer
from threadloom.checkpoint.write_refs import REF


class _Ns:
    """One ``(thread, namespace)``: checkpoints in id order, blobs and pending writes.

    Blob data, and checkpoint rows (parent id, record, metadata) of 1 KB or more, are
    kept deflated with a preset dictionary. Smaller checkpoint rows (~120 bytes in a chat
    thread) are kept raw: deflating one would cost as much as the rest of a save.

    Blobs are kept as ``channel -> blob id -> row bytes`` (``row_bytes``): the collector
    tracks neither, so a saved blob adds no object that collections must visit.
    """

    __slots__ = ("checkpoints", "blobs", "writes", "sorted", "last")

    def __init__(self) -> None:
        self.checkpoints: dict[str, bytes] = {}
        self.blobs: dict[str, dict[str, bytes]] = {}
        self.writes: dict[str, Any] = {}  # cid -> its writes, in a form of memory_rows
        self.sorted = True  # checkpoints are in id order
        self.last = ""  # the greatest id inserted (perhaps deleted since)

    def rows(self) -> Iterator[tuple[tuple[str, str], BlobRow]]:
        """Every blob as ``((channel, blob id), row)``, data as stored (maybe deflated)."""
        for channel, rows in self.blobs.items():
            for bid, row in rows.items():
                base, snap, n, chain, at = row_fields(row)
                yield (channel, bid), BlobRow(base, snap, n, chain, row[at:])


class _Locked:
    """``with store._tx(...) as tx``: the store's lock held around its primitives (a plain
    class: entered on every write, it costs a fraction of a generator-based one)."""

    __slots__ = ("lock", "tx")

    def __init__(self, lock: Any, tx: Any) -> None:
        self.lock = lock
        self.tx = tx

    def __enter__(self) -> Any:
        self.lock.acquire()
        return self.tx

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


class _MemoryTx:
    """The storage primitives of ``stored.Tx`` over plain dicts (caller holds the lock)."""

    def __init__(self, store: InMemoryCheckpointer) -> None:
        self.s = store

    @property
    def dumps(self) -> Any:  # encodes the values kept_writes kept, when they are read
        return self.s.codec.dumps

    def _ns(self, thread_id: str, ns: str) -> _Ns | None:
        spaces = self.s._data.get(thread_id)
        return spaces.get(ns) if spaces else None

    def _ns_create(self, thread_id: str, ns: str) -> _Ns:
        spaces = self.s._data.setdefault(thread_id, {})
        space = spaces.get(ns)
        if space is None:
            space = spaces[ns] = _Ns()
        return space

    @staticmethod
    def _ordered(space: _Ns) -> dict[str, bytes]:
        if not space.sorted:
            space.checkpoints = dict(sorted(space.checkpoints.items()))
            space.sorted = True
        return space.checkpoints

    def checkpoint_row(self, thread_id: str, ns: str, cid: str | None) -> CkRow | None:
        space = self._ns(thread_id, ns)
        if space is None or not space.checkpoints:
            return None
        cks = self._ordered(space)
        if cid is None:
            cid = next(reversed(cks))
        found = cks.get(cid)
        return None if found is None else CkRow(thread_id, ns, cid, *unpack_checkpoint(found))

    def checkpoint_rows(
        self, thread_id: str | None, ns: str | None, before: str | None, limit: int | None
    ) -> list[CkRow]:
        threads = [thread_id] if thread_id is not None else sorted(self.s._data)
        rows: list[CkRow] = []
        for t in threads:
            for name, space in sorted(self.s._data.get(t, {}).items()):
                if ns is not None and name != ns:
                    continue
                for cid, found in reversed(self._ordered(space).items()):
                    if before is None or cid < before:
                        rows.append(CkRow(t, name, cid, *unpack_checkpoint(found)))
        rows.sort(key=lambda r: r.checkpoint_id, reverse=True)
        return rows if limit is None else rows[:limit]

    def count_checkpoints(self, thread_id: str, ns: str) -> int:
        space = self._ns(thread_id, ns)
        return len(space.checkpoints) if space else 0

    def insert_checkpoint(self, row: CkRow) -> None:
        thread_id, ns, cid, parent_id, record, metadata = row
        spaces = self.s._data.get(thread_id)
        space = spaces.get(ns) if spaces else None
        if space is None:
            space = self._ns_create(thread_id, ns)
        if cid > space.last:
            space.last = cid
        elif space.checkpoints:
            space.sorted = False
        space.checkpoints[cid] = pack_checkpoint(parent_id, record, metadata)

    def delete_checkpoints(self, thread_id: str, ns: str, cids: list[str]) -> None:
        space = self._ns(thread_id, ns)
        if space is None:
            return
        for cid in cids:
            space.checkpoints.pop(cid, None)
            space.writes.pop(cid, None)

    def namespaces(self, thread_id: str) -> list[str]:
        return sorted(self.s._data.get(thread_id, {}))

    def thread_ids(self) -> list[str]:
        return sorted(
            t for t, spaces in self.s._data.items() if any(s.checkpoints for s in spaces.values())
        )

    def delete_thread(self, thread_id: str) -> None:
        self.s._data.pop(thread_id, None)
        self.s._threads.pop(thread_id, None)

    def blob_exists(self, thread_id: str, ns: str, channel: str, bid: str) -> bool:
        space = self._ns(thread_id, ns)
        return space is not None and bid in space.blobs.get(channel, ())

    def fetch_blobs(
        self, thread_id: str, ns: str, keys: list[tuple[str, str]]
    ) -> dict[tuple[str, str], BlobRow]:
        space = self._ns(thread_id, ns)
        if space is None:
            return {}
        out: dict[tuple[str, str], BlobRow] = {}
        blobs = space.blobs
        for channel, bid in keys:
            row = blobs.get(channel, {}).get(bid)
            if row is not None:
                out[(channel, bid)] = blob_row(row)
        return out

    def fetch_chain(self, thread_id: str, ns: str, channel: str, snap: str) -> dict[str, BlobRow]:
        space = self._ns(thread_id, ns)
        if space is None:
            return {}
        out: dict[str, BlobRow] = {}
        for bid, row in space.blobs.get(channel, {}).items():
            base, row_snap, n, chain, at = row_fields(row)
            if row_snap == snap:
                out[bid] = BlobRow(base, row_snap, n, chain, unpack(row[at:]))
        return out

    def insert_blobs(self, thread_id: str, ns: str, blobs: list[NewBlob]) -> None:
        if blobs:
            self.s._insert_blobs(self._ns_create(thread_id, ns), blobs)

    def blob_index(self, thread_id: str, ns: str) -> dict[tuple[str, str], str | None]:
        space = self._ns(thread_id, ns)
        if space is None:
            return {}
        return {
            (channel, bid): row_fields(row)[0]
            for channel, rows in space.blobs.items()
            for bid, row in rows.items()
        }

    def delete_blobs(self, thread_id: str, ns: str, keys: list[tuple[str, str]]) -> None:
        space = self._ns(thread_id, ns)
        if space is None:
            return
        blobs = space.blobs
        for channel, bid in keys:
            rows = blobs.get(channel)
            if rows is not None:
                rows.pop(bid, None)
                if not rows:
                    del blobs[channel]

    def writes(self, thread_id: str, ns: str, cid: str) -> list[tuple[str, str, bytes]]:
        space = self._ns(thread_id, ns)
        found = space.writes.get(cid) if space else None
        return write_list(found, space.checkpoints, self.dumps) if found and space else []

    def ns_writes(self, thread_id: str, ns: str) -> dict[str, list[tuple[str, str, bytes]]]:
        space = self._ns(thread_id, ns)
        return {cid: write_list(found, space.checkpoints, self.dumps)
                for cid, found in space.writes.items()} if space else {}

    def insert_writes(
        self, thread_id: str, ns: str, cid: str, rows: list[tuple[str, int, str, bytes]]
    ) -> None:
        space = self._ns_create(thread_id, ns)
        found = space.writes.get(cid)
        if found is None and (found := kept_tuple(rows)) is not None:
            space.writes[cid] = found  # a task's first writes: memory_rows' tuple form
            return
        slots = space.writes[cid] = write_slots(found or {}, space.checkpoints, self.dumps)
        for task_id, idx, channel, data in rows:
            if idx < 0 or (task_id, idx) not in slots:
                slots[(task_id, idx)] = (channel, data)

    def get_thread(self, thread_id: str) -> tuple[float | None, float | None] | None:
        return self.s._threads.get(thread_id)

    def put_thread(self, thread_id: str, ttl: float | None, expires_at: float | None) -> None:
        self.s._threads[thread_id] = (ttl, expires_at)

    def expired_threads(self, now: float) -> list[str]:
        return sorted(
            t for t, (_, exp) in self.s._threads.items() if exp is not None and exp <= now
        )

    def get_lease(self, thread_id: str) -> Lease | None:
        return self.s._leases.get(thread_id)

    def put_lease(self, thread_id: str, lease: Lease) -> None:
        self.s._leases[thread_id] = lease


_ASYNC_METHODS = ("aget_tuple", "alist", "aput", "aput_writes", "adelete_thread", "aprune")


class InMemoryCheckpointer(StoredCheckpointer):
    """Checkpoints in this process's memory (tests, notebooks, short-lived servers).

    Args:
        codec: the closed codec (default: a fresh ``Codec()``).
        keep_latest: keep only this many newest checkpoints per namespace (None: all).
        ttl_seconds: default thread time-to-live from its last write (None: forever);
            see ``set_ttl`` and ``sweep``.
        cache_size: decoded list values kept for O(delta) reloads.

    Thread-safe: one lock guards the store; values are encoded outside it. Calls do no
    I/O, so the engine calls them directly even from async runs (``inline_io``), unless
    a subclass overrides an async method (``aput``, ``aget_tuple``...): an async run then
    calls the async methods, as LangGraph's does, so the override runs.
    """

    inline_io = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if any(getattr(cls, m) is not getattr(InMemoryCheckpointer, m) for m in _ASYNC_METHODS):
            cls.inline_io = False

    def __init__(self, *, codec: Codec | None = None, keep_latest: int | None = None,
                 ttl_seconds: float | None = None, cache_size: int = 256) -> None:
        super().__init__(
            codec=codec, keep_latest=keep_latest, ttl_seconds=ttl_seconds, cache_size=cache_size
        )
        self._data: dict[str, dict[str, _Ns]] = {}
        self._threads: dict[str, tuple[float | None, float | None]] = {}
        self._leases: dict[str, Lease] = {}
        self._lock = threading.RLock()
        # blobs stored raw until _deflate_raw: (the channel's rows, blob id), all of _raw_ns
        self._raw: list[tuple[dict[str, bytes], str]] = []
        self._raw_ns: _Ns | None = None
        self._txn = _MemoryTx(self)
        self._locked = _Locked(self._lock, self._txn)

    def _tx(self, write: bool) -> _Locked:
        return self._locked

    def _commit(self, row: CkRow, new: list[NewBlob], token: int | None,
                writes: Any = None) -> int:
        # As StoredCheckpointer._commit with the _MemoryTx primitives it calls
        # (_check_base, insert_checkpoint) inlined: this runs on every save.
        thread_id, ns, cid, parent_id, record, metadata = row
        with self._lock:
            if token is not None:
                self._current_lease(self._txn, thread_id, token)
            spaces = self._data.get(thread_id)
            space = spaces.get(ns) if spaces else None
            if new:  # a delta whose base was pruned meanwhile becomes a snapshot, in place:
                # the caller's caches learn what was really stored (as _check_base)
                stored = space.blobs if space is not None else {}
                for i, blob in enumerate(new):
                    base = blob.row.base
                    if base is not None and base not in stored.get(blob.channel, ()):
                        new[i] = self.blobs.snapshot(blob)
            if space is None:
                space = self._txn._ns_create(thread_id, ns)
            lone = b""
            if writes and type(writes) is OwnWrites:  # the input's, against this checkpoint
                self._txn.insert_writes(thread_id, ns, cid, writes)
            elif writes:  # the step's task's writes, against the parent (memory_rows' forms)
                key = parent_id or ""
                if type(writes) is tuple:  # lone_form: one write the new checkpoint holds
                    lone = b"" if key in space.writes else lone_write(*writes) or b""
                    if not lone:
                        writes = [cid, writes[0], writes[1], REF + writes[2]]
                if lone:
                    space.writes[key] = cid
                elif key in space.writes:
                    self._txn.insert_writes(thread_id, ns, key, kept_rows(writes, self._txn.dumps))
                else:
                    space.writes[key] = tuple(writes)
            if new:
                self._insert_blobs(space, new)
            if cid > space.last:
                space.last = cid
            elif space.checkpoints:
                space.sorted = False
            space.checkpoints[cid] = pack_checkpoint(parent_id, record, metadata, lone)
            if self.ttl_seconds is not None or thread_id in self._threads:
                self._touch(self._txn, thread_id)
            return len(space.checkpoints) if self.keep_latest else 0

    def _lone_rows(self, writes: Any, task_id: str, values: Any, child_id: str) -> Any:
        return lone_form(writes, task_id, values) or kept_writes(
            writes, task_id, values, child_id, self.codec.dumps, self.codec.encrypt is None)

    def _insert_blobs(self, space: _Ns, new: list[NewBlob]) -> None:
        """Store blobs raw; blobs of ``SMALL`` bytes or more wait in ``_raw`` and are
        deflated in one pass (warming zlib costs most for a small blob) as soon as a save
        goes to another thread or namespace, or ``BATCH`` of them wait: a run's blobs are
        deflated by the next save elsewhere. Rows read the same either way (``unpack``).
        """
        raw = self._raw
        if raw and self._raw_ns is not space:
            self._deflate_raw()
        self._raw_ns = space
        blobs = space.blobs
        for channel, bid, row, _ in new:
            stored = blobs.get(channel)
            if stored is None:
                stored = blobs[channel] = {}
            if bid not in stored:
                base, snap, n, chain, data = row
                stored[bid] = row_bytes(base, snap, n, chain, RAW + data)
                if len(data) >= SMALL:
                    raw.append((stored, bid))
        if len(raw) >= BATCH:
            self._deflate_raw()

    def _deflate_raw(self) -> None:
        """Deflate the blobs ``_insert_blobs`` stored raw (caller holds the lock)."""
        for stored, bid in self._raw:
            row = stored.get(bid)
            if row is not None:
                at = row_data_at(row)
                if row[at : at + 1] == RAW:
                    stored[bid] = row[:at] + pack(row[at + 1 :])
        self._raw.clear()
        self._raw_ns = None
