"""``custom`` chunks reach the consumer while the node that writes them still runs, as in
LangGraph: for sync and async nodes, alone in their step or not, through ``stream`` and
``astream``. Each node waits, after its first chunk, for the consumer to say it got it; a
chunk held back until the node ended would make that wait time out."""

from __future__ import annotations

import asyncio
import threading
from typing import TypedDict

import pytest

from threadloom import START, StateGraph, get_stream_writer
from threadloom.engine.runtime import emit_message_chunk
from threadloom.messages import AIMessageChunk

WAIT_S = 5.0


class S(TypedDict):
    n: int


def live_graph(kind: str, got_first: threading.Event, *, sibling: bool = False):
    def sync_node(s):
        get_stream_writer()({"chunk": 1})
        live = got_first.wait(WAIT_S)
        get_stream_writer()({"chunk": 2})
        return {"n": 1 if live else -1}

    def sync_writer_param(s, writer):
        writer({"chunk": 1})
        live = got_first.wait(WAIT_S)
        writer({"chunk": 2})
        return {"n": 1 if live else -1}

    async def async_node(s):
        get_stream_writer()({"chunk": 1})
        live = await asyncio.to_thread(got_first.wait, WAIT_S)
        get_stream_writer()({"chunk": 2})
        return {"n": 1 if live else -1}

    fn = {"sync": sync_node, "writer": sync_writer_param, "async": async_node}[kind]
    g = StateGraph(S)
    g.add_node("node", fn)
    g.add_edge(START, "node")
    if sibling:
        g.add_node("other", lambda s: None)
        g.add_edge(START, "other")
    return g.compile()


@pytest.mark.parametrize("sibling", [False, True], ids=["alone", "with-sibling"])
@pytest.mark.parametrize("kind", ["sync", "writer", "async"])
def test_custom_chunks_arrive_while_the_node_runs_sync_stream(kind, sibling):
    got_first = threading.Event()
    app = live_graph(kind, got_first, sibling=sibling)
    seen = []
    for mode, chunk in app.stream({"n": 0}, stream_mode=["custom", "updates"]):
        seen.append((mode, chunk))
        if chunk == {"chunk": 1}:
            got_first.set()
    assert ("updates", {"node": {"n": 1}}) in seen  # 1: the first chunk came live
    assert [c for m, c in seen if m == "custom"] == [{"chunk": 1}, {"chunk": 2}]


@pytest.mark.parametrize("kind", ["sync", "writer", "async"])
def test_custom_chunks_arrive_while_the_node_runs_astream(kind):
    got_first = threading.Event()
    app = live_graph(kind, got_first)

    async def consume():
        out = []
        async for chunk in app.astream({"n": 0}, stream_mode="custom"):
            out.append(chunk)
            got_first.set()
        return out

    assert asyncio.run(consume()) == [{"chunk": 1}, {"chunk": 2}]
    assert app.invoke({"n": 0}) == {"n": 1}  # nobody streams: the node is not held up


def test_message_chunks_of_a_sync_node_arrive_while_it_runs():
    got_first = threading.Event()

    def talk(s):
        emit_message_chunk(AIMessageChunk(content="hel", id="m1"))
        live = got_first.wait(WAIT_S)
        emit_message_chunk(AIMessageChunk(content="lo", id="m1"))
        return {"n": 1 if live else -1}

    g = StateGraph(S)
    g.add_node("talk", talk)
    g.add_edge(START, "talk")
    texts = []
    for chunk, meta in g.compile().stream({"n": 0}, stream_mode="messages"):
        texts.append(chunk.content)
        got_first.set()
        assert meta["langgraph_node"] == "talk"
    assert texts == ["hel", "lo"]


def test_a_lone_sync_node_still_runs_on_the_calling_thread_without_live_modes():
    where = []

    def node(s):
        where.append(threading.get_ident())
        return {"n": 1}

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    app = g.compile()
    app.invoke({"n": 0})
    list(app.stream({"n": 0}, stream_mode="updates"))
    assert where == [threading.get_ident()] * 2


def test_updates_of_parallel_tasks_go_out_as_each_ends_and_before_a_sibling_fails():
    import operator
    from typing import Annotated

    class L(TypedDict):
        log: Annotated[list[str], operator.add]

    released = threading.Event()

    def quick(s):
        return {"log": ["quick"]}

    def held(s):
        if not released.wait(WAIT_S):  # the consumer saw quick's update while held ran
            return {"log": ["late"]}
        raise RuntimeError("held failed")

    g = StateGraph(L)
    g.add_node("quick", quick)
    g.add_node("held", held)
    g.add_edge(START, "quick")
    g.add_edge(START, "held")
    seen = []
    with pytest.raises(RuntimeError, match="held failed"):
        for chunk in g.compile().stream({"log": []}, stream_mode="updates"):
            seen.append(chunk)
            released.set()
    assert seen == [{"quick": {"log": ["quick"]}}]


def test_a_paused_run_streams_its_interrupt_as_langgraph(memory_checkpointer):
    from threadloom import interrupt

    class H(TypedDict):
        robot: str
        human: str

    def ask(s):
        return {"human": interrupt("who?")}

    g = StateGraph(H)
    g.add_node("robot", lambda s: {"robot": "beep"})
    g.add_node("ask", ask)
    g.add_edge(START, "robot")
    g.add_edge("robot", "ask")
    app = g.compile(checkpointer=memory_checkpointer)
    events = list(app.stream({"robot": ""}, thread_id="p1", stream_mode=["updates", "values"]))
    (_, upd), (_, vals) = events[-2:]
    assert [i.value for i in upd["__interrupt__"]] == ["who?"]
    assert vals == {"robot": "beep", "__interrupt__": upd["__interrupt__"]}

    before = g.compile(checkpointer=memory_checkpointer, interrupt_before=["ask"])
    chunks = list(before.stream({"robot": ""}, thread_id="p2"))
    assert chunks == [{"robot": {"robot": "beep"}}, {"__interrupt__": ()}]
