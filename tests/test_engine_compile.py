"""What ``compile()`` accepts and refuses, measured against LangGraph 1.2: it refuses
unknown names and a missing entry point, never a node reached only at run time (by a
``Command`` or a ``Send``) nor a cycle with no static way out; and what ``add_node``
takes (callable objects, retry policy sequences, a name shared with a state key)."""

from __future__ import annotations

import logging
import operator
from typing import Annotated, Literal, TypedDict

import pytest

from threadloom import END, START, Command, RetryPolicy, Send, StateGraph
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


def test_command_annotation_on_a_callable_object_and_dict_destinations():
    class Router:
        def __call__(self, s) -> Command[Literal["b", "__end__"]]:
            return Command(goto="b")

    g = StateGraph(S)
    g.add_node(Router())
    g.add_node("a", lambda s: Command(goto="b"), destinations={"b": "go"})
    g.add_node(step("b"))
    g.add_edge(START, "Router")
    g.add_edge(START, "a")
    text = g.compile().get_graph().draw_mermaid()
    assert "Router -.-> b;" in text and "Router -.-> __end__;" in text
    assert "a -. &nbsp;go&nbsp; .-> b;" in text
    assert g.compile().invoke({"n": 0})["path"] == ["b"]


def test_callable_object_is_named_after_its_class_and_lambda_after_its_name():
    class Shout:
        def __call__(self, s):
            return {"path": ["shout"]}

    g = StateGraph(S)
    g.add_node(Shout())
    g.add_node(lambda s: {"path": ["lambda"]})
    assert list(g.nodes) == ["Shout", "<lambda>"]
    g.add_edge(START, "Shout")
    g.add_edge("Shout", "<lambda>")
    assert g.compile().invoke({"n": 0})["path"] == ["shout", "lambda"]


def test_retry_policy_sequence_first_match_wins():
    calls = {"key": 0, "value": 0}

    def flaky(s):
        kind = "key" if calls["key"] < 2 else "value"
        calls[kind] += 1
        if kind == "key" or calls["value"] < 3:
            raise KeyError(kind) if kind == "key" else ValueError(kind)
        return {"path": ["ok"]}

    policies = [
        RetryPolicy(max_attempts=5, initial_interval=0, jitter=False, retry_on=KeyError),
        RetryPolicy(max_attempts=9, initial_interval=0, jitter=False, retry_on=[ValueError]),
        RetryPolicy(max_attempts=1, retry_on=Exception),  # never reached: matched above
    ]
    g = StateGraph(S)
    g.add_node("flaky", flaky, retry_policy=policies)
    g.add_edge(START, "flaky")
    assert g.compile().invoke({"n": 0})["path"] == ["ok"]
    assert calls == {"key": 2, "value": 3}

    def always(s):
        raise KeyError("always")

    g2 = StateGraph(S)
    g2.add_node("always", always, retry_policy=[
        RetryPolicy(max_attempts=2, initial_interval=0, retry_on=ValueError),
    ])
    g2.add_edge(START, "always")
    with pytest.raises(KeyError):  # no policy matches: not retried
        g2.compile().invoke({"n": 0})
    with pytest.raises(Exception, match="RetryPolicy"):
        StateGraph(S).add_node("x", always, retry_policy=[3])


def test_node_name_equal_to_a_state_key(checkpointer, thread_id):
    class T(TypedDict):
        summary: str
        n: int

    g = StateGraph(T)
    g.add_node("summary", lambda s: {"summary": f"n={s['n']}", "n": s["n"] + 1})
    g.add_node("n", lambda s: {"n": s["n"] * 10})
    g.add_edge(START, "summary")
    g.add_edge("summary", "n")
    app = g.compile(checkpointer=checkpointer)
    updates = list(app.stream({"n": 1, "summary": ""}, thread_id=thread_id,
                              stream_mode="updates"))
    assert updates == [{"summary": {"summary": "n=1", "n": 2}}, {"n": {"n": 20}}]
    state = app.get_state(thread_id=thread_id)
    assert state.values == {"summary": "n=1", "n": 20}
    assert state.metadata["writes"] is not None


def test_add_node_after_compile_warns_and_leaves_the_compiled_graph(caplog):
    g = StateGraph(S)
    g.add_node(step("a"))
    g.add_edge(START, "a")
    app = g.compile()
    with caplog.at_level(logging.WARNING, logger="threadloom.engine.graph"):
        g.add_node(step("late"))
        g.add_edge("a", "late")
    assert "already compiled" in caplog.text
    assert app.invoke({"n": 0})["path"] == ["a"]
    assert g.compile().invoke({"n": 0})["path"] == ["a", "late"]


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


def test_retry_on_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="retry_on must be an Exception class"):
        RetryPolicy(retry_on=123).should_retry(ValueError("x"))  # type: ignore[arg-type]
    assert RetryPolicy(retry_on=()).should_retry(ValueError("x")) is False


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


def test_runtime_execution_info_counts_attempts_and_keeps_the_first_time(memory_checkpointer):
    from threadloom import Runtime

    seen = []

    def flaky(s, runtime: Runtime):
        info = runtime.execution_info
        seen.append((info.node_attempt, info.node_first_attempt_time, info.thread_id))
        if len(seen) < 3:
            raise ConnectionError("blip")
        return {"path": ["ok"]}

    g = StateGraph(S)
    g.add_node("flaky", flaky, retry_policy=RetryPolicy(initial_interval=0, jitter=False))
    g.add_edge(START, "flaky")
    app = g.compile(checkpointer=memory_checkpointer)
    assert app.invoke({"n": 0}, thread_id="t-info")["path"] == ["ok"]
    assert [a for a, _, _ in seen] == [1, 2, 3]
    assert len({t for _, t, _ in seen}) == 1 and isinstance(seen[0][1], float)
    assert {tid for _, _, tid in seen} == {"t-info"}


def test_retry_waits_with_time_sleep_in_a_sync_run_and_jitter_adds_up_to_a_second(monkeypatch):
    import random
    import time

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    monkeypatch.setattr(random, "uniform", lambda a, b: 0.25)
    calls = []

    def flaky(s):
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("blip")
        return {"path": ["ok"]}

    g = StateGraph(S)
    g.add_node("flaky", flaky, retry_policy=RetryPolicy(initial_interval=0.01, jitter=True))
    g.add_edge(START, "flaky")
    assert g.compile().invoke({"n": 0})["path"] == ["ok"]
    assert slept == [0.01 + 0.25, 0.02 + 0.25]


def test_set_node_defaults_retry_policy_applies_where_a_node_has_none():
    calls = {"a": 0, "b": 0}

    def flaky(name, fails):
        def fn(s):
            calls[name] += 1
            if calls[name] <= fails:
                raise ConnectionError(name)
            return {"path": [name]}

        return fn

    g = StateGraph(S)
    g.add_node("a", flaky("a", 2))  # before the defaults: they apply at compile()
    g.set_node_defaults(retry_policy=RetryPolicy(max_attempts=3, initial_interval=0,
                                                 jitter=False))
    g.add_node("b", flaky("b", 1), retry_policy=RetryPolicy(max_attempts=1))  # its own wins
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    with pytest.raises(ConnectionError, match="b"):
        g.compile().invoke({"n": 0})
    assert calls == {"a": 3, "b": 1}
    with pytest.raises(ValueError, match="error_handler"):
        StateGraph(S).set_node_defaults(error_handler=lambda s: None)


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


def test_node_names_langgraph_accepts_and_refuses():
    g = StateGraph(S)
    g.add_node("", step("blank"))  # LangGraph accepts a blank name, and so does threadloom
    g.add_edge(START, "")
    assert g.compile().invoke({"n": 0})["path"] == ["blank"]
    for bad in ("a|b", "a:b", START, END):
        with pytest.raises(ValueError):
            StateGraph(S).add_node(bad, step("x"))
