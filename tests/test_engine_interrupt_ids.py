"""Interrupt ids and the stream events of a paused task.

As LangGraph: an interrupt's id names the call by its task's checkpoint namespace
(``node:task_id``), and the task id comes from the checkpoint the step runs from, so the
same graph paused on two threads (or twice on one thread) gives different ids, while one
pause keeps its id through the run's result, ``get_state``, the history and the resume.
A task that paused on ``interrupt()`` ends with a ``task_result`` in the ``debug`` mode and
a result in the ``tasks`` mode, its interrupts as ``{"value", "id"}`` dicts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest

from threadloom import START, InMemoryCheckpointer, StateGraph
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.engine.runtime import interrupt
from threadloom.types import Command


class S(TypedDict):
    a: str


def _graph(cp: Any, twice: bool = False) -> Any:
    def x(s: S) -> dict[str, Any]:
        return {"a": "x"}

    def ask(s: S) -> dict[str, Any]:
        answer = interrupt("q?")
        if twice:
            answer += interrupt("again?")
        return {"a": answer}

    b = StateGraph(S)
    b.add_node("x", x)
    b.add_node("ask", ask)
    b.add_edge(START, "x")
    b.add_edge("x", "ask")
    return b.compile(checkpointer=cp)


@pytest.fixture(params=["memory", "sqlite"])
def cp(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        return InMemoryCheckpointer()
    return SqliteCheckpointer(str(tmp_path / "c.db"))


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_the_same_pause_on_two_threads_has_two_ids(cp: Any, durability: str) -> None:
    g = _graph(cp)
    ids = {}
    for thread in ("u", "v"):
        out = g.invoke({"a": ""}, _cfg(thread), durability=durability)
        ids[thread] = out["__interrupt__"][0].id
        state = g.get_state(_cfg(thread))
        assert [i.id for i in state.interrupts] == [ids[thread]]
        assert [i.id for i in state.tasks[0].interrupts] == [ids[thread]]
        paused = next(iter(g.get_state_history(_cfg(thread))))
        assert [i.id for i in paused.interrupts] == [ids[thread]]
    assert ids["u"] != ids["v"]
    for thread in ("u", "v"):  # each answered by its own id
        out = g.invoke(Command(resume={ids[thread]: thread.upper()}), _cfg(thread),
                       durability=durability)
        assert out == {"a": thread.upper()}


def test_a_second_pause_on_one_thread_has_a_new_id(cp: Any) -> None:
    g = _graph(cp)
    first = g.invoke({"a": ""}, _cfg("t"))["__interrupt__"][0].id
    assert g.invoke(Command(resume="A"), _cfg("t")) == {"a": "A"}
    second = g.invoke({"a": ""}, _cfg("t"))["__interrupt__"][0].id
    assert second != first
    with pytest.raises(Exception):  # noqa: B017 - the old id answers nothing pending
        g.invoke(Command(resume={first: "old"}), _cfg("t"))
    assert g.invoke(Command(resume={second: "B"}), _cfg("t")) == {"a": "B"}


def test_two_calls_in_one_task_keep_their_ids_across_resumes(cp: Any) -> None:
    g = _graph(cp, twice=True)
    first = g.invoke({"a": ""}, _cfg("t"))["__interrupt__"][0]
    state = g.get_state(_cfg("t"))
    out = g.invoke(Command(resume={first.id: "A"}), _cfg("t"))
    second = out["__interrupt__"][0]
    assert second.value == "again?" and second.id != first.id
    # the task id is the same through both pauses (the step runs from one checkpoint)
    assert g.get_state(_cfg("t")).tasks[0].id == state.tasks[0].id
    assert g.invoke(Command(resume={second.id: "B"}), _cfg("t")) == {"a": "AB"}


def test_a_paused_task_ends_with_its_interrupts_in_debug_and_tasks_modes() -> None:
    g = _graph(InMemoryCheckpointer())
    results: list[tuple[str, dict[str, Any]]] = []
    for mode, ev in g.stream({"a": ""}, _cfg("t"), stream_mode=["tasks", "debug"]):
        if mode == "debug" and ev["type"] == "task_result":
            results.append((mode, ev["payload"]))
        elif mode == "tasks" and "result" in ev:
            results.append((mode, ev))
    pending = g.get_state(_cfg("t")).interrupts[0]
    ask_id = g.get_state(_cfg("t")).tasks[0].id
    paused = {"id": ask_id, "name": "ask", "error": None, "result": {},
              "interrupts": [{"value": "q?", "id": pending.id}]}
    assert [m for m, p in results if p["name"] == "ask"] == ["tasks", "debug"]  # as LangGraph
    assert [p for _, p in results if p["name"] == "ask"] == [paused, paused]
    events = [ev for ev in g.stream(Command(resume="A"), _cfg("t"), stream_mode="debug")
              if ev["type"] == "task_result"]
    assert [ev["payload"] for ev in events] == [
        {"id": ask_id, "name": "ask", "error": None, "result": {"a": "A"}, "interrupts": []}]
    assert events[0]["step"] == 2


def test_a_replay_or_a_fork_of_the_pause_has_a_new_id(cp: Any) -> None:
    g = _graph(cp)
    first = g.invoke({"a": ""}, _cfg("t"))["__interrupt__"][0].id
    history = list(g.get_state_history(_cfg("t")))
    at_ask = next(h for h in history if h.next == ("ask",)).config
    at_x = next(h for h in history if h.next == ("x",)).config
    ids = [g.invoke(None, c)["__interrupt__"][0].id for c in (at_ask, at_x)]
    fork = g.update_state(at_ask, {"a": "y"}, as_node="x")
    ids.append(g.invoke(None, fork)["__interrupt__"][0].id)
    assert len({first, *ids}) == 4  # as LangGraph: each runs from a checkpoint of its own
    state = g.get_state(_cfg("t"))  # the fork's pause is the thread's latest
    assert [i.id for i in state.interrupts] == [ids[2]]
    assert g.invoke(Command(resume={ids[2]: "F"}), _cfg("t")) == {"a": "F"}
