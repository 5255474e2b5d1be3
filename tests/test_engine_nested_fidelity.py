"""Nested graphs as LangGraph runs them (issue 15): what a subgraph hands back, a
``Command.PARENT`` from deep inside, pauses inside parallel steps and resumes.

Each expected value below is what LangGraph 1.2 gives for the same graph.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import START, StateGraph
from threadloom.engine.runtime import interrupt
from threadloom.errors import ParentCommand
from threadloom.types import CONFIG_KEY_NODE_FINISHED, Command


class Dialog(TypedDict):
    dialog_state: Annotated[list[str], operator.add]


def test_a_subgraph_hands_back_the_final_value_of_each_key_it_wrote(checkpointer, thread_id):
    # As LangGraph, whose subgraph node returns its final state: a reduced key's final
    # value (the subgraph's input included) goes through the parent's reducer.
    child = StateGraph(Dialog)
    child.add_node("c1", lambda s: {"dialog_state": ["c1"]})
    child.add_edge(START, "c1")
    parent = StateGraph(Dialog)
    parent.add_node("p1", lambda s: {"dialog_state": ["p1"]})
    parent.add_node("sub", child.compile())
    parent.add_edge(START, "p1")
    parent.add_edge("p1", "sub")
    app = parent.compile(checkpointer=checkpointer)
    out = app.invoke({"dialog_state": ["init"]}, thread_id=thread_id)
    assert out == {"dialog_state": ["init", "p1", "init", "p1", "c1"]}
    updates = list(app.stream({"dialog_state": []}, thread_id=thread_id + "-2"))
    assert updates[-1] == {"sub": {"dialog_state": ["p1", "c1"]}}


def test_parent_command_from_a_subgraph_two_levels_down(checkpointer, thread_id):
    def deepest(state: Dialog) -> Command:
        return Command(graph=Command.PARENT, goto="mid_3", update={"dialog_state": ["deep"]})

    deep = StateGraph(Dialog)
    deep.add_node("deepest", deepest)
    deep.add_edge(START, "deepest")
    mid = StateGraph(Dialog)
    mid.add_node("mid_1", lambda s: {"dialog_state": ["mid_1"]})
    mid.add_node("mid_2", deep.compile(), destinations=("mid_3",))
    mid.add_node("mid_3", lambda s: {"dialog_state": ["mid_3"]})
    mid.add_edge(START, "mid_1")
    mid.add_edge("mid_1", "mid_2")
    top = StateGraph(Dialog)
    top.add_node("top_1", lambda s: {"dialog_state": ["top_1"]})
    top.add_node("top_2", mid.compile())
    top.add_edge(START, "top_1")
    top.add_edge("top_1", "top_2")
    app = top.compile(checkpointer=checkpointer)
    out = app.invoke({"dialog_state": ["init"]}, thread_id=thread_id)
    # the command lands in the middle graph; the middle graph's final log is handed up
    assert out == {"dialog_state": [
        "init", "top_1", "init", "top_1", "mid_1", "deep", "mid_3"]}


class Text(TypedDict):
    k: Annotated[str, operator.add]


def _parallel_with_a_pause(checkpointer: Any) -> Any:
    def ask(s: Text) -> dict[str, str]:
        return {"k": "A" + interrupt("q")}

    g = StateGraph(Text)
    g.add_node("ask", ask)
    g.add_node("other", lambda s: {"k": "O"})
    g.add_node("end", lambda s: {"k": "E"})
    g.add_edge(START, "ask")
    g.add_edge(START, "other")
    g.add_edge(["ask", "other"], "end")
    return g.compile(checkpointer=checkpointer)


def _plain(events: list[Any]) -> list[Any]:
    """Interrupts as their values, so events compare without their ids."""
    def one(v: Any) -> Any:
        if isinstance(v, dict) and "__interrupt__" in v:
            return {**v, "__interrupt__": [i.value for i in v["__interrupt__"]]}
        return v
    return [(e[0], one(e[1])) if isinstance(e, tuple) else one(e) for e in events]


def test_a_pause_part_way_through_a_step_returns_the_finished_tasks_writes(
    checkpointer, thread_id
):
    app = _parallel_with_a_pause(checkpointer)
    out = app.invoke({"k": "x"}, thread_id=thread_id)
    assert out["k"] == "xO" and [i.value for i in out["__interrupt__"]] == ["q"]
    events = list(app.stream({"k": "x"}, thread_id=thread_id + "-s",
                             stream_mode=["values", "updates"]))
    # LangGraph: the interrupt as it happens (the state then), the sibling as it ends,
    # then the state with the finished writes applied (not saved: the step is unfinished)
    assert _plain(events) == [
        ("values", {"k": "x"}),
        ("updates", {"__interrupt__": ["q"]}),
        ("values", {"k": "x", "__interrupt__": ["q"]}),
        ("updates", {"other": {"k": "O"}}),
        ("values", {"k": "xO"}),
    ]
    events = list(app.stream(Command(resume="r"), thread_id=thread_id + "-s",
                             stream_mode=["values", "updates"]))
    assert events == [  # a resumed run streams its saved state first
        ("values", {"k": "x"}),
        ("updates", {"other": {"k": "O"}, "__metadata__": {"cached": True}}),
        ("updates", {"ask": {"k": "Ar"}}),
        ("values", {"k": "xArO"}),
        ("updates", {"end": {"k": "E"}}),
        ("values", {"k": "xArOE"}),
    ]
    assert list(app.stream(None, thread_id=thread_id + "-s", stream_mode="values")) == [
        {"k": "xArOE"}]


def test_a_resume_commands_update_holds_when_the_node_pauses_again(checkpointer, thread_id):
    def two(s: Text) -> dict[str, str]:
        return {"k": interrupt(1) + interrupt(2)}

    g = StateGraph(Text)
    g.add_node("two", two)
    g.add_edge(START, "two")
    app = g.compile(checkpointer=checkpointer)
    app.invoke({"k": "x"}, thread_id=thread_id)
    events = list(app.stream(Command(resume="a", update={"k": "U"}), thread_id=thread_id,
                             stream_mode="values"))
    assert _plain(events) == [{"k": "xU"}, {"k": "xU", "__interrupt__": [2]}]
    assert app.get_state(thread_id=thread_id).values == {"k": "xU"}
    assert list(app.stream(Command(resume="b"), thread_id=thread_id,
                           stream_mode="values")) == [{"k": "xU"}, {"k": "xUab"}]


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_the_finished_sibling_of_a_paused_task_is_not_run_again(
    checkpointer, thread_id, durability
):
    ran: list[str] = []

    def other(s: Text) -> dict[str, str]:
        ran.append("other")
        return {"k": "O"}

    def ask(s: Text) -> dict[str, str]:
        return {"k": "A" + interrupt("q")}

    g = StateGraph(Text)
    g.add_node("ask", ask)
    g.add_node("other", other)
    g.add_edge(START, "ask")
    g.add_edge(START, "other")
    app = g.compile(checkpointer=checkpointer)
    app.invoke({"k": "x"}, thread_id=thread_id, durability=durability)
    updates = list(app.stream(Command(resume="r"), thread_id=thread_id, durability=durability))
    assert updates[0] == {"other": {"k": "O"}, "__metadata__": {"cached": True}}
    assert ran == ["other"]
    assert app.get_state(thread_id=thread_id).values == {"k": "xArO"}


class Key(TypedDict):
    my_key: str


def test_the_node_finished_hook_sees_every_level_and_not_a_paused_node(checkpointer, thread_id):
    grandchild = StateGraph(Key)
    grandchild.add_node("gc_1", lambda s: {"my_key": s["my_key"] + " here"})
    grandchild.add_node("gc_2", lambda s: {"my_key": s["my_key"] + " and there"})
    grandchild.add_edge(START, "gc_1")
    grandchild.add_edge("gc_1", "gc_2")
    child = StateGraph(Key)
    child.add_node("child_1", grandchild.compile(interrupt_before=["gc_2"]))
    child.add_edge(START, "child_1")
    parent = StateGraph(Key)
    parent.add_node("p_1", lambda s: {"my_key": "hi " + s["my_key"]})
    parent.add_node("child", child.compile())
    parent.add_node("p_2", lambda s: {"my_key": s["my_key"] + " and back again"})
    parent.add_edge(START, "p_1")
    parent.add_edge("p_1", "child")
    parent.add_edge("child", "p_2")
    app = parent.compile(checkpointer=checkpointer)
    nodes: list[str] = []
    config = {"configurable": {"thread_id": thread_id, CONFIG_KEY_NODE_FINISHED: nodes.append}}
    assert list(app.stream({"my_key": "v"}, config)) == [
        {"p_1": {"my_key": "hi v"}}, {"__interrupt__": ()}]
    assert nodes == ["p_1", "gc_1"]
    assert list(app.stream(None, config)) == [
        {"child": {"my_key": "hi v here and there"}},
        {"p_2": {"my_key": "hi v here and there and back again"}},
    ]
    assert nodes == ["p_1", "gc_1", "gc_2", "child_1", "child", "p_2"]


def test_a_parent_command_from_a_graph_run_on_its_own_leaves_invoke(checkpointer, thread_id):
    class Value(TypedDict):
        value: str

    g = StateGraph(Value)
    g.add_node("jump", lambda s: Command(graph=Command.PARENT, goto="x", update={"k": 1}))
    g.add_edge(START, "jump")
    app = g.compile(checkpointer=checkpointer)
    with pytest.raises(ParentCommand) as info:  # as LangGraph: there is no parent to route
        app.invoke({"value": "start"}, thread_id=thread_id)
    assert info.value.args[0].goto == "x" and info.value.args[0].update == {"k": 1}
    # control flow, not an error: nothing is saved as the node's error
    assert app.get_state(thread_id=thread_id).tasks[0].error is None
