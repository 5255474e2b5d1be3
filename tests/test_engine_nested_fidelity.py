"""Nested graphs as LangGraph runs them (issue 15): what a subgraph hands back, a
``Command.PARENT`` from deep inside, pauses inside parallel steps and resumes.

Each expected value below is what LangGraph 1.2 gives for the same graph.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from threadloom import START, StateGraph
from threadloom.types import Command


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
