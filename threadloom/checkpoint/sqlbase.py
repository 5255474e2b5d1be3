"""The SQL storage primitives shared by the SQLite and PostgreSQL checkpointers.

Every statement is built once, at construction, from constant table names (optionally
qualified by a schema name that must match ``IDENTIFIER``); every value is a bound
parameter. Metadata filters never reach SQL (they are applied to decoded metadata).

A value read from a blob column is checked at this boundary: anything but bytes (a TEXT,
INTEGER or NULL that something else wrote into a SQLite column) raises
``SerializationError`` naming the column and the row, never a ``TypeError`` later.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threadloom.checkpoint.blob_rows import BlobRow, NewBlob
from threadloom.checkpoint.leases import Lease
from threadloom.checkpoint.sql_rows import _blob, _ck, as_blob
from threadloom.checkpoint.tx import CkRow
from threadloom.errors import CheckpointError

IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")
SCHEMA_VERSION = 1
TABLES = ("tl_meta", "tl_checkpoints", "tl_blobs", "tl_writes", "tl_threads", "tl_leases")

# Forward migrations: version -> DDL. {t_x} are table names; {blob}, {serial}, {real}
# are the dialect's types. A new version appends an entry; never edit an old one.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE IF NOT EXISTS {t_checkpoints} (thread_id TEXT NOT NULL, "
        "checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, parent_id TEXT, "
        "record {blob} NOT NULL, metadata {blob} NOT NULL, "
        "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))",
        "CREATE TABLE IF NOT EXISTS {t_blobs} (thread_id TEXT NOT NULL, "
        "checkpoint_ns TEXT NOT NULL, channel TEXT NOT NULL, bid TEXT NOT NULL, base TEXT, "
        "snap TEXT NOT NULL, n INTEGER NOT NULL, chain INTEGER NOT NULL, data {blob} NOT NULL, "
        "PRIMARY KEY (thread_id, checkpoint_ns, channel, bid))",
        "CREATE INDEX IF NOT EXISTS {i_blobs_snap} ON {t_blobs} "
        "(thread_id, checkpoint_ns, channel, snap)",
        "CREATE TABLE IF NOT EXISTS {t_writes} (seq {serial}, thread_id TEXT NOT NULL, "
        "checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, task_id TEXT NOT NULL, "
        "idx INTEGER NOT NULL, channel TEXT NOT NULL, value {blob} NOT NULL, "
        "UNIQUE (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))",
        "CREATE TABLE IF NOT EXISTS {t_threads} (thread_id TEXT PRIMARY KEY, ttl {real}, "
        "expires_at {real})",
        "CREATE TABLE IF NOT EXISTS {t_leases} (thread_id TEXT PRIMARY KEY, owner TEXT, "
        "token BIGINT NOT NULL, expires_at {real} NOT NULL)",
    ],
}


@dataclass(frozen=True)
class Dialect:
    """What differs between SQLite and PostgreSQL SQL text."""

    param: str  # "?" or "%s"
    blob: str
    serial: str
    real: str
    for_update: str  # " FOR UPDATE" or ""


SQLITE = Dialect("?", "BLOB", "INTEGER PRIMARY KEY AUTOINCREMENT", "REAL", "")
POSTGRES = Dialect("%s", "BYTEA", "BIGSERIAL PRIMARY KEY", "DOUBLE PRECISION", " FOR UPDATE")


def table_names(schema: str | None) -> dict[str, str]:
    """Format keys for every table and index, qualified by ``schema`` when given.

    Raises:
        ValueError: ``schema`` is not a plain lower-case identifier.
    """
    if schema is not None and not IDENTIFIER.match(schema):
        raise ValueError(f"schema name {schema!r} must match {IDENTIFIER.pattern}")
    prefix = f"{schema}." if schema else ""
    names = {f"t_{t[3:]}": prefix + t for t in TABLES}
    names["i_blobs_snap"] = "tl_blobs_snap_idx"
    return names


class Sql:
    """Statements for one dialect and table set (built once, parameters always bound)."""

    def __init__(self, dialect: Dialect, schema: str | None = None) -> None:
        self.dialect = dialect
        self.names = table_names(schema)
        n = {**self.names, "blob": dialect.blob, "serial": dialect.serial, "real": dialect.real}
        self.migrations = {v: [s.format(**n) for s in stmts] for v, stmts in MIGRATIONS.items()}
        q = self._q
        me = n["t_meta"]
        self.create_meta = f"CREATE TABLE IF NOT EXISTS {me} (key TEXT PRIMARY KEY, value TEXT)"
        self.get_version = q(f"SELECT value FROM {me} WHERE key = ?")
        self.set_version = q(
            f"INSERT INTO {me} (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        self._checkpoint_statements(n["t_checkpoints"], n["t_blobs"], n["t_writes"],
                                    n["t_threads"])
        self._blob_statements(n["t_blobs"])
        self._write_statements(n["t_writes"])
        self._thread_statements(n["t_threads"], n["t_leases"])

    def _checkpoint_statements(self, ck: str, bl: str, wr: str, th: str) -> None:
        q = self._q
        cols = "thread_id, checkpoint_ns, checkpoint_id, parent_id, record, metadata"
        self.ck_select = f"SELECT {cols} FROM {ck}"
        self.ck_insert = q(
            f"INSERT INTO {ck} ({cols}) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
            "parent_id = excluded.parent_id, record = excluded.record, "
            "metadata = excluded.metadata"
        )
        self.ck_count = q(f"SELECT count(*) FROM {ck} WHERE thread_id = ? AND checkpoint_ns = ?")
        self.ck_delete = q(
            f"DELETE FROM {ck} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        )
        self.wr_delete_ck = q(
            f"DELETE FROM {wr} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        )
        self.namespaces = q(
            f"SELECT DISTINCT checkpoint_ns FROM {ck} WHERE thread_id = ? ORDER BY checkpoint_ns"
        )
        self.thread_ids = f"SELECT DISTINCT thread_id FROM {ck} ORDER BY thread_id"
        self.delete_thread = [
            q(f"DELETE FROM {t} WHERE thread_id = ?") for t in (ck, bl, wr, th)
        ]

    def _blob_statements(self, bl: str) -> None:
        q = self._q
        bcols = "channel, bid, base, snap, n, chain, data"
        self.bl_exists = q(
            f"SELECT 1 FROM {bl} WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? "
            "AND bid = ?"
        )
        self.bl_by_bid = f"SELECT {bcols} FROM {bl} WHERE thread_id = ? AND checkpoint_ns = ? "
        self.bl_chain = q(
            f"SELECT {bcols} FROM {bl} WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND channel = ? AND snap = ?"
        )
        self.bl_insert = q(
            f"INSERT INTO {bl} (thread_id, checkpoint_ns, {bcols}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (thread_id, checkpoint_ns, channel, bid) DO NOTHING"
        )
        self.bl_index = q(
            f"SELECT channel, bid, base FROM {bl} WHERE thread_id = ? AND checkpoint_ns = ?"
        )
        self.bl_delete = q(
            f"DELETE FROM {bl} WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? "
            "AND bid = ?"
        )

    def _write_statements(self, wr: str) -> None:
        q = self._q
        self.wr_select = q(
            f"SELECT task_id, channel, value FROM {wr} WHERE thread_id = ? AND checkpoint_ns = ? "
            "AND checkpoint_id = ? ORDER BY seq"
        )
        self.wr_select_ns = q(f"SELECT checkpoint_id, task_id, channel, value FROM {wr} "
                              "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY seq")
        wins = (
            f"INSERT INTO {wr} (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, "
            "value) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) "
        )
        self.wr_insert_ignore = q(wins + "DO NOTHING")
        self.wr_upsert = q(
            wins + "DO UPDATE SET channel = excluded.channel, value = excluded.value"
        )

    def _thread_statements(self, th: str, le: str) -> None:
        q = self._q
        dialect = self.dialect
        self.th_get = q(f"SELECT ttl, expires_at FROM {th} WHERE thread_id = ?")
        self.th_put = q(
            f"INSERT INTO {th} (thread_id, ttl, expires_at) VALUES (?, ?, ?) ON CONFLICT "
            "(thread_id) DO UPDATE SET ttl = excluded.ttl, expires_at = excluded.expires_at"
        )
        self.th_expired = q(
            f"SELECT thread_id FROM {th} WHERE expires_at IS NOT NULL AND expires_at <= ? "
            "ORDER BY thread_id"
        )
        self.le_ensure = q(
            f"INSERT INTO {le} (thread_id, owner, token, expires_at) VALUES (?, NULL, 0, 0) "
            "ON CONFLICT (thread_id) DO NOTHING"
        )
        self.le_get = q(
            f"SELECT owner, token, expires_at FROM {le} WHERE thread_id = ?" + dialect.for_update
        )
        self.le_put = q(
            f"UPDATE {le} SET owner = ?, token = ?, expires_at = ? WHERE thread_id = ?"
        )

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.dialect.param)


class SqlTx:
    """``stored.Tx`` over a DB-API cursor inside an open transaction."""

    def __init__(self, cur: Any, sql: Sql) -> None:
        self.cur = cur
        self.sql = sql

    def _all(self, stmt: str, params: Sequence[Any] = ()) -> list[Any]:
        self.cur.execute(stmt, params)
        return list(self.cur.fetchall())

    def _one(self, stmt: str, params: Sequence[Any] = ()) -> Any:
        self.cur.execute(stmt, params)
        return self.cur.fetchone()

    def checkpoint_row(self, thread_id: str, ns: str, cid: str | None) -> CkRow | None:
        if cid is None:
            rows = self.checkpoint_rows(thread_id, ns, None, 1)
            return rows[0] if rows else None
        stmt = self.sql._q(
            self.sql.ck_select + " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        )
        row = self._one(stmt, (thread_id, ns, cid))
        return _ck(row) if row else None

    def checkpoint_rows(
        self, thread_id: str | None, ns: str | None, before: str | None, limit: int | None
    ) -> list[CkRow]:
        where: list[str] = []
        params: list[Any] = []
        for clause, value in (("thread_id = ?", thread_id), ("checkpoint_ns = ?", ns)):
            if value is not None:
                where.append(clause)
                params.append(value)
        if before is not None:
            where.append("checkpoint_id < ?")
            params.append(before)
        stmt = self.sql.ck_select + (" WHERE " + " AND ".join(where) if where else "")
        stmt += " ORDER BY checkpoint_id DESC"
        if limit is not None:
            stmt += " LIMIT ?"
            params.append(int(limit))
        return [_ck(r) for r in self._all(self.sql._q(stmt), params)]

    def count_checkpoints(self, thread_id: str, ns: str) -> int:
        return int(self._one(self.sql.ck_count, (thread_id, ns))[0])

    def insert_checkpoint(self, row: CkRow) -> None:
        self.cur.execute(self.sql.ck_insert, tuple(row))

    def delete_checkpoints(self, thread_id: str, ns: str, cids: list[str]) -> None:
        for cid in cids:
            self.cur.execute(self.sql.ck_delete, (thread_id, ns, cid))
            self.cur.execute(self.sql.wr_delete_ck, (thread_id, ns, cid))

    def namespaces(self, thread_id: str) -> list[str]:
        return [r[0] for r in self._all(self.sql.namespaces, (thread_id,))]

    def thread_ids(self) -> list[str]:
        return [r[0] for r in self._all(self.sql.thread_ids)]

    def delete_thread(self, thread_id: str) -> None:
        for stmt in self.sql.delete_thread:
            self.cur.execute(stmt, (thread_id,))

    def blob_exists(self, thread_id: str, ns: str, channel: str, bid: str) -> bool:
        return self._one(self.sql.bl_exists, (thread_id, ns, channel, bid)) is not None

    def fetch_blobs(
        self, thread_id: str, ns: str, keys: list[tuple[str, str]]
    ) -> dict[tuple[str, str], BlobRow]:
        bids = sorted({bid for _, bid in keys})
        stmt = self.sql._q(self.sql.bl_by_bid + f"AND bid IN ({', '.join('?' * len(bids))})")
        wanted = set(keys)
        out = {}
        for r in self._all(stmt, (thread_id, ns, *bids)):
            if (r[0], r[1]) in wanted:
                out[(r[0], r[1])] = _blob(r, thread_id)
        return out

    def fetch_chain(self, thread_id: str, ns: str, channel: str, snap: str) -> dict[str, BlobRow]:
        rows = self._all(self.sql.bl_chain, (thread_id, ns, channel, snap))
        return {r[1]: _blob(r, thread_id) for r in rows}

    def insert_blobs(self, thread_id: str, ns: str, blobs: list[NewBlob]) -> None:
        for b in blobs:
            r = b.row
            self.cur.execute(
                self.sql.bl_insert,
                (thread_id, ns, b.channel, b.bid, r.base, r.snap, r.n, r.chain, r.data),
            )

    def blob_index(self, thread_id: str, ns: str) -> dict[tuple[str, str], str | None]:
        return {(r[0], r[1]): r[2] for r in self._all(self.sql.bl_index, (thread_id, ns))}

    def delete_blobs(self, thread_id: str, ns: str, keys: list[tuple[str, str]]) -> None:
        for channel, bid in keys:
            self.cur.execute(self.sql.bl_delete, (thread_id, ns, channel, bid))

    def writes(self, thread_id: str, ns: str, cid: str) -> list[tuple[str, str, bytes]]:
        rows = self._all(self.sql.wr_select, (thread_id, ns, cid))
        return [
            (r[0], r[1], r[2] if type(r[2]) is bytes else as_blob(
                r[2], f"pending write {r[1]!r} of task {r[0]!r} at checkpoint {cid!r} "
                f"(thread {thread_id!r})"))
            for r in rows
        ]

    def ns_writes(self, thread_id: str, ns: str) -> dict[str, list[tuple[str, str, bytes]]]:
        out: dict[str, list[tuple[str, str, bytes]]] = {}
        for cid, task_id, channel, data in self._all(self.sql.wr_select_ns, (thread_id, ns)):
            if type(data) is not bytes:
                data = as_blob(data, f"pending write {channel!r} of task {task_id!r} at "
                               f"checkpoint {cid!r} (thread {thread_id!r})")
            out.setdefault(cid, []).append((task_id, channel, data))
        return out

    def insert_writes(
        self, thread_id: str, ns: str, cid: str, rows: list[tuple[str, int, str, bytes]]
    ) -> None:
        for task_id, idx, channel, data in rows:
            stmt = self.sql.wr_upsert if idx < 0 else self.sql.wr_insert_ignore
            self.cur.execute(stmt, (thread_id, ns, cid, task_id, idx, channel, data))

    def get_thread(self, thread_id: str) -> tuple[float | None, float | None] | None:
        row = self._one(self.sql.th_get, (thread_id,))
        return (row[0], row[1]) if row else None

    def put_thread(self, thread_id: str, ttl: float | None, expires_at: float | None) -> None:
        self.cur.execute(self.sql.th_put, (thread_id, ttl, expires_at))

    def expired_threads(self, now: float) -> list[str]:
        return [r[0] for r in self._all(self.sql.th_expired, (now,))]

    def get_lease(self, thread_id: str) -> Lease | None:
        self.cur.execute(self.sql.le_ensure, (thread_id,))
        row = self._one(self.sql.le_get, (thread_id,))
        return Lease(row[0], int(row[1]), float(row[2])) if row else None

    def put_lease(self, thread_id: str, lease: Lease) -> None:
        self.cur.execute(self.sql.le_put, (lease.owner, lease.token, lease.expires_at, thread_id))

    def schema_version(self) -> int:
        """The tables' schema version (0: ``tl_meta`` holds none)."""
        row = self._one(self.sql.get_version, ("schema_version",))
        return int(row[0]) if row else 0

    def migrate(self) -> None:
        """Create or upgrade the tables to ``SCHEMA_VERSION`` (forward only)."""
        self.cur.execute(self.sql.create_meta)
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise CheckpointError(
                f"checkpoint tables are at schema version {current}, newer than this "
                f"threadloom ({SCHEMA_VERSION}); upgrade threadloom"
            )
        for version in sorted(v for v in self.sql.migrations if v > current):
            for stmt in self.sql.migrations[version]:
                self.cur.execute(stmt)
            self.cur.execute(self.sql.set_version, ("schema_version", str(version)))
