"""Rows read back from the SQL checkpoint tables, checked: a column holding what
threadloom never writes there (TEXT in a BLOB or INTEGER column, as SQLite allows) is a
``SerializationError`` naming the stored item, never a raw ``TypeError`` later."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.checkpoint.blob_rows import BlobRow
from threadloom.checkpoint.tx import CkRow
from threadloom.errors import SerializationError

_SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL", type(None): "NULL"}


def as_blob(value: Any, where: str) -> bytes:
    """``value`` read from a blob column, as bytes.

    Args:
        where: the stored item, for the error (``"the record of checkpoint '1f0...'
            (thread 'pay1')"``).

    Raises:
        SerializationError: ``value`` is not bytes-like (a TEXT, INTEGER, REAL or NULL
            that something other than threadloom wrote there), naming ``where``.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    kind = _SQL_TYPES.get(type(value), type(value).__name__)
    raise SerializationError(
        f"{where} holds {kind}, not a BLOB: threadloom did not write it",
        type_name=type(value).__name__,
    )


def _ck(r: Sequence[Any]) -> CkRow:
    record, meta = r[4], r[5]
    if type(record) is not bytes:
        record = as_blob(record, f"the record of checkpoint {r[2]!r} (thread {r[0]!r})")
    if type(meta) is not bytes:
        meta = as_blob(meta, f"the metadata of checkpoint {r[2]!r} (thread {r[0]!r})")
    return CkRow(r[0], r[1], r[2], r[3], record, meta)


def _blob(r: Sequence[Any], thread_id: str) -> BlobRow:
    data, base, snap, n, chain = r[6], r[2], r[3], r[4], r[5]
    if type(data) is not bytes:
        data = as_blob(data, f"blob {r[1]!r} of channel {r[0]!r} (thread {thread_id!r})")
    if (type(n) is not int or type(chain) is not int or type(snap) is not str
            or not (base is None or type(base) is str)):
        # SQLite keeps a TEXT put into an INTEGER column as text: refuse it here
        kinds = ", ".join(f"{k} {type(v).__name__}" for k, v in
                          (("base", base), ("snap", snap), ("n", n), ("chain", chain)))
        raise SerializationError(
            f"blob {r[1]!r} of channel {r[0]!r} (thread {thread_id!r}) has columns of the "
            f"wrong type ({kinds}): threadloom did not write it"
        )
    return BlobRow(base, snap, n, chain, data)
