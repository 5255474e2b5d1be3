"""The checkpointer conformance suite over memory, SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PG_CONNINFO

from threadloom.checkpoint.conformance import CHECKS, Backend, run_conformance
from threadloom.checkpoint.memory import InMemoryCheckpointer
from threadloom.checkpoint.serde import Codec
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.checkpoint.stored import StoredCheckpointer


def _memory_backend() -> Backend:
    def reopen(cp: StoredCheckpointer, codec: Codec) -> StoredCheckpointer:
        cp.codec = codec  # the same process-local store, seen through a new codec
        cp.clear_caches()
        return cp

    return Backend("memory", lambda **kw: InMemoryCheckpointer(**kw), reopen)


def _sqlite_backend(tmp_path: Path) -> Backend:
    counter = iter(range(10_000))
    made: list[StoredCheckpointer] = []

    def make(**kw: Any) -> StoredCheckpointer:
        cp = SqliteCheckpointer(tmp_path / f"cp{next(counter)}.db", **kw)
        made.append(cp)
        return cp

    def reopen(cp: StoredCheckpointer, codec: Codec) -> StoredCheckpointer:
        new = SqliteCheckpointer(cp.path, codec=codec)  # type: ignore[attr-defined]
        made.append(new)
        return new

    backend = Backend("sqlite", make, reopen)
    backend.made = made  # type: ignore[attr-defined]
    return backend


@pytest.fixture(scope="session")
def pg_schema_base() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    base = f"tl_test_{uuid.uuid4().hex[:8]}"
    yield base
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE %s",
            (base + "%",),
        ).fetchall()
        for (name,) in rows:
            conn.execute(f"DROP SCHEMA {name} CASCADE")  # names we made, matching ^tl_test_


def _postgres_backend(base: str) -> Backend:
    from threadloom.checkpoint.postgres import PostgresCheckpointer

    made: list[StoredCheckpointer] = []

    def make(**kw: Any) -> StoredCheckpointer:
        cp = PostgresCheckpointer(PG_CONNINFO, schema=f"{base}_{len(made)}", pool_size=2, **kw)
        made.append(cp)
        return cp

    def reopen(cp: StoredCheckpointer, codec: Codec) -> StoredCheckpointer:
        schema = cp.schema  # type: ignore[attr-defined]
        new = PostgresCheckpointer(PG_CONNINFO, schema=schema, pool_size=2, codec=codec)
        made.append(new)
        return new

    backend = Backend("postgres", make, reopen)
    backend.made = made  # type: ignore[attr-defined]
    return backend


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        yield _memory_backend()
        return
    if request.param == "sqlite":
        b = _sqlite_backend(tmp_path)
    else:
        base = request.getfixturevalue("pg_schema_base")
        b = _postgres_backend(f"{base}_{uuid.uuid4().hex[:6]}")
    yield b
    for cp in b.made:  # type: ignore[attr-defined]
        cp.close()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_conformance(check: Any, backend: Backend) -> None:
    check(backend)


def test_run_conformance_runs_every_check(tmp_path: Path) -> None:
    seen: list[str] = []
    inner = _sqlite_backend(tmp_path)

    def make(**kw: Any) -> StoredCheckpointer:
        seen.append("make")
        return inner.make(**kw)

    run_conformance(Backend("sqlite", make, inner.reopen))
    assert len(seen) >= len(CHECKS)
