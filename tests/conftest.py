"""Shared fixtures: checkpointer backends, parametrized so behaviour tests run on each."""

from __future__ import annotations

import os
import uuid

import pytest

PG_CONNINFO = os.environ.get("THREADLOOM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def _memory():
    from threadloom.checkpoint.memory import InMemoryCheckpointer

    return InMemoryCheckpointer()


@pytest.fixture(params=["memory", "sqlite"])
def checkpointer(request, tmp_path):
    """A fresh checkpointer of each embedded kind."""
    if request.param == "memory":
        cp = _memory()
    else:
        from threadloom.checkpoint.sqlite import SqliteCheckpointer

        cp = SqliteCheckpointer(str(tmp_path / "cp.db"))
    yield cp
    cp.close()


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
