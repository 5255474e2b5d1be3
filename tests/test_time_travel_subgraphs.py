"""Time travel with subgraphs (issue 15), as LangGraph.

Two things a replay of a parent with a subgraph must get right:

* a config naming a subgraph's own checkpoint (``get_state(subgraphs=True).tasks[i].state
  .config``, or a subgraph's ``update_state`` fork) replays the *parent* graph, which goes
  into the subgraph at that checkpoint: the config carries a ``checkpoint_map``
  (namespace -> checkpoint id, the root's under ``""``) that says where each level stands;
* a stateful subgraph (``checkpointer=True``) replayed with its parent loads the state it
  had at the replayed parent checkpoint (its newest one older than it), not its latest;
  later calls of it in the same run load its latest as usual.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import START, StateGraph
from threadloom.engine.runtime import interrupt
from threadloom.types import Command


@pytest.fixture
def checkpointer(any_backend):  # type: ignore[no-untyped-def]
    """A fresh checkpointer of each backend (conftest's ``any_backend``)."""
    return any_backend


class Log(TypedDict):
    value: Annotated[list[str], operator.add]


def _asker(called: list[str]) -> Any:
    """A subgraph: step_a, then ask_1 and ask_2, each asking a question."""

    def step_a(state: Log) -> dict[str, Any]:
        called.append("step_a")
        return {"value": ["a"]}

    def ask(name: str) -> Any:
        def node(state: Log) -> dict[str, Any]:
            called.append(name)
            return {"value": [f"{name}:{interrupt(name + '?')}"]}

        return node

    sub = StateGraph(Log)
    sub.add_node("step_a", step_a)
    sub.add_node("ask_1", ask("ask_1"))
    sub.add_node("ask_2", ask("ask_2"))
    sub.add_edge(START, "step_a")
    sub.add_edge("step_a", "ask_1")
    sub.add_edge("ask_1", "ask_2")
    return sub.compile(checkpointer=True)


def _parent(sub: Any, checkpointer: Any, called: list[str]) -> Any:
    def post(state: Log) -> dict[str, Any]:
        called.append("post")
        return {"value": ["post"]}

    parent = StateGraph(Log)
    parent.add_node("executor", sub)
    parent.add_node("post", post)
    parent.add_edge(START, "executor")
    parent.add_edge("executor", "post")
    return parent.compile(checkpointer=checkpointer)


def test_replay_from_a_subgraph_checkpoint_runs_the_parent_into_it(checkpointer, thread_id):
    called: list[str] = []
    app = _parent(_asker(called), checkpointer, called)
    app.invoke({"value": []}, thread_id=thread_id)
    sub_config = app.get_state(thread_id=thread_id, subgraphs=True).tasks[0].state.config
    conf = sub_config["configurable"]
    assert conf["checkpoint_ns"] == "executor"
    assert conf["checkpoint_map"]["executor"] == conf["checkpoint_id"]
    root_id = conf["checkpoint_map"][""]
    app.invoke(Command(resume="x1"), thread_id=thread_id)
    done = app.invoke(Command(resume="x2"), thread_id=thread_id)
    assert done["value"] == ["a", "ask_1:x1", "ask_2:x2", "post"]

    called.clear()
    out = app.invoke(None, sub_config)  # back to the first question
    assert [i.value for i in out["__interrupt__"]] == ["ask_1?"]
    assert called == ["ask_1"]  # step_a ran before that checkpoint: not again
    [fork, *_] = app.get_state_history(thread_id=thread_id)
    assert (fork.metadata["source"], fork.next) == ("fork", ("executor",))
    assert fork.parent_config["configurable"]["checkpoint_id"] == root_id

    app.invoke(Command(resume="n1"), thread_id=thread_id)
    done = app.invoke(Command(resume="n2"), thread_id=thread_id)
    assert done["value"] == ["a", "ask_1:n1", "ask_2:n2", "post"]
    assert called[-1] == "post"


def test_resume_and_fork_from_a_subgraph_checkpoint(checkpointer, thread_id):
    called: list[str] = []
    app = _parent(_asker(called), checkpointer, called)
    app.invoke({"value": []}, thread_id=thread_id)
    app.invoke(Command(resume="x1"), thread_id=thread_id)
    at_second = app.get_state(thread_id=thread_id, subgraphs=True).tasks[0].state.config
    app.invoke(Command(resume="x2"), thread_id=thread_id)

    called.clear()  # answer the replayed checkpoint's question straight away
    done = app.invoke(Command(resume="r2"), at_second)
    assert done["value"] == ["a", "ask_1:x1", "ask_2:r2", "post"]
    assert called == ["ask_2", "post"]

    called.clear()  # fork the subgraph's checkpoint, then run the fork
    fork = app.update_state(at_second, {"value": ["forked"]})
    assert fork["configurable"]["checkpoint_ns"] == "executor"
    assert set(fork["configurable"]["checkpoint_map"]) == {"", "executor"}
    out = app.invoke(None, fork)
    assert [i.value for i in out["__interrupt__"]] == ["ask_2?"]
    assert called == ["ask_2"]
    done = app.invoke(Command(resume="f2"), thread_id=thread_id)
    assert done["value"] == ["a", "ask_1:x1", "forked", "ask_2:f2", "post"]


def test_replay_into_a_subgraph_two_levels_down(checkpointer, thread_id):
    called: list[str] = []
    middle = StateGraph(Log)
    middle.add_node("inner", _asker(called))
    middle.add_edge(START, "inner")
    parent = StateGraph(Log)
    parent.add_node("outer", middle.compile(checkpointer=True))
    parent.add_edge(START, "outer")
    app = parent.compile(checkpointer=checkpointer)
    app.invoke({"value": []}, thread_id=thread_id)
    mid = app.get_state(thread_id=thread_id, subgraphs=True).tasks[0].state
    inner_config = mid.tasks[0].state.config
    assert set(inner_config["configurable"]["checkpoint_map"]) == {"", "outer", "outer|inner"}
    app.invoke(Command(resume="x1"), thread_id=thread_id)
    app.invoke(Command(resume="x2"), thread_id=thread_id)

    called.clear()
    out = app.invoke(None, inner_config)
    assert [i.value for i in out["__interrupt__"]] == ["ask_1?"]
    assert called == ["ask_1"]
    app.invoke(Command(resume="n1"), thread_id=thread_id)
    done = app.invoke(Command(resume="n2"), thread_id=thread_id)
    assert done["value"] == ["a", "ask_1:n1", "ask_2:n2"]


def _counting_sub(seen: list[list[str]]) -> Any:
    def step(state: Log) -> dict[str, Any]:
        seen.append(list(state["value"]))
        return {"value": ["s"]}

    sub = StateGraph(Log)
    sub.add_node("step", step)
    sub.add_edge(START, "step")
    return sub.compile(checkpointer=True)


class Outer(TypedDict):
    trail: Annotated[list[str], operator.add]


@pytest.mark.parametrize("how", ["replay", "fork"])
def test_stateful_subgraph_loads_its_state_at_the_replayed_checkpoint(
    checkpointer, thread_id, how
):
    seen: list[list[str]] = []
    sub = _counting_sub(seen)

    parent = StateGraph(Outer)
    parent.add_node("pre", lambda s: {"trail": ["pre"]})
    parent.add_node("sub_node", sub)
    parent.add_edge(START, "pre")
    parent.add_edge("pre", "sub_node")
    app = parent.compile(checkpointer=checkpointer)
    for _ in range(3):
        app.invoke({"trail": []}, thread_id=thread_id)
    assert seen == [[], ["s"], ["s", "s"]]
    history = list(app.get_state_history(thread_id=thread_id))
    second = [s for s in history if s.next == ("sub_node",)][1]  # the 2nd invocation's
    config = second.config
    if how == "fork":
        config = app.update_state(config, {"trail": ["forked"]})
    seen.clear()
    app.invoke(None, config)
    assert seen == [["s"]]  # what it held when the 2nd invocation reached it
    seen.clear()
    app.invoke({"trail": []}, thread_id=thread_id)  # a new run: its latest state
    assert seen == [["s", "s"]]


def test_subgraph_called_in_a_loop_loads_the_replayed_state_once(checkpointer, thread_id):
    seen: list[list[str]] = []
    sub = _counting_sub(seen)

    def again(state: Outer) -> str:
        return "pre" if state["trail"].count("p") < 2 else "__end__"

    parent = StateGraph(Outer)
    parent.add_node("pre", lambda s: {"trail": ["p"]})
    parent.add_node("sub_node", sub)
    parent.add_edge(START, "pre")
    parent.add_edge("pre", "sub_node")
    parent.add_conditional_edges("sub_node", again, ["pre", "__end__"])
    app = parent.compile(checkpointer=checkpointer)
    app.invoke({"trail": []}, thread_id=thread_id)
    assert seen == [[], ["s"]]
    first = [s for s in app.get_state_history(thread_id=thread_id)
             if s.next == ("sub_node",)][-1]
    seen.clear()
    app.invoke(None, first.config)
    assert seen == [[], ["s"]]  # first call: as then; the loop's second: its new latest


def test_resume_with_the_config_of_a_replayed_subgraph_fork(checkpointer, thread_id):
    """The fork's question, asked again by a replay, is answered with the fork's config:
    the root's record names the first asking's interrupt, the fork waits on its own."""
    called: list[str] = []
    app = _parent(_asker(called), checkpointer, called)
    app.invoke({"value": []}, thread_id=thread_id)
    at_first = app.get_state(thread_id=thread_id, subgraphs=True).tasks[0].state.config
    fork = app.update_state(at_first, {"value": ["forked"]})
    out = app.invoke(None, fork)
    assert [i.value for i in out["__interrupt__"]] == ["ask_1?"]
    out = app.invoke(Command(resume="n1"), fork)
    assert [i.value for i in out["__interrupt__"]] == ["ask_2?"]
    done = app.invoke(Command(resume="n2"), thread_id=thread_id)
    assert done["value"] == ["a", "forked", "ask_1:n1", "ask_2:n2", "post"]


async def test_async_replay_fork_and_stateful_replay(checkpointer, thread_id):
    """The async entry points take the same paths (the stores' async reads)."""
    called: list[str] = []
    app = _parent(_asker(called), checkpointer, called)
    await app.ainvoke({"value": []}, thread_id=thread_id)
    snap = await app.aget_state(thread_id=thread_id, subgraphs=True)
    at_first = snap.tasks[0].state.config
    await app.ainvoke(Command(resume="x1"), thread_id=thread_id)
    await app.ainvoke(Command(resume="x2"), thread_id=thread_id)
    called.clear()
    out = await app.ainvoke(None, at_first)
    assert [i.value for i in out["__interrupt__"]] == ["ask_1?"]
    assert called == ["ask_1"]
    fork = await app.aupdate_state(at_first, {"value": ["forked"]})
    out = await app.ainvoke(None, fork)
    assert [i.value for i in out["__interrupt__"]] == ["ask_1?"]
    await app.ainvoke(Command(resume="n1"), thread_id=thread_id)
    done = await app.ainvoke(Command(resume="n2"), thread_id=thread_id)
    assert done["value"] == ["a", "forked", "ask_1:n1", "ask_2:n2", "post"]

    seen: list[list[str]] = []
    parent = StateGraph(Outer)
    parent.add_node("sub_node", _counting_sub(seen))
    parent.add_edge(START, "sub_node")
    counting = parent.compile(checkpointer=checkpointer)
    other = thread_id + "-b"
    for _ in range(2):
        await counting.ainvoke({"trail": []}, thread_id=other)
    history = [s async for s in counting.aget_state_history(thread_id=other)]
    second = [s for s in history if s.next == ("sub_node",)][0]
    seen.clear()
    await counting.ainvoke(None, second.config)
    assert seen == [["s"]]


def test_stateful_graph_invoked_in_a_node_loads_the_replayed_state(checkpointer, thread_id):
    seen: list[list[str]] = []
    sub = _counting_sub(seen)

    def call(state: Outer) -> dict[str, Any]:
        sub.invoke({"value": []})
        return {"trail": ["c"]}

    parent = StateGraph(Outer)
    parent.add_node("pre", lambda s: {"trail": ["p"]})
    parent.add_node("call", call)
    parent.add_edge(START, "pre")
    parent.add_edge("pre", "call")
    app = parent.compile(checkpointer=checkpointer)
    for _ in range(3):
        app.invoke({"trail": []}, thread_id=thread_id)
    second = [s for s in app.get_state_history(thread_id=thread_id) if s.next == ("call",)][1]
    seen.clear()
    app.invoke(None, second.config)
    assert seen == [["s"]]


def test_streamed_subgraph_checkpoints_carry_the_checkpoint_map(checkpointer, thread_id):
    """The ``checkpoints`` mode gives a subgraph checkpoint's config as history does."""
    called: list[str] = []
    app = _parent(_asker(called), checkpointer, called)
    events = list(app.stream({"value": []}, thread_id=thread_id, stream_mode="checkpoints",
                             subgraphs=True))
    streamed = [e["config"] for ns, e in events if ns]
    assert streamed
    sub = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "executor"}}
    history = [s.config for s in app.get_state_history(sub)]
    assert streamed == history[::-1]
    assert all(set(c["configurable"]["checkpoint_map"]) == {"", "executor"} for c in streamed)


class Looped(TypedDict):
    log: Annotated[list[str], operator.add]
    n: int


def _looping(checkpointer: Any, persist: bool | None, calls: list[tuple[str, int]]) -> Any:
    """A parent calling subgraph ``sub`` (s1 then s2) twice, counting in ``count``."""

    def step(name: str) -> Any:
        def node(state: Looped) -> dict[str, Any]:
            calls.append((name, len(state["log"])))
            return {"log": [name]}

        return node

    sub = StateGraph(Looped).add_node("s1", step("s1")).add_node("s2", step("s2"))
    sub = sub.add_edge(START, "s1").add_edge("s1", "s2").compile(checkpointer=persist)
    parent = StateGraph(Looped).add_node("sub", sub)
    parent.add_node("count", lambda s: {"n": s["n"] + 1})
    parent.add_edge(START, "sub").add_edge("sub", "count")
    parent.add_conditional_edges("count", lambda s: "sub" if s["n"] < 2 else "__end__")
    return parent.compile(checkpointer=checkpointer)


def _after_first_s1(checkpointer: Any, thread_id: str) -> dict[str, Any]:
    """The config of the subgraph's checkpoint after its first call's s1, with the map
    of where its parent stood (as get_state(subgraphs=True) gives it)."""
    thread = {"configurable": {"thread_id": thread_id}}
    [saved] = [t for t in checkpointer.list(thread)
               if t.config["configurable"]["checkpoint_ns"]
               and t.checkpoint["channel_values"].get("log") == ["s1"]
               and t.metadata.get("source") == "loop"]
    conf = saved.config["configurable"]
    own = {conf["checkpoint_ns"]: conf["checkpoint_id"]}
    return {"configurable": {**conf, "checkpoint_map": {**saved.metadata["parents"], **own}}}


def test_named_stateful_subgraph_starts_there_on_every_call(checkpointer, thread_id):
    """As LangGraph 1.2 (checked against it): the map names the subgraph's namespace,
    so each call of the run goes back to that checkpoint; the first continues it, a
    later one starts there anew with its input."""
    calls: list[tuple[str, int]] = []
    app = _looping(checkpointer, True, calls)
    app.invoke({"log": [], "n": 0}, thread_id=thread_id)
    config = _after_first_s1(checkpointer, thread_id)
    calls.clear()
    out = app.invoke(None, config)
    # 1st call: s2 after the named s1; 2nd: the named ["s1"] plus its input ["s1", "s2"]
    assert calls == [("s2", 1), ("s1", 3), ("s2", 4)]
    assert out == {"log": ["s1", "s2", "s1", "s1", "s2", "s1", "s2"], "n": 2}


def test_replayed_per_call_subgraph_starts_anew(checkpointer, thread_id):
    """A replay forks its parent first, so a per-call subgraph (``node:task_id``) gets
    another namespace than the map names: it runs from its input, as in LangGraph (it
    used to look for the named checkpoint there and fail)."""
    calls: list[tuple[str, int]] = []
    app = _looping(checkpointer, None, calls)
    first = app.invoke({"log": [], "n": 0}, thread_id=thread_id)
    config = _after_first_s1(checkpointer, thread_id)
    calls.clear()
    assert app.invoke(None, config) == first
    assert calls == [("s1", 0), ("s2", 1), ("s1", 2), ("s2", 3)]
