"""What ``add_node`` takes, as LangGraph 1.2: callable objects (named after their class),
a ``retry_policy`` sequence (first match wins) and ``set_node_defaults``, dict
destinations, a name shared with a state key or blank; ``Runtime.execution_info``; adding
after ``compile()`` warns."""

from __future__ import annotations

import logging
import operator
from typing import Annotated, Literal, TypedDict

import pytest

from threadloom import END, START, Command, RetryPolicy, StateGraph


class S(TypedDict):
    n: int
    path: Annotated[list[str], operator.add]


def step(name):
    def fn(s):
        return {"path": [name]}

    fn.__name__ = name
    return fn


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
    assert set(state.metadata) == {"source", "step", "parents"}  # LangGraph 1.x's keys


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


def test_retry_on_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="retry_on must be an Exception class"):
        RetryPolicy(retry_on=123).should_retry(ValueError("x"))  # type: ignore[arg-type]
    assert RetryPolicy(retry_on=()).should_retry(ValueError("x")) is False


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
    with pytest.raises(ValueError, match="cache_policy"):
        StateGraph(S).set_node_defaults(cache_policy=object())


def test_node_names_langgraph_accepts_and_refuses():
    g = StateGraph(S)
    g.add_node("", step("blank"))  # LangGraph accepts a blank name, and so does threadloom
    g.add_edge(START, "")
    assert g.compile().invoke({"n": 0})["path"] == ["blank"]
    for bad in ("a|b", "a:b", START, END):
        with pytest.raises(ValueError):
            StateGraph(S).add_node(bad, step("x"))
