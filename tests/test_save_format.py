"""The compact save format: derived ``ts``, inline small values, short engine metadata.

Whatever a checkpointer leaves out of a stored row it must give back unchanged: these
tests put checkpoints of every shape (the engine's, a caller's own ``ts``/``v``, odd
metadata) and read them back equal, from memory and from a reopened SQLite file.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from threadloom import InMemoryCheckpointer, SqliteCheckpointer, StateGraph
from threadloom.checkpoint.base import checkpoint_ts, new_checkpoint_id, new_checkpoint_id_ts
from threadloom.checkpoint.stored import CkRow, StoredCheckpointer

Reopen = Callable[[StoredCheckpointer], StoredCheckpointer]


@pytest.fixture(params=["memory", "sqlite"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[StoredCheckpointer, Reopen]]:
    opened: list[StoredCheckpointer] = []
    if request.param == "memory":
        cp: StoredCheckpointer = InMemoryCheckpointer()

        def reopen(cp: StoredCheckpointer) -> StoredCheckpointer:
            cp.clear_caches()  # as a new process would: nothing decoded is remembered
            return cp
    else:
        cp = SqliteCheckpointer(tmp_path / "f.db")

        def reopen(cp: StoredCheckpointer) -> StoredCheckpointer:
            new = SqliteCheckpointer(tmp_path / "f.db")
            opened.append(new)
            return new
    opened.append(cp)
    yield cp, reopen
    for c in opened:
        c.close()


def _engine_checkpoint(values: dict[str, Any], versions: dict[str, int]) -> dict[str, Any]:
    cid, ts = new_checkpoint_id_ts()
    return {"v": 1, "id": cid, "ts": ts, "channel_values": values,
            "channel_versions": versions, "versions_seen": {}, "next": ["node"],
            "barriers": {}}


def _put(cp: StoredCheckpointer, config: dict[str, Any], ck: dict[str, Any],
         meta: dict[str, Any] | None = None, new: dict[str, int] | None = None) -> dict[str, Any]:
    meta = meta if meta is not None else {"source": "loop", "step": 0, "writes": {},
                                          "parents": {}}
    return cp.put(config, ck, meta, new if new is not None else ck["channel_versions"])  # type: ignore[arg-type]


def _blob_channels(cp: StoredCheckpointer, thread_id: str) -> set[str]:
    with cp._tx(False) as tx:
        return {channel for channel, _ in tx.blob_index(thread_id, "")}


# -- ts -------------------------------------------------------------------------------


@pytest.mark.parametrize("ns", [0, 1, 999, 1_000, 1_700_000_000_000_000_000,
                                1_700_000_000_123_456_789, 1_700_000_001_000_000_999])
def test_checkpoint_ts_reads_the_id_as_isoformat_does(ns: int) -> None:
    us = ns // 1000
    want = dt.datetime.fromtimestamp(us // 1_000_000, dt.UTC).replace(
        microsecond=us % 1_000_000).isoformat()
    assert checkpoint_ts(f"{ns:016x}" + "ab" * 8) == want


@pytest.mark.parametrize("cid", ["", "abc", "x" * 32, "-" + "1" * 31, " 1" + "0" * 30,
                                 "1_2" + "0" * 29, "0" * 33])
def test_checkpoint_ts_is_none_for_other_ids(cid: str) -> None:
    assert checkpoint_ts(cid) is None


@pytest.mark.parametrize("ns", [1, 999_999, 1_000_000_000, 1_099_999_999, 1_152_921_504_606_846_975,
                                1_152_921_504_606_846_976, 1_700_000_000_000_000_000,
                                1_700_000_000_000_001_000, 1_700_000_000_099_999_999,
                                1_700_000_000_100_000_000, 1_700_000_000_999_999_999,
                                1_700_000_001_000_000_000, 1_700_000_001_123_456_789])
def test_new_id_and_ts_at_fixed_times_equal_the_general_forms(
    ns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast formatting of new_checkpoint_id_ts (unpadded hex from 2**60 ns, 6-digit
    micros unpadded, the second remembered) writes what the padded forms write."""
    import time

    from threadloom.checkpoint import ids as base

    monkeypatch.setattr(base, "_last_id", [0])
    monkeypatch.setattr(time, "time_ns", lambda: ns)
    for _ in range(2):  # a new second, then the remembered one
        monkeypatch.setattr(base, "_last_id", [0])
        cid, ts = new_checkpoint_id_ts()
        assert cid == f"{ns:016x}{base._process_tag[0]}"
        us = ns // 1000
        want = dt.datetime.fromtimestamp(us // 1_000_000, dt.UTC).replace(
            microsecond=us % 1_000_000).isoformat()
        assert ts == want
        base._last_ts[0] = ("", None)
        assert checkpoint_ts(cid) == ts


def test_new_ids_carry_their_ts_and_stay_ordered() -> None:
    pairs = [new_checkpoint_id_ts() for _ in range(50)] + [(new_checkpoint_id(), "")]
    ids = [cid for cid, _ in pairs]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for cid, ts in pairs[:-1]:
        assert checkpoint_ts(cid) == ts
        assert abs(dt.datetime.fromisoformat(ts) - dt.datetime.now(dt.UTC)) < dt.timedelta(
            minutes=1)


# -- checkpoints round-trip -----------------------------------------------------------------


def test_an_engine_checkpoint_round_trips_without_storing_its_ts(store: Any) -> None:
    cp, reopen = store
    ck = _engine_checkpoint({"n": 3, "items": ["a"]}, {"n": 2, "items": 1})
    ck["barriers"] = {"join": ["a", "b"]}
    config = _put(cp, {"configurable": {"thread_id": "t"}}, ck)
    with cp._tx(False) as tx:
        row = tx.checkpoint_row("t", "", None)
    assert row is not None and ck["ts"].encode() not in row.record
    got = reopen(cp).get_tuple(config)
    assert got is not None
    assert got.checkpoint == ck
    assert list(got.checkpoint) == list(ck)


@pytest.mark.parametrize("change", [
    {"ts": "2026-01-01T00:00:00+00:00"},
    {"v": 2},
    {"versions_seen": {"node": {"n": 1}}},
    {"next": [{"node": "w", "arg": {"i": 1}}]},
    {"next": []},
    {"extra": "kept"},
])
def test_other_checkpoint_shapes_round_trip(store: Any, change: dict[str, Any]) -> None:
    cp, reopen = store
    ck = _engine_checkpoint({"n": 1}, {"n": 1})
    ck.update(change)
    config = _put(cp, {"configurable": {"thread_id": "t"}}, ck)
    got = reopen(cp).get_tuple(config)
    assert got is not None and got.checkpoint == ck


def test_a_checkpoint_without_the_optional_maps_reads_them_as_empty(store: Any) -> None:
    cp, reopen = store
    ck = _engine_checkpoint({"n": 1}, {"n": 1})
    del ck["barriers"], ck["versions_seen"]
    config = _put(cp, {"configurable": {"thread_id": "t"}}, ck)
    got = reopen(cp).get_tuple(config)
    assert got is not None
    assert got.checkpoint == {**ck, "barriers": {}, "versions_seen": {}}


def test_rows_in_the_earlier_record_format_still_load(store: Any) -> None:
    cp, reopen = store
    cid = new_checkpoint_id()
    record = (b'{"c":{"v":1,"ts":"2026-01-01T00:00:00.000001+00:00",'
              b'"channel_versions":{"n":1},"next":["a"]},"r":{}}')
    meta = b'{"source":"loop","step":0,"writes":{"a":["n"]},"parents":{}}'
    with cp._tx(True) as tx:
        tx.insert_checkpoint(CkRow("t", "", cid, None, record, meta))
    got = reopen(cp).get_tuple({"configurable": {"thread_id": "t"}})
    assert got is not None
    assert got.checkpoint["ts"] == "2026-01-01T00:00:00.000001+00:00"
    assert got.checkpoint["next"] == ["a"] and got.checkpoint["barriers"] == {}
    assert got.metadata == {"source": "loop", "step": 0, "writes": {"a": ["n"]}, "parents": {}}


# -- metadata --------------------------------------------------------------------------------


@pytest.mark.parametrize("meta", [
    {"source": "loop", "step": 4, "writes": {"a": ["n", "m"]}, "parents": {}},
    {"source": "input", "step": -1, "writes": {}, "parents": {}},
    {"step": 4, "source": "loop", "writes": {}, "parents": {}},
    {"source": "loop", "step": 4, "writes": {}, "parents": {"": "x"}},
    {"source": "loop", "step": 4, "writes": {}},
    {"source": "loop", "step": True, "writes": {}, "parents": {}},
    {"source": "loop", "step": 4, "writes": {"a": [1]}, "parents": {}},
    {"source": "loop", "step": 4, "writes": {"__tl__": ["x"]}, "parents": {}},
    {"source": "loop", "step": 4, "writes": {}, "parents": {}, "user": dt.date(2026, 1, 2)},
    {},
])
def test_metadata_round_trips_whatever_its_shape(store: Any, meta: dict[str, Any]) -> None:
    cp, reopen = store
    config = _put(cp, {"configurable": {"thread_id": "t"}},
                  _engine_checkpoint({"n": 1}, {"n": 1}), meta)
    got = reopen(cp).get_tuple(config)
    assert got is not None
    assert got.metadata == meta and list(got.metadata) == list(meta)
    if "source" in meta:  # list() filters on the decoded metadata
        assert [t.metadata for t in cp.list(None, filter={"source": meta["source"]})] == [meta]


# -- inline values ------------------------------------------------------------------------


INLINE = [0, -5, 2**63 - 1, 1.5, -0.0, True, False, None, "", "short text",
          {"input_tokens": 3, "label": "x", "ok": None}, {}]
BLOB = [2**63, "x" * 65, "héllo", "\ud800", float("inf"), ["a"], {"a": [1]},
        {"a": {"b": 1}}, {str(i): i for i in range(9)}, {1: "x"}, {"__tl__": 1}, (1, 2),
        dt.date(2026, 1, 1)]


@pytest.mark.parametrize("value", INLINE + BLOB, ids=repr)
def test_values_round_trip_inline_or_as_blobs(store: Any, value: Any) -> None:
    cp, reopen = store
    config = _put(cp, {"configurable": {"thread_id": "t"}},
                  _engine_checkpoint({"v": value, "n": 1}, {"v": 1, "n": 1}))
    got = reopen(cp).get_tuple(config)
    assert got is not None
    stored = got.checkpoint["channel_values"]["v"]
    assert stored == value or (stored != stored and value != value)
    assert type(stored) is type(value)
    if isinstance(value, float):
        assert repr(stored) == repr(value)
    inline = any(type(value) is type(x) and value == x for x in INLINE)
    assert ("v" in _blob_channels(cp, "t")) is not inline
    assert "n" not in _blob_channels(cp, "t")


def test_unchanged_inline_values_are_carried_from_the_parent(store: Any) -> None:
    cp, reopen = store
    c1 = _put(cp, {"configurable": {"thread_id": "t"}},
              _engine_checkpoint({"n": 1, "usage": {"in": 1}}, {"n": 1, "usage": 1}))
    # the caller's values for unchanged channels are not read: the parent's are kept
    c2 = _put(cp, c1, _engine_checkpoint({"n": 99, "usage": {"in": 99}, "m": "new"},
                                         {"n": 1, "usage": 1, "m": 1}), new={"m": 1})
    for fresh in (False, True):
        got = (reopen(cp) if fresh else cp).get_tuple(c2)
        assert got is not None
        assert got.checkpoint["channel_values"] == {"n": 1, "usage": {"in": 1}, "m": "new"}


def test_inline_dicts_are_copies_on_the_way_in_and_out(store: Any) -> None:
    cp, _ = store
    usage = {"in": 1}
    c1 = _put(cp, {"configurable": {"thread_id": "t"}},
              _engine_checkpoint({"usage": usage}, {"usage": 1}))
    usage["in"] = 2  # mutated after the save: history must not change
    loaded = cp.get_tuple(c1)
    assert loaded is not None and loaded.checkpoint["channel_values"]["usage"] == {"in": 1}
    loaded.checkpoint["channel_values"]["usage"]["in"] = 3
    c2 = _put(cp, c1, _engine_checkpoint({"usage": usage, "n": 1}, {"usage": 1, "n": 1}),
              new={"n": 1})
    again = cp.get_tuple(c2)
    assert again is not None and again.checkpoint["channel_values"]["usage"] == {"in": 1}


def test_prune_keeps_inline_values_and_the_blobs_kept_checkpoints_need(store: Any) -> None:
    cp, reopen = store
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    for i in range(5):
        config = _put(cp, config, _engine_checkpoint({"n": i, "items": ["x"] * (i + 1)},
                                                     {"n": i + 1, "items": i + 1}))
    cp.prune("t", keep_last=1)
    got = reopen(cp).get_tuple({"configurable": {"thread_id": "t"}})
    assert got is not None
    assert got.checkpoint["channel_values"] == {"n": 4, "items": ["x"] * 5}


# -- through the engine ---------------------------------------------------------------------


def test_a_graph_run_stores_its_counter_inline_and_reads_it_back(store: Any) -> None:
    from typing import TypedDict

    class S(TypedDict):
        n: int
        label: str

    cp, reopen = store
    b = StateGraph(S)
    b.add_node("inc", lambda s: {"n": s["n"] + 1, "label": f"at {s['n'] + 1}"})
    b.set_entry_point("inc")
    b.set_finish_point("inc")
    app = b.compile(checkpointer=cp)
    for _ in range(3):
        app.invoke({"n": 0, "label": ""}, thread_id="t")
    assert _blob_channels(cp, "t") == set()
    app = b.compile(checkpointer=reopen(cp))
    state = app.get_state(thread_id="t")
    assert state.values == {"n": 1, "label": "at 1"}
    assert state.created_at == checkpoint_ts(state.config["configurable"]["checkpoint_id"])
    history = app.get_state_history(thread_id="t")
    assert [h.metadata["source"] for h in history] == ["loop", "loop", "input"] * 3
