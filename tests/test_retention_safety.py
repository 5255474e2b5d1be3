"""Retention (prune, TTL sweep, delete_thread) around a thread paused by ``interrupt()``.

Run through the engine on every backend: a paused thread keeps what it needs to resume,
and ``delete_thread`` leaves nothing behind.
"""

from __future__ import annotations

import operator
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from conftest import PG_CONNINFO

from threadloom import START, Command, StateGraph, interrupt
from threadloom.errors import EmptyInputError


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A fresh checkpointer of each kind (PostgreSQL in a schema of its own)."""
    if request.param == "memory":
        from threadloom.checkpoint.memory import InMemoryCheckpointer

        cp: Any = InMemoryCheckpointer()
    elif request.param == "sqlite":
        from threadloom.checkpoint.sqlite import SqliteCheckpointer

        cp = SqliteCheckpointer(str(tmp_path / "retention.db"))
    else:
        pytest.importorskip("psycopg")
        from threadloom.checkpoint.postgres import PostgresCheckpointer

        cp = PostgresCheckpointer(
            PG_CONNINFO, schema=f"tl_ret_{uuid.uuid4().hex[:10]}", pool_size=2
        )
    yield cp
    schema = getattr(cp, "schema", None)
    cp.close()
    if schema:
        import psycopg

        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # ours, ^tl_ret_


class S(TypedDict):
    n: int
    log: Annotated[list, operator.add]
    decision: str


def paused_app(cp: Any) -> Any:
    """``count`` loops 5 times, then ``ask`` pauses for a decision, then ``act``."""

    def ask(s: S) -> dict[str, Any]:
        return {"decision": interrupt({"approve": s["n"]}), "log": ["asked"]}

    g = StateGraph(S)
    g.add_node("count", lambda s: {"n": s["n"] + 1, "log": [f"c{s['n'] + 1}"]})
    g.add_node("ask", ask)
    g.add_node("act", lambda s: {"log": [f"act:{s['decision']}"]})
    g.add_edge(START, "count")
    g.add_conditional_edges("count", lambda s: "count" if s["n"] < 5 else "ask")
    g.add_edge("ask", "act")
    return g.compile(checkpointer=cp)


EXPECTED = {"n": 5, "decision": "yes",
            "log": ["c1", "c2", "c3", "c4", "c5", "asked", "act:yes"]}


def pause(cp: Any, thread_id: str) -> Any:
    app = paused_app(cp)
    out = app.invoke({"n": 0, "log": []}, thread_id=thread_id)
    assert out["__interrupt__"][0].value == {"approve": 5}
    assert len(list(app.get_state_history(thread_id=thread_id))) == 7  # input, START, 5 steps
    return app


def test_prune_to_one_checkpoint_keeps_a_paused_thread_resumable(store: Any) -> None:
    app = pause(store, "p1")
    before = app.get_state(thread_id="p1")
    assert store.prune("p1", keep_last=1) == 6
    history = list(app.get_state_history(thread_id="p1"))
    assert len(history) == 1
    after = app.get_state(thread_id="p1")
    assert after.values == before.values and after.next == ("ask",)
    assert [i.value for i in after.interrupts] == [{"approve": 5}]
    assert app.invoke(Command(resume="yes"), thread_id="p1") == EXPECTED


def test_ttl_sweep_compacts_but_keeps_a_paused_thread(store: Any) -> None:
    app = pause(store, "paused")
    done = paused_app(store)
    done.invoke({"n": 0, "log": []}, thread_id="finished")
    done.invoke(Command(resume="no"), thread_id="finished")
    for tid in ("paused", "finished"):
        store.set_ttl(tid, 0.05)
    time.sleep(0.1)
    assert store.sweep() == 1  # only the finished thread is deleted
    assert store.list_threads() == ["paused"]
    assert len(list(app.get_state_history(thread_id="paused"))) == 1
    assert app.get_state(thread_id="paused").next == ("ask",)
    assert store.sweep() == 0  # its expiry is suspended while it waits
    assert app.invoke(Command(resume="yes"), thread_id="paused") == EXPECTED
    # once resumed and written again, the thread's own TTL runs again
    time.sleep(0.1)
    assert store.sweep() == 1
    assert store.list_threads() == []


def test_an_expired_paused_thread_read_lazily_is_still_there(store: Any) -> None:
    app = pause(store, "lazy")
    store.set_ttl("lazy", 0.05)
    time.sleep(0.1)
    assert app.get_state(thread_id="lazy").next == ("ask",)  # get_tuple expires lazily
    assert app.invoke(Command(resume="yes"), thread_id="lazy") == EXPECTED


def test_delete_thread_removes_everything(store: Any, tmp_path: Path) -> None:
    app = pause(store, "gone")
    pause(store, "kept")
    store.delete_thread("gone")
    assert store.list_threads() == ["kept"]
    assert store.get_tuple({"configurable": {"thread_id": "gone"}}) is None
    assert list(store.list({"configurable": {"thread_id": "gone"}})) == []
    assert app.get_state(thread_id="gone").values == {}
    with pytest.raises(EmptyInputError):
        app.invoke(Command(resume="yes"), thread_id="gone")
    assert app.invoke(Command(resume="yes"), thread_id="kept") == EXPECTED
    if hasattr(store, "path"):  # SQLite: no row of the thread is left in any data table
        conn = sqlite3.connect(store.path)
        tables = ["tl_checkpoints", "tl_blobs", "tl_writes", "tl_threads"]
        counts = {t: conn.execute(f"SELECT count(*) FROM {t} WHERE thread_id = ?",  # noqa: S608
                                  ("gone",)).fetchone()[0] for t in tables}
        conn.close()
        assert counts == dict.fromkeys(tables, 0)
