"""Shared fixtures: checkpointer backends, parametrized so behaviour tests run on each."""

from __future__ import annotations

import functools
import os
import uuid

import pytest

# The one place PostgreSQL tests take their server from: test modules import it
# (``from conftest import PG_CONNINFO``) rather than spelling out a conninfo of their own.
PG_CONNINFO = os.environ.get("THREADLOOM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def _pg_unreachable() -> str | None:
    """Why the PostgreSQL of ``PG_CONNINFO`` can't be reached, or None; probed once."""
    try:
        import psycopg
    except ImportError:
        return None  # the tests themselves skip with importorskip
    try:
        psycopg.connect(PG_CONNINFO, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        return f"PostgreSQL of THREADLOOM_TEST_PG is unreachable: {exc}".strip()
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``postgres`` test errors at once when its server is down, instead of each one
    waiting out the pool's 30 s connect timeout; ``-m "not postgres"`` needs no server."""
    if item.get_closest_marker("postgres") is not None:
        reason = _pg_unreachable()
        if reason:
            pytest.fail(reason, pytrace=False)


def _memory():
    from threadloom.checkpoint.memory import InMemoryCheckpointer

    return InMemoryCheckpointer()


def _embedded(kind, tmp_path):
    """A fresh in-memory or SQLite checkpointer, closed after."""
    if kind == "memory":
        cp = _memory()
    else:
        from threadloom.checkpoint.sqlite import SqliteCheckpointer

        cp = SqliteCheckpointer(str(tmp_path / "cp.db"))
    yield cp
    cp.close()


@pytest.fixture(params=["memory", "sqlite"])
def checkpointer(request, tmp_path):
    """A fresh checkpointer of each embedded kind."""
    yield from _embedded(request.param, tmp_path)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_backend(request, tmp_path):
    """A fresh checkpointer of each backend, PostgreSQL in a schema of its own (dropped)."""
    if request.param != "postgres":
        yield from _embedded(request.param, tmp_path)
        return
    psycopg = pytest.importorskip("psycopg")
    from threadloom.checkpoint.postgres import PostgresCheckpointer

    schema = f"tl_test_{uuid.uuid4().hex[:10]}"
    cp = PostgresCheckpointer(PG_CONNINFO, schema=schema, pool_size=2)
    try:
        yield cp
    finally:
        cp.close()
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def memory_checkpointer():
    """An in-memory checkpointer."""
    cp = _memory()
    yield cp
    cp.close()


@pytest.fixture
def thread_id() -> str:
    """A unique thread id."""
    return f"t-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def work(tmp_path, monkeypatch):
    """Run in a temporary directory with the test helpers (``cli_graphs``, ...)
    importable; CLI test modules build on it."""
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))
    return tmp_path
