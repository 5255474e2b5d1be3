"""LangGraph details of updates: a pydantic node output's defaulted fields, the node an
``update_state`` without ``as_node`` is applied as, and the path of a pending Send task."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from pydantic import BaseModel, Field

from threadloom import InMemoryCheckpointer, Send, StateGraph
from threadloom.engine.snapshot import PUSH
from threadloom.types import START


class Docs(BaseModel):
    docs: Annotated[list[str], operator.add] = Field(default_factory=list)
    note: str | None = None


class MoreDocs(BaseModel):
    docs: list[str] = Field(default_factory=lambda: ["doc3"])
    note: str | None = None


def test_a_pydantic_output_counts_fields_filled_by_a_default_factory() -> None:
    # LangGraph keeps a field unless it is None, defaults to None and was not set
    builder = StateGraph(Docs)
    builder.add_node("one", lambda s: {"docs": ["doc1"]})
    builder.add_node("two", lambda s: MoreDocs())
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    out = builder.compile().invoke({"docs": []})
    assert out == {"docs": ["doc1", "doc3"], "note": None}


class S(TypedDict):
    x: Annotated[list, operator.add]


def _send_graph() -> StateGraph:
    def route(s: S) -> list[Send]:
        return [Send("foo", {"x": ["q"]})] if s["x"][-1] == "a" else []

    b = StateGraph(S)
    b.add_node("agent", lambda s: {"x": ["a"]})
    b.add_node("foo", lambda s: {"x": ["f"]})
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route)
    return b


@pytest.mark.parametrize("durability", ["exit", "async", "sync"])
def test_update_without_as_node_is_applied_as_the_node_that_ran(durability: str) -> None:
    app = _send_graph().compile(checkpointer=InMemoryCheckpointer(), interrupt_before=["foo"])
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": []}, cfg, durability=durability)
    state = app.get_state(cfg)
    assert state.next == ("foo",)
    assert [t.path for t in state.tasks] == [(PUSH, 0, False)]  # LangGraph 1.x's push path
    # applied as "agent" (the node that ran last): its edge routes again and sends nothing
    app.update_state(cfg, {"x": ["u"]})
    after = app.get_state(cfg)
    assert after.next == () and after.values == {"x": ["a", "u"]}
    assert after.metadata["source"] == "update"
    assert app.invoke(None, cfg) == {"x": ["a", "u"]}


def test_update_after_a_step_of_several_nodes_keeps_the_saved_next_tasks() -> None:
    b = StateGraph(S)
    b.add_node("a", lambda s: {"x": ["a"]})
    b.add_node("b", lambda s: {"x": ["b"]})
    b.add_node("c", lambda s: {"x": ["c"]})
    b.add_edge(START, "a")
    b.add_edge(START, "b")
    b.add_edge(["a", "b"], "c")
    app = b.compile(checkpointer=InMemoryCheckpointer(), interrupt_before=["c"])
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": []}, cfg)
    app.update_state(cfg, {"x": ["u"]})  # LangGraph: "Ambiguous update"; kept as is here
    assert app.get_state(cfg).next == ("c",)
    assert app.invoke(None, cfg) == {"x": ["a", "b", "u", "c"]}


def test_an_update_keeps_the_task_of_a_completed_join_and_drops_plain_edges() -> None:
    b = StateGraph(S)
    for name in ("one", "slow", "two", "join", "after_two"):
        b.add_node(name, lambda s, n=name: {"x": [n]})
    b.add_edge(START, "one")
    b.add_edge(START, "slow")
    b.add_edge("one", "two")
    b.add_edge(["two", "slow"], "join")
    b.add_edge("two", "after_two")
    app = b.compile(checkpointer=InMemoryCheckpointer(), interrupt_before=["join", "after_two"])
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": []}, cfg)
    assert app.get_state(cfg).next == ("join", "after_two")
    app.update_state(cfg, {"x": ["u"]}, as_node="slow")  # slow routes only to the join
    # the join's barrier is still complete; after_two's plain edge lasted one step
    assert app.get_state(cfg).next == ("join",)
    assert app.invoke(None, cfg)["x"][-2:] == ["u", "join"]


def test_a_tool_call_sent_as_a_packet_is_saved_and_read_back_as_its_dict() -> None:
    # tool calls read as Haystack's ToolCall too; in a Send's arg they store as the dict
    from threadloom import AIMessage, MessagesState

    ai = AIMessage("", tool_calls=[{"name": "foo", "args": {"hi": [1, 2]}, "id": "c1"}])
    seen = []

    def route(state: MessagesState) -> list[Send]:
        return [Send("foo", call) for call in state["messages"][-1].tool_calls]

    def foo(call: dict) -> dict:
        seen.append(call)
        return {"messages": []}

    b = StateGraph(MessagesState)
    b.add_node("agent", lambda s: {"messages": [ai]})
    b.add_node("foo", foo)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", route)
    app = b.compile(checkpointer=InMemoryCheckpointer(), interrupt_before=["foo"])
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [("user", "hi")]}, cfg)
    app.invoke(None, cfg)
    assert seen == [{"name": "foo", "args": {"hi": [1, 2]}, "id": "c1", "type": "tool_call"}]


def test_a_deferred_node_stays_next_after_an_update_and_join_triggers_are_named() -> None:
    b = StateGraph(S)
    for name in ("a", "b", "late"):
        b.add_node(name, lambda s, n=name: {"x": [n]})
    b.add_node("qa", lambda s: {"x": ["qa"]}, defer=True)
    b.add_edge(START, "a")
    b.add_edge(START, "b")
    b.add_edge("a", "late")
    b.add_edge(["a", "b"], "qa")
    app = b.compile(checkpointer=InMemoryCheckpointer(), interrupt_before=["qa"])
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke({"x": []}, cfg)
    assert app.get_state(cfg).next == ("qa",)
    app.update_state(cfg, {"x": ["u"]})  # applied as "late", which leads nowhere
    assert app.get_state(cfg).next == ("qa",)  # the deferred node still waits to run
    assert app.invoke(None, cfg)["x"][-1] == "qa"
    # LangGraph's node triggers: the node's branch channel and each join into it
    events = list(b.compile().stream({"x": []}, stream_mode="debug"))
    triggers = {e["payload"]["name"]: e["payload"]["triggers"] for e in events
                if e["type"] == "task"}
    assert triggers == {"a": ("branch:to:a",), "b": ("branch:to:b",),
                        "late": ("branch:to:late",), "qa": ("branch:to:qa", "join:a+b:qa")}
