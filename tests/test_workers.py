"""The worker pool that runs sync nodes and sync tools in async runs (engine/workers.py)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import TypedDict

import pytest

from threadloom import END, START, StateGraph
from threadloom.engine.workers import WorkerPool, to_worker

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("_VAR", default="unset")


def test_returns_the_result_on_another_thread() -> None:
    async def main() -> tuple[int, str]:
        return await to_worker(lambda a, b=0: (a + b, threading.current_thread().name), 2, b=3)

    value, thread = asyncio.run(main())
    assert value == 5
    assert thread != threading.main_thread().name


def test_raises_what_the_function_raised() -> None:
    def boom() -> None:
        raise KeyError("missing")

    async def main() -> None:
        await to_worker(boom)

    with pytest.raises(KeyError, match="missing"):
        asyncio.run(main())


def test_sees_a_copy_of_the_callers_context() -> None:
    def read_and_set() -> str:
        seen = _VAR.get()
        _VAR.set("changed in worker")
        return seen

    async def main() -> tuple[str, str]:
        _VAR.set("caller")
        seen = await to_worker(read_and_set)
        return seen, _VAR.get()

    assert asyncio.run(main()) == ("caller", "caller")


def test_blocking_calls_run_in_parallel() -> None:
    # Four calls that each wait for all four to have started can only finish if the pool
    # runs them on four threads at once.
    barrier = threading.Barrier(4, timeout=5)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(to_worker(barrier.wait) for _ in range(4))))

    assert sorted(asyncio.run(main())) == [0, 1, 2, 3]


def test_many_calls_from_many_loops_all_complete() -> None:
    pool = WorkerPool(max_workers=3)

    async def main(offset: int) -> list[int]:
        loop = asyncio.get_running_loop()
        futures = [pool.submit(loop, lambda i=i: i + offset) for i in range(300)]
        return list(await asyncio.gather(*futures))

    results: dict[int, list[int]] = {}

    def run_loop(offset: int) -> None:
        results[offset] = asyncio.run(main(offset))

    threads = [threading.Thread(target=run_loop, args=(k * 1000,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert {k: v for k, v in results.items()} == {
        k * 1000: [i + k * 1000 for i in range(300)] for k in range(3)
    }
    assert pool._workers <= 3


def test_a_cancelled_caller_does_not_break_the_pool() -> None:
    started = threading.Event()

    def slow() -> str:
        started.set()
        time.sleep(0.2)
        return "late"

    async def main() -> str:
        task = asyncio.ensure_future(to_worker(slow))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.3)  # the late result arrives and is dropped
        return await to_worker(lambda: "next")

    assert asyncio.run(main()) == "next"


class _S(TypedDict):
    who: str


def test_sync_nodes_of_an_async_run_use_the_pool() -> None:
    def node(state: _S) -> dict[str, str]:
        return {"who": threading.current_thread().name}

    builder = StateGraph(_S)
    builder.add_node("n", node)
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    graph = builder.compile()
    out = asyncio.run(graph.ainvoke({"who": ""}))
    assert out["who"] == "threadloom-worker"


def test_a_call_never_waits_behind_a_blocking_one_below_the_bound() -> None:
    # One call blocks until the test releases it; calls made meanwhile, one at a time,
    # must each find a thread of their own (an idle one or a new one).
    pool = WorkerPool(max_workers=4)
    release = threading.Event()

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        blocked = pool.submit(loop, lambda: release.wait(5) and "blocked")
        out = []
        for i in range(3):
            out.append(await asyncio.wait_for(pool.submit(loop, lambda i=i: f"quick{i}"), 2))
        release.set()
        out.append(await blocked)
        return out

    assert asyncio.run(main()) == ["quick0", "quick1", "quick2", "blocked"]
