"""A graph run inside a node, and subgraph persistence (H34).

A compiled graph invoked from inside a node function runs on the parent's thread and
checkpointer, in the namespace of the calling task (as LangGraph), so it can
``interrupt()`` and resume where it paused.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import END, START, StateGraph
from threadloom.engine.runtime import interrupt
from threadloom.types import Command


class S(TypedDict, total=False):
    human_response: str
    a: str


def inner_graph(seen: list[tuple[str, Any]]):
    def n1(state: S) -> dict[str, Any]:
        answer = interrupt("i1")
        seen.append(("n1", answer))
        return {"a": answer}

    def n2(state: S) -> dict[str, Any]:
        answer = interrupt("i2")
        seen.append(("n2", answer))
        return {"human_response": answer}

    g = StateGraph(S)
    g.add_node("n1", n1)
    g.add_node("n2", n2)
    g.add_edge(START, "n1")
    g.add_edge("n1", "n2")
    g.add_edge("n2", END)
    return g.compile()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_h34_graph_invoked_in_a_node_interrupts_and_resumes(checkpointer, thread_id, kind):
    seen: list[tuple[str, Any]] = []
    inner = inner_graph(seen)

    def call_inner(state: S) -> dict[str, Any]:
        return inner.invoke(state)

    async def acall_inner(state: S) -> dict[str, Any]:
        return await inner.ainvoke(state)

    parent = StateGraph(S)
    parent.add_node("call_inner", call_inner if kind == "sync" else acall_inner)
    parent.add_edge(START, "call_inner")
    app = parent.compile(checkpointer=checkpointer)

    out = app.invoke({"a": ""}, thread_id=thread_id)
    assert [i.value for i in out["__interrupt__"]] == ["i1"]
    out = app.invoke(Command(resume="a1"), thread_id=thread_id)
    assert [i.value for i in out["__interrupt__"]] == ["i2"]  # a1 is not delivered to i2
    assert seen == [("n1", "a1")]
    out = app.invoke(Command(resume="a2"), thread_id=thread_id)
    assert out["human_response"] == "a2" and out["a"] == "a1"
    assert "__interrupt__" not in out
    assert seen == [("n1", "a1"), ("n2", "a2")]  # n2 never saw a1
    # the inner run saved in the calling task's namespace of the parent's thread
    assert any(ns.startswith("call_inner:") for ns in namespaces(checkpointer, thread_id))


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    x: int


def counting_child(persistence: Any):
    def c1(state: Log) -> dict[str, Any]:
        return {"log": [f"c1 saw {len(state.get('log', []))}"]}

    child = StateGraph(Log)
    child.add_node("c1", c1)
    child.add_edge(START, "c1")
    return child.compile(checkpointer=persistence)


def namespaces(cp: Any, thread_id: str) -> set[str]:
    listed = cp.list({"configurable": {"thread_id": thread_id}})
    return {c.config["configurable"]["checkpoint_ns"] for c in listed}


@pytest.mark.parametrize("persistence", [True, False, None])
def test_subgraph_checkpointer_true_false_none(checkpointer, thread_id, persistence):
    parent = StateGraph(Log)
    parent.add_node("sub", counting_child(persistence))
    parent.add_edge(START, "sub")
    app = parent.compile(checkpointer=checkpointer)
    app.invoke({"log": ["in"]}, thread_id=thread_id)
    out = app.invoke({"log": ["in2"]}, thread_id=thread_id)
    saved = namespaces(checkpointer, thread_id)
    if persistence is True:  # one history across calls: the child remembers its state
        assert saved == {"", "sub"}
        # as LangGraph: a subgraph hands back its final log (its input included), so the
        # parent holds (in, in, c1 saw 1, in2); the child's saved log (in, c1 saw 1) plus those
        assert out["log"][-1] == "c1 saw 6"
    elif persistence is False:
        assert saved == {""}
        assert out["log"][-1] == "c1 saw 4"
    else:  # one namespace per call
        assert "" in saved and len(saved) == 3
        assert all(ns == "" or ns.startswith("sub:") for ns in saved)


def test_subgraph_checkpointer_true_interrupts_and_resumes(checkpointer, thread_id):
    def ask(state: Log) -> dict[str, Any]:
        return {"x": interrupt("how many?")}

    child = StateGraph(Log)
    child.add_node("ask", ask)
    child.add_edge(START, "ask")
    parent = StateGraph(Log)
    parent.add_node("sub", child.compile(checkpointer=True))
    parent.add_edge(START, "sub")
    app = parent.compile(checkpointer=checkpointer)
    [pause] = app.invoke({"log": []}, thread_id=thread_id)["__interrupt__"]
    assert app.invoke(Command(resume=7), thread_id=thread_id)["x"] == 7


def test_subgraph_interrupt_before_pauses_the_parent(checkpointer, thread_id):
    child = StateGraph(Log)
    child.add_node("c1", lambda s: {"log": ["c1"]})
    child.add_node("c2", lambda s: {"log": ["c2"]})
    child.add_edge(START, "c1")
    child.add_edge("c1", "c2")
    parent = StateGraph(Log)
    parent.add_node("sub", child.compile(interrupt_before=["c2"]))
    parent.add_node("after", lambda s: {"log": ["after"]})
    parent.add_edge(START, "sub")
    parent.add_edge("sub", "after")
    app = parent.compile(checkpointer=checkpointer)
    out = app.invoke({"log": ["in"]}, thread_id=thread_id)
    assert out == {"log": ["in"]}  # paused inside the subgraph, before c2
    assert app.get_state(thread_id=thread_id).next == ("sub",)
    out = app.invoke(None, thread_id=thread_id)
    # the subgraph's final log (its input "in" included) goes through the parent's reducer
    assert out["log"] == ["in", "in", "c1", "c2", "after"]


@pytest.mark.parametrize("how", ["interrupt", "interrupt_before"])
def test_paused_subgraph_hands_back_what_it_wrote_before_the_pause(
    checkpointer, thread_id, how
):
    def c2(state: Log) -> dict[str, Any]:
        return {"log": [f"c2:{interrupt('go on?')}" if how == "interrupt" else "c2"]}

    child = StateGraph(Log)
    child.add_node("c1", lambda s: {"log": ["c1"], "x": 1})
    child.add_node("c2", c2)
    child.add_edge(START, "c1")
    child.add_edge("c1", "c2")
    parent = StateGraph(Log)
    pause = ["c2"] if how == "interrupt_before" else None
    parent.add_node("sub", child.compile(interrupt_before=pause))
    parent.add_edge(START, "sub")
    app = parent.compile(checkpointer=checkpointer)
    app.invoke({"log": ["in"]}, thread_id=thread_id)
    resume = Command(resume="yes") if how == "interrupt" else None
    out = app.invoke(resume, thread_id=thread_id)
    assert out == {"log": ["in", "in", "c1", "c2:yes" if how == "interrupt" else "c2"], "x": 1}


def test_get_state_with_subgraphs_shows_the_paused_subgraph(checkpointer, thread_id):
    grand = StateGraph(Log)
    grand.add_node("g1", lambda s: {"x": interrupt("deep?")})
    grand.add_edge(START, "g1")
    child = StateGraph(Log)
    child.add_node("c1", lambda s: {"log": ["c1"]})
    child.add_node("inner", grand.compile())
    child.add_edge(START, "c1")
    child.add_edge("c1", "inner")
    parent = StateGraph(Log)
    parent.add_node("sub", child.compile())
    parent.add_edge(START, "sub")
    app = parent.compile(checkpointer=checkpointer)
    [pause] = app.invoke({"log": ["in"]}, thread_id=thread_id)["__interrupt__"]

    plain = app.get_state(thread_id=thread_id)
    [task] = plain.tasks
    assert task.name == "sub" and [i.id for i in task.interrupts] == [pause.id]
    assert task.state == {"configurable": {"thread_id": thread_id,
                                           "checkpoint_ns": f"sub:{task.id}"}}

    [task] = app.get_state(thread_id=thread_id, subgraphs=True).tasks
    sub = task.state
    assert sub.values == {"log": ["in", "c1"]} and sub.next == ("inner",)
    assert sub.config["configurable"]["checkpoint_ns"] == f"sub:{task.id}"
    [inner_task] = sub.tasks
    assert [i.id for i in inner_task.interrupts] == [pause.id]
    deep = inner_task.state
    assert deep.next == ("g1",) and [i.value for i in deep.interrupts] == ["deep?"]
    assert deep.config["configurable"]["checkpoint_ns"] == (
        f"sub:{task.id}|inner:{inner_task.id}")
    assert app.invoke(Command(resume=5), thread_id=thread_id)["x"] == 5
    assert app.get_state(thread_id=thread_id, subgraphs=True).tasks == ()


def test_get_state_with_subgraphs_shows_a_graph_invoked_in_a_node(checkpointer, thread_id):
    inner = inner_graph([])

    def call_inner(state: S) -> dict[str, Any]:
        return inner.invoke(state)

    parent = StateGraph(S)
    parent.add_node("call_inner", call_inner)
    parent.add_edge(START, "call_inner")
    app = parent.compile(checkpointer=checkpointer)
    app.invoke({"a": ""}, thread_id=thread_id)
    app.invoke(Command(resume="a1"), thread_id=thread_id)
    [task] = app.get_state(thread_id=thread_id, subgraphs=True).tasks
    assert task.state.values == {"a": "a1"} and task.state.next == ("n2",)
    assert [i.value for i in task.state.interrupts] == ["i2"]


@pytest.mark.parametrize("with_checkpointer", [True, False])
def test_parent_command_from_a_graph_invoked_in_a_node(
    memory_checkpointer, thread_id, with_checkpointer
):
    def jump(state: Log) -> Command:
        return Command(graph=Command.PARENT, goto="landed", update={"log": ["jumped"]})

    inner = StateGraph(Log)
    inner.add_node("jump", jump)
    inner.add_edge(START, "jump")
    inner_app = inner.compile()

    def call(state: Log) -> dict[str, Any]:
        inner_app.invoke({"log": []})
        return {"log": ["not reached"]}

    parent = StateGraph(Log)
    parent.add_node("call", call, destinations=("landed",))
    parent.add_node("landed", lambda s: {"log": ["landed"]})
    parent.add_edge(START, "call")
    app = parent.compile(checkpointer=memory_checkpointer if with_checkpointer else None)
    out = app.invoke({"log": []}, thread_id=thread_id if with_checkpointer else None)
    assert out["log"] == ["jumped", "landed"]


class Chat(TypedDict, total=False):
    log: Annotated[list, operator.add]
    result: str


@pytest.mark.parametrize("persistence", [True, None])
def test_two_graphs_invoked_in_one_node_keep_apart(checkpointer, thread_id, persistence):
    def echo(prefix: str):
        g = StateGraph(Chat)
        g.add_node("echo", lambda s: {"log": [f"{prefix}: {s['log'][-1]}"]})
        g.add_edge(START, "echo")
        return g.compile(checkpointer=persistence)

    fruit, veggie = echo("Fruit"), echo("Veggie")
    seen: list[tuple[list[str], list[str]]] = []

    def call_both(state: Chat) -> dict[str, Any]:
        f = fruit.invoke({"log": ["cherries"]})
        v = veggie.invoke({"log": ["broccoli"]})
        seen.append((f["log"], v["log"]))
        return {"result": f["log"][-1]}

    parent = StateGraph(Chat)
    parent.add_node("call_both", call_both)
    parent.add_edge(START, "call_both")
    app = parent.compile(checkpointer=checkpointer)
    app.invoke({"result": ""}, thread_id=thread_id)
    app.invoke({"result": ""}, thread_id=thread_id)
    once = (["cherries", "Fruit: cherries"], ["broccoli", "Veggie: broccoli"])
    if persistence:  # each remembers its own history, and only its own (as LangGraph)
        assert seen == [once, (once[0] * 2, once[1] * 2)]
        assert {"call_both", "call_both|1"} <= namespaces(checkpointer, thread_id)
    else:
        assert seen == [once, once]


@pytest.mark.parametrize("persistence", [None, True])
def test_replaying_a_parent_checkpoint_uses_the_subgraph_state_at_that_point(
    checkpointer, thread_id, persistence
):
    calls: list[str] = []

    def step(name: str, ask: bool = False):
        def run(state: Log) -> dict[str, Any]:
            calls.append(name)
            return {"log": [f"{name}:{interrupt('q')}" if ask else name]}

        return run

    child = StateGraph(Log)
    for name in ("c1", "c2", "c3"):
        child.add_node(name, step(name, ask=name == "c2"))
    child.add_edge(START, "c1")
    child.add_edge("c1", "c2")
    child.add_edge("c2", "c3")
    parent = StateGraph(Log)
    parent.add_node("pre", lambda s: {"log": ["pre"]})
    parent.add_node("sub", child.compile(checkpointer=persistence))
    parent.add_edge(START, "pre")
    parent.add_edge("pre", "sub")
    app = parent.compile(checkpointer=checkpointer)
    app.invoke({"log": []}, thread_id=thread_id)
    assert app.invoke(Command(resume="A"), thread_id=thread_id)["log"] == [
        "pre", "pre", "c1", "c2:A", "c3"]
    [at_sub] = [s for s in app.get_state_history(thread_id=thread_id) if s.next == ("sub",)]
    calls.clear()
    out = app.invoke(None, at_sub.config)  # replay: the subgraph runs from its start
    assert calls == ["c1", "c2"]
    assert [i.value for i in out["__interrupt__"]] == ["q"]
    assert out["log"] == ["pre"]


def test_graph_streamed_inside_a_node_interrupts_and_resumes(checkpointer, thread_id):
    seen: list[tuple[str, Any]] = []
    inner = inner_graph(seen)
    chunks: list[Any] = []

    def call_inner(state: S) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for chunk in inner.stream(state, stream_mode="updates"):
            chunks.append(chunk)
            for update in chunk.values():
                out.update(update or {})
        return out

    parent = StateGraph(S)
    parent.add_node("call_inner", call_inner)
    parent.add_edge(START, "call_inner")
    app = parent.compile(checkpointer=checkpointer)
    assert [i.value for i in app.invoke({"a": ""}, thread_id=thread_id)["__interrupt__"]] == [
        "i1"]
    out = app.invoke(Command(resume="a1"), thread_id=thread_id)
    assert [i.value for i in out["__interrupt__"]] == ["i2"]
    out = app.invoke(Command(resume="a2"), thread_id=thread_id)
    assert out["human_response"] == "a2"
    assert seen == [("n1", "a1"), ("n2", "a2")]
    assert {"n2": {"human_response": "a2"}} in chunks


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_doubly_nested_interrupt_before_resumes_under_each_durability(
    checkpointer, thread_id, durability
):
    class K(TypedDict):
        my_key: str

    grand = StateGraph(K)
    grand.add_node("g1", lambda s: {"my_key": s["my_key"] + " here"})
    grand.add_node("g2", lambda s: {"my_key": s["my_key"] + " and there"})
    grand.add_edge(START, "g1")
    grand.add_edge("g1", "g2")
    child = StateGraph(K)
    child.add_node("child_1", grand.compile(interrupt_before=["g2"]))
    child.add_edge(START, "child_1")
    parent = StateGraph(K)
    parent.add_node("p1", lambda s: {"my_key": "hi " + s["my_key"]})
    parent.add_node("child", child.compile())
    parent.add_node("p2", lambda s: {"my_key": s["my_key"] + " and back again"})
    parent.add_edge(START, "p1")
    parent.add_edge("p1", "child")
    parent.add_edge("child", "p2")
    app = parent.compile(checkpointer=checkpointer, durability=durability)
    assert app.invoke({"my_key": "my value"}, thread_id=thread_id) == {"my_key": "hi my value"}
    assert app.invoke(None, thread_id=thread_id) == {
        "my_key": "hi my value here and there and back again"}


def test_a_key_reduced_in_the_subgraph_but_not_in_the_parent_gets_its_final_value(
    checkpointer, thread_id
):
    class Inner(TypedDict):
        my_key: Annotated[str, operator.add]

    class Outer(TypedDict):
        my_key: str

    inner = StateGraph(Inner)
    inner.add_node("i1", lambda s: {"my_key": " got here"})
    inner.add_node("i2", lambda s: {"my_key": " and there"})
    inner.add_edge(START, "i1")
    inner.add_edge("i1", "i2")
    parent = StateGraph(Outer)
    parent.add_node("inner", inner.compile(checkpointer=True))
    parent.add_edge(START, "inner")
    app = parent.compile(checkpointer=checkpointer)
    updates = list(app.stream({"my_key": ""}, thread_id=thread_id, stream_mode="updates"))
    assert updates == [{"inner": {"my_key": " got here and there"}}]


def test_get_state_subgraphs_finds_a_checkpointer_true_graph_invoked_in_a_node(
    checkpointer, thread_id
):
    class Sub(TypedDict, total=False):
        bar: str

    sub = StateGraph(Sub)
    sub.add_node("s1", lambda s: {"bar": "hi! " + s["bar"]})
    sub.add_node("s2", lambda s: {"bar": s["bar"] + interrupt("Provide baz value")})
    sub.add_edge(START, "s1")
    sub.add_edge("s1", "s2")
    subgraph = sub.compile(checkpointer=True)

    class P(TypedDict):
        foo: str

    def node_2(state: P) -> dict[str, Any]:
        return {"foo": subgraph.invoke({"bar": state["foo"]})["bar"]}

    parent = StateGraph(P)
    parent.add_node("node_2", node_2)
    parent.add_edge(START, "node_2")
    app = parent.compile(checkpointer=checkpointer)
    app.invoke({"foo": "foo"}, thread_id=thread_id)
    [task] = app.get_state(thread_id=thread_id, subgraphs=True).tasks
    assert task.state.values == {"bar": "hi! foo"}
    assert app.invoke(Command(resume="baz"), thread_id=thread_id) == {"foo": "hi! foobaz"}


def test_subgraph_interrupt_after_pauses_the_parent(checkpointer, thread_id):
    child = StateGraph(Log)
    child.add_node("c1", lambda s: {"log": ["c1"]})
    child.add_node("c2", lambda s: {"log": ["c2"]})
    child.add_edge(START, "c1")
    child.add_edge("c1", "c2")
    parent = StateGraph(Log)
    parent.add_node("sub", child.compile(interrupt_after=["c1"]))
    parent.add_edge(START, "sub")
    app = parent.compile(checkpointer=checkpointer)
    assert app.invoke({"log": ["in"]}, thread_id=thread_id) == {"log": ["in"]}
    [task] = app.get_state(thread_id=thread_id, subgraphs=True).tasks
    assert task.state.values == {"log": ["in", "c1"]} and task.state.next == ("c2",)
    assert app.invoke(None, thread_id=thread_id) == {"log": ["in", "in", "c1", "c2"]}


def test_graph_invoked_in_a_node_with_the_parent_state_reads_its_own_keys(
    checkpointer, thread_id
):
    class Sub(TypedDict):
        foo: str
        bar: str

    class P(TypedDict):
        foo: str
        counter: int

    sub = StateGraph(Sub)
    sub.add_node("s1", lambda s: {"foo": "sub", "bar": interrupt("v")})
    sub.add_edge(START, "s1")
    subgraph = sub.compile(checkpointer=True)

    def call_subgraph(state: P) -> dict[str, Any]:
        out = subgraph.invoke(state)  # the parent's whole state, 'counter' included
        return {"foo": out["foo"] + ":" + out["bar"]}

    parent = StateGraph(P)
    parent.add_node("call_subgraph", call_subgraph)
    parent.add_edge(START, "call_subgraph")
    app = parent.compile(checkpointer=checkpointer)
    assert "__interrupt__" in app.invoke({"foo": "", "counter": 0}, thread_id=thread_id)
    assert app.invoke(Command(resume="x"), thread_id=thread_id) == {"foo": "sub:x", "counter": 0}
