"""A store's checkpoints read lazily, newest first: ``StoredCheckpointer.list`` and its
``list_as`` / ``alist``.

The checkpoints are read and decoded in pages, each page in its own short read
transaction: the first page holds one checkpoint and each next one twice as many, up to
``PAGE``. So ``next(iter(cp.list(config)))`` (or ``limit=1``) on a thread of 10,000
checkpoints decodes one, and the full history costs one transaction per ``PAGE``
checkpoints. No transaction stays open while the caller holds the iterator, so the caller
may run the graph (or write the store) between items, as LangGraph's time travel does.

Pages of one thread and namespace are read by key (``checkpoint_id`` below the last one
read); a listing across namespaces or threads reads its rows once, in the first page's
transaction, and decodes them in pages. A checkpoint deleted while a listing is under way
(``prune``, ``delete_thread``) is either listed whole or not at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import CheckpointTuple, thread_config
from threadloom.checkpoint.tx import CkRow
from threadloom.errors import CheckpointError
from threadloom.workers import to_worker

if TYPE_CHECKING:
    from threadloom.checkpoint.stored import StoredCheckpointer

PAGE = 256  # the largest page: checkpoints decoded per read transaction
_BATCH_WRITES = 4  # above this many rows a page reads its namespace's pending writes at once


def pages(
    cp: StoredCheckpointer,
    config: Mapping[str, Any] | None,
    convert: Callable[[CheckpointTuple], Any] | None,
    filter: Mapping[str, Any] | None,  # noqa: A002 - LangGraph's name
    before: Mapping[str, Any] | None,
    limit: int | None,
) -> Generator[list[Any], None, None]:
    """The checkpoints ``cp.list`` yields, as pages (lists, newest first), each tuple passed
    through ``convert`` (None: kept) as it is decoded; nothing is read before the first
    page is asked for.

    Raises:
        SerializationError, CheckpointError: as ``StoredCheckpointer.get_tuple``, when the
            page holding a damaged checkpoint is read.
    """
    thread_id: str | None = None
    ns: str | None = None
    if config is not None:
        thread_id, _, _ = thread_config(config)
        ns = (config.get("configurable") or {}).get("checkpoint_ns")
        if cp._expire_if_due(thread_id):  # noqa: SLF001
            return
    cursor = ((before or {}).get("configurable") or {}).get("checkpoint_id")
    if limit is not None and limit <= 0:
        return
    by_key = thread_id is not None and ns is not None
    held: list[CkRow] | None = None  # a listing across namespaces: its rows, read once
    pos = 0
    size = 1
    taken = 0
    batch: dict[tuple[str, str], Any] = {}  # (thread, ns) -> pending writes by checkpoint
    children: dict[str, Any] = {}  # what resolves pending-write references (cp._tuple)
    while True:
        out: list[Any] = []
        with cp._tx(False) as tx:  # noqa: SLF001
            if by_key:
                want = size if filter or limit is None else min(size, limit - taken)
                rows = tx.checkpoint_rows(thread_id, ns, cursor, want)
                done = len(rows) < want
                if rows:
                    cursor = rows[-1].checkpoint_id
            else:
                if held is None:
                    held = tx.checkpoint_rows(thread_id, ns, cursor, None if filter else limit)
                rows = held[pos:pos + size]
                pos += size
                done = pos >= len(held)
            for row in rows:
                if filter:
                    meta = cp._decode_metadata(row)  # noqa: SLF001
                    if any(k not in meta or meta[k] != v for k, v in filter.items()):
                        continue
                written = None
                if len(rows) > _BATCH_WRITES:  # many checkpoints: a namespace's writes at once
                    space = (row.thread_id, row.checkpoint_ns)
                    if space not in batch:
                        batch[space] = tx.ns_writes(*space)
                    written = batch[space].get(row.checkpoint_id, [])
                try:
                    item = cp._tuple(  # noqa: SLF001
                        tx, row, seed=False, written=written, children=children)
                except CheckpointError:
                    if held is not None and tx.checkpoint_row(*row[:3]) is None:
                        continue  # deleted since its row was read: not listed
                    raise
                out.append(item if convert is None else convert(item))
                taken += 1
                if limit is not None and taken >= limit:
                    done = True
                    break
        if out:
            yield out
        if done:
            return
        size = min(size * 2, PAGE)


async def apages(
    cp: StoredCheckpointer,
    config: Mapping[str, Any] | None,
    convert: Callable[[CheckpointTuple], Any] | None,
    filter: Mapping[str, Any] | None,  # noqa: A002 - LangGraph's name
    before: Mapping[str, Any] | None,
    limit: int | None,
) -> AsyncIterator[Any]:
    """The items of ``pages``, one by one, each page read in a worker thread when the
    caller gets to it (on the loop's thread for a store whose reads do no I/O,
    ``inline_io``); raises as ``pages``."""
    it = pages(cp, config, convert, filter, before, limit)
    inline = getattr(cp, "inline_io", False)
    try:
        while True:
            page = next(it, None) if inline else await to_worker(next, it, None)
            if page is None:
                return
            for item in page:
                yield item
    finally:
        it.close()
