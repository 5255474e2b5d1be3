"""The lease heartbeat (``engine/heartbeat.py``): one thread per process renews every
lease held, on each lease's own timer; a run starts no thread of its own."""

from __future__ import annotations

import threading
import time
from typing import TypedDict

from threadloom import START, StateGraph
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.engine.heartbeat import HEARTBEATS, Heartbeats


def _wait_for(cond, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_each_renewal_runs_on_its_own_timer_until_removed_or_refused():
    beats = Heartbeats()
    calls = {"a": 0, "b": 0, "c": 0}

    def renew(name: str, keep: bool = True):
        def call() -> bool:
            calls[name] += 1
            if name == "c":
                raise OSError("the store is unreachable")  # skipped: the next beat tries
            return keep
        return call

    a = beats.add(renew("a"), 0.02)
    beats.add(renew("b", keep=False), 0.02)
    beats.add(renew("c"), 0.02)
    slow = beats.add(renew("a"), 3600)  # due in an hour: never called here
    assert _wait_for(lambda: calls["a"] >= 3 and calls["c"] >= 3)
    assert calls["b"] == 1 and beats.held() == 3  # refused once: dropped
    beats.remove(a)
    beats.remove(a)  # a key not held is ignored
    seen = calls["a"]
    time.sleep(0.1)
    assert calls["a"] == seen  # removed: no more calls (the hourly one is not due)
    beats.remove(slow)
    assert beats.held() == 1


def test_a_lease_added_while_the_thread_sleeps_long_is_renewed_on_time():
    """The thread sleeps until the earliest renewal; a shorter one added meanwhile wakes
    it."""
    beats = Heartbeats()
    beats.add(lambda: True, 3600)
    time.sleep(0.05)  # the thread now sleeps for an hour
    done = threading.Event()
    beats.add(lambda: done.set() or True, 0.05)
    assert done.wait(5)


class S(TypedDict, total=False):
    n: int


def test_runs_hold_a_lease_but_start_no_thread_each(tmp_path, monkeypatch):
    cp = SqliteCheckpointer(str(tmp_path / "beat.db"))
    seen: list[int] = []

    def node(s: S) -> dict[str, int]:
        seen.append(HEARTBEATS.held())  # the run's lease is being renewed
        return {"n": s.get("n", 0) + 1}

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    graph = g.compile(checkpointer=cp)
    graph.invoke({"n": 0}, {"configurable": {"thread_id": "t"}})  # starts the shared thread
    started: list[str] = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start",
                        lambda self: (started.append(self.name), start(self))[1])
    for i in range(20):
        graph.invoke({"n": i}, {"configurable": {"thread_id": f"t{i}"}})
    assert not [name for name in started if "lease" in name]
    assert seen == [1] * 21 and HEARTBEATS.held() == 0  # each released when its run ended
    cp.close()


def test_a_forked_child_can_run_a_thread_the_parent_was_running(tmp_path):
    """The parent's in-process claim on a thread (a run inside a slow node at fork time)
    is not the child's: the child runs that thread once the parent let its lease go
    (found by a new-user trial: the child waited out busy_timeout, then raised)."""
    import multiprocessing
    import threading as th

    inside, release = th.Event(), th.Event()

    def node(s: S) -> dict[str, int]:
        if s.get("n", 0) == 0:  # the parent's run waits here while the child is forked
            inside.set()
            release.wait(10)
        return {"n": s.get("n", 0) + 1}

    g = StateGraph(S)
    g.add_node("node", node)
    g.add_edge(START, "node")
    graph = g.compile(checkpointer=SqliteCheckpointer(str(tmp_path / "fork.db")),
                      busy_timeout=20)
    config = {"configurable": {"thread_id": "busy"}}
    parent = th.Thread(target=lambda: graph.invoke({"n": 0}, config))
    parent.start()
    assert inside.wait(10)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()

    def child() -> None:
        try:
            out.put(graph.invoke({"n": 100}, config)["n"])
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            out.put(repr(exc))

    proc = ctx.Process(target=child)
    proc.start()
    time.sleep(0.3)
    release.set()  # the parent's run ends and gives its lease back
    parent.join(10)
    assert out.get(timeout=30) == 101
    proc.join(10)
