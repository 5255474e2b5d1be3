"""The save path's shortcuts store exactly what the general path stores.

``BlobLayer.encode_refs`` copies unchanged channels from the parent's cached record
entries (``carry``) instead of walking them; ``InMemoryCheckpointer`` deflates blobs in
batches. Neither may change a stored byte that is read back, or a value.
"""

from __future__ import annotations

from typing import Any

import pytest

from threadloom import InMemoryCheckpointer
from threadloom.checkpoint.base import new_checkpoint_id_ts
from threadloom.checkpoint.memory_rows import BATCH as _BATCH
from threadloom.checkpoint.memory_rows import DEFLATED as _DEFLATED
from threadloom.checkpoint.memory_rows import RAW as _RAW
from threadloom.checkpoint.memory_rows import SMALL as _SMALL
from threadloom.messages import AIMessage, HumanMessage, ToolMessage

META = {"source": "loop", "step": 0, "writes": {}, "parents": {}}


def _steps() -> list[tuple[dict[str, Any], dict[str, int]]]:
    """Channel values and new versions of an agent-like thread, step by step."""
    messages: list[Any] = [HumanMessage("go " * 80, id="h")]
    steps: list[tuple[dict[str, Any], dict[str, int]]] = [
        ({"n": 0, "messages": list(messages), "usage": {}}, {"messages": 1}),
    ]
    for i in range(6):
        messages = [*messages, AIMessage("thinking " * 25, id=f"a{i}", tool_calls=[
            {"name": "f", "args": {"x": i}, "id": f"c{i}", "type": "tool_call"}])]
        steps.append(({"n": i, "messages": messages, "usage": {"t": i}, "why": None},
                      {"messages": 2 + 2 * i, "n": 2 + i, "usage": 2 + i, "why": 1}))
        messages = [*messages, ToolMessage(str(i), tool_call_id=f"c{i}", id=f"t{i}")]
        steps.append(({"n": i, "messages": messages, "usage": {"t": i}, "why": None},
                      {"messages": 3 + 2 * i}))
        steps.append(({"n": i, "messages": messages, "usage": {"t": i}, "why": None}, {}))
    return steps


def _run(cp: InMemoryCheckpointer, thread: str, *, forget: bool) -> list[tuple[bytes, bytes]]:
    """Put every step; with ``forget`` the parent cache is dropped before each put (the
    general path). Returns the stored record and metadata bytes."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    versions: dict[str, int] = {}
    ids = []
    for values, new in _steps():
        versions.update(new)
        cid, ts = new_checkpoint_id_ts()
        checkpoint = {"v": 1, "id": cid, "ts": ts, "channel_values": values,
                      "channel_versions": dict(versions), "versions_seen": {},
                      "next": ["node"], "barriers": {}}
        if forget:
            cp._parents.data.clear()
        config = cp.put(config, checkpoint, META, new)  # type: ignore[arg-type]
        ids.append(cid)
    rows = []
    with cp._tx(False) as tx:
        for cid in ids:
            row = tx.checkpoint_row(thread, "", cid)
            assert row is not None
            rows.append((row.record, row.metadata))
    return rows


def _shape(rows: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Rows with checkpoint ids (which differ between runs) blanked out."""
    import re

    return [(re.sub(rb"[0-9a-f]{32}", b"ID", r), m) for r, m in rows]


def test_carried_refs_store_the_same_records_as_the_general_path() -> None:
    fast = _run(InMemoryCheckpointer(), "t", forget=False)
    slow = _run(InMemoryCheckpointer(), "t", forget=True)
    assert _shape(fast) == _shape(slow)


def test_carried_refs_read_back_every_checkpoint_equal() -> None:
    cp = InMemoryCheckpointer()
    _run(cp, "t", forget=False)
    history = list(cp.list({"configurable": {"thread_id": "t"}}))
    cp.clear_caches()
    again = list(cp.list({"configurable": {"thread_id": "t"}}))
    assert [h.checkpoint for h in history] == [a.checkpoint for a in again]
    expected = [values for values, _ in _steps()]
    assert [h.checkpoint["channel_values"] for h in reversed(again)] == expected


def _waiting(cp: InMemoryCheckpointer, thread: str) -> list[tuple[str, str]]:
    """Keys of the thread's blobs stored raw although big enough to deflate."""
    rows = cp._data[thread][""].rows()
    return [k for k, r in rows if r.data[:1] == _RAW and len(r.data) > _SMALL]


def test_blobs_are_deflated_once_a_save_goes_to_another_thread() -> None:
    cp = InMemoryCheckpointer()
    _run(cp, "a", forget=False)
    waiting = _waiting(cp, "a")
    assert waiting and sorted(bid for _, bid in cp._raw) == sorted(bid for _, bid in waiting)
    before = cp.get_tuple({"configurable": {"thread_id": "a"}})
    _run(cp, "b", forget=False)
    blobs = dict(cp._data["a"][""].rows())
    assert _waiting(cp, "a") == [] and all(blobs[k].data[:1] == _DEFLATED for k in waiting)
    assert _waiting(cp, "b")
    cp.clear_caches()
    after = cp.get_tuple({"configurable": {"thread_id": "a"}})
    assert before is not None and after is not None
    assert after.checkpoint["channel_values"] == before.checkpoint["channel_values"]


def test_one_long_thread_deflates_in_batches() -> None:
    cp = InMemoryCheckpointer()
    for _ in range(6):  # 7 big blobs each
        _run(cp, "one", forget=False)
        assert len(cp._raw) < _BATCH
    rows = [r for _, r in cp._data["one"][""].rows()]
    assert any(r.data[:1] == _DEFLATED for r in rows)
    cp.clear_caches()
    history = list(cp.list({"configurable": {"thread_id": "one"}}))
    assert [h.checkpoint["channel_values"] for h in reversed(history)] == [
        values for _ in range(6) for values, _ in _steps()
    ]


def test_blob_rows_round_trip_as_bytes() -> None:
    from threadloom.checkpoint.blob_rows import BlobRow
    from threadloom.checkpoint.memory_rows import blob_row as _row
    from threadloom.checkpoint.memory_rows import pack as _pack
    from threadloom.checkpoint.memory_rows import row_bytes as _row_bytes
    from threadloom.checkpoint.memory_rows import row_data_at as _row_data_at
    from threadloom.checkpoint.memory_rows import row_fields as _row_fields

    cases = [
        BlobRow(None, "1.abc", -1, 0, b'{"a":1}'),
        BlobRow("2.abc", "1.abc", 7, 3, b"[1,2]"),
        BlobRow("3.\u00e9\u4e2d\x00", "1.\u00e9", 0, 0, b""),
        BlobRow(None, "", 2**40, 2**33, b"x" * 500),
    ]
    for row in cases:
        for packed in (_RAW + row.data, _pack(row.data)):
            stored = _row_bytes(row.base, row.snap, row.n, row.chain, packed)
            assert _row(stored) == row
            at = _row_data_at(stored)
            assert stored[at:] == packed
            assert _row_fields(stored) == (row.base, row.snap, row.n, row.chain, at)


def test_stored_rows_read_back_through_every_primitive() -> None:
    cp = InMemoryCheckpointer()
    _run(cp, "t", forget=False)
    space = cp._data["t"][""]
    rows = dict(space.rows())
    assert rows and not any(type(r) is not bytes for c in space.blobs.values() for r in c.values())
    with cp._tx(False) as tx:
        index = tx.blob_index("t", "")
        assert index == {k: r.base for k, r in rows.items()}
        fetched = tx.fetch_blobs("t", "", [*rows, ("messages", "nope"), ("nope", "1.x")])
        assert set(fetched) == set(rows)
        for key, row in fetched.items():
            assert row._replace(data=b"") == rows[key]._replace(data=b"")
            assert tx.blob_exists("t", "", *key)
        assert not tx.blob_exists("t", "", "messages", "nope")
        snaps = {(c, r.snap) for (c, _), r in rows.items()}
        for channel, snap in snaps:
            chain = tx.fetch_chain("t", "", channel, snap)
            want = {b for (c, b), r in rows.items() if c == channel and r.snap == snap}
            assert set(chain) == want
    assert cp.prune("t", keep_last=1) > 0
    cp.clear_caches()
    latest = cp.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest is not None
    assert latest.checkpoint["channel_values"] == _steps()[-1][0]


# -- the engine's direct save (RunLoop._save_direct) ------------------------------------


def _loop_graph(cp: Any) -> Any:
    import operator
    from typing import Annotated, TypedDict

    from threadloom import END, START, Send, StateGraph, interrupt

    class S(TypedDict, total=False):
        n: int
        log: Annotated[list, operator.add]
        ask: bool

    def step(s: S) -> dict[str, Any]:
        if s.get("ask") and s["n"] == 2:
            interrupt("more?")
        return {"n": s["n"] + 1, "log": [f"step{s['n']}"]}

    def route(s: S) -> Any:
        if s["n"] >= 4:
            return END
        return [Send("fan", {"n": s["n"], "log": []}), "step"] if s["n"] == 1 else "step"

    g = StateGraph(S)
    g.add_node("step", step)
    g.add_node("fan", lambda s: {"log": ["fan"]})
    g.add_edge(START, "step")
    g.add_conditional_edges("step", route, ["step", "fan", END])
    g.add_edge("fan", END)
    return g.compile(checkpointer=cp)


def _history(cp: Any, thread: str) -> list[Any]:
    """Every stored checkpoint of ``thread``, ids and times blanked, oldest first."""
    out = []
    for t in reversed(list(cp.list({"configurable": {"thread_id": thread}}))):
        ck = dict(t.checkpoint, id="", ts="")
        writes = sorted((w.channel, _events([w.value])[0]) for w in t.pending_writes)
        out.append((ck, t.metadata, t.parent_config is None, writes))
    return out


def _events(events: list[Any]) -> list[Any]:
    import re

    # ids, and the thread's name in the checkpoint events' configs
    return [re.sub(r"[0-9a-f]{24,32}|'(fast|slow)'|'timestamp': '[^']*'", "ID", repr(e))
            for e in events]


def _drive(app: Any, thread: str, how: str) -> list[Any]:
    """Run ``thread`` to a pause and resume it, returning what the runs streamed."""
    import asyncio

    from threadloom import Command

    modes = ["checkpoints", "debug", "values", "updates"]
    first, again = {"n": 0, "log": [], "ask": True}, Command(resume="yes")
    if how == "private":
        return [*app.stream(first, thread_id=thread, stream_mode=modes),
                *app.stream(again, thread_id=thread, stream_mode=modes)]

    async def run() -> list[Any]:
        out = [e async for e in app.astream(first, thread_id=thread, stream_mode=modes,
                                            durability=how)]
        out += [e async for e in app.astream(again, thread_id=thread, stream_mode=modes,
                                             durability=how)]
        out.append(await app.ainvoke({"n": 0, "log": []}, thread_id=thread + "-i",
                                     durability=how))
        return out

    return asyncio.run(run())


@pytest.mark.parametrize("how", ["private", "sync", "async", "exit"])
def test_direct_saves_store_and_stream_what_the_general_path_does(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from threadloom.engine.scheduler import RunLoop

    cp = InMemoryCheckpointer()
    app = _loop_graph(cp)
    direct_seen: list[bool] = []
    real = RunLoop._saves_directly

    def spy(self: RunLoop) -> bool:
        direct_seen.append(real(self))
        return direct_seen[-1]

    monkeypatch.setattr(RunLoop, "_saves_directly", spy)
    fast = _drive(app, "fast", how)
    monkeypatch.setattr(RunLoop, "_saves_directly", lambda self: False)
    slow = _drive(app, "slow", how)
    assert any(direct_seen) == (how in ("private", "sync"))
    assert _events(fast) == _events(slow)
    assert _history(cp, "fast") == _history(cp, "slow")
    if how != "private":
        assert _history(cp, "fast-i") == _history(cp, "slow-i")


def test_direct_saves_keep_a_lease_token_on_every_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A subgraph of a leased SQLite run saves directly (blocking_ok, no lease of its
    own) and still carries the parent's token, so a run that lost its lease cannot
    write."""
    import tempfile
    from pathlib import Path
    from typing import TypedDict

    from threadloom import START, SqliteCheckpointer, StateGraph
    from threadloom.engine.scheduler import RunLoop
    from threadloom.errors import ThreadBusyError

    class P(TypedDict, total=False):
        n: int

    direct: list[tuple[bool, bool]] = []
    real = RunLoop._saves_directly

    def spy(self: RunLoop) -> bool:
        direct.append((bool(self.namespace), real(self)))
        return direct[-1][1]

    monkeypatch.setattr(RunLoop, "_saves_directly", spy)
    with tempfile.TemporaryDirectory() as tmp:
        cp = SqliteCheckpointer(str(Path(tmp) / "t.db"))
        try:
            def steal(s: P) -> dict[str, Any]:
                cp.break_lease("t")
                cp.acquire_lease("t", "someone-else", 60.0)
                return {"n": 1}

            inner = StateGraph(P)
            inner.add_node("steal", steal)
            inner.add_edge(START, "steal")
            outer = StateGraph(P)
            outer.add_node("sub", inner.compile())
            outer.add_edge(START, "sub")
            app = outer.compile(checkpointer=cp)
            with pytest.raises(ThreadBusyError):
                app.invoke({"n": 0}, thread_id="t")
            assert direct == [(False, False), (True, True)]
            saved = list(cp.list({"configurable": {"thread_id": "t"}}))
            # fenced: each graph's input checkpoint (no n yet) and START step (n=0), no more
            assert [t.checkpoint["channel_values"].get("n") for t in saved] == [0, None] * 2
            state = app.get_state(thread_id="t")
            assert state.values == {"n": 0} and state.next == ("sub",)
        finally:
            cp.close()
