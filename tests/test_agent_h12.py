"""H12: an empty assistant reply left after a malformed tool call was dropped.

The agent does not exit on it, the next request carries no contentless assistant message,
and the run ends on the next reply with its usage counted."""

from __future__ import annotations

import json
from typing import Any

import model_fixtures
import pytest
from providers_server import json_reply

from threadloom import create_agent, tool

_server_instance = model_fixtures._server_instance
_http_client = model_fixtures._http_client
provider_server = model_fixtures.provider_server
openai_model = model_fixtures.openai_model


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _completion(message: dict[str, Any], finish: str, usage: tuple[int, int]) -> Any:
    return json_reply({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message},
                     "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                  "total_tokens": sum(usage)}})


DROPPED = {"content": None}  # what an adapter that dropped the bad call left
BAD_CALL = {"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
    "name": "lookup", "arguments": "{bad json"}}]}


@pytest.mark.parametrize("first", [DROPPED, BAD_CALL], ids=["dropped", "bad-json"])
def test_h12_no_exit_and_no_contentless_assistant_message(provider_server, openai_model,
                                                          first: dict[str, Any]) -> None:
    provider_server.queue(_completion(first, "tool_calls", (10, 5)),
                          _completion({"content": "final answer"}, "stop", (20, 3)))
    agent = create_agent(openai_model(), [lookup], exit_conditions=["text"])
    out = agent.run(messages="look up k")
    assert out["exit_reason"] == "text" and out["last_message"].text == "final answer"
    assert out["token_usage"]["total_tokens"] == 38
    sent = provider_server.last_json["messages"]
    for message in sent:
        if message["role"] == "assistant":
            assert message.get("content") or message.get("tool_calls"), json.dumps(sent)


def test_h12_a_cut_off_empty_reply_stops_with_length(provider_server, openai_model) -> None:
    provider_server.queue(_completion(DROPPED, "length", (10, 5)))
    out = create_agent(openai_model(), [lookup]).run(messages="look up k")
    assert out["exit_reason"] == "length"
