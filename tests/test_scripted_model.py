"""ScriptedChatModel: replies in order, streams like a real model, records its calls."""

from __future__ import annotations

import model_fixtures
import pytest

from threadloom.errors import ScriptExhaustedError
from threadloom.messages import AIMessage, HumanMessage
from threadloom.models import ChatModel, ScriptedChatModel

WEATHER = model_fixtures.WEATHER


def test_replies_in_order_of_every_kind():
    model = ScriptedChatModel([
        "hello there",
        {"content": "", "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
        AIMessage("done", id="fixed-id"),
        {"content": "cut", "finish_reason": "length",
         "usage": {"input_tokens": 7, "output_tokens": 1}},
    ])
    assert isinstance(model, ChatModel) and model.supports_tools
    first = model.invoke("hi")
    assert first.content == "hello there" and first.finish_reason == "stop"
    second = model.invoke("weather?", tools=[WEATHER])
    assert second.tool_calls == [{"name": "get_weather", "args": {"city": "Oslo"},
                                  "id": second.tool_calls[0]["id"], "type": "tool_call"}]
    assert second.tool_calls[0]["id"].startswith("call_")
    assert second.finish_reason == "tool_calls"
    assert model.invoke("x").id == "fixed-id"
    fourth = model.invoke("x")
    assert fourth.finish_reason == "length"
    assert fourth.usage == {"input_tokens": 7, "output_tokens": 1, "total_tokens": 8}


def test_calls_are_recorded():
    model = ScriptedChatModel(["a", "b"])
    model.invoke([HumanMessage("one")], tools=[WEATHER], tool_choice="auto", temperature=0)
    model.invoke("two")
    assert [c["messages"][-1].content for c in model.calls] == ["one", "two"]
    assert model.calls[0]["tools"] == [WEATHER] and model.calls[1]["tools"] is None
    assert model.calls[0]["kwargs"] == {"tool_choice": "auto", "temperature": 0}


def test_streams_text_and_tool_args_in_pieces():
    model = ScriptedChatModel([{
        "content": "let me check the weather",
        "tool_calls": [{"name": "get_weather", "args": {"city": "San Francisco"}, "id": "c9"}],
    }])
    chunks = list(model.stream("weather?"))
    text = [c.content for c in chunks if c.content]
    tool = [c.tool_call_chunks[0] for c in chunks if c.tool_call_chunks]
    assert len(text) == 5 and "".join(text) == "let me check the weather"
    assert len(tool) >= 3 and tool[0]["id"] == "c9" and tool[1]["id"] is None
    assert len({c.id for c in chunks}) == 1
    merged = sum(chunks).to_message()
    assert merged.tool_calls[0]["args"] == {"city": "San Francisco"}
    assert merged.usage is not None and merged.finish_reason == "tool_calls"


def test_default_usage_is_an_estimate():
    msg = ScriptedChatModel(["x" * 40]).invoke("y" * 80)
    assert msg.usage == {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}


def test_callable_script_sees_messages_and_tools():
    def reply(messages, tools):
        names = [t["function"]["name"] for t in tools or []]
        return f"{len(messages)} messages, tools {names}"

    model = ScriptedChatModel(reply)
    assert model.invoke(["a", "b"], tools=[WEATHER]).content == \
        "2 messages, tools ['get_weather']"
    assert model.invoke("a").content == "1 messages, tools []"


def test_raw_string_args_reproduce_truncation():
    model = ScriptedChatModel([{"tool_calls": [
        {"name": "write_file", "args": '{"path":"a.txt","content":"hel', "id": "c1"}],
        "finish_reason": "tool_calls"}])
    msg = model.invoke("write")
    assert msg.tool_calls == [] and msg.invalid_tool_calls[0]["id"] == "c1"
    assert "again in full" in msg.invalid_tool_calls[0]["error"]


def test_exhausted_script_names_the_count():
    model = ScriptedChatModel(["only"])
    model.invoke("a")
    with pytest.raises(ScriptExhaustedError, match="called 2 times .* only 1 replies"):
        model.invoke("b")


def test_bad_script_entries():
    with pytest.raises(TypeError, match="wrap it in a list"):
        ScriptedChatModel("hello")
    with pytest.raises(ValueError, match="unknown keys"):
        ScriptedChatModel([{"contents": "typo"}]).invoke("x")


def test_deterministic_across_instances():
    script = ["hello world", {"tool_calls": [{"name": "f", "args": {"a": 1}}]}]
    runs = []
    for _ in range(2):
        model = ScriptedChatModel(script)
        msgs = [model.invoke("q"), model.invoke("q")]
        runs.append([(m.content, m.tool_calls, m.usage) for m in msgs])
    assert runs[0] == runs[1]


async def test_async_twins():
    model = ScriptedChatModel(["one two", "three"])
    chunks = [c async for c in model.astream("x")]
    assert "".join(c.content for c in chunks) == "one two"
    assert (await model.ainvoke("y")).content == "three"
