"""The storage primitives a checkpoint store provides inside one transaction.

``StoredCheckpointer`` (``stored.py``) runs the whole checkpointer algorithm on these; a
backend (memory, SQLite, PostgreSQL) implements ``Tx`` and keeps rows its own way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple, Protocol

from threadloom.checkpoint.base import ERROR, FAILED, INTERRUPT, RESUME, SCHEDULED
from threadloom.checkpoint.blob_rows import BlobRow, NewBlob
from threadloom.checkpoint.leases import Lease
from threadloom.errors import CheckpointError

# Special write channels keep one slot per task (negative idx) and are overwritten.
WRITES_IDX = {ERROR: -1, SCHEDULED: -2, INTERRUPT: -3, RESUME: -4, FAILED: -5}


class OwnWrites(list):  # type: ignore[type-arg]
    """Write rows a ``_commit`` stores against the checkpoint it writes, not against its
    parent (``put_with_own_writes``)."""

    __slots__ = ()


class CkRow(NamedTuple):
    """A stored checkpoint row."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    record: bytes
    metadata: bytes




class Tx(Protocol):
    """Storage primitives, all inside one backend transaction."""

    def checkpoint_row(self, thread_id: str, ns: str, cid: str | None) -> CkRow | None: ...
    def checkpoint_rows(
        self, thread_id: str | None, ns: str | None, before: str | None, limit: int | None
    ) -> list[CkRow]: ...
    def count_checkpoints(self, thread_id: str, ns: str) -> int: ...
    def insert_checkpoint(self, row: CkRow) -> None: ...
    def delete_checkpoints(self, thread_id: str, ns: str, cids: list[str]) -> None: ...
    def namespaces(self, thread_id: str) -> list[str]: ...
    def thread_ids(self) -> list[str]: ...
    def delete_thread(self, thread_id: str) -> None: ...
    def blob_exists(self, thread_id: str, ns: str, channel: str, bid: str) -> bool: ...
    def fetch_blobs(
        self, thread_id: str, ns: str, keys: list[tuple[str, str]]
    ) -> dict[tuple[str, str], BlobRow]: ...
    def fetch_chain(
        self, thread_id: str, ns: str, channel: str, snap: str
    ) -> dict[str, BlobRow]: ...
    def insert_blobs(self, thread_id: str, ns: str, blobs: list[NewBlob]) -> None: ...
    def blob_index(self, thread_id: str, ns: str) -> dict[tuple[str, str], str | None]: ...
    def delete_blobs(self, thread_id: str, ns: str, keys: list[tuple[str, str]]) -> None: ...
    def writes(self, thread_id: str, ns: str, cid: str) -> list[tuple[str, str, bytes]]: ...
    def ns_writes(self, thread_id: str, ns: str) -> dict[str, list[tuple[str, str, bytes]]]:
        """``writes`` of every checkpoint of a namespace at once: checkpoint id -> rows."""
        ...
    def insert_writes(
        self, thread_id: str, ns: str, cid: str, rows: list[tuple[str, int, str, bytes]]
    ) -> None: ...
    def get_thread(self, thread_id: str) -> tuple[float | None, float | None] | None: ...
    def put_thread(self, thread_id: str, ttl: float | None, expires_at: float | None) -> None: ...
    def expired_threads(self, now: float) -> list[str]: ...
    def get_lease(self, thread_id: str) -> Lease | None: ...
    def put_lease(self, thread_id: str, lease: Lease) -> None: ...


def check_schema(where: str, tables: Sequence[str], present: Collection[str],
                 version: Callable[[], int], supported: int, absent: str) -> None:
    """Refuse, for a store opened read-only, anything but threadloom's complete tables at
    the ``supported`` schema version (a store opened for writing creates or migrates them).

    Args:
        where: the store, as the errors name it (``"'app.db'"``, a masked conninfo).
        tables: every table threadloom keeps; ``present``: those the store has.
        version: reads the tables' schema version (called only when all are present).
        absent: what a store without any of the tables is, e.g. ``"a SQLite database
            without threadloom's tables"``.

    Raises:
        CheckpointError: ``"<where> holds no threadloom checkpoints (<absent>)"``, or
            names the missing tables, or the other schema version and what to do.
    """
    missing = [t for t in tables if t not in present]
    if len(missing) == len(tables):
        raise CheckpointError(f"{where} holds no threadloom checkpoints ({absent})")
    if missing:
        raise CheckpointError(f"{where} lacks threadloom tables {missing}: not a complete "
                              "threadloom checkpoint database")
    found = version()
    if found != supported:
        raise CheckpointError(
            f"{where} has checkpoint tables of schema version {found}, "
            + (f"newer than this threadloom ({supported}); upgrade threadloom"
               if found > supported else f"older than this threadloom's ({supported}); "
               "open it once for writing (e.g. threadloom run) to upgrade it"))
