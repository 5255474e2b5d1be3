"""response_format: the tool strategy and the provider-native JSON-schema strategy."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from threadloom.agent import (
    ProviderStrategy,
    StructuredOutputError,
    ToolStrategy,
    create_agent,
)
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.models import ScriptedChatModel


class Weather(BaseModel):
    """The weather report to return."""

    city: str
    celsius: float = Field(ge=-90, le=60)


def lookup(city: str) -> str:
    """Look the weather up."""
    return f"{city}: 21C"


def structured_call(args: Any, call_id: str = "s1") -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": "Weather", "args": args, "id": call_id}]}


def test_tool_strategy_validates_and_ends() -> None:
    model = ScriptedChatModel([
        {"content": "", "tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}, "id": "c1"}]},
        structured_call({"city": "Oslo", "celsius": 21}),
    ])
    agent = create_agent(model, tools=[lookup], response_format=Weather)
    out = agent.run("weather in Oslo?")
    assert out["structured_response"] == Weather(city="Oslo", celsius=21)
    assert out["exit_reason"] == "structured_response"
    offered = [t["function"]["name"] for t in model.calls[0]["tools"]]
    assert offered == ["lookup", "Weather"]
    assert model.calls[0]["tools"][1]["function"]["parameters"]["required"] == ["city", "celsius"]
    assert out["last_message"].type == "tool"
    assert out["last_message"].text.startswith("Returning structured response:")
    assert out["tool_call_counts"] == {"lookup": 1}


def test_tool_strategy_invalid_arguments_are_sent_back() -> None:
    model = ScriptedChatModel([
        structured_call({"city": "Oslo", "celsius": 999}, "s1"),
        structured_call({"city": "Oslo", "celsius": 20}, "s2"),
    ])
    out = create_agent(model, response_format=ToolStrategy(Weather)).run("x")
    assert out["structured_response"].celsius == 20 and len(model.calls) == 2
    error = next(m for m in model.calls[1]["messages"] if m.type == "tool")
    assert error.status == "error" and "celsius" in error.text and "Weather" in error.text


def test_structured_response_is_none_until_produced() -> None:
    out = create_agent(ScriptedChatModel(["just text"]), response_format=Weather).run("x")
    assert out["structured_response"] is None and out["exit_reason"] == "text"


def test_native_strategy_when_the_model_supports_it() -> None:
    model = ScriptedChatModel([json.dumps({"city": "Bergen", "celsius": 12.5})])
    model.supports_structured_output = True
    out = create_agent(model, response_format=Weather).run("x")
    assert out["structured_response"] == Weather(city="Bergen", celsius=12.5)
    assert out["exit_reason"] == "structured_response"
    fmt = model.calls[0]["kwargs"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Weather"
    assert fmt["json_schema"]["schema"]["properties"]["city"] == {"title": "City",
                                                                  "type": "string"}
    assert model.calls[0]["tools"] is None


def test_native_strategy_with_tools_and_a_fenced_reply() -> None:
    model = ScriptedChatModel([
        {"content": "", "tool_calls": [{"name": "lookup", "args": {"city": "Oslo"}, "id": "c1"}]},
        '```json\n{"city": "Oslo", "celsius": 21}\n```',
    ])
    out = create_agent(model, tools=[lookup], response_format=ProviderStrategy(Weather)).run("x")
    assert out["structured_response"].city == "Oslo"
    assert [t["function"]["name"] for t in model.calls[0]["tools"]] == ["lookup"]


def test_native_strategy_invalid_reply_raises() -> None:
    model = ScriptedChatModel(['{"city": "Oslo"}'])
    model.supports_structured_output = True
    with pytest.raises(StructuredOutputError, match="celsius"):
        create_agent(model, response_format=Weather).run("x")


def test_bad_response_format_and_tool_strategy_without_tools() -> None:
    with pytest.raises(TypeError, match="response_format"):
        create_agent(ScriptedChatModel(["x"]), response_format={"type": "json"})
    model = ScriptedChatModel(["x"])
    model.supports_tools = False
    with pytest.raises(TypeError, match="cannot take tools"):
        create_agent(model, response_format=Weather)


def test_structured_response_survives_the_checkpoint(tmp_path: Any) -> None:
    cp = SqliteCheckpointer(str(tmp_path / "s.db"))
    model = ScriptedChatModel([structured_call({"city": "Oslo", "celsius": 3})])
    agent = create_agent(model, response_format=Weather, checkpointer=cp)
    agent.run("x", thread_id="s")
    again = create_agent(ScriptedChatModel([]), response_format=Weather, checkpointer=cp)
    stored = again.get_state(thread_id="s").values["structured_response"]
    assert stored == Weather(city="Oslo", celsius=3)
    cp.close()
