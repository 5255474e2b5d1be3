"""One checkpointer algorithm over three stores (memory, SQLite, PostgreSQL).

``StoredCheckpointer`` implements the whole protocol of ``base.py`` plus retention (TTL,
``prune``, ``keep_latest``) and thread leases, on top of a small set of storage
primitives (``Tx``) that each backend provides inside one transaction. The backends
differ only in how rows are kept, so they pass the same conformance suite by design.

A checkpoint that cannot be decoded (edited by hand, damaged on disk) raises
``SerializationError`` (a missing blob: ``CheckpointError``) naming it; the rest reads.

A backend opened ``read_only`` (``SqliteCheckpointer(path, read_only=True)``,
``PostgresCheckpointer(conninfo, read_only=True)``) never writes: it creates and migrates
nothing (a store without threadloom's tables at the current schema version is refused
with ``check_schema``), an expired thread reads as deleted without being deleted (a paused
one reads as stored, without being compacted), and every writing method raises
``CheckpointError``.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from threadloom.checkpoint.base import (
    BaseCheckpointer,
    Checkpoint,
    CheckpointTuple,
    PendingWrite,
    make_config,
    thread_config,
)
from threadloom.checkpoint.blob_rows import LRU, BlobRow, NewBlob, Ref
from threadloom.checkpoint.blobs import BlobLayer
from threadloom.checkpoint.leases import LEASE_TOKEN_KEY, Lease, LeaseMixin
from threadloom.checkpoint.listing import apages, pages
from threadloom.checkpoint.records import (
    FORGED,
    bad_shape,
    encode_metadata,
    encode_record,
    name_checkpoint,
    row_metadata,
    row_record,
)
from threadloom.checkpoint.retention import Retention
from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.tx import WRITES_IDX, CkRow, OwnWrites, Tx, check_schema
from threadloom.checkpoint.write_refs import is_ref, resolve_writes, write_rows
from threadloom.errors import CheckpointError

__all__ = ["CkRow", "StoredCheckpointer", "Tx", "check_schema"]

_new_row = tuple.__new__  # CkRow(...) without the Python-level __new__ of a NamedTuple


class _Reader:
    def __init__(self, tx: Tx, thread_id: str, ns: str) -> None:
        self.tx, self.thread_id, self.ns = tx, thread_id, ns

    def fetch_blobs(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], BlobRow]:
        return self.tx.fetch_blobs(self.thread_id, self.ns, keys)

    def fetch_chain(self, channel: str, snap: str) -> dict[str, BlobRow]:
        return self.tx.fetch_chain(self.thread_id, self.ns, channel, snap)


class StoredCheckpointer(Retention, LeaseMixin, BaseCheckpointer):
    """The checkpointer algorithm; backends subclass it and provide ``_tx``.

    Args:
        codec: the closed codec values are stored with (a fresh ``Codec()`` by default,
            which also allows the globally registered types).
        keep_latest: after each ``put``, keep only this many newest checkpoints of the
            namespace (``prune``); None keeps everything.
        ttl_seconds: default time-to-live of a thread, counted from its last write;
            expired threads are deleted lazily on access or by ``sweep()``.
        cache_size: decoded list values and delta tips kept in this process.
    """

    def __init__(
        self,
        *,
        codec: Codec | None = None,
        keep_latest: int | None = None,
        ttl_seconds: float | None = None,
        cache_size: int = 256,
    ) -> None:
        if keep_latest is not None and keep_latest < 1:
            raise ValueError(f"keep_latest must be >= 1 or None, got {keep_latest!r}")
        self.codec = codec or Codec()
        self.keep_latest = keep_latest
        self.ttl_seconds = ttl_seconds
        self.blobs = BlobLayer(self.codec, cache_size)
        # (thread, ns) -> (last checkpoint id, its refs, its carry or None): see encode_refs
        self._parents = LRU(cache_size)

    read_only = False  # a backend opened read-only sets it (see the module doc)

    def _tx(self, write: bool) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    def clear_caches(self) -> None:
        """Forget every decoded value and delta tip held in this process (as after a
        restart); the stored data is untouched."""
        self.blobs = BlobLayer(self.codec, self.blobs.cache_size)
        self._parents = LRU(self.blobs.cache_size)

    # -- reading --------------------------------------------------------------------------

    def get_tuple(self, config: Mapping[str, Any]) -> CheckpointTuple | None:
        """See ``BaseCheckpointer.get_tuple``; an expired thread is deleted and reads as None
        (a paused one is compacted instead, see ``sweep``)."""
        thread_id, ns, cid = thread_config(config)
        for _ in range(2):
            with self._tx(False) as tx:
                if self._readable(tx, thread_id):
                    row = tx.checkpoint_row(thread_id, ns, cid)
                    return None if row is None else self._tuple(tx, row, seed=cid is None)
            if self.read_only or self._expire(thread_id):
                return None
        return None

    def list(
        self, config: Mapping[str, Any] | None, *,
        filter: Mapping[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: Mapping[str, Any] | None = None, limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """See ``BaseCheckpointer.list``: lazy, each checkpoint decoded as the caller gets
        to it, in pages of short read transactions (``listing.py``). Metadata filters
        compare decoded values in Python (never spliced into SQL)."""
        return self.list_as(config, None, filter=filter, before=before, limit=limit)

    def alist(  # type: ignore[override]
        self,
        config: Mapping[str, Any] | None,
        *,
        filter: Mapping[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list``, as lazy: each page is read in a worker thread when the caller
        gets to it."""
        return self.alist_as(config, None, filter=filter, before=before, limit=limit)

    def list_as(
        self,
        config: Mapping[str, Any] | None,
        convert: Callable[[CheckpointTuple], Any] | None,
        *,
        filter: Mapping[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> Iterator[Any]:
        """What ``list`` yields, each tuple passed through ``convert`` (None: kept) as it is
        decoded: history snapshots keep no tuple alive through the read."""
        for page in pages(self, config, convert, filter, before, limit):
            yield from page

    def alist_as(
        self,
        config: Mapping[str, Any] | None,
        convert: Callable[[CheckpointTuple], Any] | None,
        *,
        filter: Mapping[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Any]:
        """Async ``list_as``: one worker-thread hop per page (none for a store whose reads
        do no I/O, ``inline_io``)."""
        return apages(self, config, convert, filter, before, limit)

    def _tuple(self, tx: Tx, row: CkRow, *, seed: bool,
               written: builtins.list[tuple[str, str, bytes]] | None = None,
               children: dict[str, Any] | None = None) -> CheckpointTuple:
        """The decoded checkpoint of ``row``.

        ``children``: a listing's ``_with_refs`` context (the refs of the row before).

        Raises:
            SerializationError: the record, metadata, a blob or a pending write is not
                what threadloom wrote (a note names the checkpoint and the thread).
            CheckpointError: a blob it needs is missing (with the same note).
        """
        try:
            checkpoint, refs = self._decode_record(row)
            reader = _Reader(tx, row.thread_id, row.checkpoint_ns)
            checkpoint["channel_values"] = self.blobs.decode(
                row.thread_id, row.checkpoint_ns, refs, reader, seed=seed
            )
            if seed:
                self._parents.put(
                    (row.thread_id, row.checkpoint_ns), (row.checkpoint_id, refs, None)
                )
            if written is None:
                written = tx.writes(row.thread_id, row.checkpoint_ns, row.checkpoint_id)
            loads = self.codec.loads
            writes = [PendingWrite(task_id, channel, loads(data))
                      for task_id, channel, data in written if not is_ref(data)]
            if len(writes) < len(written):
                writes = self._with_refs(tx, row, written, {} if children is None else children)
            if children is not None:
                children["refs"] = {row.checkpoint_id: refs}
            metadata = self._decode_metadata(row)
        except CheckpointError as exc:
            name_checkpoint(exc, row)
            raise
        except FORGED as exc:  # the last net: whatever else a forged row trips
            raise name_checkpoint(bad_shape("data", exc), row) from exc
        ids = row.thread_id, row.checkpoint_ns
        parent = make_config(*ids, row.parent_id) if row.parent_id else None
        return CheckpointTuple(make_config(*ids, row.checkpoint_id), checkpoint, metadata,
                               parent, writes)

    def _with_refs(self, tx: Tx, row: CkRow, written: builtins.list[tuple[str, str, bytes]],
                   children: dict[str, Any]) -> builtins.list[PendingWrite]:
        """``row``'s pending writes, references resolved from stored bytes (``write_refs``)."""
        thread_id, ns = row.thread_id, row.checkpoint_ns
        reader = _Reader(tx, thread_id, ns)  # not self.blobs: its list items are the run's
        stored = children.get("layer") or children.setdefault(
            "layer", BlobLayer(self.codec, self.blobs.cache_size))

        def child_refs(child_id: str) -> Any:
            child = tx.checkpoint_row(thread_id, ns, child_id)
            return None if child is None else self._decode_record(child)[1]

        def decode(channel: str, ref: Ref) -> Any:
            return stored.decode(thread_id, ns, {channel: ref}, reader)[channel]

        return resolve_writes(written, self.codec.loads, dict(children.get("refs") or {}),
                              child_refs, decode)

    # -- writing --------------------------------------------------------------------------

    def put(self, config: Mapping[str, Any], checkpoint: Checkpoint,
            metadata: Mapping[str, Any], new_versions: Mapping[str, int]) -> dict[str, Any]:
        """See ``BaseCheckpointer.put``: one transaction writes the checkpoint and its blobs.

        The returned config names the new checkpoint and keeps the lease token of
        ``config`` (if any), so a run that saves with it stays fenced.

        Raises:
            SerializationError: a value the codec cannot store (nothing is written).
            ThreadBusyError: the config's lease token is no longer the thread's current one.
        """
        return self._store(config, checkpoint, metadata, new_versions, None)

    def put_with_writes(
        self, config: Mapping[str, Any], checkpoint: Checkpoint, metadata: Mapping[str, Any],
        new_versions: Mapping[str, int], writes: Sequence[tuple[str, Any]], task_id: str,
    ) -> dict[str, Any]:
        """See ``BaseCheckpointer.put_with_writes``: the writes (against the parent, which
        ``config`` must name) and the checkpoint in one transaction (PostgreSQL: one
        round trip); raises as ``put`` and ``put_writes``."""
        rows = self._lone_rows(writes, task_id, checkpoint["channel_values"], checkpoint["id"])
        return self._store(config, checkpoint, metadata, new_versions, rows)

    def put_with_own_writes(
        self, config: Mapping[str, Any], checkpoint: Checkpoint, metadata: Mapping[str, Any],
        new_versions: Mapping[str, int], writes: Sequence[tuple[str, Any]], task_id: str,
    ) -> dict[str, Any]:
        """See ``BaseCheckpointer.put_with_own_writes``: one transaction; raises as
        ``put`` and ``put_writes``."""
        rows = OwnWrites(write_rows(writes, task_id, WRITES_IDX, self.codec.dumps))
        return self._store(config, checkpoint, metadata, new_versions, rows)

    def _lone_rows(self, writes: Sequence[tuple[str, Any]], task_id: str,
                   values: Mapping[str, Any], child_id: str) -> Any:
        """What ``_commit`` stores for a lone task's ``writes`` (``write_rows``, by
        reference to the child checkpoint ``child_id`` holding ``values``)."""
        return write_rows(writes, task_id, WRITES_IDX, self.codec.dumps, values, child_id,
                          self.codec.encrypt is None)

    def _store(self, config: Mapping[str, Any], checkpoint: Checkpoint,
               metadata: Mapping[str, Any], new_versions: Mapping[str, int],
               writes: Any) -> dict[str, Any]:
        thread_id, ns, parent_id = thread_config(config)
        if writes and parent_id is None and type(writes) is not OwnWrites:
            raise CheckpointError("put_writes needs a config naming a checkpoint_id")
        cid = checkpoint["id"]
        key = (thread_id, ns)
        cached = self._parents.data.get(key)  # the last checkpoint put or loaded here
        if cached is not None and cached[0] == parent_id:
            parent_refs, parent_carry = cached[1], cached[2]
        else:
            parent_refs, parent_carry = self._parent_refs(thread_id, ns, parent_id), None
        refs, short, carry, new = self.blobs.encode_refs(
            thread_id, ns, checkpoint, new_versions, parent_refs, parent_carry
        )
        codec = self.codec
        row = _new_row(CkRow, (thread_id, ns, cid, parent_id,
                               encode_record(codec, checkpoint, refs, short),
                               encode_metadata(codec, metadata)))
        token = (config.get("configurable") or {}).get(LEASE_TOKEN_KEY)
        count = self._commit(row, new, token, writes)
        if new:
            self.blobs.committed(thread_id, ns, new)
        self._parents.put(key, (cid, refs, carry))
        if self.keep_latest and count > self.keep_latest:
            self.prune(thread_id, keep_last=self.keep_latest)
        conf = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}
        if token is not None:  # the run's next writes, made with this config, stay fenced
            conf[LEASE_TOKEN_KEY] = token
        return {"configurable": conf}

    def _commit(self, row: CkRow, new: builtins.list[NewBlob], token: int | None,
                writes: builtins.list[tuple[str, int, str, bytes]] | None = None) -> int:
        """Write one ``put`` in one transaction, after checking the lease ``token``; with
        ``writes`` (rows of ``write_rows``), those against the parent checkpoint too.

        Returns the namespace's checkpoint count when ``keep_latest`` is set (else 0).
        """
        with self._tx(True) as tx:
            thread_id, ns = row.thread_id, row.checkpoint_ns
            if token is not None:
                self._current_lease(tx, thread_id, token)
            if writes:  # against the parent, or this checkpoint (OwnWrites)
                tx.insert_writes(thread_id, ns, row.checkpoint_id if type(writes) is OwnWrites
                                 else row.parent_id or "", writes)
            if new:
                # in place: the caller's caches learn what was really stored
                new[:] = [self._check_base(tx, thread_id, ns, b) for b in new]
                tx.insert_blobs(thread_id, ns, new)
            tx.insert_checkpoint(row)
            self._touch(tx, thread_id)
            return tx.count_checkpoints(thread_id, ns) if self.keep_latest else 0

    def _decode_record(self, row: CkRow) -> tuple[Checkpoint, dict[str, Ref]]:
        """See ``records.row_record``."""
        return row_record(self.codec, row)

    def _decode_metadata(self, row: CkRow) -> dict[str, Any]:
        """See ``records.row_metadata``."""
        return row_metadata(self.codec, row)

    def _check_base(self, tx: Tx, thread_id: str, ns: str, blob: NewBlob) -> NewBlob:
        base = blob.row.base
        if base is None or tx.blob_exists(thread_id, ns, blob.channel, base):
            return blob
        return self.blobs.snapshot(blob)  # the base was pruned or deleted meanwhile

    def _parent_refs(self, thread_id: str, ns: str, parent_id: str | None) -> dict[str, Ref]:
        if parent_id is None:
            return {}
        cached = self._parents.get((thread_id, ns))
        if cached is not None and cached[0] == parent_id:
            return cached[1]
        with self._tx(False) as tx:
            row = tx.checkpoint_row(thread_id, ns, parent_id)
        if row is None:
            return {}
        return self._decode_record(row)[1]

    def put_writes(
        self, config: Mapping[str, Any], writes: Sequence[tuple[str, Any]], task_id: str
    ) -> None:
        """See ``BaseCheckpointer.put_writes``: idempotent per ``(task_id, index)``; the
        special channels (``__error__``, ``__interrupt__``...) are overwritten.

        Raises:
            CheckpointError: the config names no checkpoint.
            SerializationError: a value the codec cannot store (nothing is written).
            ThreadBusyError: the config's lease token is stale.
        """
        thread_id, ns, cid = thread_config(config)
        if cid is None:
            raise CheckpointError("put_writes needs a config naming a checkpoint_id")
        rows = write_rows(writes, task_id, WRITES_IDX, self.codec.dumps)
        with self._tx(True) as tx:
            self._check_fence(tx, thread_id, config)
            tx.insert_writes(thread_id, ns, cid, rows)

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, blob and write of a thread, in every namespace.

        A run holding the thread's lease (SQLite, PostgreSQL) loses it in the same
        transaction: its next write raises ``ThreadBusyError`` ("... the thread was
        deleted ..."), so it cannot bring back a partial history. Runs on
        ``InMemoryCheckpointer`` hold no lease: one going on keeps writing, into a thread
        of the same id. To refuse instead, take the lease first (``acquire_lease``), as
        ``threadloom threads delete`` does. The lease row stays: tokens never repeat.

        Raises:
            CheckpointError: the checkpointer was opened read-only.
        """
        with self._tx(True) as tx:
            lease = tx.get_lease(thread_id)
            tx.delete_thread(thread_id)
            if lease is not None and lease.owner is not None:
                tx.put_lease(thread_id, Lease(None, lease.token, 0.0))
        self.blobs.forget_thread(thread_id)
        self._parents.drop_thread(thread_id)

    def list_threads(self) -> builtins.list[str]:
        """Every thread id with at least one checkpoint, sorted."""
        with self._tx(False) as tx:
            return tx.thread_ids()

