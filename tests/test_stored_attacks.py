"""Forged and damaged rows on the real SQLite and PostgreSQL stores (issue 17, "Stored data").

Each attack edits one thread's rows the way a hand, a bug or an attacker with database
access could: values nested ~1,000 deep, envelopes whose fields overflow (a timedelta of
10**12 days, a Decimal exponent beyond the decimal module), value references of a type
threadloom never writes, text where a number belongs, a number in ``next``, a delta
chain that loops. Every one must surface as ``SerializationError``/``CheckpointError``
naming the thread and the checkpoint, within seconds, through ``get_state``, the history,
a new run and the CLI, while ``threads list`` still lists the healthy thread.

The other half: values a run can store must read back (ints over 4,300 digits, aware
datetimes near year 1 and 9999 in a ``ZoneInfo`` zone, a 490-deep state in ``threads
show``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict
from zoneinfo import ZoneInfo

import pytest

from threadloom import END, START, StateGraph
from threadloom.errors import CheckpointError, SerializationError

TESTS = Path(__file__).resolve().parent


class S(TypedDict, total=False):
    x: Any
    items: list[str]


def _step(state: S) -> dict[str, Any]:
    return {"x": state.get("x"), "items": [*(state.get("items") or []), "a" * 50]}


def _graph(cp: Any, node: Callable[[S], dict[str, Any]] = _step) -> Any:
    builder = StateGraph(S)
    builder.add_node("n", node)
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    return builder.compile(checkpointer=cp)


@dataclass
class Store:
    """One real backend: a factory of checkpointers, raw SQL on its tables, CLI flags."""

    kind: str
    open: Callable[[], Any]
    execute: Callable[[str, tuple[Any, ...]], int]
    rows: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
    cli: list[str]


def _sqlite_store(tmp_path: Path) -> Iterator[Store]:
    from threadloom.checkpoint.sqlite import SqliteCheckpointer

    path = tmp_path / "c.db"

    def execute(sql: str, params: tuple[Any, ...]) -> int:
        with sqlite3.connect(path) as conn:
            count = conn.execute(sql.replace("%s", "?"), params).rowcount
        conn.close()
        return count

    def rows(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with sqlite3.connect(path) as conn:
            out = conn.execute(sql.replace("%s", "?"), params).fetchall()
        conn.close()
        return out

    yield Store("sqlite", lambda: SqliteCheckpointer(path), execute, rows, ["--db", str(path)])


def _postgres_store() -> Iterator[Store]:
    psycopg = pytest.importorskip("psycopg")
    from conftest import PG_CONNINFO

    from threadloom.checkpoint.postgres import PostgresCheckpointer

    schema = f"sb_forged_{uuid.uuid4().hex[:10]}"
    conninfo = f"{PG_CONNINFO}{'&' if '?' in PG_CONNINFO else '?'}options=-csearch_path%3D{schema}"

    def execute(sql: str, params: tuple[Any, ...]) -> int:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            return conn.execute(sql, params).rowcount

    def rows(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                    for r in conn.execute(sql, params).fetchall()]

    try:
        yield Store("postgres", lambda: PostgresCheckpointer(PG_CONNINFO, schema=schema,
                                                             pool_size=2),
                    execute, rows, ["--postgres", conninfo])
    finally:
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A real SQLite file or a fresh PostgreSQL schema."""
    yield from (_sqlite_store(tmp_path) if request.param == "sqlite" else _postgres_store())


def _seed(store: Store) -> None:
    cp = store.open()
    graph = _graph(cp)
    for thread in ("good", "victim"):
        for _ in range(3):
            graph.invoke({"x": {"k": "v" * 100}}, {"configurable": {"thread_id": thread}})
    cp.close()


# -- the attacks --------------------------------------------------------------------------

VICTIM_X = "thread_id = 'victim' AND channel = 'x'"


def _set_x(store: Store, data: bytes) -> None:
    assert store.execute(f"UPDATE tl_blobs SET data = %s WHERE {VICTIM_X}", (data,)) >= 1


def _edit_records(store: Store, edit: Callable[[dict[str, Any]], None]) -> None:
    for cid, record in store.rows(
            "SELECT checkpoint_id, record FROM tl_checkpoints WHERE thread_id = 'victim'", ()):
        tree = json.loads(bytes(record))
        edit(tree)
        store.execute("UPDATE tl_checkpoints SET record = %s WHERE thread_id = 'victim' "
                      "AND checkpoint_id = %s", (json.dumps(tree).encode(), cid))


def _body(tree: dict[str, Any]) -> dict[str, Any]:
    return tree["k"] if "k" in tree else tree["c"]


def _set_next(tree: dict[str, Any]) -> None:
    body = _body(tree)
    body["nx" if "k" in tree else "next"] = [5]


def _text_version(tree: dict[str, Any]) -> None:
    _body(tree)["v"] = "1"  # text where the format version number belongs


def _loop_chain(store: Store) -> None:
    assert store.execute("UPDATE tl_blobs SET base = bid WHERE thread_id = 'victim' "
                         "AND base IS NOT NULL", ()) >= 1


ATTACKS: dict[str, Callable[[Store], None]] = {
    "nested 1,000 deep": lambda s: _set_x(s, b"[" * 1000 + b"]" * 1000),
    "timedelta of 10**12 days": lambda s: _set_x(s, b'{"__tl__":"td","v":[999999999999,0,0]}'),
    "decimal exponent 10**25": lambda s: _set_x(
        s, b'{"__tl__":"dec","v":"1e99999999999999999999999"}'),
    "zone that is a path": lambda s: _set_x(
        s, b'{"__tl__":"dt","v":"2024-01-01T00:00:00+00:00","z":"../../etc/passwd"}'),
    "value ref a number": lambda s: _edit_records(s, lambda t: t["r"].update(x=5)),
    "value ref a dict": lambda s: _edit_records(s, lambda t: t["r"].update(x={"a": 1})),
    "text version number": lambda s: _edit_records(s, _text_version),
    "number in next": lambda s: _edit_records(s, _set_next),
    "delta chain loops": _loop_chain,
}


def _in_time(fn: Callable[[], Any], seconds: float = 20) -> BaseException | None:
    """What ``fn`` raised (None if it returned), failing the test if it hangs."""
    out: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            out.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{fn} still running after {seconds} s (a hang)"
    return out[0]


def _cli(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get(
        "PYTHONPATH", "")]), COLUMNS="250")
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args, *store.cli],
                          env=env, capture_output=True, text=True, timeout=60)


def _assert_named(exc: BaseException | None, where: str) -> None:
    assert isinstance(exc, CheckpointError), f"{where}: {type(exc).__name__}: {exc}"
    text = " ".join([str(exc), *getattr(exc, "__notes__", [])])
    assert "'victim'" in text and "in checkpoint '" in text, f"{where}: {text}"


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_forged_row_is_a_named_error_everywhere(store: Store, attack: str) -> None:
    _seed(store)
    ATTACKS[attack](store)
    cp = store.open()
    graph = _graph(cp)
    victim = {"configurable": {"thread_id": "victim"}}
    _assert_named(_in_time(lambda: graph.get_state(victim)), "get_state")
    _assert_named(_in_time(lambda: list(graph.get_state_history(victim))), "history")
    _assert_named(_in_time(lambda: graph.invoke({"x": 1}, victim)), "invoke")
    good = graph.get_state({"configurable": {"thread_id": "good"}})
    assert len(good.values["items"]) == 3
    cp.close()

    listed = _cli(store, "threads", "list")
    assert listed.returncode == 1 and "Traceback" not in listed.stderr, listed.stderr
    rows = {r.split("│")[1].strip(): [c.strip() for c in r.split("│")[2:-1]]
            for r in listed.stdout.splitlines() if r.startswith("│") and "│" in r[1:]}
    # three runs of one node each, on LangGraph's numbers: steps -1, 0, 1 per run
    assert rows["good"][:3] == ["9", "7", "done"], listed.stdout
    assert rows["victim"][2].startswith("unreadable"), listed.stdout
    assert listed.stderr.startswith("error: cannot read thread 'victim'"), listed.stderr
    for command in ("show", "history"):
        result = _cli(store, "threads", command, "victim")
        err = result.stderr.strip()
        assert result.returncode == 1 and len(err.splitlines()) == 1, err
        assert "thread 'victim'" in err and "in checkpoint '" in err, err
        for raw in ("RecursionError", "OverflowError", "InvalidOperation", "KeyError",
                    "AttributeError"):
            assert f"error: {raw}" not in err, err


@pytest.mark.parametrize("column", ["n", "chain"])
def test_sqlite_text_where_a_number_belongs(tmp_path: Path, column: str) -> None:
    """SQLite keeps a TEXT put into an INTEGER column as text: the blob's ``n``/``chain``."""
    store = next(_sqlite_store(tmp_path))
    _seed(store)
    assert store.execute(f"UPDATE tl_blobs SET {column} = 'abc' WHERE thread_id = 'victim'",
                         ()) >= 1
    cp = store.open()
    exc = _in_time(lambda: _graph(cp).get_state({"configurable": {"thread_id": "victim"}}))
    _assert_named(exc, column)
    assert f"{column} str" in str(exc)
    cp.close()


# -- values a run stores read back -------------------------------------------------------

BIG = 7 ** 6000  # 5,071 digits: past Python's 4,300-digit limit for decimal text
ROUND_TRIPS: dict[str, Any] = {
    "int of 5,071 digits": BIG,
    "negative big int": -BIG,
    "big ints nested": {"k": [BIG, {BIG: -BIG}], "s": {BIG}},
    "aware datetime near 9999": dt.datetime(9999, 12, 31, 23, 0, tzinfo=ZoneInfo(
        "America/New_York")),
    "aware datetime near year 1": dt.datetime(1, 1, 1, 0, 30, tzinfo=ZoneInfo("Asia/Tokyo")),
    "datetime at a fold": dt.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=ZoneInfo(
        "America/New_York")),
}


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_what_a_run_stores_reads_back(store: Store, name: str) -> None:
    value = ROUND_TRIPS[name]
    cp = store.open()
    _graph(cp, lambda _s: {"x": value}).invoke({"x": 0}, {"configurable": {"thread_id": "rt"}})
    cp.close()
    fresh = store.open()  # a new process's view: nothing cached
    got = _graph(fresh).get_state({"configurable": {"thread_id": "rt"}}).values["x"]
    fresh.close()
    assert got == value and type(got) is type(value)
    if isinstance(value, dt.datetime):
        assert got.tzinfo == value.tzinfo and got.fold == value.fold
        assert got.utcoffset() == value.utcoffset()


def test_threads_show_prints_the_deepest_state_the_engine_stores(store: Store) -> None:
    deep: Any = "leaf"
    for _ in range(490):
        deep = [deep]
    cp = store.open()
    _graph(cp, lambda _s: {"x": deep}).invoke({"x": 0}, {"configurable": {"thread_id": "d"}})
    cp.close()
    result = _cli(store, "threads", "show", "d")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)["values"]["x"]
    for _ in range(490):
        shown = shown[0]
    assert shown == "leaf"


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def _from_deep_stack(frames: int, fn: Callable[[], Any]) -> Any:
    return fn() if frames == 0 else _from_deep_stack(frames - 1, fn)


def test_the_depth_bound_does_not_depend_on_the_callers_stack() -> None:
    from threadloom.checkpoint.depth import MAX_DEPTH
    from threadloom.checkpoint.serde import Codec

    codec = Codec()
    deepest = _nested(MAX_DEPTH - 1)  # the string leaf inside MAX_DEPTH - 1 lists
    limit = sys.getrecursionlimit()
    for frames in (0, 300, 600):
        data = _from_deep_stack(frames, lambda: codec.dumps({"x": deepest}))
        assert _from_deep_stack(frames, lambda d=data: codec.loads(d)) == {"x": deepest}
        with pytest.raises(SerializationError, match=r"channel_values\.x: nested 5\d\d levels"):
            _from_deep_stack(frames, lambda: codec.dumps(_nested(MAX_DEPTH + 20),
                                                         path="channel_values.x"))
    assert sys.getrecursionlimit() == limit
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(SerializationError, match="nested too deeply or circular"):
        codec.dumps(loop)


def _text_channel_version(tree: dict[str, Any]) -> None:
    body = _body(tree)
    if isinstance(body.get("cv"), dict):
        body["cv"] = {k: "2" for k in body["cv"]}


def test_a_text_channel_version_is_a_named_error_when_a_run_continues(store: Store) -> None:
    # The checkpointer's protocol allows text versions (LangGraph's are text), but the
    # engine writes integers only: a forged one is refused by name, not a raw TypeError.
    _seed(store)
    _edit_records(store, _text_channel_version)
    cp = store.open()
    try:
        graph = _graph(cp)
        with pytest.raises(SerializationError, match="victim") as info:
            graph.invoke({"x": 1}, {"configurable": {"thread_id": "victim"}})
        assert "not integers" in str(info.value)
        assert len(graph.get_state({"configurable": {"thread_id": "good"}})
                   .values["x"]) >= 1
    finally:
        cp.close()
