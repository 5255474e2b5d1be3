"""Task results and bulk updates, as LangGraph (issue 15): ``StateTask.path``/``result``,
the error a failed task saves (``repr`` form), ``bulk_update_state`` and its validation,
``update_state(..., as_node="__input__")`` and a copy-fork updated by a list of updates.

Each behaviour runs on every backend: memory, SQLite and PostgreSQL.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import (
    END,
    START,
    Command,
    InvalidUpdateError,
    Send,
    StateGraph,
    StateUpdate,
)
from threadloom.engine.snapshot import PULL, PUSH, StateTask
from threadloom.errors import SerializationError


@pytest.fixture
def cp(any_backend):  # type: ignore[no-untyped-def]
    """A fresh checkpointer of each backend (conftest's ``any_backend``)."""
    return any_backend


class Add(TypedDict):
    value: Annotated[int, operator.add]


def _parallel(cp: Any, fail: list[bool]) -> Any:
    def one(s: Add) -> dict[str, int]:
        return {"value": 2}

    def two(s: Add) -> dict[str, int]:
        if fail[0]:
            raise ConnectionError("I'm not good")
        return {"value": 3}

    g = StateGraph(Add)
    g.add_node("one", one)
    g.add_node("two", two)
    g.add_edge(START, "one")
    g.add_edge(START, "two")
    return g.compile(checkpointer=cp)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_finished_task_saves_its_writes_and_no_marker(cp: Any, durability: str) -> None:
    # as LangGraph: the checkpoint of a failed step holds the finished sibling's write and
    # the failed task's error, nothing more (a task with writes is done by them; only a
    # task that routes, or writes nothing, saves a __scheduled__ entry too)
    calls: list[str] = []
    fail = [True]

    def one(s: Add) -> dict[str, int]:
        calls.append("one")
        return {"value": 2}

    def two(s: Add) -> dict[str, int]:
        calls.append("two")
        if fail[0]:
            raise ConnectionError("I'm not good")
        return {"value": 3}

    g = StateGraph(Add)
    g.add_node("one", one)
    g.add_node("two", two)
    g.add_edge(START, "one")
    g.add_edge(START, "two")
    app = g.compile(checkpointer=cp)
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ConnectionError):
        app.invoke({"value": 1}, config, durability=durability)
    saved = cp.get_tuple(config)
    writes = sorted((w.channel, w.value) for w in saved.pending_writes)
    assert writes == [("__error__", "ConnectionError(\"I'm not good\")"), ("value", 2)]
    fail[0] = False
    assert app.invoke(None, config, durability=durability) == {"value": 6}
    assert calls == ["one", "two", "two"]  # "one" finished: not run again


def test_a_task_that_writes_nothing_is_still_done_on_resume(cp: Any) -> None:
    calls: list[str] = []

    def quiet(s: Add) -> None:
        calls.append("quiet")

    def boom(s: Add) -> dict[str, int]:
        calls.append("boom")
        if len(calls) < 3:
            raise ConnectionError("down")
        return {"value": 1}

    g = StateGraph(Add)
    g.add_node("quiet", quiet)
    g.add_node("boom", boom)
    g.add_edge(START, "quiet")
    g.add_edge(START, "boom")
    app = g.compile(checkpointer=cp)
    with pytest.raises(ConnectionError):
        app.invoke({"value": 1}, thread_id="t")
    assert app.invoke(None, thread_id="t") == {"value": 2}
    assert sorted(calls) == ["boom", "boom", "quiet"]


def test_a_failed_step_shows_the_finished_tasks_result_and_the_errors_repr(cp: Any) -> None:
    app = _parallel(cp, [True])
    with pytest.raises(ConnectionError):
        app.invoke({"value": 1}, thread_id="t")
    state = app.get_state(thread_id="t")
    assert state.values == {"value": 3} and state.next == ("two",)
    one, two = state.tasks
    assert one == StateTask(one.id, "one", (PULL, "one"), result={"value": 2})
    assert two == StateTask(two.id, "two", (PULL, "two"), 'ConnectionError("I\'m not good")')
    # the checkpoint named by id shows the same tasks, its writes left unapplied
    named = app.get_state(state.config)
    assert named.values == {"value": 1} and named.tasks == state.tasks


def test_the_input_checkpoints_start_task_has_the_input_as_its_result(cp: Any) -> None:
    app = _parallel(cp, [False])
    assert app.invoke({"value": 1}, thread_id="t") == {"value": 6}
    first = list(app.get_state_history(thread_id="t"))[-1]
    assert first.metadata["source"] == "input"
    assert [(t.name, t.path, t.result) for t in first.tasks] == [
        ("__start__", (PULL, "__start__"), {"value": 1})]


def test_a_send_task_has_a_push_path(cp: Any) -> None:
    class S(TypedDict):
        out: Annotated[list[int], operator.add]

    def fan(s: S) -> Command:
        return Command(goto=[Send("work", 1), Send("work", 2)])

    g = StateGraph(S)
    g.add_node("fan", fan)
    g.add_node("work", lambda n: {"out": [n]})
    g.add_edge(START, "fan")
    app = g.compile(checkpointer=cp, interrupt_before=["work"])
    app.invoke({"out": []}, thread_id="t")
    paths = [t.path for t in app.get_state(thread_id="t").tasks]
    assert paths == [(PUSH, 0, False), (PUSH, 1, False)]


class Foo(TypedDict):
    foo: str


def _chain(cp: Any) -> Any:
    g = StateGraph(Foo)
    g.add_node("agent", lambda s: {"foo": "agent"})
    g.add_node("tool", lambda s: {"foo": "tool"})
    g.add_edge(START, "agent")
    g.add_edge("agent", "tool")
    return g.compile(checkpointer=cp)


def _view(app: Any, thread: str) -> list[tuple[Any, ...]]:
    return [(s.values, s.next, s.metadata["step"], [t.name for t in s.tasks])
            for s in app.get_state_history(thread_id=thread)]


def test_bulk_updates_as_input_rebuild_the_history_of_two_runs(cp: Any) -> None:
    app = _chain(cp)
    app.invoke({"foo": "input"}, thread_id="ran")
    app.invoke({"foo": "input"}, thread_id="ran")
    turn = [
        [StateUpdate({"foo": "input"}, "__input__")],
        [StateUpdate({"foo": "input"}, "__start__")],
        [StateUpdate({"foo": "agent"}, "agent")],
        [StateUpdate({"foo": "tool"}, "tool")],
    ]
    config = app.bulk_update_state({"configurable": {"thread_id": "built"}}, turn * 2)
    assert app.get_state(config).values == {"foo": "tool"}
    assert _view(app, "built") == _view(app, "ran")
    # each update's writes are the result of the task it stands for
    built = list(app.get_state_history(thread_id="built"))
    assert [t.result for s in built for t in s.tasks][:3] == [
        {"foo": "tool"}, {"foo": "agent"}, {"foo": "input"}]


def test_several_updates_of_one_super_step_make_one_checkpoint(cp: Any) -> None:
    class Two(TypedDict):
        foo: str
        baz: str

    g = StateGraph(Two)
    g.add_node("a", lambda s: {"foo": "bar"})
    g.add_node("b", lambda s: {"baz": "qux"})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    app = g.compile(checkpointer=cp)
    config = {"configurable": {"thread_id": "t"}}
    app.bulk_update_state(config, [
        [StateUpdate({"foo": "bar"}, "a")],
        [StateUpdate({"foo": "updated"}, "a"), StateUpdate({"baz": "new"}, "b")],
    ])
    assert app.get_state(config).values == {"foo": "updated", "baz": "new"}
    assert len(list(cp.list(config))) == 2
    with pytest.raises(ValueError, match="No supersteps provided"):
        app.bulk_update_state(config, [])
    with pytest.raises(ValueError, match="No updates provided"):
        app.bulk_update_state(config, [[], []])
    for bad in (
        [StateUpdate({"foo": "x"}), StateUpdate({"baz": "y"})],  # several without as_node
        [StateUpdate(None, END), StateUpdate(None, "__copy__")],  # a clear among several
        [StateUpdate({"foo": "x"}, "__input__"), StateUpdate({"foo": "y"}, "a")],
        [StateUpdate({"foo": "x"}, "a"), StateUpdate({"foo": "y"}, "nope")],
    ):
        with pytest.raises(InvalidUpdateError):
            app.bulk_update_state(config, [bad])
    assert len(list(cp.list(config))) == 2  # nothing saved by a refused step


async def test_abulk_update_state_routes_a_commands_sends(cp: Any) -> None:
    class S(TypedDict):
        foo: str
        tasks: Annotated[list[int], operator.add]

    g = StateGraph(S)
    g.add_node("map", lambda s: {"foo": "map"})
    g.add_node("task", lambda s: {"tasks": [s["index"]]})
    g.add_edge(START, "map")
    app = g.compile(checkpointer=cp)
    sends = [Send("task", {"index": i}) for i in range(3)]
    config = await app.abulk_update_state({"configurable": {"thread_id": "t"}}, [
        [StateUpdate({"foo": "input"}, "__input__")],
        [StateUpdate({"foo": "input"}, "__start__")],
        [StateUpdate(Command(goto=sends, update={"foo": "map"}), "map")],
    ])
    state = await app.aget_state(config)
    assert state.next == ("task", "task", "task")
    config = await app.abulk_update_state(
        config, [[StateUpdate({"tasks": [i]}, "task") for i in range(3)]])
    state = await app.aget_state(config)
    assert state.values == {"foo": "map", "tasks": [0, 1, 2]} and state.next == ()


def test_a_copy_fork_updated_by_a_list_of_updates(cp: Any) -> None:
    app = _chain(cp)
    app.invoke({"foo": "input"}, thread_id="t")
    at_agent = next(s for s in app.get_state_history(thread_id="t") if s.next == ("agent",))
    config = app.update_state(at_agent.config, [StateUpdate({"foo": "agent*"}, "agent")],
                              as_node="__copy__")
    state = app.get_state(config)
    assert state.values == {"foo": "agent*"} and state.next == ("tool",)
    fork = app.get_state(state.parent_config)
    assert fork.metadata["source"] == "fork" and fork.parent_config == at_agent.parent_config
    assert [(t.name, t.result) for t in fork.tasks] == [("agent", {"foo": "agent*"})]
    with pytest.raises(InvalidUpdateError, match="Invalid update item"):
        app.update_state(at_agent.config, [5], as_node="__copy__")


def _double_then_note(cp: Any) -> Any:
    class S(TypedDict):
        num: int
        text: str
        log: Annotated[list[str], operator.add]

    g = StateGraph(S)
    g.add_node("double", lambda s: {"num": s["num"] * 2, "text": s["text"] * 2})
    g.add_node("note", lambda s: {"log": ["noted"]})
    g.add_edge(START, "double")
    g.add_edge("double", "note")
    return g.compile(checkpointer=cp)


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_history_shows_a_lone_tasks_result_even_for_a_reducer_key(
    cp: Any, durability: str
) -> None:
    # as LangGraph: a step of one task saves the task's writes with its checkpoint, so
    # its result is what it wrote (a reducer key too), also in get_state by checkpoint id
    app = _double_then_note(cp)
    app.invoke({"num": 1, "text": "one", "log": []}, thread_id="t", durability=durability)
    await app.ainvoke({"num": 1, "text": "one", "log": []}, thread_id="a",
                      durability=durability)
    for thread in ("t", "a"):
        history = list(app.get_state_history(thread_id=thread))
        tasks = [(t.name, t.result) for s in history for t in s.tasks]
        assert tasks == [("note", {"log": ["noted"]}), ("double", {"num": 2, "text": "oneone"}),
                         ("__start__", {"num": 1, "text": "one", "log": []})]
        older = app.get_state(history[1].config)
        assert [(t.name, t.result) for t in older.tasks] == [("note", {"log": ["noted"]})]


def test_a_lone_tasks_writes_and_checkpoint_are_one_save() -> None:
    # put_with_writes (one transaction; PostgreSQL: one round trip), never put_writes
    # then put; a step of several tasks saves each task's writes as it finishes
    from threadloom import InMemoryCheckpointer

    calls: list[str] = []

    class Counting(InMemoryCheckpointer):
        def put(self, *args: Any) -> Any:
            calls.append("put")
            return super().put(*args)

        def put_writes(self, *args: Any) -> Any:
            calls.append("put_writes")
            return super().put_writes(*args)

        def put_with_writes(self, *args: Any) -> Any:
            calls.append("put_with_writes")
            return super().put_with_writes(*args)

    _double_then_note(Counting()).invoke({"num": 1, "text": "one", "log": []}, thread_id="t")
    # the input checkpoint and its START writes, the START step, then one save per node
    assert calls == ["put", "put_writes", "put", "put_with_writes", "put_with_writes"]


def test_an_input_its_reducer_refuses_stays_pending_on_the_input_checkpoint() -> None:
    """The input's writes are saved before they are applied, as LangGraph's are: when a
    reducer refuses them, the thread's input checkpoint keeps them pending."""
    from threadloom import InMemoryCheckpointer

    def picky(current: list[str] | None, new: list[str]) -> list[str]:
        if "bad" in new:
            raise ValueError("no bad items")
        return [*(current or []), *new]

    class S(TypedDict):
        items: Annotated[list[str], picky]

    g = StateGraph(S)
    g.add_node("node", lambda s: {})
    g.add_edge(START, "node")
    cp = InMemoryCheckpointer()
    graph = g.compile(checkpointer=cp)
    graph.invoke({"items": ["ok"]}, thread_id="t")
    with pytest.raises(ValueError, match="no bad items"):
        graph.invoke({"items": ["bad"]}, thread_id="t")
    saved = cp.get_tuple({"configurable": {"thread_id": "t"}})
    assert saved.metadata["source"] == "input" and saved.checkpoint["next"] == [START]
    assert [(w.channel, w.value) for w in saved.pending_writes] == [("items", ["bad"])]
    with pytest.raises(ValueError, match="no bad items"):  # get_state applies it, as
        graph.get_state({"configurable": {"thread_id": "t"}})  # LangGraph's does


def test_the_tasks_stream_mode_sends_each_tasks_start_and_end(cp: Any) -> None:
    class S(TypedDict):
        foo: Annotated[str, lambda a, b: ", ".join(x for x in (a, b) if x)]

    g = StateGraph(S)
    g.add_node("one", lambda s: Command(update=[("foo", "one.0"), ("foo", "one.1")]))
    g.add_node("two", lambda s: {"foo": "two"})
    g.add_edge(START, "one")
    g.add_edge("one", "two")
    app = g.compile(checkpointer=cp)
    events = list(app.stream({"foo": "in"}, thread_id="t", stream_mode=["updates", "tasks"]))
    ids = [e[1].pop("id") for e in events if e[0] == "tasks"]
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
    assert events == [
        ("tasks", {"name": "one", "input": {"foo": "in"}, "triggers": ("branch:to:one",)}),
        ("updates", {"one": [{"foo": "one.0"}, {"foo": "one.1"}]}),  # one dict per write
        ("tasks", {"name": "one", "error": None,
                   "result": {"foo": {"$writes": ["one.0", "one.1"]}}, "interrupts": []}),
        ("tasks", {"name": "two", "input": {"foo": "in, one.0, one.1"},
                   "triggers": ("branch:to:two",)}),
        ("updates", {"two": {"foo": "two"}}),
        ("tasks", {"name": "two", "error": None, "result": {"foo": "two"}, "interrupts": []}),
    ]


def test_the_tasks_stream_mode_ends_a_failed_task_with_its_error(cp: Any) -> None:
    app = _parallel(cp, [True])
    ends = []
    with pytest.raises(ConnectionError):
        for event in app.stream({"value": 1}, thread_id="t", stream_mode="tasks"):
            if "error" in event:
                ends.append((event["name"], event["error"], event["result"]))
    assert sorted(ends) == [("one", None, {"value": 2}),
                            ("two", 'ConnectionError("I\'m not good")', {})]


def test_history_of_a_send_step_lists_sends_first_and_keeps_an_answered_interrupt(
    cp: Any,
) -> None:
    # as LangGraph's history: a step's Send tasks come first (path (PUSH, i, False)),
    # then the edge-triggered ones; a root-state graph's task result is the bare value;
    # a task resumed and finished keeps its interrupt and shows its result
    from threadloom import interrupt

    asked: list[int] = []

    def fan(state: list) -> list:
        return ["fan"]

    def ask(state: Any) -> list:
        asked.append(state)
        if len(asked) == 1:
            interrupt("ok?")
        return [f"ask|{state}"]

    g = StateGraph(Annotated[list, operator.add])
    g.add_node("fan", fan)
    g.add_node("ask", ask)
    g.add_node("side", lambda s: ["side"])
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", lambda s: [Send("ask", 1), "side"])
    app = g.compile(checkpointer=cp)
    app.invoke(["in"], thread_id="t")
    assert app.invoke(None, thread_id="t") == ["in", "fan", "side", "ask|1"]
    step = next(s for s in app.get_state_history(thread_id="t") if s.metadata["step"] == 1)
    assert step.next == ("ask", "side")
    assert [(t.name, t.path, t.result) for t in step.tasks] == [
        ("ask", (PUSH, 0, False), ["ask|1"]), ("side", (PULL, "side"), ["side"])]
    assert [i.value for i in step.tasks[0].interrupts] == ["ok?"]
    assert [i.value for i in step.interrupts] == ["ok?"]


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_a_lone_write_the_codec_cannot_store_still_saves_the_checkpoint(
    cp: Any, durability: str
) -> None:
    # a reducer's own marker object in a write: the state it makes is stored, the write
    # itself cannot be; the step's checkpoint is saved without the task's writes
    class Bump:  # not registered with the codec
        pass

    def count(current: int, update: Any) -> int:
        return (current or 0) + (1 if isinstance(update, Bump) else update)

    class S(TypedDict):
        n: Annotated[int, count]

    g = StateGraph(S)
    g.add_node("bump", lambda s: {"n": Bump()})
    g.add_edge(START, "bump")
    app = g.compile(checkpointer=cp)
    assert app.invoke({"n": 1}, thread_id="s", durability=durability) == {"n": 2}
    assert (await app.ainvoke({"n": 1}, thread_id="a", durability=durability)) == {"n": 2}
    for thread in ("s", "a"):
        assert app.get_state(thread_id=thread).values == {"n": 2}


def _input_graph(cp: Any) -> Any:
    class S(TypedDict):
        items: Annotated[list[Any], lambda a, b: [*(a or []), *b]]

    g = StateGraph(S)
    g.add_node("node", lambda s: {})
    g.add_edge(START, "node")
    return g.compile(checkpointer=cp)


def test_the_input_checkpoint_and_its_writes_are_one_save(any_backend: Any,
                                                           monkeypatch: Any) -> None:
    """With "sync" durability the input checkpoint and its START task's writes are one
    transaction (``put_with_own_writes``): a run saves three times (input, START step,
    node), no ``put_writes``; the writes read back as LangGraph's, under the START task."""
    commits: list[Any] = []
    commit = any_backend._commit
    monkeypatch.setattr(any_backend, "_commit", lambda *a: (commits.append(a[3]), commit(*a))[1])
    monkeypatch.setattr(any_backend, "put_writes", None)  # must not be called
    graph = _input_graph(any_backend)
    graph.invoke({"items": ["a"]}, thread_id="t")
    assert len(commits) == 3 and type(commits[0]).__name__ == "OwnWrites"
    first = next(s for s in graph.get_state_history({"configurable": {"thread_id": "t"}})
                 if s.metadata["source"] == "input")
    saved = any_backend.get_tuple(first.config)
    assert [(w.task_id, w.channel, w.value) for w in saved.pending_writes] == [
        (first.tasks[0].id, "items", ["a"])]
    assert first.tasks[0].name == START and first.tasks[0].result == {"items": ["a"]}


def test_an_input_the_codec_refuses_saves_nothing(any_backend: Any) -> None:
    """The input checkpoint is not left behind without its writes: the thread keeps what
    it held (LangGraph saves the checkpoint, then fails on the writes)."""
    graph = _input_graph(any_backend)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"items": ["a"]}, config)
    before = [s.config for s in graph.get_state_history(config)]
    with pytest.raises(SerializationError):
        graph.invoke({"items": [object()]}, config)
    assert [s.config for s in graph.get_state_history(config)] == before
    assert graph.invoke({"items": ["b"]}, config)["items"] == ["a", "b"]
