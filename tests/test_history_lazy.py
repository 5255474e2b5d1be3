"""``get_state_history`` (and ``aget_state_history``, ``checkpointer.list``) is lazy on
every store: each checkpoint is decoded when the caller gets to it, so the first snapshot
of a long thread, or ``limit=``, decodes only what it returns (counted decodes, not
timings), and no read transaction stays open between items (the caller may write the
thread while it iterates, as LangGraph's time-travel loops do)."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from threadloom import END, START, StateGraph
from threadloom.checkpoint.listing import PAGE

STEPS = 300  # about 300 checkpoints: more than one full page


class _State(TypedDict):
    n: int
    seen: Annotated[list, operator.add]


def _graph(cp: Any) -> Any:
    g = StateGraph(_State)
    g.add_node("a", lambda s: {"n": s["n"] + 1, "seen": ["a"]})
    g.add_node("b", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", lambda s: END if s["n"] >= STEPS else "a")
    return g.compile(checkpointer=cp)


def _counting(cp: Any, monkeypatch: Any) -> list[str]:
    """Note the id of each checkpoint the store decodes."""
    decoded: list[str] = []
    real = cp._decode_record

    def decode(row: Any) -> Any:
        decoded.append(row.checkpoint_id)
        return real(row)

    monkeypatch.setattr(cp, "_decode_record", decode)
    return decoded


def _thread(any_backend: Any) -> tuple[Any, dict[str, Any]]:
    graph = _graph(any_backend)
    cfg = {"configurable": {"thread_id": "lazy"}, "recursion_limit": STEPS + 10}
    graph.invoke({"n": 0, "seen": []}, cfg)
    return graph, {"configurable": {"thread_id": "lazy"}}


def test_the_first_snapshot_and_a_limit_decode_only_what_they_return(any_backend, monkeypatch):
    graph, cfg = _thread(any_backend)
    full = list(graph.get_state_history(cfg))
    assert len(full) > PAGE
    decoded = _counting(any_backend, monkeypatch)

    first = next(iter(graph.get_state_history(cfg)))
    assert first == full[0] and first.values["n"] == STEPS
    assert decoded == [full[0].config["configurable"]["checkpoint_id"]]

    decoded.clear()
    assert list(graph.get_state_history(cfg, limit=5)) == full[:5]
    assert len(decoded) == 5

    decoded.clear()
    history = graph.get_state_history(cfg)
    taken = [next(history) for _ in range(10)]
    assert taken == full[:10] and len(decoded) <= 15  # the pages of 1, 2, 4, 8 begun
    assert list(history) == full[10:] and len(decoded) == len(full)

    decoded.clear()
    assert next(iter(any_backend.list(cfg))).checkpoint["id"] == decoded[0]
    assert len(decoded) == 1


def test_async_history_is_as_lazy_and_the_same(any_backend, monkeypatch):
    graph, cfg = _thread(any_backend)
    full = list(graph.get_state_history(cfg))
    decoded = _counting(any_backend, monkeypatch)

    async def main() -> tuple[Any, list[Any], list[Any]]:
        first = await anext(aiter(graph.aget_state_history(cfg)))
        count = len(decoded)
        limited = [s async for s in graph.aget_state_history(cfg, limit=3)]
        whole = [s async for s in graph.aget_state_history(cfg)]
        return (first, count), limited, whole

    (first, count), limited, whole = asyncio.run(main())
    assert first == full[0] and count == 1
    assert limited == full[:3]
    assert whole == full


def test_the_thread_can_be_written_between_items(any_backend):
    """No transaction (nor the store's lock) is held between items: a fork written from
    the first snapshot while the history is read does not block, and the history goes on
    with the checkpoints it had not reached (the fork is newer than all of them)."""
    graph, cfg = _thread(any_backend)
    full = list(graph.get_state_history(cfg))
    history = graph.get_state_history(cfg)
    older = next(history)
    forked = graph.update_state(full[3].config, {"n": -1})
    assert graph.get_state(forked).values["n"] == -1
    assert older == full[0]
    assert list(history) == full[1:]
    assert len(list(graph.get_state_history(cfg))) == len(full) + 1
