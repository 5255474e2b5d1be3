"""``Overwrite`` writes and ``UntrackedValue`` keys, as LangGraph has them.

``Overwrite(value)`` (or its JSON forms) written to a reduced key replaces the value,
bypassing the reducer; two in one super-step are an ``InvalidUpdateError``. A key marked
``UntrackedValue`` is seen by the run's nodes but never saved: not in checkpoints, saved
writes or ``Send`` packets. Run on every checkpointer backend.
"""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import (
    END,
    START,
    InMemoryCheckpointer,
    InvalidUpdateError,
    Overwrite,
    Send,
    StateGraph,
    UntrackedValue,
    add_messages,
)
from threadloom.messages import AIMessage, HumanMessage


@pytest.fixture
def saver(any_backend):  # type: ignore[no-untyped-def]
    """A fresh checkpointer of each backend (conftest's ``any_backend``)."""
    return any_backend


class Log(TypedDict):
    messages: Annotated[list, operator.add]


_FORMS = {
    "typed": lambda v: Overwrite(v),
    "sentinel": lambda v: {"__overwrite__": v},
    "json": lambda v: {"type": "__overwrite__", "value": v},
}


def _writer(update: Any) -> Any:
    return lambda state: {"messages": update}


@pytest.mark.parametrize("form", sorted(_FORMS))
def test_overwrite_replaces_a_reduced_value(saver: Any, form: str) -> None:
    builder = StateGraph(Log)
    builder.add_node("a", _writer(["a"]))
    builder.add_node("b", _writer(_FORMS[form](["b"])))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": form}}
    assert graph.invoke({"messages": ["START"]}, config) == {"messages": ["b"]}
    assert graph.get_state(config).values == {"messages": ["b"]}


def test_overwrite_in_a_parallel_step_drops_the_later_plain_writes(saver: Any) -> None:
    builder = StateGraph(Log)
    for name, update in (("a", ["a"]), ("b", Overwrite(["b"])), ("c", ["c"]), ("d", ["d"])):
        builder.add_node(name, _writer(update))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("a", "c")
    builder.add_edge("b", "d")
    builder.add_edge("c", "d")
    graph = builder.compile(checkpointer=saver)
    out = graph.invoke({"messages": ["START"]}, {"configurable": {"thread_id": "p"}})
    assert out == {"messages": ["b", "d"]}


def test_two_overwrites_in_one_step_are_refused(saver: Any) -> None:
    builder = StateGraph(Log)
    builder.add_node("a", _writer(["a"]))
    builder.add_node("b", _writer(Overwrite(["b"])))
    builder.add_node("c", _writer({"__overwrite__": ["c"]}))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("a", "c")
    builder.add_edge("b", END)
    builder.add_edge("c", END)
    graph = builder.compile(checkpointer=saver)
    with pytest.raises(InvalidUpdateError, match="only one Overwrite value per super-step"):
        graph.invoke({"messages": ["START"]}, {"configurable": {"thread_id": "e"}})


def test_overwrite_of_a_messages_key() -> None:
    class Chat(TypedDict):
        messages: Annotated[list, add_messages]

    builder = StateGraph(Chat)
    builder.add_node("reset", lambda s: {"messages": Overwrite([AIMessage(content="fresh")])})
    builder.add_edge(START, "reset")
    out = builder.compile().invoke({"messages": [HumanMessage(content="old")]})
    assert [m.content for m in out["messages"]] == ["fresh"]


class _Resource:
    """A value the codec cannot store (it holds a lock)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Lock()


class Session(TypedDict):
    messages: Annotated[list[str], operator.add]
    resource: Annotated[_Resource, UntrackedValue]


def test_untracked_value_is_seen_by_nodes_and_sends_but_never_saved(saver: Any) -> None:
    def setup(state: Session) -> dict[str, Any]:
        return {"messages": ["setup"], "resource": _Resource("first")}

    def fan(state: Session) -> list[Send]:
        return [Send("use", state)]

    def use(state: Session) -> dict[str, Any]:
        assert state["resource"].name == "first"
        return {"messages": [f"used {state['resource'].name}"], "resource": _Resource("next")}

    builder = StateGraph(Session)
    builder.add_node("setup", setup)
    builder.add_node("use", use)
    builder.add_edge(START, "setup")
    builder.add_conditional_edges("setup", fan)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "u"}}
    out = graph.invoke({}, config)
    assert out["messages"] == ["setup", "used first"]
    assert out["resource"].name == "next"
    assert "resource" not in graph.get_state(config).values
    for snap in graph.get_state_history(config):
        assert "resource" not in snap.values


def test_untracked_key_inside_a_send_argument_is_dropped_only_at_the_top(saver: Any) -> None:
    class State(TypedDict):
        dictionary: dict
        secret: Annotated[str, UntrackedValue]

    def fan(state: State) -> list[Send]:
        return [Send("tool", {"dictionary": {"secret": "nested"}, "secret": "top"})]

    def tool(state: State) -> dict[str, Any]:
        assert state == {"dictionary": {"secret": "nested"}, "secret": "top"}
        return {"dictionary": state["dictionary"], "secret": "new"}

    builder = StateGraph(State)
    builder.add_node("setup", lambda s: {})
    builder.add_node("tool", tool)
    builder.add_edge(START, "setup")
    builder.add_conditional_edges("setup", fan)
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "k"}}
    assert graph.invoke({}, config)["secret"] == "new"
    values = graph.get_state(config).values
    assert "secret" not in values
    assert values["dictionary"] == {"secret": "nested"}


def test_untracked_value_instances_and_their_guard() -> None:
    class Guarded(TypedDict):
        note: Annotated[str, UntrackedValue(str)]

    class Unguarded(TypedDict):
        note: Annotated[str, UntrackedValue(str, guard=False)]

    for schema, refused in ((Guarded, True), (Unguarded, False)):
        builder = StateGraph(schema)
        builder.add_node("a", lambda s: {"note": "a"})
        builder.add_node("b", lambda s: {"note": "b"})
        builder.add_edge(START, "a")
        builder.add_edge(START, "b")
        graph = builder.compile(checkpointer=InMemoryCheckpointer())
        config = {"configurable": {"thread_id": "g"}}
        if refused:
            with pytest.raises(InvalidUpdateError, match="note"):
                graph.invoke({}, config)
        else:
            assert graph.invoke({}, config) == {"note": "b"}
            assert graph.get_state(config).values == {}
