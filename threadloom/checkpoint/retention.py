"""Retention of a stored checkpointer: pruning, time-to-live, sweeping expired threads.

A mixin of ``StoredCheckpointer`` (``stored.py``), on the same storage primitives (``Tx``).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from threadloom.checkpoint.base import INTERRUPT
from threadloom.checkpoint.blob_rows import reachable_blobs
from threadloom.checkpoint.tx import CkRow, Tx

if TYPE_CHECKING:
    from threadloom.checkpoint.base import Checkpoint
    from threadloom.checkpoint.blob_rows import LRU, Ref
    from threadloom.checkpoint.blobs import BlobLayer


class Retention:
    """``prune``, ``set_ttl`` and ``sweep`` (mixed into ``StoredCheckpointer``)."""

    read_only: bool
    ttl_seconds: float | None
    blobs: BlobLayer
    _parents: LRU

    def _tx(self, write: bool) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    def _decode_record(self, row: CkRow) -> tuple[Checkpoint, dict[str, Ref]]:
        raise NotImplementedError


    def prune(self, thread_id: str, *, keep_last: int) -> int:
        """Keep the ``keep_last`` newest checkpoints of each namespace of a thread.

        Also kept: any older leaf checkpoint with a pending ``__interrupt__`` write (a
        paused fork), and every blob a kept checkpoint needs, delta bases included, so
        the state loaded after pruning equals the state before it.

        Raises:
            ValueError: ``keep_last`` < 1 (the latest checkpoint is always needed).
        """
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1, got {keep_last!r}")
        deleted = 0
        with self._tx(True) as tx:
            for ns in tx.namespaces(thread_id):
                deleted += self._prune_ns(tx, thread_id, ns, keep_last)
        return deleted

    def _prune_ns(self, tx: Tx, thread_id: str, ns: str, keep_last: int) -> int:
        rows = tx.checkpoint_rows(thread_id, ns, None, None)
        if len(rows) <= keep_last:
            return 0
        keep = rows[:keep_last]
        parents = {r.parent_id for r in rows}
        drop: list[str] = []
        for r in rows[keep_last:]:
            paused = r.checkpoint_id not in parents and any(
                ch == INTERRUPT for _, ch, _ in tx.writes(thread_id, ns, r.checkpoint_id)
            )
            if paused:
                keep.append(r)
            else:
                drop.append(r.checkpoint_id)
        tx.delete_checkpoints(thread_id, ns, drop)
        index = tx.blob_index(thread_id, ns)
        needed = reachable_blobs([self._decode_record(r)[1] for r in keep], index)
        tx.delete_blobs(thread_id, ns, [k for k in index if k not in needed])
        return len(drop)

    def set_ttl(self, thread_id: str, seconds: float | None) -> None:
        """Give one thread its own time-to-live (None: never expires), from now."""
        now = time.time()
        with self._tx(True) as tx:
            tx.put_thread(thread_id, seconds, now + seconds if seconds is not None else None)

    def sweep(self) -> int:
        """Delete every expired thread now. Returns how many were deleted.

        A thread paused by ``interrupt()`` (its latest checkpoint, in any namespace, has a
        pending interrupt) is not deleted: it is pruned to what resuming needs
        (``prune(keep_last=1)``) and its expiry is suspended until its next write, so a
        human can still answer it. Remove it with ``delete_thread``.
        """
        with self._tx(False) as tx:
            expired = tx.expired_threads(time.time())
        return sum(1 for thread_id in expired if self._expire(thread_id))

    def _expire(self, thread_id: str) -> bool:
        """Delete an expired thread (True), or compact it when it is paused (False)."""
        with self._tx(True) as tx:
            if not self._due(tx, thread_id):
                return False
            if not self._paused(tx, thread_id):
                tx.delete_thread(thread_id)
                deleted = True
            else:
                for ns in tx.namespaces(thread_id):
                    self._prune_ns(tx, thread_id, ns, 1)
                info = tx.get_thread(thread_id)
                tx.put_thread(thread_id, info[0] if info else None, None)
                deleted = False
        if deleted:
            self.blobs.forget_thread(thread_id)
            self._parents.drop_thread(thread_id)
        return deleted

    @staticmethod
    def _paused(tx: Tx, thread_id: str) -> bool:
        for ns in tx.namespaces(thread_id):
            latest = tx.checkpoint_row(thread_id, ns, None)
            if latest is not None and any(
                ch == INTERRUPT for _, ch, _ in tx.writes(thread_id, ns, latest.checkpoint_id)
            ):
                return True
        return False

    def _touch(self, tx: Tx, thread_id: str) -> None:
        info = tx.get_thread(thread_id)
        own_ttl = info[0] if info else None
        ttl = own_ttl if own_ttl is not None else self.ttl_seconds
        if info is None and ttl is None:
            return
        tx.put_thread(thread_id, own_ttl, time.time() + ttl if ttl is not None else None)

    def _expire_if_due(self, thread_id: str) -> bool:
        """Expire the thread if it is due; True when it is (or, read-only, reads as) gone."""
        with self._tx(False) as tx:
            if self._readable(tx, thread_id):
                return False
        return self.read_only or self._expire(thread_id)

    def _readable(self, tx: Tx, thread_id: str) -> bool:
        """Whether the thread reads as stored: it is not expired or, read-only (nothing is
        deleted or compacted then), expired but paused (a sweep would keep it)."""
        return not self._due(tx, thread_id) or (self.read_only and self._paused(tx, thread_id))

    @staticmethod
    def _due(tx: Tx, thread_id: str) -> bool:
        info = tx.get_thread(thread_id)
        return info is not None and info[1] is not None and info[1] <= time.time()
