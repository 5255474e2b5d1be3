"""Costs that must stay flat as the work grows, asserted by deterministic counts (bytes
allocated, SQL statements), never by timing (benchmarks/curves.py measures the time).

A step appending one item to a long list (operator.add, add_messages) writes a delta
without comparing or copying the whole list; the stored thread reads back the same list,
in a fresh process cache too.
"""

from __future__ import annotations

import asyncio
import operator
import tempfile
import threading
import tracemalloc
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from conftest import PG_CONNINFO

from threadloom import END, START, AIMessage, InMemoryCheckpointer, MessagesState, StateGraph
from threadloom.checkpoint.sqlite import SqliteCheckpointer


class _Items(TypedDict):
    n: int
    items: Annotated[list, operator.add]


def _appender(saver: Any, steps: int) -> Any:
    g = StateGraph(_Items)
    g.add_node("a", lambda s: {"n": s["n"] + 1, "items": [("step", s["n"])]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: END if s["n"] >= steps else "a")
    return g.compile(checkpointer=saver)


def test_a_step_on_a_long_list_allocates_one_new_list_not_two():
    """Each step's reducer builds the new list (8 bytes an item); nothing else of the
    list's length is allocated: the checkpointer neither copies the list it stored (it
    was 6 lists' worth over these 3 steps when it did) nor compares it item by item."""
    n = 200_000
    graph = _appender(InMemoryCheckpointer(), 3)
    cfg = {"configurable": {"thread_id": "long"}}
    graph.invoke({"n": 0, "items": list(range(n))}, cfg)
    graph.invoke({"n": 0}, cfg)  # the list the cache holds is now the stored one
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        graph.invoke({"n": 0}, cfg)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert peak < 5 * 8 * n, f"{peak / (8 * n):.2f} lists' worth allocated in 3 steps"
    assert len(graph.get_state(cfg).values["items"]) == n + 9


@pytest.mark.parametrize("reload", [False, True])
def test_long_list_deltas_read_back_whole(tmp_path, reload):
    path = str(tmp_path / "cp.db")
    n = 5_000
    saver = SqliteCheckpointer(path)
    graph = _appender(saver, 40)
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}
    graph.invoke({"n": 0, "items": list(range(n))}, cfg)
    graph.invoke({"n": 35}, cfg)
    expected = list(range(n)) + [("step", i) for i in range(40)] + [("step", i)
                                                                     for i in range(35, 40)]
    if reload:
        saver.close()
        saver = SqliteCheckpointer(path)
        graph = _appender(saver, 40)
    assert graph.get_state(cfg).values["items"] == expected
    history = [s.values.get("items") for s in graph.get_state_history(cfg)]
    assert history[0] == expected and history[5] == expected[:-5]
    saver.close()


def test_in_place_append_to_a_long_list_is_stored_once(tmp_path):
    """Unsupported but common: a node appends to the state's list in place and returns
    it. The stored thread holds each item once (the cache knows the length it stored)."""
    n = 1_000

    def grow(state: dict[str, Any]) -> dict[str, Any]:
        state["items"].append(state["n"])  # mutates the stored list
        return {"n": state["n"] + 1, "items": [-1]}

    g = StateGraph(_Items)
    g.add_node("a", grow)
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: END if s["n"] >= 3 else "a")
    saver = SqliteCheckpointer(str(tmp_path / "cp.db"))
    graph = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"n": 0, "items": list(range(n))}, cfg)
    saver.close()
    fresh = g.compile(checkpointer=SqliteCheckpointer(str(tmp_path / "cp.db")))
    stored = fresh.get_state(cfg).values["items"]
    assert stored[:n] == list(range(n))
    assert stored == out["items"]


def test_add_messages_on_a_long_history_reads_back_whole(tmp_path):
    path = str(tmp_path / "cp.db")

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"r{len(state['messages'])}")]}

    g = StateGraph(MessagesState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    graph = g.compile(checkpointer=SqliteCheckpointer(path))
    cfg = {"configurable": {"thread_id": "chat"}}
    graph.invoke({"messages": [("user", f"u{i}") for i in range(600)]}, cfg)
    for i in range(5):
        graph.invoke({"messages": [("user", f"again {i}")]}, cfg)
    fresh = g.compile(checkpointer=SqliteCheckpointer(path))
    contents = [m.content for m in fresh.get_state(cfg).values["messages"]]
    assert len(contents) == 611
    assert contents[600:] == ["r600", "again 0", "r602", "again 1", "r604", "again 2",
                              "r606", "again 3", "r608", "again 4", "r610"]


class _Counter(TypedDict):
    n: int


def _loop_graph(saver: Any, steps: int) -> Any:
    g = StateGraph(_Counter)
    g.add_node("a", lambda s: {"n": s["n"] + 1})
    g.add_node("b", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", lambda s: END if s["n"] >= steps else "a")
    return g.compile(checkpointer=saver)


class _SeenThreads(SqliteCheckpointer):
    """A real SQLite checkpointer that notes which thread each read ran on."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.read_on: list[int] = []

    def get_tuple(self, config: Any) -> Any:
        self.read_on.append(threading.get_ident())
        return super().get_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Any:
        self.read_on.append(threading.get_ident())
        return super().list(config, **kwargs)


def test_sync_get_state_reads_on_the_calling_thread_without_a_loop(tmp_path):
    """Sync ``get_state``/``get_state_history`` call the store's sync reads on the
    caller's thread: no private event loop is made, no worker thread is used."""
    from threadloom.engine import sync

    saver = _SeenThreads(str(tmp_path / "cp.db"))
    graph = _loop_graph(saver, 6)
    cfg = {"configurable": {"thread_id": "t"}}
    graph.invoke({"n": 0}, cfg)
    seen: dict[str, Any] = {}

    def reader() -> None:
        seen["state"] = graph.get_state(cfg).values
        seen["history"] = len(list(graph.get_state_history(cfg)))
        seen["loop"] = getattr(sync._local, "holder", None)
        seen["ident"] = threading.get_ident()

    saver.read_on.clear()
    worker = threading.Thread(target=reader)
    worker.start()
    worker.join()
    assert seen["state"] == {"n": 6} and seen["history"] >= 7
    assert seen["loop"] is None  # this thread never needed an event loop
    assert saver.read_on == [seen["ident"]] * 2
    saver.close()


def test_history_reads_pending_writes_in_one_query_per_namespace(tmp_path):
    """``get_state_history`` of a long thread reads its pending writes in one SELECT once
    its pages grow past a few checkpoints (the first three pages, 1 + 2 + 4 checkpoints,
    read their own), and its checkpoints in pages that double (1, 2, 4, ... 256, one
    read transaction each): not one SELECT per checkpoint; counted with sqlite3's trace
    callback."""
    saver = SqliteCheckpointer(str(tmp_path / "cp.db"))
    graph = _loop_graph(saver, 60)
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 70}
    graph.invoke({"n": 0}, cfg)
    list(graph.get_state_history(cfg))  # every connection a read uses now exists
    statements: list[str] = []
    for conn in saver._conns:  # the store's connections (one per OS thread)
        conn.set_trace_callback(statements.append)
    try:
        snapshots = list(graph.get_state_history(cfg))
    finally:
        for conn in saver._conns:
            conn.set_trace_callback(None)
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(snapshots) >= 60
    writes = [s for s in selects if "tl_writes" in s]
    pages = [s for s in selects if "ORDER BY checkpoint_id DESC" in s]
    assert len(writes) <= 1 + 2 + 4 + 1, writes  # the first pages' own, then the namespace's
    assert len(pages) <= 7, pages  # 1 + 2 + 4 + 8 + 16 + 32 >= 61 checkpoints
    assert len(selects) <= len(writes) + len(pages) + 1, selects  # + the thread's TTL
    saver.close()


def _pg_round_trips(steps: int, schema: str, **kwargs: Any) -> tuple[int, int]:
    """(statements, round trips) one run of the 2-node loop sends to PostgreSQL, counted
    from libpq's protocol trace of the store's one pooled connection."""
    from threadloom.checkpoint.postgres import PostgresCheckpointer

    saver = PostgresCheckpointer(PG_CONNINFO, pool_size=1, schema=schema, **kwargs)
    try:
        graph = _loop_graph(saver, steps)
        graph.invoke({"n": 0}, {"configurable": {"thread_id": "warm"}, "recursion_limit": 50})
        with saver._pool.connection() as conn:
            pgconn = conn.pgconn
        with tempfile.TemporaryFile("w+") as trace:
            pgconn.trace(trace.fileno())
            try:
                out = graph.invoke({"n": 0}, {"configurable": {"thread_id": f"t{steps}"},
                                              "recursion_limit": steps + 10})
            finally:
                pgconn.untrace()
            trace.seek(0)
            kinds = [(p[1], p[3].strip()) for p in (line.split("\t") for line in trace)
                     if len(p) > 3]
        assert out["n"] == steps
        statements = sum(1 for way, kind in kinds if way == "F" and kind in ("Query",
                                                                             "Execute"))
        return statements, sum(1 for way, kind in kinds if (way, kind) == ("B",
                                                                           "ReadyForQuery"))
    finally:
        saver.close()


@pytest.mark.postgres
@pytest.mark.parametrize("ttl", [None, 3600.0])
def test_postgres_super_step_is_one_round_trip(pg_schema, ttl):
    """With the default durability each super-step's checkpoint is one transaction sent
    in one round trip: BEGIN, the lease row locked, the lone task's two writes (its key
    and its routing, as LangGraph saves them), the checkpoint, the TTL touch, COMMIT
    (counted per extra step, so what a run costs once does not blur it)."""
    s10, r10 = _pg_round_trips(10, pg_schema, ttl_seconds=ttl)
    s30, r30 = _pg_round_trips(30, pg_schema, ttl_seconds=ttl)
    assert (r30 - r10) / 20 == 1
    assert (s30 - s10) / 20 <= 7


@pytest.mark.postgres
def test_postgres_stale_lease_writes_nothing_in_the_pipelined_put(pg_schema):
    from threadloom.checkpoint.leases import LEASE_TOKEN_KEY
    from threadloom.checkpoint.postgres import PostgresCheckpointer
    from threadloom.errors import ThreadBusyError

    saver = PostgresCheckpointer(PG_CONNINFO, pool_size=1, schema=pg_schema)
    try:
        graph = _loop_graph(saver, 2)
        cfg = {"configurable": {"thread_id": "fenced"}}
        graph.invoke({"n": 0}, cfg)
        before = len(list(saver.list(cfg)))
        token = saver.acquire_lease("fenced", "run-1", 60.0)
        saver.break_lease("fenced")
        saved = saver.get_tuple(cfg)
        stale = {"configurable": {**saved.config["configurable"], LEASE_TOKEN_KEY: token}}
        with pytest.raises(ThreadBusyError, match="stale"):
            saver.put(stale, {**saved.checkpoint, "id": "1" * 32}, {}, {})
        assert len(list(saver.list(cfg))) == before
    finally:
        saver.close()


@pytest.fixture
def pg_schema() -> Any:
    psycopg = pytest.importorskip("psycopg")
    name = f"tl_test_cost_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.mark.postgres
def test_postgres_delta_whose_base_vanished_is_stored_as_a_snapshot(pg_schema):
    """The pipelined put writes a delta only while its base blob exists (checked by the
    server); when a prune or a hand edit removed it, the put is retried as a snapshot."""
    import psycopg

    from threadloom.checkpoint.postgres import PostgresCheckpointer

    saver = PostgresCheckpointer(PG_CONNINFO, pool_size=1, schema=pg_schema)
    cfg = {"configurable": {"thread_id": "gone"}, "recursion_limit": 50}
    try:
        graph = _appender(saver, 3)
        graph.invoke({"n": 0, "items": list(range(1000))}, cfg)
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            deleted = conn.execute(f"DELETE FROM {pg_schema}.tl_blobs WHERE thread_id = %s",
                                   ("gone",)).rowcount
        assert deleted > 0
        graph.invoke({"n": 0}, cfg)  # the cache still holds the deleted blob as the base
    finally:
        saver.close()
    fresh = PostgresCheckpointer(PG_CONNINFO, pool_size=1, schema=pg_schema)
    try:
        items = _appender(fresh, 3).get_state(cfg).values["items"]
    finally:
        fresh.close()
    assert items == list(range(1000)) + [("step", i) for i in range(3)] * 2


def test_sync_messages_stream_needs_no_task_per_chunk():
    """A sync ``stream(..., stream_mode="messages")`` takes the chunks a node already
    produced in one loop pass: asyncio tasks made on the private loop stay few whatever
    the reply's length (it was one per chunk). Each chunk shares one metadata dict, as
    LangGraph's do."""
    from threadloom import ScriptedChatModel
    from threadloom.engine.sync import _private_loop

    def run(words: int) -> tuple[int, int, int]:
        model = ScriptedChatModel(lambda _m, _t=None: " ".join(["tok"] * words),
                                  record_calls=False)
        g = StateGraph(MessagesState)
        async def call(s: Any) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(s["messages"])]}

        # an async node: it runs on the loop, so the count does not depend on timing (a
        # sync node that streams runs on a worker, its chunks live, as LangGraph's)
        g.add_node("model", call)
        g.add_edge(START, "model")
        g.add_edge("model", END)
        graph = g.compile()
        loop = _private_loop()
        made: list[Any] = []

        def factory(lp: Any, coro: Any, **kw: Any) -> Any:
            made.append(coro)
            return asyncio.Task(coro, loop=lp, **kw)

        loop.set_task_factory(factory)
        try:
            chunks = list(graph.stream({"messages": [("user", "hi")]},
                                       stream_mode="messages"))
        finally:
            loop.set_task_factory(None)
        return len(chunks), len(made), len({id(meta) for _, meta in chunks})

    short, long = run(10), run(1000)
    assert long[0] > 1000 and short[0] > 10
    assert long[1] == short[1] < 20, (short, long)
    assert long[2] == 1


def test_history_of_a_growing_list_decodes_each_delta_a_bounded_number_of_times() -> None:
    # a list key stored as deltas: reading the history newest first must not walk each
    # checkpoint's whole delta chain again (the trial: 2,000 checkpoints took 3.6 s)
    from typing import TypedDict

    from threadloom import END, START, InMemoryCheckpointer, StateGraph

    class S(TypedDict):
        i: int
        log: Annotated[list[int], operator.add]

    n = 600
    g = StateGraph(S)
    g.add_node("step", lambda s: {"i": s["i"] + 1, "log": [s["i"]]})
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["i"] >= n else "step")
    cp = InMemoryCheckpointer()
    app = g.compile(checkpointer=cp)
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 10 * n}
    app.invoke({"i": 0, "log": []}, cfg)
    fresh = InMemoryCheckpointer()  # a cold cache: what another process reading it does
    fresh._data, fresh._threads = cp._data, cp._threads
    calls = 0
    real = fresh.codec.loads

    def counting(*args, **kwargs):
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    fresh.codec.loads = counting  # type: ignore[method-assign]
    history = list(g.compile(checkpointer=fresh).get_state_history(cfg))
    assert len(history) == n + 2
    assert history[0].values["log"] == list(range(n)) and history[-2].values["log"] == []
    assert calls < 20 * n  # was about n * n / 2 delta decodes
