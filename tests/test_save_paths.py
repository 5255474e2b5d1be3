"""The save path's shortcuts store exactly what the general path stores.

``BlobLayer.encode_refs`` copies unchanged channels from the parent's cached record
entries (``carry``) instead of walking them; ``InMemoryCheckpointer`` deflates blobs in
batches. Neither may change a stored byte that is read back, or a value.
"""

from __future__ import annotations

from typing import Any

from threadloom import InMemoryCheckpointer
from threadloom.checkpoint.base import new_checkpoint_id_ts
from threadloom.checkpoint.memory import _BATCH, _DEFLATED, _RAW, _SMALL
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
    blobs = cp._data[thread][""].blobs
    return [k for k, r in blobs.items() if r.data[:1] == _RAW and len(r.data) > _SMALL]


def test_blobs_are_deflated_once_a_save_goes_to_another_thread() -> None:
    cp = InMemoryCheckpointer()
    _run(cp, "a", forget=False)
    waiting = _waiting(cp, "a")
    assert waiting and sorted(k for _, k in cp._raw) == sorted(waiting)
    before = cp.get_tuple({"configurable": {"thread_id": "a"}})
    _run(cp, "b", forget=False)
    blobs = cp._data["a"][""].blobs
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
    rows = cp._data["one"][""].blobs.values()
    assert any(r.data[:1] == _DEFLATED for r in rows)
    cp.clear_caches()
    history = list(cp.list({"configurable": {"thread_id": "one"}}))
    assert [h.checkpoint["channel_values"] for h in reversed(history)] == [
        values for _ in range(6) for values, _ in _steps()
    ]
