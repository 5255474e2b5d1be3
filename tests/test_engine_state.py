"""State schemas, channels and reducers as the scheduler applies them."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import MutableSet, Sequence
from typing import Annotated, TypedDict

import pytest
from pydantic import BaseModel

from threadloom import (
    END,
    START,
    Ephemeral,
    InvalidUpdateError,
    Send,
    StateGraph,
    add_messages,
    merge_lists,
    replace_values,
)


class Counter(TypedDict):
    n: int
    log: Annotated[list[str], operator.add]


def _chain(schema, *fns):
    g = StateGraph(schema)
    g.add_sequence(list(fns))
    g.add_edge(START, fns[0].__name__)
    return g.compile()


def test_typeddict_last_value_and_reduced_channels():
    def inc(s: Counter):
        return {"n": s["n"] + 1, "log": [f"inc{s['n']}"]}

    def again(s: Counter):
        return {"n": s["n"] + 1, "log": ["again"]}

    out = _chain(Counter, inc, again).invoke({"n": 1})
    assert out == {"n": 3, "log": ["inc1", "again"]}


@dataclasses.dataclass
class DC:
    n: int = 0
    items: Annotated[list[int], operator.add] = dataclasses.field(default_factory=list)


class PM(BaseModel):
    n: int = 0
    items: Annotated[list[int], operator.add] = []


@pytest.mark.parametrize("schema", [DC, PM], ids=["dataclass", "pydantic"])
def test_dataclass_and_pydantic_schemas_pass_objects_to_nodes(schema):
    seen = []

    def first(s):
        seen.append(type(s))
        return {"n": s.n + 5, "items": [s.n]}

    def second(s):
        seen.append(type(s))
        return {"items": [s.n]}

    out = _chain(schema, first, second).invoke({"n": 1})
    assert out == {"n": 6, "items": [1, 6]}
    assert seen == [schema, schema]


def test_two_writes_to_a_last_value_key_name_the_key_and_nodes():
    class S(TypedDict):
        last: int

    g = StateGraph(S)
    g.add_node("w", lambda s: {"last": s["last"]})
    g.add_node("fan", lambda s: None)
    g.add_conditional_edges("fan", lambda s: [Send("w", {"last": i}) for i in (1, 2, 3)])
    g.add_edge(START, "fan")
    app = g.compile()
    with pytest.raises(InvalidUpdateError) as info:
        app.invoke({"last": 0})
    err = info.value
    assert err.field == "last"
    assert err.nodes == ("w", "w", "w")
    assert "reducer" in str(err) and "'last'" in str(err)


def test_parallel_writes_with_reducer_keep_send_order_whatever_finishes_first():
    import random
    import time

    class S(TypedDict):
        results: Annotated[list[int], operator.add]

    def worker(arg):
        time.sleep(random.random() * 0.02)
        return {"results": [arg["x"]]}

    g = StateGraph(S)
    g.add_node("worker", worker)
    g.add_conditional_edges(START, lambda s: [Send("worker", {"x": i}) for i in (1, 2, 3, 4, 5)])
    app = g.compile()
    for _ in range(5):
        assert app.invoke({"results": []})["results"] == [1, 2, 3, 4, 5]


def test_unknown_key_in_input_is_dropped_as_langgraph_drops_it():
    class S(TypedDict):
        a: int

    seen = []
    g = StateGraph(S)
    g.add_node("n", lambda s: seen.append(dict(s)))
    g.add_edge(START, "n")
    assert g.compile().invoke({"a": 1, "nope": 2}) == {"a": 1}
    assert seen == [{"a": 1}]


def test_non_dict_return_names_node_and_type():
    class S(TypedDict):
        a: int

    g = StateGraph(S)
    g.add_node("oops", lambda s: 42)
    g.add_edge(START, "oops")
    with pytest.raises(InvalidUpdateError, match=r"node 'oops' gave int 42 .* super-step 1"):
        g.compile().invoke({"a": 1})


def bad_reducer(a, b):
    if b == 2:
        raise ValueError("cannot merge")
    return b


class Strict(TypedDict):
    x: Annotated[int, bad_reducer]


def test_reducer_error_names_node_key_and_step():
    S = Strict
    g = StateGraph(S)
    g.add_node("w", lambda s: {"x": 2})
    g.add_edge(START, "w")
    with pytest.raises(ValueError, match="cannot merge") as info:
        g.compile().invoke({"x": 1})
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "'w'" in notes and "'x'" in notes and "super-step 1" in notes


def test_ephemeral_key_is_seen_by_the_next_step_then_cleared():
    class S(TypedDict):
        flag: Annotated[str | None, Ephemeral]
        seen: Annotated[list, operator.add]

    g = StateGraph(S)
    g.add_node("set", lambda s: {"flag": "on"})
    g.add_node("read1", lambda s: {"seen": [s.get("flag")]})
    g.add_node("read2", lambda s: {"seen": [s.get("flag")]})
    g.add_sequence([("x", lambda s: None)])
    g.add_edge(START, "set")
    g.add_edge("set", "read1")
    g.add_edge("read1", "read2")
    g.add_edge("read2", "x")
    out = g.compile().invoke({"seen": []})
    assert out["seen"] == ["on", None]
    assert "flag" not in out


def test_input_and_output_schemas_filter():
    class In(TypedDict):
        question: str

    class Out(TypedDict):
        answer: str

    class Full(In, Out):
        scratch: str

    g = StateGraph(Full, input_schema=In, output_schema=Out)
    g.add_node("think", lambda s: {"scratch": s["question"] * 2})
    g.add_node("say", lambda s: {"answer": s["scratch"].upper()})
    g.add_edge(START, "think")
    g.add_edge("think", "say")
    out = g.compile().invoke({"question": "hi"})
    assert out == {"answer": "HIHI"}


def test_private_channel_from_node_input_schema():
    class S(TypedDict):
        a: int

    class Private(TypedDict):
        secret: int

    g = StateGraph(S)
    g.add_node("w", lambda s: {"secret": 7})
    g.add_node("r", lambda s: {"a": s["secret"] + 1}, input_schema=Private)
    g.add_edge(START, "w")
    g.add_edge("w", "r")
    assert g.compile().invoke({"a": 0}) == {"a": 8}


def test_generic_reducers():
    class S(TypedDict):
        items: Annotated[list, merge_lists]
        mode: Annotated[str, replace_values]

    g = StateGraph(S)
    g.add_node("a", lambda s: {"items": "one", "mode": "x"})
    g.add_node("b", lambda s: {"items": ["two", "three"], "mode": "y"})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    assert g.compile().invoke({"items": [], "mode": "start"}) == {
        "items": ["one", "two", "three"], "mode": "y"}


def test_remove_message_on_key_without_add_messages_is_refused():
    from threadloom import RemoveMessage

    class S(TypedDict):
        msgs: list

    g = StateGraph(S)
    g.add_node("rm", lambda s: {"msgs": [RemoveMessage(id="1")]})
    g.add_edge(START, "rm")
    with pytest.raises(InvalidUpdateError, match="add_messages") as info:
        g.compile().invoke({"msgs": []})
    assert info.value.field == "msgs"


def test_end_edge_constant_and_command_update_object():
    class S(TypedDict):
        a: int

    g = StateGraph(S)
    g.add_node("set_a", lambda s: {"a": 1})
    g.add_edge(START, "set_a")
    g.add_edge("set_a", END)
    assert g.compile().invoke({"a": 0}) == {"a": 1}


def test_node_name_may_equal_a_state_key_but_not_a_reserved_name():
    from threadloom.errors import GraphBuildError

    class S(TypedDict):
        a: int

    g = StateGraph(S)
    g.add_node("a", lambda s: {"a": s["a"] + 1})  # accepted, as in LangGraph 1.2
    g.add_edge(START, "a")
    assert g.compile().invoke({"a": 1}) == {"a": 2}
    with pytest.raises(GraphBuildError, match="reserved"):
        g.add_node(END, lambda s: None)


class Typed(BaseModel):
    n: int
    tags: list[str] = []


def test_pydantic_state_validates_the_input_like_langgraph():
    g = StateGraph(Typed)
    g.add_node("inc", lambda s: {"n": s.n + 1})
    g.add_edge(START, "inc")
    app = g.compile()
    assert app.invoke({"n": "41"})["n"] == 42  # coerced as pydantic does
    with pytest.raises(InvalidUpdateError, match="'n'") as info:
        app.invoke({"n": "abc"})
    assert info.value.field == "n"
    with pytest.raises(InvalidUpdateError, match="missing required"):
        app.invoke({})
    with pytest.raises(InvalidUpdateError, match="'tags'"):
        app.invoke({"n": 1, "tags": 5})


def test_dataclass_state_missing_field_is_an_update_error():
    @dataclasses.dataclass
    class Needs:
        n: int

    g = StateGraph(Needs)
    g.add_node("inc", lambda s: {"n": s.n + 1})
    g.add_edge(START, "inc")
    with pytest.raises(InvalidUpdateError, match="Needs"):
        g.compile().invoke({})


def test_a_key_the_schema_lacks_is_dropped_from_a_node_return_and_update_state() -> None:
    # As LangGraph 1.2: {'a': 1, 'zzz': 2} from a node gives {'a': 1}; update_state with
    # only unknown keys saves a checkpoint that changes nothing.
    from typing import TypedDict

    from threadloom import START, InMemoryCheckpointer, StateGraph

    class S(TypedDict):
        a: int

    g = StateGraph(S)
    g.add_node("n", lambda s: {"a": s["a"] + 1, "zzz": 2})
    g.add_edge(START, "n")
    graph = g.compile(checkpointer=InMemoryCheckpointer())
    cfg = {"configurable": {"thread_id": "drop"}}
    assert graph.invoke({"a": 0}, cfg) == {"a": 1}
    graph.update_state(cfg, {"zzz": 3})
    assert graph.get_state(cfg).values == {"a": 1}


class _SeqMessages(TypedDict):
    hello: str
    messages: Annotated[Sequence[str], add_messages]


class _MutSet(TypedDict):
    tags: Annotated[MutableSet[str], operator.or_]


def test_abstract_collection_keys_start_empty_so_input_goes_through_the_reducer():
    """``Annotated[Sequence[...], add_messages]`` (older LangGraph tutorials): the input's
    string becomes a message, as LangGraph's reducer channel starts from an empty list."""
    seen = []
    g = StateGraph(_SeqMessages)
    g.add_node("a", lambda s: seen.append(s))
    g.add_edge(START, "a")
    out = g.compile().invoke({"hello": "there", "messages": "hi"})
    assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage"]
    assert out["messages"][0].content == "hi" and seen[0]["messages"] == out["messages"]

    g2 = StateGraph(_MutSet)
    g2.add_node("b", lambda s: {"tags": {"x"}})
    g2.add_edge(START, "b")
    assert g2.compile().invoke({"tags": {"y"}}) == {"tags": {"x", "y"}}
    assert g2.compile().invoke({}) == {"tags": {"x"}}
