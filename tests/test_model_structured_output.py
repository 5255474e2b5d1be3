"""``model.with_structured_output(Schema)``, as LangChain code calls it: function calling on
a model without a JSON mode (scripted), ``json_schema`` on the OpenAI adapter over real
HTTP on loopback; pydantic classes give instances, TypedDicts and schema dicts dicts."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import model_fixtures
import pytest
from providers_server import json_reply
from pydantic import BaseModel, Field

from threadloom import AIMessage, ScriptedChatModel
from threadloom.models import StructuredOutputError

# the shared pytest fixtures (a loopback server per module, a model factory)
_server_instance = model_fixtures._server_instance
_http_client = model_fixtures._http_client
provider_server = model_fixtures.provider_server
openai_model = model_fixtures.openai_model


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    celsius: float = Field(description="temperature in degrees Celsius")


class WeatherDict(TypedDict):
    city: str
    celsius: float


def _calling(args: dict[str, Any], seen: list[Any]) -> ScriptedChatModel:
    def reply(messages: list[Any], tools: list[dict] | None) -> Any:
        seen.append(tools)
        return {"tool_calls": [{"name": tools[0]["function"]["name"], "args": args}]}

    return ScriptedChatModel(reply)


def test_function_calling_gives_a_pydantic_instance() -> None:
    seen: list[Any] = []
    structured = _calling({"city": "Oslo", "celsius": 4}, seen).with_structured_output(Weather)
    assert structured.invoke("weather in Oslo?") == Weather(city="Oslo", celsius=4.0)
    tool = seen[0][0]["function"]
    assert tool["name"] == "Weather" and tool["description"] == "The weather in a city."
    assert tool["parameters"]["required"] == ["city", "celsius"]
    assert asyncio.run(structured.ainvoke("again")) == Weather(city="Oslo", celsius=4.0)


@pytest.mark.parametrize("schema", [WeatherDict, {"title": "weather", "type": "object",
                                                  "properties": {"city": {"type": "string"}}}])
def test_typeddicts_and_schema_dicts_give_dicts(schema: Any) -> None:
    seen: list[Any] = []
    out = _calling({"city": "Oslo", "celsius": 4}, seen).with_structured_output(schema)
    assert out.invoke("hi") == {"city": "Oslo", "celsius": 4}
    assert seen[0][0]["function"]["name"] in ("WeatherDict", "weather")


def test_a_reply_that_does_not_match_raises_or_comes_back_raw() -> None:
    model = _calling({"city": "Oslo"}, [])
    with pytest.raises(StructuredOutputError, match="celsius"):
        model.with_structured_output(Weather).invoke("hi")
    out = model.with_structured_output(Weather, include_raw=True).invoke("hi")
    assert isinstance(out["raw"], AIMessage) and out["parsed"] is None
    assert isinstance(out["parsing_error"], StructuredOutputError)
    plain = ScriptedChatModel(["no tool call here"])
    with pytest.raises(StructuredOutputError, match="did not call Weather"):
        plain.with_structured_output(Weather).invoke("hi")
    with pytest.raises(ValueError, match="method"):
        plain.with_structured_output(Weather, method="grammar")


def test_json_schema_on_the_openai_adapter_over_http(provider_server: Any,
                                                     openai_model: Any) -> None:
    provider_server.queue(json_reply({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": '{"city": "Oslo", "celsius": 4.5}'}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}))
    structured = openai_model().with_structured_output(Weather)
    assert structured.method == "json_schema"
    assert structured.invoke("weather in Oslo?") == Weather(city="Oslo", celsius=4.5)
    body = provider_server.last_json
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Weather"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["city", "celsius"]
    assert "tools" not in body


def test_bound_models_take_structured_output_too() -> None:
    seen: list[Any] = []
    model = _calling({"city": "Oslo", "celsius": 1}, seen).bind(temperature=0)
    assert model.with_structured_output(Weather).invoke("hi").celsius == 1.0
