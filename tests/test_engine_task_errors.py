"""Every asyncio task the scheduler starts is awaited or has its error consumed: no
"Task exception was never retrieved" when parallel branches fail together, when a sibling
fails while being cancelled, or when the consumer of a stream walks away mid-step."""

from __future__ import annotations

import asyncio
import gc
import operator
from typing import Annotated, TypedDict

import pytest

from threadloom import START, StateGraph
from threadloom.checkpoint.base import ERROR


class S(TypedDict):
    log: Annotated[list[str], operator.add]


async def fail_value(s):
    raise ValueError("one")


async def fail_key(s):
    raise KeyError("two")


def fail_sync(s):
    raise RuntimeError("sync")


async def slow(s):
    await asyncio.sleep(0.05)
    return {"log": ["slow"]}


def parallel(*fns, checkpointer=None):
    g = StateGraph(S)
    for i, fn in enumerate(fns):
        g.add_node(f"n{i}", fn)
        g.add_edge(START, f"n{i}")
    return g.compile(checkpointer=checkpointer)


def run_watched(coro_fn):
    """Run ``coro_fn()`` on a fresh loop; return what the loop's exception handler saw
    (after collecting garbage, which is when unretrieved task errors are reported)."""
    seen: list[str] = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, ctx: seen.append(str(ctx.get("message")))
        )
        await coro_fn()
        for _ in range(3):
            gc.collect()
            await asyncio.sleep(0.06)

    asyncio.run(main())
    return seen


@pytest.mark.parametrize("fns", [(fail_value, fail_key), (fail_sync, fail_value, slow),
                                 (fail_value, slow)], ids=["two-fail", "sync-async", "one-fail"])
def test_parallel_failures_leave_no_unretrieved_task_error(fns, checkpointer, thread_id):
    app = parallel(*fns, checkpointer=checkpointer)

    async def go():
        with pytest.raises((ValueError, KeyError, RuntimeError)):
            await app.ainvoke({"log": []}, thread_id=thread_id)

    assert run_watched(go) == []


def test_every_task_that_failed_in_the_step_has_its_error_saved(checkpointer, thread_id):
    app = parallel(fail_value, fail_key, checkpointer=checkpointer)
    with pytest.raises(ValueError, match="one"):  # the first failed task, in task order
        app.invoke({"log": []}, thread_id=thread_id)
    saved = checkpointer.get_tuple({"configurable": {"thread_id": thread_id}})
    errors = sorted(w.value for w in saved.pending_writes if w.channel == ERROR)
    assert errors == ["KeyError('two')", "ValueError('one')"]


def test_a_sibling_that_fails_while_cancelled_is_consumed():
    async def stubborn(s):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise RuntimeError("failed while cancelled") from None
        return {"log": ["never"]}

    async def fail_soon(s):
        await asyncio.sleep(0.01)
        raise ValueError("first")

    app = parallel(stubborn, fail_soon)

    async def go():
        with pytest.raises(ValueError, match="first"):
            await app.ainvoke({"log": []})

    assert run_watched(go) == []


def test_stream_consumer_leaving_mid_step_leaves_no_unretrieved_task_error():
    async def stubborn(s):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise RuntimeError("failed while cancelled") from None
        return {"log": ["never"]}

    async def quick(s):
        return {"log": ["quick"]}

    g = StateGraph(S)
    g.add_node("quick", quick)
    g.add_node("a", stubborn)
    g.add_node("b", stubborn)
    g.add_edge(START, "quick")
    g.add_edge("quick", "a")
    g.add_edge("quick", "b")
    app = g.compile()

    async def go():
        stream = app.astream({"log": []}, stream_mode="updates")
        assert await stream.__anext__() == {"quick": {"log": ["quick"]}}
        await asyncio.sleep(0.02)  # a and b are running
        await stream.aclose()

    assert run_watched(go) == []


def test_a_sync_sibling_on_a_worker_ends_and_its_error_handler_runs():
    # LangGraph's thread pool lets a sync node already running finish when a sibling
    # fails: its error handler runs and its error is saved, so a resume reruns handlers
    import threading

    from threadloom import InMemoryCheckpointer

    started = threading.Event()
    calls = {"a": 0, "b": 0, "ha": 0, "hb": 0}
    crash = [True]

    def node_a(s):
        calls["a"] += 1
        raise RuntimeError("a failed")

    def node_b(s):
        calls["b"] += 1
        assert started.wait(5)
        raise RuntimeError("b failed")

    def handler_a(s, error):
        calls["ha"] += 1
        started.set()
        if crash[0]:
            raise RuntimeError("handler_a crash")
        return {"log": ["ra"]}

    def handler_b(s, error):
        calls["hb"] += 1
        if crash[0]:
            raise RuntimeError("handler_b crash")
        return {"log": ["rb"]}

    g = StateGraph(S)
    g.add_node("a", node_a, error_handler=handler_a)
    g.add_node("b", node_b, error_handler=handler_b)
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    app = g.compile(checkpointer=InMemoryCheckpointer())
    with pytest.raises(RuntimeError):
        app.invoke({"log": []}, thread_id="t")
    assert calls == {"a": 1, "b": 1, "ha": 1, "hb": 1}
    crash[0] = False
    assert sorted(app.invoke(None, thread_id="t")["log"]) == ["ra", "rb"]
    assert calls["a"] == calls["b"] == 1  # the nodes did not run again
