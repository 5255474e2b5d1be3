"""A thread's checkpoint history as LangGraph saves it: the input checkpoint, the START
step, one checkpoint per super-step; replays fork; ``update_state`` and copy-forks.

Every expected sequence here was read off LangGraph 1.2 running the same graph.
"""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any, NotRequired, Required, TypedDict

import pytest

from threadloom import END, START, InvalidUpdateError, StateGraph


class S(TypedDict):
    x: Annotated[list, operator.add]


def chain(calls: list[str] | None = None) -> StateGraph:
    def node(name: str) -> Any:
        def fn(state: S) -> dict[str, Any]:
            if calls is not None:
                calls.append(name)
            return {"x": [name]}

        return fn

    g = StateGraph(S)
    g.add_node("a", node("a"))
    g.add_node("b", node("b"))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


def rows(app: Any, thread_id: str) -> list[tuple[int, str, tuple[str, ...], list[str]]]:
    return [(h.metadata["step"], h.metadata["source"], h.next, h.values.get("x", []))
            for h in app.get_state_history(thread_id=thread_id)]


def test_a_run_saves_the_input_checkpoint_then_the_start_step(checkpointer, thread_id):
    app = chain().compile(checkpointer=checkpointer)
    assert app.invoke({"x": ["in"]}, thread_id=thread_id) == {"x": ["in", "a", "b"]}
    assert rows(app, thread_id) == [
        (2, "loop", (), ["in", "a", "b"]),
        (1, "loop", ("b",), ["in", "a"]),
        (0, "loop", ("a",), ["in"]),
        (-1, "input", ("__start__",), []),
    ]
    history = list(app.get_state_history(thread_id=thread_id))
    assert [[t.name for t in h.tasks] for h in history] == [[], ["b"], ["a"], ["__start__"]]
    assert history[-1].parent_config is None
    for child, parent in zip(history, history[1:], strict=False):
        assert child.parent_config["configurable"]["checkpoint_id"] == (
            parent.config["configurable"]["checkpoint_id"])
    # a second input goes on numbering: its input checkpoint holds the state before it
    app.invoke({"x": ["in2"]}, thread_id=thread_id)
    assert rows(app, thread_id)[:4] == [
        (6, "loop", (), ["in", "a", "b", "in2", "a", "b"]),
        (5, "loop", ("b",), ["in", "a", "b", "in2", "a"]),
        (4, "loop", ("a",), ["in", "a", "b", "in2"]),
        (3, "input", ("__start__",), ["in", "a", "b"]),
    ]


def test_nodes_run_from_super_step_1_without_a_checkpointer_too():
    def a(state: S) -> dict[str, Any]:
        raise RuntimeError("boom")

    g = StateGraph(S)
    g.add_node("a", a)
    g.add_edge(START, "a")
    with pytest.raises(RuntimeError) as info:
        g.compile().invoke({"x": []})
    assert info.value.__notes__ == ["while running node 'a' at super-step 1"]


@pytest.mark.parametrize("back", [3, 2, 1, 0])
def test_a_replay_saves_a_fork_and_runs_on_from_it(checkpointer, thread_id, back):
    calls: list[str] = []
    app = chain(calls).compile(checkpointer=checkpointer)
    app.invoke({"x": ["in"]}, thread_id=thread_id)
    past = list(app.get_state_history(thread_id=thread_id))[back]
    calls.clear()
    assert app.invoke(None, past.config) == {"x": ["in", "a", "b"]}
    assert calls == [[], ["b"], ["a", "b"], ["a", "b"]][back]
    step = past.metadata["step"]
    again = rows(app, thread_id)[: 3 - step]
    # first the fork (the replayed checkpoint, one step on), then the steps run again
    assert again[-1] == (step + 1, "fork", past.next, past.values.get("x", []))
    assert [r[0] for r in again] == list(range(3, step, -1))
    assert again[0][3] == ["in", "a", "b"]
    assert len(list(app.get_state_history(thread_id=thread_id))) == 4 + len(again)


@pytest.mark.parametrize("back", [3, 2, 1, 0])
def test_a_replay_streams_the_saved_state_first(checkpointer, thread_id, back):
    app = chain().compile(checkpointer=checkpointer)
    app.invoke({"x": ["in"]}, thread_id=thread_id)
    past = list(app.get_state_history(thread_id=thread_id))[back]
    values = list(app.stream(None, past.config, stream_mode="values"))
    # as LangGraph 1.2: the input checkpoint streams its state before the input is applied
    # each step's state once
    every = [{"x": []}, {"x": ["in"]}, {"x": ["in", "a"]}, {"x": ["in", "a", "b"]}]
    assert values == every[3 - back:]


def test_update_state_before_anything_ran_is_the_input(checkpointer, thread_id):
    app = chain().compile(checkpointer=checkpointer)
    cfg = app.update_state({"configurable": {"thread_id": thread_id}}, {"x": ["u"]})
    snap = app.get_state(cfg)
    assert (snap.next, snap.metadata["source"], snap.metadata["step"]) == (("a",), "update", 0)
    # on the input checkpoint of a run, the update replaces the input (as LangGraph)
    app.invoke({"x": ["in"]}, thread_id=thread_id + "2")
    first = list(app.get_state_history(thread_id=thread_id + "2"))[-1]
    cfg = app.update_state(first.config, {"x": ["upd"]})
    assert app.get_state(cfg).next == ("a",)
    assert app.invoke(None, cfg) == {"x": ["upd", "a", "b"]}


def test_copy_fork_saves_a_sibling_with_the_same_state(checkpointer, thread_id):
    calls: list[str] = []
    app = chain(calls).compile(checkpointer=checkpointer)
    app.invoke({"x": ["in"]}, thread_id=thread_id)
    before_b = next(h for h in app.get_state_history(thread_id=thread_id) if h.next == ("b",))
    cfg = app.update_state(before_b.config, None, as_node="__copy__")
    copy = app.get_state(cfg)
    assert copy.metadata["source"] == "fork" and copy.metadata["step"] == 2
    assert copy.values == before_b.values and copy.next == ("b",)
    assert copy.parent_config == before_b.parent_config  # a sibling, not a child
    assert app.get_state(app.update_state(before_b.config, {"x": ["y"]})).metadata[
        "source"] == "update"
    calls.clear()
    assert app.invoke(None, cfg) == {"x": ["in", "a", "b"]}
    assert calls == ["b"]
    with pytest.raises(InvalidUpdateError, match="values=None"):
        app.update_state(before_b.config, {"x": ["z"]}, as_node="__copy__")


def test_debug_and_checkpoints_events_carry_configs_and_tasks(memory_checkpointer):
    app = chain().compile(checkpointer=memory_checkpointer)
    events = list(app.stream({"x": ["in"]}, thread_id="dbg", stream_mode=["debug", "checkpoints"]))
    saved = [p for mode, p in events if mode == "checkpoints"]
    debug = [p for mode, p in events if mode == "debug" and p["type"] == "checkpoint"]
    assert [d["payload"] for d in debug] == saved
    history = list(reversed(list(app.get_state_history(thread_id="dbg"))))
    assert [c["config"] for c in saved] == [
        {"configurable": {"thread_id": "dbg", "checkpoint_ns": "",
                          "checkpoint_id": h.config["configurable"]["checkpoint_id"]}}
        for h in history]
    assert saved[0]["parent_config"] is None
    assert [c["parent_config"] for c in saved[1:]] == [c["config"] for c in saved[:-1]]
    assert [[(t["id"], t["name"]) for t in c["tasks"]] for c in saved] == [
        [(t.id, t.name) for t in h.tasks] for h in history]
    assert saved[0]["tasks"][0] == {"id": history[0].tasks[0].id, "name": "__start__",
                                    "interrupts": (), "state": None}


def parallel_with_a_failure() -> StateGraph:
    def bad(state: S) -> dict[str, Any]:
        time.sleep(0.05)  # the sibling has finished by then
        raise ValueError("nope")

    g = StateGraph(S)
    g.add_node("good", lambda s: {"x": ["good"]})
    g.add_node("bad", bad)
    g.add_edge(START, "good")
    g.add_edge(START, "bad")
    return g


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_after_a_failed_step_get_state_applies_the_finished_sibling(
    checkpointer, thread_id, durability
):
    app = parallel_with_a_failure().compile(checkpointer=checkpointer)
    with pytest.raises(ValueError, match="nope"):
        app.invoke({"x": ["in"]}, thread_id=thread_id, durability=durability)
    latest = app.get_state(thread_id=thread_id)
    assert latest.values == {"x": ["in", "good"]} and latest.next == ("bad",)
    assert [(t.name, t.error) for t in latest.tasks] == [
        ("good", None), ("bad", "ValueError('nope')")]  # the error saved in every mode
    assert latest.metadata["step"] == 0
    # the checkpoint itself, named by id, is as saved: no pending write applied
    named = app.get_state(latest.config)
    assert named.values == {"x": ["in"]} and named.next == ("good", "bad")


async def test_aget_state_history_yields_the_same_snapshots(memory_checkpointer):
    app = chain().compile(checkpointer=memory_checkpointer)
    await app.ainvoke({"x": ["in"]}, thread_id="ah")
    got = [s async for s in app.aget_state_history(thread_id="ah")]
    assert got == list(app.get_state_history(thread_id="ah"))
    assert [s.metadata["step"] for s in got] == [2, 1, 0, -1]
    assert [s.metadata["step"] async for s in app.aget_state_history(thread_id="ah", limit=2)] \
        == [2, 1]


# -- H31: Required / NotRequired around an Annotated reducer keep the reducer ------------

class H31A(TypedDict):
    count: NotRequired[Annotated[int, operator.add]]
    seen: NotRequired[int]


class H31B(TypedDict, total=False):
    count: Required[Annotated[int, operator.add]]
    seen: int


class H31C(TypedDict):
    notes: NotRequired[Annotated[list, operator.add]]
    seen: NotRequired[int]


def _two_writers(schema: Any, key: str, first: Any, second: Any) -> Any:
    g = StateGraph(schema)
    g.add_node("a", lambda s: {key: first})
    g.add_node("b", lambda s: {key: second})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("a", END)
    g.add_edge("b", END)
    return g.compile()


@pytest.mark.parametrize("schema", [H31A, H31B])
def test_h31_a_required_wrapper_keeps_the_counter_reducer(schema):
    app = _two_writers(schema, "count", 1, 2)
    assert app.invoke({"seen": 0})["count"] == 3  # the int channel starts at 0
    assert app.invoke({"count": 10})["count"] == 13


def test_h31_not_required_list_keeps_its_reducer():
    assert _two_writers(H31C, "notes", ["a"], ["b"]).invoke({"notes": ["x"]})["notes"] == [
        "x", "a", "b"]


# -- refusals: another graph's thread; resuming a finished thread ------------------------

class Other(TypedDict):
    y: int


def test_a_thread_saved_by_another_graph_is_refused_by_name(checkpointer, thread_id):
    from threadloom.errors import GraphRunError

    chain().compile(checkpointer=checkpointer).invoke({"x": ["in"]}, thread_id=thread_id)
    g = StateGraph(Other)
    g.add_node("n", lambda s: {"y": 1})
    g.add_edge(START, "n")
    other = g.compile(checkpointer=checkpointer)
    for attempt in ({"y": 0}, None):
        with pytest.raises(GraphRunError) as info:
            other.invoke(attempt, thread_id=thread_id)
        text = str(info.value)
        assert f"thread {thread_id!r}" in text and "state keys ['x']" in text
        assert "next nodes []" in text and "0 pending interrupt(s)" in text
        assert "no key ['x']" in text
    # nothing was saved by the refused runs
    assert len(list(other.get_state_history(thread_id=thread_id))) == 4


def test_resume_on_a_finished_thread_is_refused(checkpointer, thread_id):
    from threadloom import Command
    from threadloom.errors import EmptyInputError

    app = chain().compile(checkpointer=checkpointer)
    with pytest.raises(EmptyInputError):  # unknown thread: as before
        app.invoke(Command(resume="yes"), thread_id=thread_id)
    app.invoke({"x": ["in"]}, thread_id=thread_id)
    with pytest.raises(EmptyInputError) as info:
        app.invoke(Command(resume="yes"), thread_id=thread_id)
    text = str(info.value)
    assert f"thread {thread_id!r}" in text and "no pending interrupt" in text
    assert "finished at step 2" in text and "state keys ['x']" in text


class Pub(TypedDict):
    a: int


class Priv(TypedDict):
    a: int
    secret: str


def test_a_node_state_hint_adds_its_private_keys_as_channels():
    def one(s: Pub) -> Priv:
        return {"a": s["a"] + 1, "secret": "s1"}

    def two(s: Priv) -> Pub:
        return {"a": s["a"] * 10 if s["secret"] == "s1" else -1}

    g = StateGraph(Pub)
    g.add_node("one", one)
    g.add_node("two", two)
    g.add_edge(START, "one")
    g.add_edge("one", "two")
    assert g.compile().invoke({"a": 1}) == {"a": 20}  # as LangGraph: secret stays private


def test_history_read_as_it_is_decoded_equals_history_of_the_listed_tuples(
        checkpointer, thread_id):
    """``get_state_history`` turns each checkpoint into its snapshot as the store decodes
    it (``list_as``); that is what building them from ``list()``'s tuples gives, forks,
    replays and lone-task results included."""
    from threadloom.engine.snapshot import _without_id, history_of

    class S(TypedDict):
        n: int
        log: Annotated[list, operator.add]

    g = StateGraph(S)
    g.add_node("a", lambda s: {"n": s["n"] + 1, "log": ["a"]})
    g.add_node("b", lambda s: {"n": s["n"] * 2})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    graph = g.compile(checkpointer=checkpointer)
    cfg = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"n": 1, "log": []}, cfg)
    old = list(graph.get_state_history(cfg))[-2].config  # the START step's checkpoint
    graph.invoke(None, old)  # a replay: a fork off an earlier checkpoint
    graph.update_state(cfg, {"n": 7}, as_node="a")
    shown = list(graph.get_state_history(cfg))
    listed = list(checkpointer.list(_without_id(cfg)))
    assert shown == history_of(graph, listed)
    assert any(t.result for s in shown for t in s.tasks)  # lone results were read
