"""``get_input_jsonschema`` / ``get_output_jsonschema``, ``with_config`` and ``copy``,
as LangGraph's compiled graphs offer them."""

import operator
from dataclasses import dataclass, field
from typing import Annotated, NotRequired, Required, TypedDict

import pytest

from threadloom import START, StateGraph


class Overall(TypedDict):
    locations: list[str]
    results: Annotated[list[str], operator.add]


class Loose(TypedDict, total=False):
    a: str
    b: Required[str]
    c: Annotated[NotRequired[str], "meta"]


def _compiled(schema, **kw):
    g = StateGraph(schema, **kw)
    g.add_node("n", lambda s: {})
    g.add_edge(START, "n")
    return g.compile()


def test_typeddict_schema_is_pydantic_s_with_reducers_ignored():
    app = _compiled(Overall)
    assert app.get_input_jsonschema() == {
        "properties": {
            "locations": {"items": {"type": "string"}, "title": "Locations", "type": "array"},
            "results": {"items": {"type": "string"}, "title": "Results", "type": "array"}},
        "required": ["locations", "results"], "title": "Overall", "type": "object"}
    assert app.get_output_jsonschema() == app.get_input_jsonschema()


def test_required_follows_totality_and_required_markers():
    class Out(TypedDict):
        x: str
        y: NotRequired[int]

    app = _compiled(Loose, output_schema=Out)
    assert app.get_input_jsonschema()["required"] == ["b"]
    assert set(app.get_input_jsonschema()["properties"]) == {"a", "b", "c"}
    assert app.get_output_jsonschema()["required"] == ["x"]


def test_dataclass_fields_with_defaults_or_none_are_optional():
    @dataclass
    class D:
        need: str
        maybe: int | None
        tagged: Annotated[float | None, "x"]
        items: list[int] = field(default_factory=list)
        also_needed: str = field(default=...)  # type: ignore[assignment]
        plain: str = "d"

    schema = _compiled(D).get_input_jsonschema()
    assert set(schema["required"]) == {"need", "also_needed"}
    assert schema["title"] == "LangGraphInput"


def test_with_config_binds_config_under_each_call_and_copy_replaces_attributes():
    seen = []

    def node(state, config):
        seen.append((config["configurable"].get("user"), config["configurable"].get("x")))
        return {}

    g = StateGraph(Overall)
    g.add_node("n", node)
    g.add_edge(START, "n")
    app = g.compile()
    bound = app.with_config({"configurable": {"user": "ann"}}, run_name="named")
    assert bound is not app and bound.bound_config["run_name"] == "named"
    bound.invoke({"locations": [], "results": []}, {"configurable": {"x": 1}})
    app.invoke({"locations": [], "results": []})
    assert seen == [("ann", 1), (None, None)]
    assert bound.get_graph().to_json()["edges"][0] == {"source": "__start__", "target": "n"}
    clone = app.copy({"name": "other"})
    assert (clone.name, app.name) == ("other", app.name)
    spec = app.nodes["n"].copy({})
    assert spec == app.nodes["n"] and spec is not app.nodes["n"]


def test_a_reducer_that_cannot_take_two_values_is_refused_at_build():
    def bad(a):
        return a

    class Bad(TypedDict):
        hello: Annotated[str, bad]

    with pytest.raises(ValueError, match="Invalid reducer signature for state key 'hello'"):
        StateGraph(Bad)

    def with_default(a, b, c=None):
        return a + b

    class Fine(TypedDict):
        hello: Annotated[str, with_default]

    StateGraph(Fine)


def test_bad_pydantic_input_is_both_update_error_and_pydantic_validation_error():
    from pydantic import BaseModel, ValidationError

    from threadloom.errors import InvalidUpdateError

    class Q(BaseModel):
        query: str

    g = StateGraph(Q)
    g.add_node("n", lambda s: {})
    g.add_edge(START, "n")
    with pytest.raises(ValidationError) as info:
        g.compile().invoke({"query": {}})
    assert isinstance(info.value, InvalidUpdateError) and info.value.field == "query"
    assert "input key 'query' does not match" in str(info.value)
    assert info.value.errors()[0]["loc"] == ()


def test_updates_of_a_node_writing_a_key_twice_are_one_dict_per_write():
    from threadloom import Command

    class Foo(TypedDict):
        foo: Annotated[str, operator.add]

    g = StateGraph(Foo)
    g.add_node("node_a", lambda s: [Command(update={"foo": "a1"}), Command(update={"foo": "a2"})])
    g.add_node("node_b", lambda s: {"foo": "b"})
    g.add_edge(START, "node_a")
    g.add_edge("node_a", "node_b")
    app = g.compile()
    assert app.invoke({"foo": ""}) == {"foo": "a1a2b"}
    assert list(app.stream({"foo": ""}, stream_mode="updates")) == [
        {"node_a": [{"foo": "a1"}, {"foo": "a2"}]}, {"node_b": {"foo": "b"}}]


async def test_a_builders_node_shows_its_function_as_langgraphs_runnable():
    # LangGraph's builder.nodes[name].runnable.func (sync) / .afunc (async)
    class Counter:
        calls = 0

        def __call__(self, state: dict) -> dict:
            self.calls += 1
            return {}

    async def later(state: dict) -> dict:
        return {}

    class St(TypedDict):
        x: int

    counter = Counter()
    g = StateGraph(St)
    g.add_node("count", counter)
    g.add_node("later", later)
    assert g.nodes["count"].runnable.func is counter
    assert g.nodes["count"].runnable.afunc is None
    assert (g.nodes["later"].runnable.func, g.nodes["later"].runnable.afunc) == (None, later)
