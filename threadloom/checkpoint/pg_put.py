"""PostgreSQL: a checkpoint ``put`` in one round trip (libpq pipeline mode).

The generic ``StoredCheckpointer._commit`` reads before it writes (the lease row, each
delta's base blob, the thread's TTL row), so on PostgreSQL each statement waited for the
server: about six round trips a step. Here the same transaction is sent at once —
``BEGIN``, the lease row locked ``FOR UPDATE``, the blobs, the checkpoint, the TTL touch,
``COMMIT``, one ``Sync`` — and every write checks on the server what the generic path
checked in Python:

- with a lease token, each write happens only ``WHERE`` the locked lease row still has an
  owner and that token; a stale token writes nothing (and commits nothing), and the
  caller then runs the generic path, which raises ``ThreadBusyError`` with its message;
- a delta blob stores its ``snap`` only when its base blob still exists, else NULL into a
  NOT NULL column: the statement fails, the transaction rolls back, and the generic path
  writes the blob as a full snapshot;
- the TTL touch is one upsert computing ``expires_at`` from the row's own ``ttl`` or the
  store's default, as ``Retention._touch`` does in two statements.

So durability is unchanged: the checkpoint and its blobs are one transaction, committed
before ``put`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq

from threadloom.checkpoint.blob_rows import NewBlob
from threadloom.checkpoint.tx import CkRow, OwnWrites

_CK_COLS = "thread_id, checkpoint_ns, checkpoint_id, parent_id, record, metadata"


@dataclass(frozen=True)
class PutStatements:
    """The pipelined put's statements for one table set (``Sql.names``)."""

    lease_lock: str
    lease_ok: str
    ck_insert: str
    bl_insert: str
    touch: str
    count: str
    wr_insert: str  # a task's write against the parent (put_with_writes), kept if there
    wr_upsert: str  # a special channel's write (negative idx): replaced

    @classmethod
    def build(cls, names: dict[str, str], ttl_default: float | None) -> PutStatements:
        """Statements over the tables ``names`` (``sqlbase.table_names``)."""
        ck, bl, th, le, wr = (names[k] for k in ("t_checkpoints", "t_blobs", "t_threads",
                                                 "t_leases", "t_writes"))
        wins = (f"INSERT INTO {wr} (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, "
                "channel, value) SELECT %s, %s, %s, %s, %s::integer, %s, %s::bytea WHERE {ok} "
                "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) ")
        ok = (f"EXISTS (SELECT 1 FROM {le} WHERE thread_id = %s AND owner IS NOT NULL "
              "AND token = %s)")
        if ttl_default is None:  # own ttl or none: NULL + now is NULL, as _touch writes
            touch = f"UPDATE {th} SET expires_at = %s + ttl WHERE thread_id = %s AND {{ok}}"
        else:
            touch = (f"INSERT INTO {th} AS t (thread_id, ttl, expires_at) SELECT %s, NULL, "
                     f"%s::float8 + {float(ttl_default)!r} WHERE {{ok}} ON CONFLICT (thread_id) "
                     f"DO UPDATE SET expires_at = %s::float8 + COALESCE(t.ttl, "
                     f"{float(ttl_default)!r})")
        return cls(
            lease_lock=f"SELECT owner, token FROM {le} WHERE thread_id = %s FOR UPDATE",
            lease_ok=ok,
            ck_insert=(
                f"INSERT INTO {ck} ({_CK_COLS}) SELECT %s, %s, %s, %s, %s::bytea, %s::bytea "
                "WHERE {ok} ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE "
                "SET parent_id = excluded.parent_id, record = excluded.record, "
                "metadata = excluded.metadata"),
            bl_insert=(
                f"INSERT INTO {bl} (thread_id, checkpoint_ns, channel, bid, base, snap, n, "
                "chain, data) SELECT %s, %s, %s, %s, %s::text, CASE WHEN %s::text IS NULL "
                f"OR EXISTS (SELECT 1 FROM {bl} b WHERE b.thread_id = %s AND "
                "b.checkpoint_ns = %s AND b.channel = %s AND b.bid = %s) THEN %s::text END, "
                "%s::integer, %s::integer, %s::bytea WHERE {ok} "
                "ON CONFLICT (thread_id, checkpoint_ns, channel, bid) DO NOTHING"),
            touch=touch,
            count=f"SELECT count(*) FROM {ck} WHERE thread_id = %s AND checkpoint_ns = %s",
            wr_insert=wins + "DO NOTHING",
            wr_upsert=wins + "DO UPDATE SET channel = excluded.channel, value = excluded.value",
        )


def put_pipelined(conn: Any, st: PutStatements, row: CkRow, new: list[NewBlob],
                  token: int | None, now: float, count: bool,
                  writes: list[tuple[str, int, str, bytes]] | None = None) -> int | None:
    """Write one ``put`` (``row`` and its blobs ``new``; ``writes``: a task's write rows
    against the parent checkpoint, or against ``row`` for ``OwnWrites``) in one
    transaction and one round trip on ``conn`` (an autocommit psycopg connection outside
    any transaction).

    Returns the namespace's checkpoint count (``count``) or 0; None when nothing was
    written and the generic path must run: the lease token is stale, or a delta's base
    blob has vanished.

    Raises:
        psycopg.Error: any other database error (the transaction is rolled back).
    """
    tid, ns = row.thread_id, row.checkpoint_ns
    ok, guard = ("TRUE", ()) if token is None else (st.lease_ok, (tid, token))
    try:
        with conn.pipeline():
            control = conn.cursor()
            control.execute("BEGIN")
            if token is not None:
                conn.cursor().execute(st.lease_lock, (tid,))
            for b in new:
                r = b.row
                conn.cursor().execute(st.bl_insert.format(ok=ok), (
                    tid, ns, b.channel, b.bid, r.base, r.base, tid, ns, b.channel, r.base,
                    r.snap, r.n, r.chain, r.data, *guard))
            target = row.checkpoint_id if type(writes) is OwnWrites else row.parent_id
            for task_id, idx, channel, data in writes or ():
                stmt = st.wr_upsert if idx < 0 else st.wr_insert
                conn.cursor().execute(stmt.format(ok=ok), (
                    tid, ns, target, task_id, idx, channel, data, *guard))
            written = conn.cursor()
            written.execute(st.ck_insert.format(ok=ok), (*row, *guard))
            touch = st.touch.format(ok=ok)
            if touch.startswith("UPDATE"):
                conn.cursor().execute(touch, (now, tid, *guard))
            else:
                conn.cursor().execute(touch, (tid, now, *guard, now))
            counted = conn.cursor()
            if count:
                counted.execute(st.count, (tid, ns))
            control.execute("COMMIT")
    except psycopg.errors.NotNullViolation as exc:
        _rollback(conn)
        if exc.diag.column_name == "snap":  # a delta's base is gone: snapshot it instead
            return None
        raise
    except BaseException:
        _rollback(conn)
        raise
    if written.rowcount != 1:  # the lease is stale: nothing was written
        return None
    return int(counted.fetchone()[0]) if count else 0


def _rollback(conn: Any) -> None:
    if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        conn.execute("ROLLBACK")
