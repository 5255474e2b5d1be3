"""A step of plain sync tasks (a Send fan-out) runs as one batch on the workers
(engine/step_run.py, workers.Batch): the same run as one asyncio task per packet, with a
few queued worker calls instead of one per packet. Counts are asserted, never times."""

from __future__ import annotations

import asyncio
import contextvars
import operator
import random
import threading
import time
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import END, START, InMemoryCheckpointer, RetryPolicy, Send, StateGraph
from threadloom.engine import step_run
from threadloom.errors import NodeCancelledError
from threadloom.types import Command
from threadloom.workers import MAX_WORKERS, WorkerPool


class Fan(TypedDict):
    n: int
    total: Annotated[int, operator.add]
    got: Annotated[list, operator.add]


def _fan(work: Any, *, checkpointer: Any = None, **node: Any) -> Any:
    g = StateGraph(Fan)
    g.add_node("work", work, **node)
    g.add_conditional_edges(START, lambda s: [Send("work", {"n": i}) for i in range(s["n"])])
    g.add_edge("work", END)
    return g.compile(checkpointer=checkpointer)


def test_a_fan_out_queues_one_worker_call_per_pool_slot_not_per_packet(monkeypatch) -> None:
    puts: list[bool] = []
    real = WorkerPool.put
    monkeypatch.setattr(WorkerPool, "put",
                        lambda self, fut, fn: (puts.append(fut is None), real(self, fut, fn)))
    graph = _fan(lambda s: {"total": 1, "got": [s["n"]]})
    out = graph.invoke({"n": 1000, "total": 0, "got": []})
    assert out["total"] == 1000
    assert out["got"] == list(range(1000))  # applied in Send order
    assert 1 <= len(puts) <= MAX_WORKERS and all(puts)


def test_a_fan_out_makes_no_asyncio_task_per_packet() -> None:
    graph = _fan(lambda s: {"total": 1})
    made: list[object] = []

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(
            lambda lp, coro, **kw: made.append(coro) or asyncio.Task(coro, loop=lp, **kw))
        return await graph.ainvoke({"n": 500, "total": 0, "got": []})

    assert asyncio.run(main())["total"] == 500
    assert len(made) < 10  # the run's own tasks, whatever the packet count


def test_writes_apply_in_send_order_whatever_order_packets_finish() -> None:
    rng = random.Random(7)
    delays = [rng.random() / 200 for _ in range(40)]

    def work(s: dict[str, Any]) -> dict[str, Any]:
        time.sleep(delays[s["n"]])
        return {"got": [s["n"]]}

    assert _fan(work).invoke({"n": 40, "total": 0, "got": []})["got"] == list(range(40))


def test_blocking_packets_still_run_side_by_side() -> None:
    barrier = threading.Barrier(4, timeout=10)  # each waits for all four to have started
    graph = _fan(lambda s: {"total": barrier.wait() * 0 + 1})
    assert graph.invoke({"n": 4, "total": 0, "got": []})["total"] == 4


def test_max_concurrency_bounds_the_batch() -> None:
    lock = threading.Lock()
    now = [0, 0]  # running, most seen

    def work(s: dict[str, Any]) -> dict[str, Any]:
        with lock:
            now[0] += 1
            now[1] = max(now[1], now[0])
        time.sleep(0.002)
        with lock:
            now[0] -= 1
        return {"total": 1}

    out = _fan(work).invoke({"n": 30, "total": 0, "got": []}, {"max_concurrency": 2})
    assert out["total"] == 30 and now[1] <= 2


_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("_VAR", default="unset")


def test_each_packet_sees_its_own_copy_of_the_context() -> None:
    def work(s: dict[str, Any]) -> dict[str, Any]:
        seen = _VAR.get()
        _VAR.set(f"packet {s['n']}")
        return {"got": [seen]}

    _VAR.set("caller")
    assert _fan(work).invoke({"n": 20, "total": 0, "got": []})["got"] == ["caller"] * 20


def test_the_first_failed_packet_in_send_order_raises_with_its_note() -> None:
    def work(s: dict[str, Any]) -> dict[str, Any]:
        if s["n"] in (3, 5):
            raise KeyError(f"packet {s['n']}")
        return {"total": 1}

    with pytest.raises(KeyError, match="packet 3") as info:
        _fan(work).invoke({"n": 8, "total": 0, "got": []}, {"max_concurrency": 1})
    assert any("'work'" in note for note in info.value.__notes__)


def test_a_failed_packet_is_saved_and_stops_the_packets_not_started() -> None:
    ran: list[int] = []

    def work(s: dict[str, Any]) -> dict[str, Any]:
        ran.append(s["n"])
        if s["n"] == 2:
            raise ValueError("no")
        return {"total": 1}

    saver = InMemoryCheckpointer()
    graph = _fan(work, checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}, "max_concurrency": 1}
    with pytest.raises(ValueError, match="no"):
        graph.invoke({"n": 10, "total": 0, "got": []}, cfg)
    assert ran == [0, 1, 2]  # one at a time: nothing starts after the failure
    state = graph.get_state(cfg)
    errors = [t.error for t in state.tasks if t.error]
    assert len(errors) == 1 and "ValueError" in errors[0]
    assert sum(1 for t in state.tasks if t.result is not None) == 2  # saved as they ended


def test_a_node_raising_cancelled_error_fails_as_node_cancelled() -> None:
    def work(s: dict[str, Any]) -> dict[str, Any]:
        if s["n"] == 1:
            raise asyncio.CancelledError()
        return {"total": 1}

    with pytest.raises(NodeCancelledError):
        _fan(work).invoke({"n": 3, "total": 0, "got": []})


def test_retry_policies_and_interrupts_keep_their_meaning_in_a_fan_out() -> None:
    from threadloom import interrupt

    tries: dict[int, int] = {}

    def flaky(s: dict[str, Any]) -> dict[str, Any]:
        tries[s["n"]] = tries.get(s["n"], 0) + 1
        if tries[s["n"]] == 1:
            raise ConnectionError("once")
        return {"total": 1}

    policy = RetryPolicy(max_attempts=2, initial_interval=0.0, jitter=False)
    out = _fan(flaky, retry_policy=policy).invoke({"n": 5, "total": 0, "got": []})
    assert out["total"] == 5 and set(tries.values()) == {2}

    def ask(s: dict[str, Any]) -> dict[str, Any]:
        return {"got": [interrupt(s["n"]) if s["n"] % 2 else s["n"]]}

    graph = _fan(ask, checkpointer=InMemoryCheckpointer())
    cfg = {"configurable": {"thread_id": "i"}}
    first = graph.invoke({"n": 6, "total": 0, "got": []}, cfg)
    asked = first["__interrupt__"]
    assert sorted(i.value for i in asked) == [1, 3, 5]
    done = graph.invoke(Command(resume={i.id: -i.value for i in asked}), cfg)
    assert done["got"] == [0, -1, 2, -3, 4, -5]


def _events(monkeypatch: Any, batched: bool) -> list[tuple[str, str]]:
    monkeypatch.setattr(step_run, "_batchable", lambda t: batched)
    graph = _fan(lambda s: {"total": 1, "got": [s["n"]]})
    out = []
    for mode, p in graph.stream({"n": 5, "total": 0, "got": []},
                                stream_mode=["tasks", "updates", "debug", "values"]):
        if mode == "tasks":  # ids differ by nothing here: plain "<step>:<index>"
            p = {k: v for k, v in p.items() if k != "error"}
        if mode == "debug":
            p = {**p, "timestamp": None}
        out.append((mode, repr(p)))
    return out


def test_a_fan_out_streams_what_one_task_per_packet_streams(monkeypatch) -> None:
    batched, each = _events(monkeypatch, True), _events(monkeypatch, False)
    assert sorted(batched) == sorted(each)
    for events in (batched, each):  # every packet starts before any ends, as LangGraph
        kinds = ["start" if "'input'" in p else "end" for m, p in events
                 if m in ("tasks", "debug") and "'step': 0" not in p]
        assert kinds == sorted(kinds, key=lambda k: k != "start")
    assert [p for m, p in batched if m == "values"] == [p for m, p in each if m == "values"]


def test_the_batch_path_is_taken_only_for_plain_sync_nodes() -> None:
    async def anode(s: dict[str, Any]) -> dict[str, Any]:
        return {"total": 1}

    def with_config(s: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        return {"total": 1}

    seen: list[bool] = []
    real = step_run._as_a_batch

    async def spy(*args: Any) -> Any:
        seen.append(True)
        return await real(*args)

    step_run._as_a_batch = spy  # type: ignore[assignment]
    try:
        for fn in (anode, with_config):
            assert _fan(fn).invoke({"n": 3, "total": 0, "got": []})["total"] == 3
        assert not seen
        assert _fan(lambda s: {"total": 1}).invoke({"n": 3, "total": 0, "got": []})["total"] == 3
        assert seen == [True]
    finally:
        step_run._as_a_batch = real  # type: ignore[assignment]


def test_closing_the_stream_mid_fan_out_starts_no_further_packet() -> None:
    started: list[int] = []

    def work(s: dict[str, Any]) -> dict[str, Any]:
        started.append(s["n"])
        time.sleep(0.01)
        return {"total": 1}

    graph = _fan(work)
    for _ in graph.stream({"n": 200, "total": 0, "got": []}, {"max_concurrency": 1}):
        break  # the START step's update; the fan-out is cancelled as it starts
    time.sleep(0.05)
    seen = len(started)
    time.sleep(0.05)
    assert len(started) == seen < 200  # nothing more started once the run was cancelled


def _per_packet_types() -> dict[str, Any]:
    import types

    from threadloom.engine.runtime import TaskContext
    from threadloom.engine.tasks import Task, TaskResult

    return {"Task": Task, "TaskResult": TaskResult, "TaskContext": TaskContext,
            "asyncio.Task": asyncio.Task, "Future": asyncio.Future,
            "Context": contextvars.Context, "coroutine": types.CoroutineType,
            "Handle": asyncio.Handle}


def _census() -> dict[str, int]:
    import gc

    kinds = {cls: name for name, cls in _per_packet_types().items()}
    counts = dict.fromkeys(kinds.values(), 0)
    for obj in gc.get_objects():
        name = kinds.get(type(obj))
        if name is not None:
            counts[name] += 1
    return counts


def _per_packet(counts: list[dict[str, int]], packets: int) -> dict[str, float]:
    return {k: round((counts[1][k] - counts[0][k]) / packets, 2) for k in counts[0]}


def test_objects_alive_per_packet_while_the_fan_out_runs_and_when_it_applies(
        monkeypatch) -> None:
    """Half-way through a fan-out each packet holds its Task (and, once finished, its
    result), and when the step applies its writes, its Task and TaskResult: no asyncio
    task, coroutine, future, handle or context per packet (an asyncio task per packet
    kept one of each alive, about 20 objects a packet)."""
    import gc

    from threadloom.engine import scheduler, step_run

    mid: list[dict[str, int]] = []
    applied: list[dict[str, int]] = []
    real = scheduler.apply_step

    def probe(loop: Any, tasks: list[Any], results: list[Any]) -> Any:
        if len(tasks) > 1:
            applied.append(_census())
        return real(loop, tasks, results)

    finished = [0]
    real_finished = step_run._finished

    def count_finished(loop: Any, task: Any, live: Any) -> None:
        finished[0] += task.name == "work"
        real_finished(loop, task, live)

    def work(s: dict[str, Any]) -> dict[str, Any]:
        if s["n"] == s["half"]:
            # the loop builds each result from its worker's outcome: wait until it has
            # taken every earlier packet's, so exactly half the packets hold a result
            deadline = time.monotonic() + 30
            while finished[0] < s["half"] and time.monotonic() < deadline:
                time.sleep(0.001)
            mid.append(_census())
        return {"total": 1}

    monkeypatch.setattr(scheduler, "apply_step", probe)
    monkeypatch.setattr(step_run, "_finished", count_finished)
    g = StateGraph(Fan)
    g.add_node("work", work)
    g.add_conditional_edges(START, lambda s: [Send("work", {"n": i, "half": s["n"] // 2})
                                              for i in range(s["n"])])
    g.add_edge("work", END)
    graph = g.compile()
    graph.invoke({"n": 10, "total": 0, "got": []})
    finished[0] = 0
    mid.clear()
    applied.clear()
    gc.collect()
    gc.disable()
    try:
        for n in (1000, 3000):
            finished[0] = 0
            graph.invoke({"n": n, "total": 0, "got": []}, {"max_concurrency": 1})
    finally:
        gc.enable()
    during, after = _per_packet(mid, 2000), _per_packet(applied, 2000)
    assert during["Task"] == 1 and during["TaskResult"] <= 0.51, during
    assert after["Task"] == 1 and after["TaskResult"] == 1, after
    for name in ("TaskContext", "asyncio.Task", "Future", "Context", "coroutine", "Handle"):
        assert during[name] < 0.01 and after[name] < 0.01, (name, during, after)
