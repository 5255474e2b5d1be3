"""The super-step scheduler: concurrency, ordering, Send, Command, limits, retries."""

from __future__ import annotations

import asyncio
import operator
import threading
from typing import Annotated, TypedDict

import pytest

from threadloom import (
    END,
    START,
    Command,
    GraphRecursionError,
    InvalidRouteError,
    RetryPolicy,
    Runtime,
    Send,
    StateGraph,
)


class S(TypedDict):
    n: int
    log: Annotated[list, operator.add]


def _fan(*nodes, schema=S):
    g = StateGraph(schema)
    for name, fn in nodes:
        g.add_node(name, fn)
        g.add_edge(START, name)
    return g.compile()


def test_sync_nodes_of_one_step_run_concurrently_in_threads():
    barrier = threading.Barrier(2, timeout=5)

    def a(s):
        barrier.wait()  # would time out (BrokenBarrierError) if run one after the other
        return {"log": ["a"]}

    def b(s):
        barrier.wait()
        return {"log": ["b"]}

    assert _fan(("a", a), ("b", b)).invoke({"n": 0})["log"] == ["a", "b"]


def test_async_nodes_of_one_step_run_concurrently():
    started = asyncio.Event

    async def run():
        gate: dict[str, asyncio.Event] = {"a": started(), "b": started()}

        async def a(s):
            gate["a"].set()
            await asyncio.wait_for(gate["b"].wait(), 5)
            return {"log": ["a"]}

        async def b(s):
            gate["b"].set()
            await asyncio.wait_for(gate["a"].wait(), 5)
            return {"log": ["b"]}

        return await _fan(("a", a), ("b", b)).ainvoke({"n": 0})

    assert asyncio.run(run())["log"] == ["a", "b"]


def test_writes_applied_by_node_name_not_completion_or_insertion_order():
    async def slow(s):
        await asyncio.sleep(0.05)
        return {"log": ["slow"]}

    async def fast(s):
        return {"log": ["fast"]}

    # as LangGraph: edge-triggered tasks' writes go in by node name ("a_slow" first),
    # though "b_fast" was added first and finishes first
    app = _fan(("b_fast", fast), ("a_slow", slow))
    assert app.invoke({"n": 0})["log"] == ["slow", "fast"]


def test_send_map_reduce_one_task_per_packet():
    class MR(TypedDict):
        items: list[int]
        squares: Annotated[list[int], operator.add]

    g = StateGraph(MR)
    g.add_node("square", lambda arg: {"squares": [arg * arg]})
    g.add_node("total", lambda s: {"items": [sum(s["squares"])]})
    g.add_conditional_edges(START, lambda s: [Send("square", x) for x in s["items"]])
    g.add_edge("square", "total")
    out = g.compile().invoke({"items": [1, 2, 3]})
    assert out["squares"] == [1, 4, 9]
    assert out["items"] == [14]


def test_command_update_and_goto():
    def router(s):
        return Command(update={"log": ["router"]}, goto=["x", Send("y", 5)])

    g = StateGraph(S)
    g.add_node("router", router, destinations=("x", "y"))
    g.add_node("x", lambda s: {"log": ["x"]})
    g.add_node("y", lambda arg: {"log": [f"y{arg}"]})
    g.add_edge(START, "router")
    assert g.compile().invoke({"n": 0})["log"] == ["router", "x", "y5"]


def test_command_to_unknown_node_names_node_target_and_step():
    g = StateGraph(S)
    g.add_node("r", lambda s: Command(goto="ghost"))
    g.add_edge(START, "r")
    with pytest.raises(InvalidRouteError) as info:
        g.compile().invoke({"n": 0})
    assert (info.value.node, info.value.target, info.value.step) == ("r", "ghost", 1)


def test_conditional_edge_returning_unknown_node():
    g = StateGraph(S)
    g.add_node("a", lambda s: None)
    g.add_conditional_edges("a", lambda s: "nope")
    g.add_edge(START, "a")
    with pytest.raises(InvalidRouteError, match="'nope'"):
        g.compile().invoke({"n": 0})


def _looper(seen):
    def loop(s, runtime: Runtime):
        seen.append(runtime.remaining_steps)
        return {"n": s["n"] + 1}

    g = StateGraph(S)
    g.add_node("loop", loop)
    g.add_edge(START, "loop")
    g.add_conditional_edges("loop", lambda s: END if s["n"] % 4 == 0 else "loop")
    return g


def test_recursion_limit_error_names_limit_and_nodes():
    g = StateGraph(S)
    g.add_node("spin", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "spin")
    g.add_conditional_edges("spin", lambda s: "spin" if s["n"] < 100 else END)
    with pytest.raises(GraphRecursionError) as info:
        g.compile().invoke({"n": 0}, recursion_limit=6)
    assert "6" in str(info.value)
    assert info.value.limit == 6 and info.value.nodes == ("spin",)


def test_recursion_limit_is_per_invocation_on_a_thread(memory_checkpointer, thread_id):
    seen: list[int] = []
    app = _looper(seen).compile(checkpointer=memory_checkpointer)
    first = app.invoke({"n": 0}, thread_id=thread_id, recursion_limit=6)
    assert first["n"] == 4
    first_seen = seen[0]
    seen.clear()
    second = app.invoke({"n": 5}, thread_id=thread_id, recursion_limit=6)
    assert second["n"] == 8
    assert seen[0] == first_seen == 6
    # a run that needs 3 steps fails with limit 2, naming 2, and the thread stays usable
    with pytest.raises(GraphRecursionError, match="limit of 2"):
        app.invoke({"n": 1}, thread_id=thread_id, recursion_limit=2)
    assert app.get_state(thread_id=thread_id).values["n"] == 3


def test_retry_policy_retries_then_succeeds_and_gives_up():
    calls = {"n": 0}

    def flaky(s):
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("blip")
        return {"log": ["ok"]}

    g = StateGraph(S)
    g.add_node("flaky", flaky, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.001,
                                                            jitter=False))
    g.add_edge(START, "flaky")
    assert g.compile().invoke({"n": 0})["log"] == ["ok"]
    assert calls["n"] == 3

    calls["n"] = -10
    with pytest.raises(ConnectionError) as info:
        g.compile().invoke({"n": 0})
    assert any("'flaky'" in note for note in info.value.__notes__)

    def typo(s):
        calls["n"] += 1
        raise ValueError("bug")

    g2 = StateGraph(S)
    g2.add_node("typo", typo, retry_policy=RetryPolicy(max_attempts=5, initial_interval=0.001))
    g2.add_edge(START, "typo")
    calls["n"] = 0
    with pytest.raises(ValueError):
        g2.compile().invoke({"n": 0})
    assert calls["n"] == 1  # ValueError is not retried by default


def test_node_error_note_names_node_and_step():
    g = StateGraph(S)
    g.add_node("ok", lambda s: {"n": 1})
    g.add_node("boom", lambda s: 1 / 0)
    g.add_edge(START, "ok")
    g.add_edge("ok", "boom")
    with pytest.raises(ZeroDivisionError) as info:
        g.compile().invoke({"n": 0})
    assert "while running node 'boom' at super-step 2" in info.value.__notes__


def test_failing_sibling_cancels_async_siblings():
    cancelled = []

    async def slow(s):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return {"log": ["slow"]}

    async def bad(s):
        raise RuntimeError("fail")

    with pytest.raises(RuntimeError):
        _fan(("slow", slow), ("bad", bad)).invoke({"n": 0})
    assert cancelled == [True]


def test_batch_and_abatch():
    g = StateGraph(S)
    g.add_node("double", lambda s: {"n": s["n"] * 2})
    g.add_edge(START, "double")
    app = g.compile()
    assert [o["n"] for o in app.batch([{"n": 1}, {"n": 2}])] == [2, 4]
    assert [o["n"] for o in asyncio.run(app.abatch([{"n": 3}, {"n": 4}]))] == [6, 8]


def test_sync_invoke_works_inside_a_running_event_loop():
    g = StateGraph(S)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    app = g.compile()

    async def inside():
        return app.invoke({"n": 1})

    assert asyncio.run(inside())["n"] == 2


def test_node_receives_config_and_context():
    seen = {}

    def node(s, config, runtime: Runtime):
        seen["tags"] = config.get("tags")
        seen["context"] = runtime.context
        return None

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.compile().invoke({"n": 0}, {"tags": ["x"]}, context={"user": "u1"})
    assert seen == {"tags": ["x"], "context": {"user": "u1"}}
