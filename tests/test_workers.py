"""The worker pool that runs sync nodes and sync tools in async runs (engine/workers.py)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import TypedDict

import pytest

from threadloom import END, START, StateGraph
from threadloom.workers import MAX_WORKERS, WorkerPool, pool_of, to_worker

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


def test_each_loop_has_its_own_pool_and_many_calls_complete() -> None:
    pools: dict[int, object] = {}

    async def main(offset: int) -> list[int]:
        pools[offset] = pool_of(asyncio.get_running_loop())
        return list(await asyncio.gather(*(to_worker(lambda i=i: i + offset) for i in range(300))))

    results: dict[int, list[int]] = {}

    def run_loop(offset: int) -> None:
        results[offset] = asyncio.run(main(offset))

    threads = [threading.Thread(target=run_loop, args=(k * 1000,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == {k * 1000: [i + k * 1000 for i in range(300)] for k in range(3)}
    assert len({id(p) for p in pools.values()}) == 3


def test_a_sync_node_running_another_graph_never_waits_for_its_callers_threads() -> None:
    # More outer runs than the bound of one pool, each holding a worker while its sync
    # node runs an inner graph whose two sync branches need workers too: the inner run has
    # its own loop and pool, so nothing waits for a thread held by the outer runs.
    def sleepy(state: _S) -> dict[str, str]:
        time.sleep(0.05)
        return {}

    inner_builder = StateGraph(_S)
    inner_builder.add_node("a", sleepy)
    inner_builder.add_node("b", sleepy)
    inner_builder.add_edge(START, "a")
    inner_builder.add_edge(START, "b")
    inner = inner_builder.compile()

    def outer_node(state: _S) -> dict[str, str]:
        time.sleep(0.05)
        inner.invoke({"who": ""})
        return {"who": "done"}

    outer_builder = StateGraph(_S)
    outer_builder.add_node("n", outer_node)
    outer_builder.add_edge(START, "n")
    outer = outer_builder.compile()

    async def main() -> list[str]:
        runs = [outer.ainvoke({"who": ""}) for _ in range(MAX_WORKERS + 4)]
        return [r["who"] for r in await asyncio.wait_for(asyncio.gather(*runs), 20)]

    assert asyncio.run(main()) == ["done"] * (MAX_WORKERS + 4)


def test_stop_iteration_becomes_runtime_error_and_other_results_arrive() -> None:
    def bad() -> None:
        next(iter(()))

    async def main() -> tuple[list[int], BaseException | None]:
        calls = [to_worker(lambda i=i: i) for i in range(20)]
        failing = to_worker(bad)
        good = list(await asyncio.wait_for(asyncio.gather(*calls), 5))
        try:
            await asyncio.wait_for(failing, 5)
        except RuntimeError as exc:
            return good, exc
        return good, None

    good, error = asyncio.run(main())
    assert good == list(range(20))
    assert isinstance(error, RuntimeError) and isinstance(error.__cause__, StopIteration)


def test_idle_workers_end() -> None:
    pool = WorkerPool(max_workers=2, idle_timeout_s=0.05)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        return await pool.submit(loop, lambda: 7)

    assert asyncio.run(main()) == 7
    deadline = time.monotonic() + 5
    while pool._workers and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool._workers == 0


def test_a_closed_loops_workers_end_without_waiting_out_the_idle_timeout() -> None:
    """``asyncio.run`` after ``asyncio.run`` (a script calling ``ainvoke`` so): each loop's
    workers end about a second after it closes, not 30 s later (found by a new-user
    trial: 20 runs left 40 idle threads behind)."""

    async def one() -> int:
        return await to_worker(lambda: 1)

    before = {t.ident for t in threading.enumerate()}
    for _ in range(10):
        assert asyncio.run(one()) == 1

    def left() -> list[threading.Thread]:
        return [t for t in threading.enumerate()
                if t.name == "threadloom-worker" and t.ident not in before]

    assert left()  # the pools' workers outlive their calls
    deadline = time.monotonic() + 5
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left()


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
