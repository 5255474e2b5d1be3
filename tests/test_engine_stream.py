"""Stream modes, subgraphs, errors and cancellation while streaming."""

from __future__ import annotations

import asyncio
import operator
import threading
from typing import Annotated, TypedDict

import pytest

from threadloom import START, StateGraph, get_stream_writer
from threadloom.engine.runtime import emit_message_chunk


class S(TypedDict):
    n: int
    log: Annotated[list, operator.add]


def two_step():
    def inc(s):
        get_stream_writer()({"progress": s["n"]})
        return {"n": s["n"] + 1, "log": ["inc"]}

    g = StateGraph(S)
    g.add_node("inc", inc)
    g.add_node("again", lambda s: {"log": ["again"]})
    g.add_edge(START, "inc")
    g.add_edge("inc", "again")
    return g.compile()


def test_stream_without_a_mode_yields_updates_as_langgraph():
    expected = [{"inc": {"n": 2, "log": ["inc"]}}, {"again": {"log": ["again"]}}]
    assert list(two_step().stream({"n": 1})) == expected
    assert list(two_step().stream({"n": 1}, stream_mode=None)) == expected

    async def collect():
        return [c async for c in two_step().astream({"n": 1})]

    assert asyncio.run(collect()) == expected


def test_values_mode_yields_state_after_input_and_each_step():
    chunks = list(two_step().stream({"n": 1}, stream_mode="values"))
    assert chunks == [
        {"n": 1, "log": []},
        {"n": 2, "log": ["inc"]},
        {"n": 2, "log": ["inc", "again"]},
    ]


def test_values_mode_skips_steps_that_write_no_output_key(any_backend):
    """LangGraph sends ``values`` after a step (the input step too) only when it wrote an
    output key: an empty input and a node returning None add no event."""

    class T(TypedDict):
        a: int
        b: int

    g = StateGraph(T)
    g.add_node("nothing", lambda s: None)
    g.add_node("writes_b", lambda s: {"b": 1})
    g.add_edge(START, "nothing")
    g.add_edge("nothing", "writes_b")
    saved = g.compile(checkpointer=any_backend)
    for graph, config in ((g.compile(), None), (saved, {"configurable": {"thread_id": "t"}})):
        assert list(graph.stream({}, config, stream_mode=["values", "updates"])) == [
            ("updates", {"nothing": None}),
            ("updates", {"writes_b": {"b": 1}}),
            ("values", {"b": 1}),
        ]
    assert list(g.compile().stream({"a": 1}, stream_mode="values")) == [{"a": 1}, {"a": 1, "b": 1}]


def test_updates_mode_yields_node_updates():
    assert list(two_step().stream({"n": 1}, stream_mode="updates")) == [
        {"inc": {"n": 2, "log": ["inc"]}},
        {"again": {"log": ["again"]}},
    ]


def test_custom_mode_and_list_of_modes():
    app = two_step()
    assert list(app.stream({"n": 5}, stream_mode="custom")) == [{"progress": 5}]
    pairs = list(app.stream({"n": 5}, stream_mode=["custom", "updates"]))
    assert [mode for mode, _ in pairs] == ["custom", "updates", "updates"]


def test_debug_mode_reports_task_start_and_result():
    events = list(two_step().stream({"n": 1}, stream_mode="debug"))
    kinds = [(e["type"], e["payload"]["name"]) for e in events]
    assert kinds == [("task", "inc"), ("task_result", "inc"),
                     ("task", "again"), ("task_result", "again")]
    assert events[1]["payload"]["result"] == {"n": 2, "log": ["inc"]}


def test_debug_and_checkpoints_modes_report_saved_checkpoints(memory_checkpointer):
    app = two_step()
    app.checkpointer = memory_checkpointer
    events = list(app.stream({"n": 1}, thread_id="dbg", stream_mode=["debug", "checkpoints"]))
    saved = [p for mode, p in events if mode == "checkpoints"]
    assert [c["metadata"]["source"] for c in saved] == ["input", "loop", "loop", "loop"]
    assert [c["metadata"]["step"] for c in saved] == [-1, 0, 1, 2]
    assert saved[-1]["values"] == {"n": 2, "log": ["inc", "again"]}
    debug_types = [p["type"] for mode, p in events if mode == "debug"]
    assert debug_types.count("checkpoint") == 4 and debug_types.count("task") == 2
    ids = {h.config["configurable"]["checkpoint_id"]
           for h in app.get_state_history(thread_id="dbg")}
    assert {c["id"] for c in saved} == ids


def test_unknown_stream_mode_is_refused():
    with pytest.raises(ValueError, match="unknown stream mode"):
        list(two_step().stream({"n": 1}, stream_mode="everything"))


def test_messages_mode_yields_chunks_with_metadata_and_no_duplicates():
    from threadloom import AIMessage, AIMessageChunk, add_messages

    class M(TypedDict):
        messages: Annotated[list, add_messages]

    def talk(s):
        for piece in ("Hel", "lo"):
            emit_message_chunk(AIMessageChunk(content=piece, id="m1"))
        return {"messages": [AIMessage(content="Hello", id="m1"),
                             AIMessage(content="not streamed", id="m2")]}

    g = StateGraph(M)
    g.add_node("talk", talk)
    g.add_edge(START, "talk")
    out = list(g.compile().stream({"messages": []}, {"tags": ["t1"]}, stream_mode="messages"))
    assert [m.content for m, _ in out] == ["Hel", "lo", "not streamed"]
    meta = out[0][1]
    assert meta == {  # LangGraph's keys, the config's tags last
        "ls_integration": "langgraph", "langgraph_step": 1, "langgraph_node": "talk",
        "langgraph_triggers": ("branch:to:talk",), "langgraph_path": ("__pregel_pull", "talk"),
        "langgraph_checkpoint_ns": meta["langgraph_checkpoint_ns"], "tags": ["t1"]}
    assert meta["langgraph_checkpoint_ns"].startswith("talk:")


def test_subgraph_streams_with_namespaces_and_sends_back_only_written_keys():
    class P(TypedDict):
        a: int
        b: str
        s1: int

    sub = StateGraph(P)
    sub.add_node("inner", lambda s: {"s1": 7})
    sub.add_edge(START, "inner")

    g = StateGraph(P)
    g.add_node("node_a", lambda s: {"a": 1})
    g.add_node("sub", sub.compile())
    g.add_edge(START, "node_a")
    g.add_edge(START, "sub")
    app = g.compile()
    # H08 case 1: no clash on keys the subgraph only carried
    assert app.invoke({"a": 0, "b": "x", "s1": 0}) == {"a": 1, "b": "x", "s1": 7}
    events = list(app.stream({"a": 0, "b": "x", "s1": 0}, stream_mode="updates",
                             subgraphs=True))
    namespaces = [ns for ns, _ in events]
    assert () in namespaces
    nested = [(ns, ev) for ns, ev in events if ns]
    assert nested and nested[0][0][0].startswith("sub:")
    assert nested[0][1] == {"inner": {"s1": 7}}
    plain = list(app.stream({"a": 0, "b": "x", "s1": 0}, stream_mode="updates"))
    assert all("inner" not in ev for ev in plain)


def test_subgraph_with_a_smaller_schema_reads_only_its_own_keys(memory_checkpointer):
    # Reported: a parent {foo, extra} with a compiled subgraph node {foo} failed with
    # "the run's input wrote key 'extra'"; LangGraph gives a subgraph the keys it has.
    class Parent(TypedDict):
        foo: str
        extra: int

    class Child(TypedDict):
        foo: str
        inner: str  # the subgraph's own key, not the parent's

    seen = []

    def c1(s):
        seen.append(dict(s))
        return {"foo": s["foo"] + "!", "inner": "kept inside"}

    sub = StateGraph(Child)
    sub.add_node("c1", c1)
    sub.add_edge(START, "c1")
    g = StateGraph(Parent)
    g.add_node("sub", sub.compile())
    g.add_edge(START, "sub")
    app = g.compile(checkpointer=memory_checkpointer)
    assert app.invoke({"foo": "a", "extra": 1}, thread_id="t") == {"foo": "a!", "extra": 1}
    assert seen == [{"foo": "a"}]
    # the same through Send, whose argument may carry keys the subgraph lacks
    from threadloom import Send

    g2 = StateGraph(Parent)
    g2.add_node("sub", sub.compile())
    g2.add_conditional_edges(START, lambda s: [Send("sub", {"foo": "b", "extra": 5})])
    assert g2.compile().invoke({"foo": "a", "extra": 1}) == {"foo": "b!", "extra": 1}
    # a top-level input key the graph lacks is dropped, as LangGraph drops it
    assert app.invoke({"foo": "a", "nope": 1}, thread_id="t2") == {"foo": "a!"}


def test_failing_node_ends_the_stream_with_the_error_sync_and_async():
    g = StateGraph(S)
    g.add_node("ok", lambda s: {"n": 1})
    g.add_node("boom", lambda s: 1 / 0)
    g.add_edge(START, "ok")
    g.add_edge("ok", "boom")
    app = g.compile()
    seen = []
    with pytest.raises(ZeroDivisionError):
        for chunk in app.stream({"n": 0}, stream_mode="updates"):
            seen.append(chunk)
    assert seen == [{"ok": {"n": 1}}]

    async def consume():
        async for _ in app.astream({"n": 0}):
            pass

    with pytest.raises(ZeroDivisionError):
        asyncio.run(asyncio.wait_for(consume(), 10))


def test_cancelling_astream_consumer_cancels_nodes_and_thread_resumes(memory_checkpointer):
    started = threading.Event()
    cancelled = []
    slow_enabled = {"on": True}

    async def slow(s):
        started.set()
        if slow_enabled["on"]:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
        return {"log": ["slow"]}

    g = StateGraph(S)
    g.add_node("first", lambda s: {"log": ["first"]})
    g.add_node("slow", slow)
    g.add_edge(START, "first")
    g.add_edge("first", "slow")
    app = g.compile(checkpointer=memory_checkpointer)

    async def consume_then_cancel():
        agen = app.astream({"n": 0}, thread_id="c1", stream_mode="updates")
        async for chunk in agen:
            if "first" in chunk:
                break
        await agen.aclose()

    asyncio.run(asyncio.wait_for(consume_then_cancel(), 10))
    assert cancelled == [True] or not started.is_set()
    assert app.get_state(thread_id="c1").next == ("slow",)
    slow_enabled["on"] = False
    assert app.invoke(None, thread_id="c1")["log"] == ["first", "slow"]


def test_breaking_out_of_sync_stream_stops_the_run():
    ran = []
    g = StateGraph(S)
    g.add_node("one", lambda s: ran.append(1) or {"n": 1})
    g.add_node("two", lambda s: ran.append(2) or {"n": 2})
    g.add_edge(START, "one")
    g.add_edge("one", "two")
    for _ in g.compile().stream({"n": 0}, stream_mode="updates"):
        break
    assert ran == [1]


def test_subgraph_interrupt_pauses_parent_and_resumes(memory_checkpointer):
    from threadloom import Command, interrupt

    class P(TypedDict):
        answer: str
        log: Annotated[list, operator.add]

    inner_runs = []

    def ask(s):
        inner_runs.append(1)
        return {"answer": interrupt("name?")}

    sub = StateGraph(P)
    sub.add_node("ask", ask)
    sub.add_node("greet", lambda s: {"log": [f"hi {s['answer']}"]})
    sub.add_edge(START, "ask")
    sub.add_edge("ask", "greet")

    g = StateGraph(P)
    g.add_node("before", lambda s: {"log": ["before"]})
    g.add_node("sub", sub.compile())
    g.add_node("after", lambda s: {"log": ["after"]})
    g.add_edge(START, "before")
    g.add_edge("before", "sub")
    g.add_edge("sub", "after")
    app = g.compile(checkpointer=memory_checkpointer)
    out = app.invoke({"log": []}, thread_id="sub-int")
    assert out["__interrupt__"][0].value == "name?"
    assert app.get_state(thread_id="sub-int").next == ("sub",)
    out = app.invoke(Command(resume="Ada"), thread_id="sub-int")
    assert out["log"] == ["before", "before", "hi Ada", "after"]  # as LangGraph
    assert out["answer"] == "Ada"
    assert inner_runs == [1, 1]


def test_send_to_subgraph_and_parent_command():
    from threadloom import Command, Send

    class P(TypedDict):
        x: int
        results: Annotated[list, operator.add]

    def work(s):
        if s["x"] == 3:
            return Command(graph=Command.PARENT, update={"results": ["parent-jump"]})
        return {"results": [s["x"] * 10]}

    sub = StateGraph(P)
    sub.add_node("work", work)
    sub.add_edge(START, "work")
    g = StateGraph(P)
    g.add_node("sub", sub.compile())
    g.add_conditional_edges(START, lambda s: [Send("sub", {"x": i, "results": []})
                                              for i in (1, 2, 3)])
    out = g.compile().invoke({"x": 0, "results": []})
    assert out["results"] == [10, 20, "parent-jump"]


def test_a_message_written_twice_in_a_run_is_emitted_once():
    from threadloom import AIMessage, add_messages

    class M(TypedDict):
        messages: Annotated[list, add_messages]
        last: object

    reply = AIMessage(content="once", id="r1")
    g = StateGraph(M)
    g.add_node("say", lambda s: {"messages": [reply]})
    g.add_node("copy", lambda s: {"last": s["messages"][-1]})
    g.add_edge(START, "say")
    g.add_edge("say", "copy")
    out = list(g.compile().stream({"messages": []}, stream_mode="messages"))
    assert [(m.content, meta["langgraph_node"]) for m, meta in out] == [("once", "say")]


def test_an_exception_in_the_consumer_cancels_the_run_cleanly():
    ran = []

    async def slow(s):
        await asyncio.sleep(0.05)
        ran.append("slow")
        return {"n": 2}

    g = StateGraph(S)
    g.add_node("one", lambda s: {"n": 1})
    g.add_node("slow", slow)
    g.add_node("after", lambda s: ran.append("after") or {"n": 3})
    g.add_edge(START, "one")
    g.add_edge("one", "slow")
    g.add_edge("slow", "after")
    with pytest.raises(KeyError):
        for _ in g.compile().stream({"n": 0}, stream_mode="updates"):
            raise KeyError("consumer failed")
    assert "after" not in ran


def test_messages_metadata_carries_the_allowlisted_configurable_keys_only():
    """As LangGraph's ``ensure_config``: thread/checkpoint/run ids given in
    ``configurable`` (and ``config["metadata"]``) reach ``messages`` metadata; other
    configurable keys (secrets) never do; a Send task's path says push."""
    from threadloom import HumanMessage, MessagesState, Send

    def said(state):
        return {"messages": HumanMessage(content="hi", id="h1")}

    g = (StateGraph(MessagesState).add_node("said", said)
         .add_conditional_edges(START, lambda s: [Send("said", s)]).compile())
    conf = {"thread_id": "th", "checkpoint_id": "c1", "run_id": "r1", "graph_id": "g",
            "some_api_key": "secret", "user_id": "u"}
    [(msg, meta)] = list(g.stream({"messages": []}, {"configurable": conf, "metadata": {"m": 1}},
                                  stream_mode="messages"))
    assert msg.content == "hi"
    assert {k: meta[k] for k in ("m", "thread_id", "checkpoint_id", "run_id", "graph_id")} == {
        "m": 1, "thread_id": "th", "checkpoint_id": "c1", "run_id": "r1", "graph_id": "g"}
    assert "some_api_key" not in meta and "user_id" not in meta
    assert meta["langgraph_triggers"] == ("__pregel_push",)
    assert meta["langgraph_path"] == ("__pregel_push", 0, False)
