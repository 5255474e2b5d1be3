"""Several pending interrupts answered by a resume map (H05, H35).

Each interrupt has its own id (parallel nodes, parallel tool calls in one node, two
``interrupt()`` calls in one node or subgraph node); ``Command(resume={id: value})`` gives
each its own answer, a map naming only some leaves the others pending (their nodes do not
run), a map naming none is an error listing the pending ids, and one plain value with
several pending is an error.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import END, START, StateGraph
from threadloom.engine.runtime import interrupt
from threadloom.errors import GraphRunError, ResumeError
from threadloom.messages import AIMessage, HumanMessage
from threadloom.nodes import ToolNode
from threadloom.reducers import add_messages
from threadloom.tools import tool
from threadloom.types import Command


class Answers(TypedDict):
    answers: Annotated[list[str], operator.add]


def two_askers(runs: list[str]) -> StateGraph:
    def ask_left(state: Answers) -> dict[str, Any]:
        runs.append("left")
        return {"answers": [f"left={interrupt('left')}"]}

    def ask_right(state: Answers) -> dict[str, Any]:
        runs.append("right")
        return {"answers": [f"right={interrupt('right')}"]}

    g = StateGraph(Answers)
    g.add_node("ask_left", ask_left)
    g.add_node("ask_right", ask_right)
    g.add_edge(START, "ask_left")
    g.add_edge(START, "ask_right")
    g.add_edge("ask_left", END)
    g.add_edge("ask_right", END)
    return g


def by_value(interrupts: Any) -> dict[str, str]:
    return {i.value: i.id for i in interrupts}


def test_h35_map_naming_some_leaves_the_others_pending(checkpointer, thread_id):
    runs: list[str] = []
    app = two_askers(runs).compile(checkpointer=checkpointer)
    out = app.invoke({"answers": []}, thread_id=thread_id)
    ids = by_value(out["__interrupt__"])
    assert set(ids) == {"left", "right"} and ids["left"] != ids["right"]
    assert by_value(app.get_state(thread_id=thread_id).interrupts) == ids  # stable ids
    runs.clear()

    out = app.invoke(Command(resume={ids["left"]: "L"}), thread_id=thread_id)
    assert [(i.value, i.id) for i in out["__interrupt__"]] == [("right", ids["right"])]
    assert runs == ["left"]  # nothing was delivered to ask_right: it did not run
    snap = app.get_state(thread_id=thread_id)
    assert [(i.value, i.id) for i in snap.interrupts] == [("right", ids["right"])]

    out = app.invoke(Command(resume={ids["right"]: "R"}), thread_id=thread_id)
    assert sorted(out["answers"]) == ["left=L", "right=R"]
    assert "__interrupt__" not in out
    assert runs == ["left", "right"]  # ask_left ran twice in all, ask_right twice
    assert app.get_state(thread_id=thread_id).interrupts == ()


def test_map_answering_all_parallel_nodes_at_once(checkpointer, thread_id):
    app = two_askers([]).compile(checkpointer=checkpointer)
    ids = by_value(app.invoke({"answers": []}, thread_id=thread_id)["__interrupt__"])
    out = app.invoke(Command(resume={ids["left"]: "L", ids["right"]: "R"}), thread_id=thread_id)
    assert sorted(out["answers"]) == ["left=L", "right=R"]
    assert "__interrupt__" not in out


def test_plain_value_or_map_naming_none_with_several_pending_is_refused(
    checkpointer, thread_id
):
    app = two_askers([]).compile(checkpointer=checkpointer)
    ids = by_value(app.invoke({"answers": []}, thread_id=thread_id)["__interrupt__"])
    with pytest.raises(ResumeError, match="resume with a dict") as info:
        app.invoke(Command(resume="yes"), thread_id=thread_id)
    # as LangGraph: a RuntimeError with its sentence, and one of threadloom's run errors
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, GraphRunError)
    assert "you must specify the interrupt id when resuming" in str(info.value)
    assert ids["left"] in str(info.value) and ids["right"] in str(info.value)
    with pytest.raises(ResumeError, match="names none of the pending") as info:
        app.invoke(Command(resume={"0" * 32: "x"}), thread_id=thread_id)
    assert ids["left"] in str(info.value) and "0" * 32 in str(info.value)
    # nothing was consumed: both are still pending and answerable
    assert by_value(app.get_state(thread_id=thread_id).interrupts) == ids


class Got(TypedDict, total=False):
    got: Any


def test_h35_variant_map_with_unknown_id_is_not_an_answer(checkpointer, thread_id):
    def ask(state: Got) -> dict[str, Any]:
        return {"got": interrupt("q")}

    g = StateGraph(Got)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    app = g.compile(checkpointer=checkpointer)
    [pause] = app.invoke({}, thread_id=thread_id)["__interrupt__"]
    with pytest.raises(ResumeError, match="names none of the pending") as info:
        app.invoke(Command(resume={"0" * 32: "x"}), thread_id=thread_id)
    assert pause.id in str(info.value)
    snap = app.get_state(thread_id=thread_id)
    assert [i.id for i in snap.interrupts] == [pause.id]
    assert "got" not in snap.values
    # a dict whose keys are not interrupt ids is an ordinary answer
    out = app.invoke(Command(resume={"approved": True}), thread_id=thread_id)
    assert out["got"] == {"approved": True}


class Messages(TypedDict):
    messages: Annotated[list, add_messages]


def shape_tool(name: str):
    @tool(name)
    def run() -> str:
        """Ask a human about a shape."""
        ans = interrupt({"tool": name})
        return f"{name}:{ans}"

    return run


def shapes_graph(checkpointer):
    names = ["circle", "square", "triangle"]

    def agent(state: Messages) -> dict[str, Any]:
        calls = [
            {"name": n, "args": {}, "id": f"c{i + 1}", "type": "tool_call"}
            for i, n in enumerate(names)
        ]
        return {"messages": [AIMessage("", tool_calls=calls)]}

    g = StateGraph(Messages)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([shape_tool(n) for n in names]))
    g.add_edge(START, "agent")
    g.add_edge("agent", "tools")
    g.add_edge("tools", END)
    return g.compile(checkpointer=checkpointer)


def test_h05_parallel_tool_interrupts_each_get_their_answer(checkpointer, thread_id):
    app = shapes_graph(checkpointer)
    out = app.invoke({"messages": [HumanMessage("go")]}, thread_id=thread_id)
    pending = app.get_state(thread_id=thread_id).interrupts
    assert len(pending) == 3 and len({i.id for i in pending}) == 3
    assert [i.id for i in app.get_state(thread_id=thread_id).interrupts] == [
        i.id for i in pending
    ]
    assert {i.id for i in out["__interrupt__"]} == {i.id for i in pending}
    with pytest.raises(ResumeError, match="resume with a dict"):
        app.invoke(Command(resume="ok"), thread_id=thread_id)
    out = app.invoke(
        Command(resume={i.id: f"ok-{i.value['tool']}" for i in pending}), thread_id=thread_id
    )
    tool_messages = [(m.content, m.tool_call_id) for m in out["messages"] if m.type == "tool"]
    assert tool_messages == [
        ("circle:ok-circle", "c1"), ("square:ok-square", "c2"), ("triangle:ok-triangle", "c3")
    ]
    assert "__interrupt__" not in out


def test_parallel_tool_interrupts_answered_one_by_one(checkpointer, thread_id):
    app = shapes_graph(checkpointer)
    app.invoke({"messages": [HumanMessage("go")]}, thread_id=thread_id)
    pending = {i.value["tool"]: i.id for i in app.get_state(thread_id=thread_id).interrupts}
    out = app.invoke(Command(resume={pending["square"]: "S"}), thread_id=thread_id)
    left = {i.value["tool"]: i.id for i in out["__interrupt__"]}
    assert left == {"circle": pending["circle"], "triangle": pending["triangle"]}
    out = app.invoke(
        Command(resume={pending["circle"]: "C", pending["triangle"]: "T"}), thread_id=thread_id
    )
    tool_messages = [m.content for m in out["messages"] if m.type == "tool"]
    assert tool_messages == ["circle:C", "square:S", "triangle:T"]


def test_two_interrupts_in_one_subgraph_node(checkpointer, thread_id):
    seen: list[Any] = []

    def ask_twice(state: Got) -> dict[str, Any]:
        first = interrupt("first")
        second = interrupt("second")
        seen.append((first, second))
        return {"got": [first, second]}

    child = StateGraph(Got)
    child.add_node("ask_twice", ask_twice)
    child.add_edge(START, "ask_twice")
    parent = StateGraph(Got)
    parent.add_node("sub", child.compile())
    parent.add_edge(START, "sub")
    app = parent.compile(checkpointer=checkpointer)
    [first] = app.invoke({"got": None}, thread_id=thread_id)["__interrupt__"]
    assert first.value == "first"
    [second] = app.invoke(Command(resume={first.id: "A"}), thread_id=thread_id)[
        "__interrupt__"
    ]
    assert second.value == "second" and second.id != first.id
    out = app.invoke(Command(resume={second.id: "B"}), thread_id=thread_id)
    assert out["got"] == ["A", "B"] and seen == [("A", "B")]


def test_parallel_tool_interrupt_ids_do_not_depend_on_which_call_asks_first(
    checkpointer, thread_id
):
    runs = {"n": 0}
    names = ["circle", "square", "triangle"]

    def slow_tool(name: str, delay: int):
        @tool(name)
        async def run() -> str:
            """Ask a human about a shape, after a while."""
            import asyncio

            # first run: circle asks first; on resume the order is reversed
            await asyncio.sleep(0.01 * (delay if runs["n"] == 1 else 3 - delay))
            return f"{name}:{interrupt({'tool': name})}"

        return run

    def agent(state: Messages) -> dict[str, Any]:
        calls = [{"name": n, "args": {}, "id": f"c{i}", "type": "tool_call"}
                 for i, n in enumerate(names)]
        return {"messages": [AIMessage("", tool_calls=calls)]}

    def count(state: Messages) -> dict[str, Any]:
        runs["n"] += 1
        return {}

    g = StateGraph(Messages)
    g.add_node("agent", agent)
    g.add_node("count", count)
    g.add_node("tools", ToolNode([slow_tool(n, i) for i, n in enumerate(names)]))
    g.add_edge(START, "agent")
    g.add_edge("agent", "count")
    g.add_edge("count", "tools")
    app = g.compile(checkpointer=checkpointer)
    app.invoke({"messages": [HumanMessage("go")]}, thread_id=thread_id)
    runs["n"] = 2
    pending = app.get_state(thread_id=thread_id).interrupts
    out = app.invoke(
        Command(resume={i.id: i.value["tool"].upper() for i in pending}), thread_id=thread_id
    )
    assert [m.content for m in out["messages"] if m.type == "tool"] == [
        "circle:CIRCLE", "square:SQUARE", "triangle:TRIANGLE"
    ]


def test_send_fan_out_interrupts_each_answered_by_id(checkpointer, thread_id):
    from threadloom.types import Send

    class Fan(TypedDict):
        items: list[str]
        answers: Annotated[list[str], operator.add]

    def ask(arg: dict[str, str]) -> dict[str, Any]:
        return {"answers": [f"{arg['item']}={interrupt(arg['item'])}"]}

    g = StateGraph(Fan)
    g.add_node("ask", ask)
    g.add_conditional_edges(START, lambda s: [Send("ask", {"item": i}) for i in s["items"]])
    app = g.compile(checkpointer=checkpointer)
    out = app.invoke({"items": ["a", "b", "c"], "answers": []}, thread_id=thread_id)
    ids = by_value(out["__interrupt__"])
    assert len(set(ids.values())) == 3
    out = app.invoke(Command(resume={ids["b"]: "B"}), thread_id=thread_id)
    assert sorted(i.value for i in out["__interrupt__"]) == ["a", "c"]
    out = app.invoke(Command(resume={ids["a"]: "A", ids["c"]: "C"}), thread_id=thread_id)
    assert sorted(out["answers"]) == ["a=A", "b=B", "c=C"]


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]


def test_updates_stream_of_a_pausing_run_matches_langgraph(checkpointer, thread_id):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": [interrupt("q")]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    app = g.compile(checkpointer=checkpointer)
    first = list(app.stream({"log": []}, thread_id=thread_id, stream_mode="updates"))
    assert first[0] == {"a": {"log": ["a"]}}
    [(key, (pause,))] = first[1].items()
    assert key == "__interrupt__" and pause.value == "q" and len(first) == 2
    again = list(app.stream(Command(resume="x"), thread_id=thread_id, stream_mode="updates"))
    assert again == [{"a": {"log": ["a"]}, "__metadata__": {"cached": True}},
                     {"b": {"log": ["x"]}}]

    before = StateGraph(Log)
    before.add_node("a", lambda s: {"log": ["a"]})
    before.add_node("b", lambda s: {"log": ["b"]})
    before.add_edge(START, "a")
    before.add_edge("a", "b")
    app = before.compile(checkpointer=checkpointer, interrupt_before=["b"])
    other = thread_id + "-before"
    assert list(app.stream({"log": []}, thread_id=other, stream_mode="updates")) == [
        {"a": {"log": ["a"]}}, {"__interrupt__": ()}]
    assert list(app.stream(None, thread_id=other, stream_mode="updates")) == [
        {"b": {"log": ["b"]}}]
