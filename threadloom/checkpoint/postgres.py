"""``PostgresCheckpointer``: checkpoints in PostgreSQL, for many workers (extra: postgres).

psycopg 3 with a ``psycopg_pool.ConnectionPool``. Tables are created on first use, under
an advisory lock, with a schema version and forward migrations (``sqlbase.MIGRATIONS``).
Each ``put`` and ``put_writes`` is one transaction. Thread leases live in a row per thread
(owner, fencing token, expiry), read ``SELECT ... FOR UPDATE`` inside the writing
transaction, so two workers on two machines can neither interleave writes on a thread nor
write after losing the lease. Async methods run the sync ones in a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.sqlbase import POSTGRES, Sql, SqlTx
from threadloom.checkpoint.stored import StoredCheckpointer
from threadloom.engine.errors import CheckpointError

try:
    import psycopg
    from psycopg_pool import ConnectionPool
except ImportError as _exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "PostgresCheckpointer needs psycopg 3 and psycopg_pool: "
        "pip install 'threadloom[postgres]'"
    ) from _exc

_MIGRATION_LOCK = 0x746C636B  # "tlck": advisory lock key serializing table creation


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

    Raises:
        ValueError: ``schema`` is not a valid identifier.
        CheckpointError: the server cannot be reached, or its tables are newer than
            this threadloom.
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
    ) -> None:
        super().__init__(
            codec=codec, keep_latest=keep_latest, ttl_seconds=ttl_seconds, cache_size=cache_size
        )
        self._sql = Sql(POSTGRES, schema)
        self.schema = schema
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True},
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=30)
            self._migrate()
        except psycopg.Error as exc:  # PoolTimeout included
            self._pool.close()
            raise CheckpointError(f"cannot use PostgreSQL checkpoint store: {exc}") from exc
        except Exception:
            self._pool.close()
            raise

    def _migrate(self) -> None:
        with self._tx(True) as tx:
            tx.cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if self.schema:
                # the name matched sqlbase.IDENTIFIER in Sql(); identifiers cannot be bound
                tx.cur.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            tx.migrate()

    @contextmanager
    def _tx(self, write: bool) -> Iterator[Any]:
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield SqlTx(cur, self._sql)

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()
