"""@tool / Tool: schema from signatures, injected arguments, invocation, output formatting."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field, ValidationError

from threadloom.errors import ToolError
from threadloom.tools import (
    InjectedConfig,
    InjectedIdempotencyKey,
    InjectedState,
    InjectedToolCallId,
    Tool,
    format_tool_output,
    tool,
)


class Address(BaseModel):
    """A postal address."""

    street: str = Field(description="street and number")
    zip_code: int | None = None


class TreeNode(BaseModel):
    value: int
    children: list[TreeNode] = []


class Opaque:
    """Not a type pydantic can describe."""


class RunnableConfig(dict):
    """Stands in for a LangChain-style config type, recognised by its name."""


@tool
def get_weather(
    city: Annotated[str, "The city to look up"],
    unit: Literal["celsius", "fahrenheit"] = "celsius",
    days: Annotated[int, Field(ge=1, le=7, description="forecast length")] = 1,
    home: Optional[Address] = None,  # noqa: UP045 - the Optional spelling is what we test
    note: str | None = None,
) -> str:
    """Get the weather for a city.

    Uses the forecast service.

    Args:
        city: overridden by the Annotated description.
        unit: the temperature unit,
            celsius or fahrenheit.
        note (str): free text.

    Returns:
        A sentence.
    """
    return f"{city}:{unit}:{days}"


def test_bare_decorator_name_and_description_from_function() -> None:
    assert isinstance(get_weather, Tool)
    assert get_weather.name == "get_weather"
    assert get_weather.description == "Get the weather for a city.\n\nUses the forecast service."
    assert get_weather.return_direct is False


def test_schema_from_signature_has_openai_shape() -> None:
    schema = get_weather.json_schema()
    assert schema["type"] == "object"
    assert schema["required"] == ["city"]
    props = schema["properties"]
    assert list(props) == ["city", "unit", "days", "home", "note"]
    assert props["city"] == {"type": "string", "description": "The city to look up"}
    assert props["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert props["unit"]["default"] == "celsius"
    assert props["unit"]["description"] == "the temperature unit, celsius or fahrenheit."
    assert props["days"]["minimum"] == 1 and props["days"]["maximum"] == 7
    assert props["days"]["description"] == "forecast length"
    assert props["note"]["description"] == "free text."
    assert {"type": "null"} in props["note"]["anyOf"]


def test_nested_model_is_inlined_without_refs_or_titles() -> None:
    text = json.dumps(get_weather.json_schema())
    assert "$ref" not in text and "$defs" not in text and '"title"' not in text
    home = get_weather.json_schema()["properties"]["home"]
    obj = next(s for s in home["anyOf"] if s.get("type") == "object")
    assert obj["required"] == ["street"]
    assert obj["properties"]["street"]["description"] == "street and number"
    assert obj["description"] == "A postal address."


def test_property_named_title_and_default_dicts_survive_cleaning() -> None:
    @tool
    def publish(title: str, meta: dict = {"title": "x"}) -> str:  # noqa: B006
        """Publish."""
        return title

    props = publish.json_schema()["properties"]
    assert props["title"] == {"type": "string"}
    assert props["meta"]["default"] == {"title": "x"}


def test_recursive_model_does_not_loop() -> None:
    @tool
    def walk(root: TreeNode) -> int:
        """Walk a tree."""
        return root.value

    schema = walk.json_schema()
    assert schema["properties"]["root"]["properties"]["value"] == {"type": "integer"}
    assert walk.invoke({"root": {"value": 3, "children": [{"value": 4}]}}) == 3


def test_decorator_forms() -> None:
    @tool("lookup")
    def f1(q: str) -> str:
        """Find things."""
        return q

    @tool(name="final", description="Give the final answer.", return_direct=True)
    async def f2(answer: str) -> str:
        return answer

    assert (f1.name, f1.description, f1.return_direct) == ("lookup", "Find things.", False)
    assert (f2.name, f2.description, f2.return_direct) == ("final", "Give the final answer.", True)
    assert f2.coroutine is not None and f2.func is None
    assert f2.to_openai() == {
        "type": "function",
        "function": {
            "name": "final",
            "description": "Give the final answer.",
            "parameters": {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            },
        },
    }


def test_no_argument_tool_schema() -> None:
    @tool
    def now() -> str:
        """The time."""
        return "12:00"

    assert now.json_schema() == {"type": "object", "properties": {}, "required": []}
    assert now.invoke({}) == "12:00"


def test_tool_class_with_args_schema() -> None:
    class SearchArgs(BaseModel):
        query: str = Field(description="what to search")
        limit: int = 5

    def search(
        query: str, limit: int, call_id: Annotated[str, InjectedToolCallId], extra: Opaque = None
    ) -> list[str]:
        return [f"{query}@{call_id}"] * limit

    t = Tool("search", "Search the web.", func=search, args_schema=SearchArgs)
    assert t.json_schema()["properties"]["query"]["description"] == "what to search"
    assert t.json_schema()["required"] == ["query"]
    assert t.invoke({"query": "x", "limit": 2}, tool_call_id="c1") == ["x@c1", "x@c1"]
    assert t.invoke({"query": "y", "call_id": "forged"}, tool_call_id="c2") == ["y@c2"] * 5


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": "bad name!", "description": "", "func": print}, ValueError),
        ({"name": "ok", "description": ""}, ValueError),
        ({"name": "ok", "description": "", "func": print, "args_schema": dict}, TypeError),
    ],
)
def test_tool_constructor_errors(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Tool(**kwargs)


def test_unsupported_parameter_type_names_the_tool() -> None:
    def f(x: Opaque) -> str:
        return ""

    with pytest.raises(TypeError, match="'f': cannot build an argument schema"):
        tool(f)


def test_parameter_names_that_shadow_basemodel_attributes() -> None:
    @tool
    def weird(schema: int, json: str, copy: bool = False) -> str:
        """Odd names."""
        return f"{schema}|{json}|{copy}"

    assert list(weird.json_schema()["properties"]) == ["schema", "json", "copy"]
    assert weird.invoke({"schema": 2, "json": "j", "copy": True}) == "2|j|True"


# --- injected arguments ---------------------------------------------------------------


@tool
def injected_tool(
    city: str,
    state: Annotated[dict, InjectedState],
    user: Annotated[str, InjectedState("user_id")],
    call_id: Annotated[str, InjectedToolCallId],
    config: dict,
    cfg2: Annotated[dict, InjectedConfig],
    cfg3: RunnableConfig,
    key: Annotated[str, InjectedIdempotencyKey],
) -> dict:
    """Echo what was injected."""
    return {
        "city": city,
        "state": state,
        "user": user,
        "call_id": call_id,
        "config": config,
        "cfg2": cfg2,
        "cfg3": cfg3,
        "key": key,
    }


def test_injected_parameters_are_absent_from_the_schema() -> None:
    schema = injected_tool.json_schema()
    assert schema["properties"] == {"city": {"type": "string"}}
    assert schema["required"] == ["city"]
    assert set(injected_tool.injected_params) == {
        "state", "user", "call_id", "config", "cfg2", "cfg3", "key",
    }
    assert "state" not in json.dumps(injected_tool.to_openai())


def test_injected_values_are_filled_and_cannot_be_overridden() -> None:
    state = {"user_id": "u-1", "messages": []}
    config = {"configurable": {"thread_id": "t"}}
    forged = {
        "city": "Oslo",
        "state": {"user_id": "attacker"},
        "user": "attacker",
        "call_id": "forged",
        "config": {"configurable": {"thread_id": "other"}},
        "key": "forged",
    }
    out = injected_tool.invoke(
        forged, state=state, tool_call_id="c1", config=config, idempotency_key="t:ck:c1"
    )
    assert out == {
        "city": "Oslo",
        "state": state,
        "user": "u-1",
        "call_id": "c1",
        "config": config,
        "cfg2": config,
        "cfg3": config,
        "key": "t:ck:c1",
    }


def test_injected_state_key_from_object_state_and_key_defaults_to_call_id() -> None:
    class S:
        user_id = "u-obj"

    out = injected_tool.invoke({"city": "X"}, state=S(), tool_call_id="c9")
    assert out["user"] == "u-obj"
    assert out["key"] == "c9"
    assert out["config"] == {}


def test_plain_injected_state_annotation() -> None:
    @tool
    def peek(state: InjectedState) -> str:
        """Peek."""
        return str(sorted(state))

    assert peek.json_schema()["properties"] == {}
    assert peek.invoke({}, state={"b": 1, "a": 2}) == "['a', 'b']"


# --- invocation -----------------------------------------------------------------------


def test_invoke_validates_and_coerces() -> None:
    assert get_weather.invoke({"city": "Oslo", "days": "3"}) == "Oslo:celsius:3"


def test_validation_error_names_the_field() -> None:
    with pytest.raises(ToolError, match="days") as info:
        get_weather.invoke({"city": "Oslo", "days": 9})
    assert isinstance(info.value.__cause__, ValidationError)
    assert info.value.tool_name == "get_weather"
    with pytest.raises(ToolError, match="city"):
        get_weather.invoke({})
    with pytest.raises(ToolError, match="unit"):
        get_weather.invoke({"city": "Oslo", "unit": "kelvin"})


def test_non_dict_arguments_raise_tool_error() -> None:
    with pytest.raises(ToolError, match="JSON object"):
        get_weather.invoke(["Oslo"])  # type: ignore[arg-type]


def test_nested_model_argument_arrives_as_model() -> None:
    @tool
    def mail(to: Address) -> str:
        """Mail."""
        return type(to).__name__ + ":" + to.street

    assert mail.invoke({"to": {"street": "Main 1"}}) == "Address:Main 1"


async def test_async_tool_ainvoke() -> None:
    @tool
    async def double(x: int) -> int:
        """Double."""
        await asyncio.sleep(0)
        return 2 * x

    assert await double.ainvoke({"x": 21}) == 42
    with pytest.raises(RuntimeError, match="ainvoke"):
        double.invoke({"x": 1})


def test_async_only_tool_invoke_outside_a_loop() -> None:
    @tool
    async def double(x: int) -> int:
        """Double."""
        return 2 * x

    assert double.invoke({"x": 4}) == 8


async def test_sync_tool_ainvoke_runs_in_a_worker_thread() -> None:
    @tool
    def where() -> int:
        """Thread id."""
        return threading.get_ident()

    assert await where.ainvoke({}) != threading.get_ident()


def test_tool_is_still_callable_directly() -> None:
    assert get_weather("Rome", unit="fahrenheit") == "Rome:fahrenheit:1"


# --- output formatting ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        (None, ""),
        ({"temp": 21, "city": "Oslo"}, '{"temp": 21, "city": "Oslo"}'),
        ([1, "two"], '[1, "two"]'),
        (3.5, "3.5"),
        (Address(street="Main 1"), '{"street": "Main 1", "zip_code": null}'),
        (dt.date(2024, 5, 1), '"2024-05-01"'),
        ({"city": "Zürich"}, '{"city": "Zürich"}'),
    ],
)
def test_format_tool_output(value: Any, expected: str) -> None:
    assert format_tool_output(value) == expected


def test_format_tool_output_falls_back_to_str_for_unknown_objects() -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    assert json.loads(format_tool_output({"x": Thing()})) == {"x": "a thing"}
