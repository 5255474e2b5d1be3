"""RecordingChatModel / ReplayChatModel: record a real (loopback) model, replay offline."""

from __future__ import annotations

import json

import model_fixtures
import pytest

from threadloom.messages import HumanMessage, ToolMessage
from threadloom.models import (
    CassetteMismatchError,
    RecordingChatModel,
    ReplayChatModel,
    ScriptedChatModel,
)

_server_instance = model_fixtures._server_instance
_http_client = model_fixtures._http_client
provider_server = model_fixtures.provider_server
openai_model = model_fixtures.openai_model

WEATHER = model_fixtures.WEATHER


def conversation(model):
    """A two-turn tool conversation; returns the replies."""
    first = model.invoke([HumanMessage("weather in NYC?")], tools=[WEATHER], temperature=0)
    history = [HumanMessage("weather in NYC?"), first,
               ToolMessage("sunny", tool_call_id=first.tool_calls[0]["id"])]
    second = model.invoke(history, tools=[WEATHER], temperature=0)
    return first, second


@pytest.fixture
def recorded(tmp_path, provider_server, openai_model):
    provider_server.queue("openai-chat-tool-call-single.json", "openai-chat-text.json")
    path = tmp_path / "cassettes" / "weather.json"
    replies = conversation(RecordingChatModel(openai_model(), path))
    return path, replies


def test_record_then_replay_offline(recorded, provider_server):
    path, (first, second) = recorded
    replay = ReplayChatModel(path)
    r1, r2 = conversation(replay)
    assert r1.tool_calls == first.tool_calls and r2.content == second.content
    assert r2.usage == second.usage and r2.finish_reason == "stop"
    assert len(provider_server.requests) == 2  # replay sent nothing


def test_cassette_holds_no_secrets(recorded):
    path, _ = recorded
    text = path.read_text()
    assert "sk-test-SECRET-1234" not in text and "authorization" not in text.lower()
    assert "127.0.0.1" not in text
    data = json.loads(text)
    assert data["version"] == 1 and len(data["interactions"]) == 2
    request = data["interactions"][0]["request"]
    assert request["messages"][0]["content"] == "weather in NYC?"
    assert request["tools"] == [WEATHER] and request["kwargs"] == {"temperature": 0}


def test_replay_names_the_first_difference(recorded):
    path, _ = recorded
    replay = ReplayChatModel(path)
    with pytest.raises(CassetteMismatchError) as info:
        replay.invoke([HumanMessage("weather in Paris?")], tools=[WEATHER], temperature=0)
    err = info.value
    assert err.field == "messages[0].content" and err.index == 0
    assert "'weather in NYC?'" in str(err) and "'weather in Paris?'" in str(err)
    with pytest.raises(CassetteMismatchError, match=r"kwargs\.temperature"):
        ReplayChatModel(path).invoke([HumanMessage("weather in NYC?")], tools=[WEATHER],
                                     temperature=1)


def test_replay_past_the_end(recorded):
    path, _ = recorded
    replay = ReplayChatModel(path)
    conversation(replay)
    with pytest.raises(CassetteMismatchError, match="call #3 has no recording"):
        replay.invoke("again")


def test_record_streamed_and_replay_streams(tmp_path, provider_server, openai_model):
    provider_server.queue("openai-stream-tool-call-deltas.jsonl")
    path = tmp_path / "s.json"
    chunks = list(RecordingChatModel(openai_model(), path).stream("weather?", tools=[WEATHER]))
    recorded = sum(chunks).to_message()
    replayed = list(ReplayChatModel(path).stream("weather?", tools=[WEATHER]))
    assert len(replayed) > 3
    assert sum(replayed).to_message().tool_calls == recorded.tool_calls
    assert sum(replayed).usage_metadata == recorded.usage


async def test_async_record_and_replay(tmp_path):
    path = tmp_path / "a.json"
    recorder = RecordingChatModel(ScriptedChatModel(["hello world"]), path)
    assert (await recorder.ainvoke("hi")).content == "hello world"
    assert (await ReplayChatModel(path).ainvoke("hi")).content == "hello world"


def test_not_a_cassette(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"interactions": []}')
    with pytest.raises(ValueError, match="not a version-1 threadloom cassette"):
        ReplayChatModel(bad)
