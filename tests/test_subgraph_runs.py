"""Subgraph runs as LangGraph runs them: a tool used directly as a node (and sending a
``Command`` to its parent graph), ``invoke(..., subgraphs=True)``, the exit checkpoint of
a subgraph under ``durability="exit"``, checkpoint events of such runs, and the order
of what graphs invoked inside a node stream.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import START, StateGraph
from threadloom.engine.runtime import interrupt
from threadloom.reducers import add_messages
from threadloom.tools import tool
from threadloom.types import Command


class Msgs(TypedDict):
    messages: Annotated[list, add_messages]


class Parent(TypedDict):
    messages: Annotated[list, add_messages]
    user_name: str


def _cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


@pytest.mark.parametrize("persist", [True, False])
def test_tool_node_sends_command_to_parent(any_backend, thread_id, persist) -> None:
    @tool(return_direct=True)
    def get_user_name() -> Command:
        """Retrieve user name"""
        return Command(update={"user_name": "Meow"}, graph=Command.PARENT)

    sub = StateGraph(Msgs).add_node("tool", get_user_name).add_edge(START, "tool")
    parent = StateGraph(Parent).add_node("alice", sub.compile(checkpointer=persist))
    graph = parent.add_edge(START, "alice").compile(checkpointer=any_backend)
    out = graph.invoke({"messages": [("user", "hi")]}, _cfg(thread_id), durability="exit")
    assert out["user_name"] == "Meow"
    assert [m.content for m in out["messages"]] == ["hi"]
    assert graph.get_state(_cfg(thread_id)).values["user_name"] == "Meow"


class Args(TypedDict, total=False):
    a: int
    b: int
    total: int


def test_tool_node_reads_its_arguments_from_the_state() -> None:
    @tool
    def add(a: int, b: int = 10) -> dict[str, int]:
        """Add."""
        return {"total": a + b}

    graph = StateGraph(Args).add_node(add).add_edge(START, "add").compile()
    assert graph.invoke({"a": 1, "b": 2}) == {"a": 1, "b": 2, "total": 3}
    assert graph.invoke({"a": 1}) == {"a": 1, "total": 11}


async def test_async_tool_node() -> None:
    @tool
    async def add(a: int, b: int) -> dict[str, int]:
        """Add."""
        return {"total": a + b}

    graph = StateGraph(Args).add_node("sum", add).add_edge(START, "sum").compile()
    assert (await graph.ainvoke({"a": 2, "b": 3}))["total"] == 5
    assert graph.invoke({"a": 2, "b": 4})["total"] == 6


class Inner(TypedDict):
    my_key: Annotated[str, operator.add]
    my_other_key: str


class Outer(TypedDict):
    my_key: str


def _looping_parent(checkpointer: Any, inner_checkpointer: Any = None) -> Any:
    inner = StateGraph(Inner)
    inner.add_node("inner_1", lambda s: {"my_key": " got here", "my_other_key": s["my_key"]})
    inner.add_node("inner_2", lambda s: {"my_key": " and there"})
    inner.add_edge(START, "inner_1").add_edge("inner_1", "inner_2")
    graph = StateGraph(Outer).add_node("inner", inner.compile(checkpointer=inner_checkpointer))
    graph.add_edge(START, "inner")
    graph.add_conditional_edges(
        "inner", lambda s: "inner" if s["my_key"].count("there") < 2 else "__end__"
    )
    return graph.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_invoke_with_subgraphs_and_exit_checkpoints(any_backend, thread_id, durability) -> None:
    app = _looping_parent(any_backend, inner_checkpointer=any_backend)
    out = app.invoke({"my_key": ""}, _cfg(thread_id), subgraphs=True, durability=durability)
    assert out == {"my_key": " got here and there got here and there"}
    saved = list(any_backend.list(_cfg(thread_id)))  # every namespace of the thread
    # as LangGraph: a finished per-call subgraph saves no exit checkpoint
    assert len(saved) == (1 if durability == "exit" else 12)


def test_invoke_with_subgraphs_other_modes() -> None:
    app = _looping_parent(None)
    chunks = app.invoke({"my_key": ""}, stream_mode="updates", subgraphs=True)
    assert [ns[0].split(":")[0] if ns else "" for ns, _ in chunks] == [
        "inner", "inner", "", "inner", "inner", ""
    ]
    assert app.invoke({"my_key": ""}, subgraphs=True) == app.invoke({"my_key": ""})


class Ask(TypedDict, total=False):
    value: str


def test_invoke_with_subgraphs_reports_the_interrupt(any_backend, thread_id) -> None:
    def ask(state: Ask) -> dict[str, str]:
        return {"value": interrupt("what?")}

    child = StateGraph(Ask).add_node(ask).add_edge(START, "ask").compile()
    app = StateGraph(Ask).add_node("child", child).add_edge(START, "child")
    app = app.compile(checkpointer=any_backend)
    out = app.invoke({"value": ""}, _cfg(thread_id), subgraphs=True)
    assert [i.value for i in out["__interrupt__"]][-1] == "what?"
    assert app.invoke(Command(resume="x"), _cfg(thread_id), subgraphs=True) == {"value": "x"}


def test_exit_run_streams_checkpoint_events(any_backend, thread_id) -> None:
    app = _looping_parent(any_backend)
    events = [
        e
        for e in app.stream({"my_key": ""}, _cfg(thread_id), stream_mode="debug",
                            durability="exit")
        if e["type"] == "checkpoint"
    ]
    assert len(events) == 4  # one per step (input, START, inner, inner), one saved
    [saved] = list(app.get_state_history(_cfg(thread_id)))
    last = events[-1]["payload"]
    assert last["config"]["configurable"] == saved.config["configurable"]
    assert last["values"] == saved.values
    assert last["parent_config"] is None and saved.parent_config is None


class Sub(TypedDict):
    sub_counter: Annotated[int, operator.add]


class Other(TypedDict):
    other_sub_counter: Annotated[int, operator.add]


class Counter(TypedDict):
    parent_counter: int


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_graphs_invoked_in_a_node_stream_before_its_update(any_backend, mode) -> None:
    sub1 = StateGraph(Sub).add_node("s", lambda s: {"sub_counter": 2}).add_edge(START, "s")
    first = sub1.compile(checkpointer=True)
    sub2 = StateGraph(Other).add_node("o", lambda s: {"other_sub_counter": 3})
    second = sub2.add_edge(START, "o").compile()

    def parent_node(state: Counter) -> dict[str, int]:
        one = first.invoke({"sub_counter": state["parent_counter"]})
        two = second.invoke({"other_sub_counter": one["sub_counter"]})
        return {"parent_counter": two["other_sub_counter"]}

    app = StateGraph(Counter).add_node(parent_node).add_edge(START, "parent_node")
    app = app.compile(checkpointer=any_backend)
    args = ({"parent_counter": 0}, _cfg("t"))
    if mode == "sync":
        got = list(app.stream(*args, subgraphs=True, stream_mode="updates"))
    else:
        got = [c async for c in app.astream(*args, subgraphs=True, stream_mode="updates")]
    assert got[0] == (("parent_node",), {"s": {"sub_counter": 2}})
    assert got[1][0][0].startswith("parent_node:") and got[1][0][1] == "1"
    assert got[1][1] == {"o": {"other_sub_counter": 3}}
    assert got[2] == ((), {"parent_node": {"parent_counter": 5}})


def test_snapshots_and_checkpoint_events_show_langgraph_metadata(any_backend, thread_id) -> None:
    """As LangGraph 1.x: ``source``, ``step`` and ``parents`` only; the store still keeps
    which keys each node wrote (``writes``), for history results and the CLI."""
    app = _looping_parent(any_backend)
    events = list(app.stream({"my_key": ""}, _cfg(thread_id), stream_mode="checkpoints"))
    assert all(set(e["metadata"]) == {"source", "step", "parents"} for e in events)
    snaps = list(app.get_state_history(_cfg(thread_id)))
    assert all(set(s.metadata) == {"source", "step", "parents"} for s in snaps)
    assert app.get_state(_cfg(thread_id)).metadata == {"source": "loop", "step": 2, "parents": {}}
    stored = [t.metadata.get("writes") for t in any_backend.list(_cfg(thread_id))]
    assert {"inner": ["my_key"]} in stored
