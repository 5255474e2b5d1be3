"""What ``compile()`` accepts and refuses, measured against LangGraph 1.2: it refuses
unknown names, a missing entry point and a non-checkpointer, never a node reached only at
run time (by a ``Command`` or a ``Send``) nor a cycle with no static way out; and the run
semantics that come with it (join to END, write order, recursion limit, error types).
What ``add_node`` takes is ``test_engine_nodes.py``."""

from __future__ import annotations

import operator
from typing import Annotated, Literal, TypedDict

import pytest

from threadloom import END, START, Command, Send, StateGraph
from threadloom.errors import GraphRecursionError, GraphValidationError


class S(TypedDict):
    n: int
    path: Annotated[list[str], operator.add]


def step(name):
    def fn(s):
        return {"path": [name]}

    fn.__name__ = name
    return fn


@pytest.mark.parametrize("annotated", [True, False])
def test_node_reached_only_by_command_goto_compiles_and_runs(annotated, checkpointer, thread_id):
    if annotated:
        def decide(s) -> Command[Literal["b"]]:
            return Command(update={"n": 1}, goto="b")
    else:
        def decide(s):
            return Command(update={"n": 1}, goto="b")

    g = StateGraph(S)
    g.add_node("a", decide)
    g.add_node(step("b"))
    g.add_edge(START, "a")
    app = g.compile(checkpointer=checkpointer)
    assert app.invoke({"n": 0}, thread_id=thread_id) == {"n": 1, "path": ["b"]}
    text = app.get_graph().draw_mermaid()
    assert ("a -.-> b;" in text) is annotated


def test_node_reached_only_by_send_compiles():
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_node(step("worker"))
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: [Send("worker", s), Send("worker", s)], ["worker"])
    assert g.compile().invoke({"n": 0})["path"] == ["a", "worker", "worker"]


def test_node_no_edge_reaches_compiles_and_never_runs():
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_node(step("island"))
    g.add_edge(START, "a")
    assert g.compile().invoke({"n": 0}) == {"n": 0, "path": ["a"]}


def test_cycle_without_way_out_runs_into_the_recursion_limit():
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_node(step("b"))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "a")
    app = g.compile()
    with pytest.raises(GraphRecursionError) as info:
        app.invoke({"n": 0}, recursion_limit=5)
    assert info.value.limit == 5
    chunks: list = []
    with pytest.raises(GraphRecursionError):
        for chunk in app.stream({"n": 0}, recursion_limit=4, stream_mode="updates"):
            chunks.append(chunk)
    assert [next(iter(c)) for c in chunks] == ["a", "b", "a", "b"]


def test_self_loop_without_way_out_runs_into_the_recursion_limit():
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_edge(START, "a")
    g.add_edge("a", "a")
    with pytest.raises(GraphRecursionError):
        g.compile().invoke({"n": 0}, recursion_limit=3)


def test_join_edge_to_end(checkpointer, thread_id):
    g = StateGraph(S)
    for name in ("a", "b", "c"):
        g.add_node(step(name))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("b", "c")  # the join waits for a (step 0) and c (step 1)
    g.add_edge(["a", "c"], END)
    for app in (g.compile(), g.compile(checkpointer=checkpointer)):
        out = app.invoke({"n": 0}, thread_id=thread_id if app.checkpointer else None)
        assert sorted(out["path"]) == ["a", "b", "c"]
    assert checkpointer.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
    assert g.compile(checkpointer=checkpointer).get_state(thread_id=thread_id).next == ()


def test_graph_of_start_to_end_only():
    g = StateGraph(S)
    g.add_edge(START, END)
    assert g.compile().invoke({"n": 3}) == {"n": 3, "path": []}


def test_compile_still_refuses_what_langgraph_refuses():
    g = StateGraph(S)
    with pytest.raises(GraphValidationError, match="entry point"):
        g.compile()
    g.add_node(step("a"))
    with pytest.raises(GraphValidationError, match="entry point"):
        g.compile()
    g.add_edge(START, "a")
    with pytest.raises(GraphValidationError, match="'zz'") as info:
        g.compile(interrupt_before=["zz"])
    assert info.value.node == "zz"
    g.add_node("d", lambda s: None, destinations=("ghost",))
    with pytest.raises(GraphValidationError, match="ghost"):
        g.compile()


def test_build_errors_are_value_errors_and_name_the_unknown_node_as_langgraph():
    g = StateGraph(S)
    g.add_node(step("start"))
    g.add_edge(START, "start")
    g.add_edge("unknown", "start")
    with pytest.raises(ValueError, match="Found edge starting at unknown node 'unknown'"):
        g.compile()
    with pytest.raises(ValueError):
        StateGraph(S).add_sequence([])
    with pytest.raises(ValueError):
        StateGraph(S).add_sequence([step("x"), step("x")])


def test_recursion_error_is_a_recursion_error():
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_edge(START, "a")
    g.add_edge("a", "a")
    with pytest.raises(RecursionError):
        g.compile().invoke({"n": 0}, recursion_limit=2)


def test_compile_refuses_what_is_not_a_checkpointer():
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_edge(START, "a")

    class NotACheckpointer:
        pass

    with pytest.raises(TypeError, match="Invalid checkpointer provided"):
        g.compile(checkpointer=NotACheckpointer())


def test_set_conditional_entry_point():
    g = StateGraph(S)
    g.add_node(step("big"))
    g.add_node(step("small"))
    g.set_conditional_entry_point(lambda s: "big" if s["n"] > 5 else "small")
    app = g.compile()
    assert app.invoke({"n": 9})["path"] == ["big"]
    assert app.invoke({"n": 1})["path"] == ["small"]


def test_two_writes_to_a_last_value_key_name_the_key_as_langgraph():
    from threadloom.errors import InvalidUpdateError

    g = StateGraph(S)
    g.add_node("a", lambda s: {"n": 1})
    g.add_node("b", lambda s: {"n": 2})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    with pytest.raises(InvalidUpdateError, match="At key 'n'"):
        g.compile().invoke({"n": 0})


def test_parallel_writes_go_in_by_node_name_then_sends_as_sent():
    g = StateGraph(S)
    for name in ("zeta", "beta", "alpha"):
        g.add_node(step(name))
        g.add_edge(START, name)
    assert g.compile().invoke({"n": 0})["path"] == ["alpha", "beta", "zeta"]

    g2 = StateGraph(S)
    g2.add_node("w", lambda arg: {"path": [arg]})
    g2.add_node(step("m"))
    g2.add_conditional_edges(START, lambda s: [Send("w", "w2"), Send("w", "w1"), "m"])
    assert g2.compile().invoke({"n": 0})["path"] == ["m", "w2", "w1"]


def test_default_recursion_limit_is_langgraphs():
    from threadloom.engine.scheduler import DEFAULT_RECURSION_LIMIT

    g = StateGraph(S)
    g.add_node("spin", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "spin")
    g.add_conditional_edges("spin", lambda s: "spin" if s["n"] < 60 else END)
    assert g.compile().invoke({"n": 0})["n"] == 60  # past the old default of 25
    assert DEFAULT_RECURSION_LIMIT == 10007


def test_invoke_and_stream_accept_langgraphs_debug_flag():
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_edge(START, "a")
    app = g.compile()
    assert app.invoke({"n": 0}, debug=True) == {"n": 0, "path": ["a"]}
    assert list(app.stream({"n": 0}, debug=False)) == [{"a": {"path": ["a"]}}]
