"""``PostgresCheckpointer``: checkpoints in PostgreSQL, for many workers (extra: postgres).

psycopg 3 with a ``psycopg_pool.ConnectionPool``. Tables are created on first use, under
an advisory lock, with a schema version and forward migrations (``sqlbase.MIGRATIONS``).
Each ``put`` and ``put_writes`` is one transaction; a ``put`` is sent in one round trip
(pipeline mode, ``pg_put.py``). Thread leases live in a row per thread
(owner, fencing token, expiry), read ``SELECT ... FOR UPDATE`` inside the writing
transaction, so two workers on two machines can neither interleave writes on a thread nor
write after losing the lease. Async methods run the sync ones in a worker thread.

Opening fails fast: the connection string is parsed first, then one direct connection
(with a short ``connect_timeout`` unless the string sets one) creates or migrates the
tables, and only then is the pool opened. A bad string or an unreachable server is a
``CheckpointError`` naming the (password-masked) connection string and libpq's reason,
not a pool timeout after its retries.

``read_only=True`` creates and migrates nothing: the one direct connection checks that
threadloom's tables exist (in ``schema``, else on the connection's ``search_path``) at
this threadloom's schema version, and refuses any other database as one that "holds no
threadloom checkpoints"; every transaction then runs ``READ ONLY`` and every writing
method raises ``CheckpointError`` before it connects (``threadloom threads list``,
``show`` and ``history`` open PostgreSQL this way).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from threadloom.checkpoint.blob_rows import NewBlob
from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.sqlbase import POSTGRES, SCHEMA_VERSION, TABLES, Sql, SqlTx
from threadloom.checkpoint.stored import StoredCheckpointer, check_schema
from threadloom.checkpoint.tx import CkRow
from threadloom.errors import CheckpointError, ThreadBusyError
from threadloom.redact import mask_url, mask_urls

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool

    from threadloom.checkpoint.pg_put import PutStatements, put_pipelined
except ImportError as _exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "PostgresCheckpointer needs psycopg 3 and psycopg_pool: "
        "pip install 'threadloom[postgres]'"
    ) from _exc

_LEASE_LOCK_MS = 200  # taking a lease waits this long for its row, then retries
_MIGRATION_LOCK = 0x746C636B  # "tlck": advisory lock key serializing table creation
_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


def mask_conninfo(conninfo: str) -> str:
    """``conninfo`` with any password replaced by ``***`` (``password=...`` in either
    form, and in a URL the userinfo password and secret-looking query values, as
    ``threadloom.redact.mask_url``), for error messages and logs."""
    return mask_url(_PASSWORD_KV.sub(r"\1***", conninfo))


def _reason(exc: BaseException, conninfo: str) -> str:
    """libpq's message on one line, with the connection string's passwords masked (a
    parse error may quote part of the string)."""
    text = mask_urls(" ".join(str(exc).split()) or type(exc).__name__, conninfo)
    for secret in (m.group(2).strip("'") for m in _PASSWORD_KV.finditer(conninfo)):
        if secret:
            text = text.replace(secret, "***")
    return text


class PostgresCheckpointer(StoredCheckpointer):
    """Checkpoints in PostgreSQL (as LangGraph's ``PostgresSaver``, plus deltas,
    retention, TTL and leases).

    Args:
        conninfo: a libpq connection string, e.g. ``"postgresql://user@host:5432/db"``.
        pool_size: the most connections the pool opens.
        schema: put the tables in this schema (created if missing); must be a plain
            lower-case identifier. None uses the connection's ``search_path``.
        keep_latest: keep only this many newest checkpoints per namespace (None: all).
        ttl_seconds: default thread time-to-live from its last write (None: forever).
        codec: the closed codec (default: a fresh ``Codec()``).
        cache_size: decoded list values kept for O(delta) reloads.
        connect_timeout: seconds to wait for each new connection, where ``conninfo``
            sets no ``connect_timeout`` of its own.
        read_only: never create, migrate or write anything (see the module doc).
        lock_timeout_s: the longest a write waits for a row another transaction holds
            (then ``ThreadBusyError``); taking a lease waits 0.2 s per try and retries
            up to the run's ``busy_timeout``.

    Raises:
        ValueError: ``schema`` is not a valid identifier.
        CheckpointError: ``conninfo`` is not a valid connection string, the server
            cannot be reached or refuses the login (the message names the masked
            ``conninfo`` and the reason), or its tables are newer than this threadloom;
            with ``read_only``, also: the database holds no threadloom tables (``"...
            holds no threadloom checkpoints"``), only some, or another schema version.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        pool_size: int = 8,
        schema: str | None = None,
        keep_latest: int | None = None,
        ttl_seconds: float | None = None,
        codec: Codec | None = None,
        cache_size: int = 256,
        connect_timeout: int = 5,
        read_only: bool = False,
        lock_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(
            codec=codec, keep_latest=keep_latest, ttl_seconds=ttl_seconds, cache_size=cache_size
        )
        self._sql = Sql(POSTGRES, schema)
        self._put = PutStatements.build(self._sql.names, ttl_seconds)
        self.schema = schema
        self.read_only = read_only
        self._where = where = f"PostgreSQL checkpoint store at {mask_conninfo(conninfo)!r}"
        kwargs: dict[str, Any] = {"autocommit": True}
        try:
            if "connect_timeout" not in conninfo_to_dict(conninfo):
                kwargs["connect_timeout"] = max(1, int(connect_timeout))
        except psycopg.Error as exc:
            raise CheckpointError(f"invalid connection string for the {where}: "
                                  f"{_reason(exc, conninfo)}") from exc
        try:  # one direct connection first: its failure is the real cause, at once
            with psycopg.connect(conninfo, **kwargs) as conn:
                if read_only:
                    conn.read_only = True
                    self._check_schema(conn)
                else:
                    self._migrate(conn)
        except psycopg.Error as exc:
            raise CheckpointError(f"cannot use the {where}: {_reason(exc, conninfo)}") from exc
        self.lock_timeout_s = lock_timeout_s
        self._pool = ConnectionPool(
            conninfo, min_size=1, max_size=max(1, pool_size), kwargs=kwargs, open=False,
            configure=_begin_read_only if read_only else self._configure)
        try:
            self._pool.open(wait=True, timeout=30)
        except psycopg.Error as exc:  # PoolTimeout included
            self._pool.close()
            raise CheckpointError(f"cannot use the {where}: {_reason(exc, conninfo)}") from exc

    def _migrate(self, conn: Any) -> None:
        """Create or migrate the tables on ``conn`` (an autocommit connection)."""
        with conn.transaction(), conn.cursor() as cur:
            tx = SqlTx(cur, self._sql)
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if self.schema:
                # the name matched sqlbase.IDENTIFIER in Sql(); identifiers cannot be bound
                cur.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            tx.migrate()

    def _check_schema(self, conn: Any) -> None:
        """Read-only: refuse a database without threadloom's current tables (in
        ``schema``, else on ``search_path``), creating nothing."""
        qualified = {self._sql.names[f"t_{t[3:]}"]: t for t in TABLES}
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL",
                        (list(qualified),))
            present = {qualified[r[0]] for r in cur.fetchall()}
            place = f"schema {self.schema!r}" if self.schema else "its search_path"
            check_schema(self._where, TABLES, present, SqlTx(cur, self._sql).schema_version,
                         SCHEMA_VERSION, f"no threadloom tables in {place}")

    def _configure(self, conn: Any) -> None:
        """Each pooled connection waits at most ``lock_timeout_s`` for a row lock: a
        writer stalled inside its transaction (SIGSTOP, a hung client) cannot block the
        others without bound."""
        conn.execute(f"SET lock_timeout = {max(1, int(self.lock_timeout_s * 1000))}")

    @contextmanager
    def _tx(self, write: bool, *, lease_of: str | None = None) -> Iterator[Any]:
        """One transaction. A lost connection (the server restarted, the backend was
        terminated) is a ``CheckpointError``, a row lock not granted in time a
        ``ThreadBusyError``; ``lease_of`` (a thread id) makes the lock wait short, as
        taking a lease retries up to the run's ``busy_timeout`` itself."""
        if write and self.read_only:
            raise CheckpointError(f"the {self._where} was opened read-only; it does not write")
        try:
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                if lease_of is not None:
                    cur.execute(f"SET LOCAL lock_timeout = {_LEASE_LOCK_MS}")
                yield SqlTx(cur, self._sql)
        except psycopg.Error as exc:
            raise self._failure(exc, lease_of) from exc

    def _failure(self, exc: psycopg.Error, lease_of: str | None) -> Exception:
        """What a driver error means to the caller: a row lock not granted in time is a
        ``ThreadBusyError``, anything else (a lost connection...) a ``CheckpointError``."""
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            thread = lease_of or ""
            return ThreadBusyError(
                f"thread {thread!r} is busy: another writer holds its rows in an open "
                "transaction" if thread else "another writer of this store has held the "
                f"rows this write needs for over {self.lock_timeout_s}s (a stalled "
                "transaction)", thread_id=thread)
        return CheckpointError(f"the {self._where} failed: {_reason(exc, '')}")

    def _lease_tx(self, thread_id: str) -> Any:
        return self._tx(True, lease_of=thread_id)

    def _commit(self, row: CkRow, new: list[NewBlob], token: int | None,
                writes: list[tuple[str, int, str, bytes]] | None = None) -> int:
        """One ``put`` in one round trip (``pg_put``); the generic path (several round
        trips) when that path wrote nothing: a stale lease (it raises) or a vanished delta
        base (it writes a snapshot)."""
        if not self.read_only:
            try:
                with self._pool.connection() as conn:
                    count = put_pipelined(conn, self._put, row, new, token, time.time(),
                                          bool(self.keep_latest), writes)
            except psycopg.Error as exc:
                raise self._failure(exc, None) from exc
            if count is not None:
                return count
        return super()._commit(row, new, token, writes)

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()


def _begin_read_only(conn: Any) -> None:
    """Make each transaction of a pooled connection ``BEGIN READ ONLY`` (the server
    refuses any write in it)."""
    conn.read_only = True
