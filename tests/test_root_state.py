"""Root-channel graphs: a state schema that is one value, not a record of keys.

As LangGraph: ``StateGraph(list)``, ``StateGraph(list[str])``,
``StateGraph(Annotated[list, operator.add])`` and a messages list keep the whole state in
one channel, ``__root__``; nodes take and return the bare value, ``invoke`` returns it,
``get_state().values`` is it, and ``updates`` stream ``{node: value}``. Run on every
checkpointer backend (memory, SQLite, PostgreSQL).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict

import pytest

from threadloom import (
    END,
    START,
    AIMessage,
    AnyMessage,
    Command,
    HumanMessage,
    RemoveMessage,
    Send,
    StateGraph,
    add_messages,
    interrupt,
)
from threadloom.errors import GraphBuildError


@pytest.fixture
def saver(any_backend):  # type: ignore[no-untyped-def]
    """A fresh checkpointer of each backend (conftest's ``any_backend``)."""
    return any_backend


class _Named:
    """A node object that appends its own name (or ``name|arg`` for a Send argument)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = name

    def __call__(self, state: Any) -> list[str]:
        return [self.name] if isinstance(state, list) else [f"{self.name}|{state}"]


def _fan_out_graph() -> StateGraph:
    def send_twice(state: list[str]) -> list[Send]:
        return [Send("2", state), Send("2", state)]

    def to_three(state: list[str]) -> Literal["3"]:
        return "3"

    builder = StateGraph(Annotated[list, operator.add])
    for name in ("1", "2", "3"):
        builder.add_node(_Named(name))
    builder.add_edge(START, "1")
    builder.add_conditional_edges("1", send_twice)
    builder.add_conditional_edges("2", to_three)
    return builder


def test_reduced_root_list_runs_sends_and_returns_the_bare_value() -> None:
    graph = _fan_out_graph().compile()
    assert graph.invoke(["0"]) == ["0", "1", "2", "2", "3"]
    assert list(graph.stream(["0"], stream_mode="updates")) == [
        {"1": ["1"]}, {"2": ["2"]}, {"2": ["2"]}, {"3": ["3"]},
    ]
    assert list(graph.stream(["0"], stream_mode="values"))[-1] == ["0", "1", "2", "2", "3"]


def test_root_state_is_checkpointed_and_shown_bare(saver: Any) -> None:
    graph = _fan_out_graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    assert graph.invoke(["0"], config) == ["0", "1", "2", "2", "3"]
    assert graph.get_state(config).values == ["0", "1", "2", "2", "3"]
    history = list(graph.get_state_history(config))
    assert history[0].values == ["0", "1", "2", "2", "3"]
    assert history[-1].values == []  # the input checkpoint: the reducer's empty start
    # a second run continues from the saved value
    assert graph.invoke(["x"], config)[-5:] == ["x", "1", "2", "2", "3"]


def test_last_value_root_and_plain_list_schema() -> None:
    def add_a(state: list[str]) -> list[str]:
        return [s + "a" for s in state]

    for schema in (list[str], list):
        graph = StateGraph(schema).add_node(add_a).add_edge(START, "add_a").compile()
        assert graph.invoke(["x", "y"]) == ["xa", "ya"]


def test_root_commands_mixed_and_several_updates_of_one_node() -> None:
    def mixed(state: list[str]) -> list[Any]:
        return [Command(update=["a"]), ["b"]]

    graph = StateGraph(Annotated[list[str], operator.add])
    graph = graph.add_node(mixed).add_edge(START, "mixed").compile()
    assert graph.invoke([]) == ["a", "b"]

    def node_a(state: str) -> list[Command]:
        return [Command(update="a1"), Command(update="a2")]

    def node_b(state: str) -> str:
        return "b"

    graph = (
        StateGraph(Annotated[str, operator.add])
        .add_sequence([node_a, node_b])
        .add_edge(START, "node_a")
        .compile()
    )
    assert graph.invoke("") == "a1a2b"
    assert list(graph.stream("", stream_mode="updates")) == [
        {"node_a": ["a1", "a2"]},
        {"node_b": "b"},
    ]


def test_root_messages_list_with_remove(saver: Any) -> None:
    builder = StateGraph(Annotated[list[AnyMessage], add_messages])
    builder.add_node("chatbot", lambda state: [AIMessage(content="Hello"),
                                               AIMessage(content="How can I help?")])
    builder.add_node("trim", lambda state: [RemoveMessage(id=state[-2].id)])
    builder.add_edge(START, "chatbot")
    builder.add_edge("chatbot", "trim")
    builder.add_edge("trim", END)
    app = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "m"}}
    out = app.invoke([HumanMessage(content="Hi")], config)
    assert [m.content for m in out] == ["Hi", "How can I help?"]
    app.update_state(config, [RemoveMessage(id=out[-1].id)])
    assert [m.content for m in app.get_state(config).values] == ["Hi"]


def test_root_graph_pauses_and_resumes(saver: Any) -> None:
    def ask(state: list[str]) -> list[str]:
        return [interrupt("more?")]

    graph = StateGraph(Annotated[list, operator.add]).add_node(ask).add_edge(START, "ask")
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "p"}}
    paused = app.invoke(["q"], config)
    assert list(paused) == ["__interrupt__"]  # a bare value has no keys: only the pause
    assert paused["__interrupt__"][0].value == "more?"
    assert app.invoke(Command(resume="yes"), config) == ["q", "yes"]


def test_root_graph_as_a_nested_invoke_and_subgraph() -> None:
    inner = StateGraph(list).add_node("twice", lambda s: s + s).add_edge(START, "twice")
    child = inner.compile()

    def call_child(state: list[int]) -> list[int]:
        return child.invoke(state)

    outer = StateGraph(list).add_node(call_child).add_edge(START, "call_child").compile()
    assert outer.invoke([1]) == [1, 1]
    as_node = StateGraph(list).add_node("child", child).add_edge(START, "child").compile()
    assert as_node.invoke([2]) == [2, 2]


def test_dict_schemas_are_unchanged_and_plain_classes_still_refused() -> None:
    class State(TypedDict):
        foo: Annotated[str, operator.add]

    graph = StateGraph(State).add_node("n", lambda s: {"foo": "b"}).add_edge(START, "n")
    assert graph.compile().invoke({"foo": "a"}) == {"foo": "ab"}

    class Plain:
        x: int

    with pytest.raises(GraphBuildError, match="not a TypedDict"):
        StateGraph(Plain)


def test_exit_durability_keeps_the_finished_tasks_of_a_paused_step(saver: Any) -> None:
    """As LangGraph: with ``durability="exit"`` a pause saves the writes of the step's
    tasks that finished, so resuming does not run them again."""
    calls = {"a": 0, "b": 0}

    def a(state: list[str]) -> list[str]:
        calls["a"] += 1
        return ["a"]

    def b(state: list[str]) -> list[str]:
        calls["b"] += 1
        return [interrupt("b?")]

    builder = StateGraph(Annotated[list, operator.add]).add_node(a).add_node(b)
    builder.add_edge(START, "a").add_edge(START, "b")
    app = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "x"}}
    assert "__interrupt__" in app.invoke(["0"], config, durability="exit")
    assert app.invoke(Command(resume="B"), config, durability="exit") == ["0", "a", "B"]
    assert calls == {"a": 1, "b": 2}


def test_max_concurrency_caps_the_tasks_running_at_once() -> None:
    import asyncio

    seen = {"now": 0, "most": 0}

    async def work(item: int) -> list[int]:
        seen["now"] += 1
        seen["most"] = max(seen["most"], seen["now"])
        await asyncio.sleep(0.01)
        seen["now"] -= 1
        return [item]

    builder = StateGraph(Annotated[list, operator.add]).add_node("work", work)
    builder.add_node("fan", lambda s: ["fan"])
    builder.add_edge(START, "fan")
    builder.add_conditional_edges("fan", lambda s: [Send("work", i) for i in range(12)])
    graph = builder.compile()
    assert graph.invoke([], {"max_concurrency": 3}) == ["fan", *range(12)]
    assert seen["most"] == 3
    seen["most"] = 0
    assert graph.invoke([]) == ["fan", *range(12)]
    assert seen["most"] == 12


def test_command_repr_shows_the_fields_set() -> None:
    assert repr(Command(goto=Send("2", 3))) == "Command(goto=Send(node='2', arg=3))"
    assert repr(Command(update=["a"], resume=1)) == "Command(update=['a'], resume=1)"


def test_updates_of_a_key_written_twice_by_one_node_come_one_by_one() -> None:
    class State(TypedDict):
        foo: Annotated[str, operator.add]

    def node_a(state: State) -> list[Command]:
        return [Command(update={"foo": "a1"}), Command(update={"foo": "a2"})]

    graph = (
        StateGraph(State)
        .add_sequence([node_a, ("node_b", lambda s: {"foo": "b"})])
        .add_edge(START, "node_a")
        .compile()
    )
    assert graph.invoke({"foo": ""}) == {"foo": "a1a2b"}
    assert list(graph.stream({"foo": ""}, stream_mode="updates")) == [
        {"node_a": [{"foo": "a1"}, {"foo": "a2"}]},
        {"node_b": {"foo": "b"}},
    ]
