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
