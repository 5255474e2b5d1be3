"""What nodes and routers read of the state (LangGraph's channel reads): a hint narrows
to its schema's keys; no hint reads the state schema's keys, not the keys only other
schemas (output, private inputs) declare; a router without a hint reads what its
source node reads."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadloom import END, START, StateGraph


class Overall(TypedDict):
    foo: Annotated[int, operator.add]
    bar: str


class Private(TypedDict):
    baz: str


class Out(TypedDict):
    echo: dict


def test_an_unhinted_node_reads_only_the_state_schemas_keys(any_backend: Any) -> None:
    seen: list[dict[str, Any]] = []

    def first(state: Overall) -> dict[str, Any]:
        return {"foo": 1, "baz": "private", "echo": {"x": 1}}

    def second(state):  # noqa: ANN001 - no hint on purpose
        seen.append(dict(state))
        return {"foo": 1}

    def third(state: Private) -> dict[str, Any]:
        seen.append(dict(state))
        return {}

    builder = StateGraph(Overall, output_schema=Out)  # "echo" is an output-only key
    builder.add_sequence([("first", first), ("second", second), ("third", third)])
    builder.add_edge(START, "first")
    builder.add_edge("third", END)
    app = builder.compile(checkpointer=any_backend)
    out = app.invoke({"foo": 0, "bar": "b"}, {"configurable": {"thread_id": "t"}})
    assert out == {"echo": {"x": 1}}
    assert seen == [{"foo": 1, "bar": "b"}, {"baz": "private"}]


def test_routers_read_their_hint_or_their_source_nodes_keys() -> None:
    routed: list[dict[str, Any]] = []

    def node_1(state: Overall) -> dict[str, Any]:
        return {"foo": 1, "baz": "meow"}

    def node_2(state: Private) -> dict[str, Any]:
        return {"foo": 1, "bar": state["baz"]}

    def by_overall(state: Overall) -> str:
        routed.append(dict(state))
        return END

    def by_private(state: Private) -> str:
        routed.append(dict(state))
        return "node_2"

    def unhinted(state):  # noqa: ANN001 - reads what node_2 reads
        routed.append(dict(state))
        return END

    builder = StateGraph(Overall)
    builder.add_node(node_1)
    builder.add_node(node_2)
    builder.add_edge(START, "node_1")
    builder.add_conditional_edges("node_1", by_private)
    builder.add_conditional_edges("node_2", by_overall)
    builder.add_conditional_edges("node_2", unhinted)
    assert builder.compile().invoke({"foo": 0}) == {"foo": 2, "bar": "meow"}
    assert routed == [{"baz": "meow"}, {"foo": 2, "bar": "meow"}, {"baz": "meow"}]


def test_without_extra_channels_nodes_read_the_whole_state() -> None:
    def node(state):  # noqa: ANN001
        return {"foo": 1}

    builder = StateGraph(Overall)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    app = builder.compile()
    assert app.nodes["node"].input_keys is None  # the fast path: no narrowing
    assert app.invoke({"foo": 1, "bar": "x"}) == {"foo": 2, "bar": "x"}


def test_a_pydantic_states_validators_run_on_the_input(any_backend: Any) -> None:
    from pydantic import BaseModel, field_validator, model_validator

    from threadloom.errors import InputValidationError

    class State(BaseModel):
        name: str
        text: str = ""
        flag: int = 13

        @field_validator("name", mode="after")
        @classmethod
        def capital(cls, value: str) -> str:
            if value[0].islower():
                raise ValueError("Name must start with a capital letter")
            return "Validated " + value

        @model_validator(mode="before")
        @classmethod
        def mark(cls, values: Any) -> Any:
            return values | {"flag": 392}

    seen: list[Any] = []

    def node(state: State) -> dict[str, Any]:
        seen.append(state)
        return {"text": f"Hello, {state.name}!"}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    app = builder.compile(checkpointer=any_backend)
    out = app.invoke({"name": "John"}, {"configurable": {"thread_id": "t"}})
    assert out["text"] == "Hello, Validated John!"
    assert seen == [State.model_validate({"name": "John"})]
    assert seen[0].flag == 392
    with pytest.raises(InputValidationError, match="capital letter"):
        app.invoke({"name": "john"}, {"configurable": {"thread_id": "t2"}})


def test_a_pydantic_node_reads_nested_models_a_node_wrote_as_dicts(any_backend: Any) -> None:
    import datetime

    from pydantic import BaseModel

    class Inner(BaseModel):
        v: int

    class State(BaseModel):
        inner: Inner
        wait: datetime.timedelta

    seen: list[Any] = []

    def write(state: State) -> dict[str, Any]:
        return {"inner": {"v": 5}, "wait": 7}

    def read(state: State) -> dict[str, Any]:
        seen.append((state.inner, state.wait))
        return {}

    builder = StateGraph(State)
    builder.add_sequence([write, read])
    builder.add_edge(START, "write")
    app = builder.compile(checkpointer=any_backend)
    out = app.invoke({"inner": {"v": 1}, "wait": 3}, {"configurable": {"thread_id": "t"}})
    assert seen == [(Inner(v=5), datetime.timedelta(seconds=7))]
    assert out == {"inner": {"v": 5}, "wait": 7}  # stored as written, as LangGraph
