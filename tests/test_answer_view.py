"""The messages stream of a JSON-schema tool-prompting reply shows the answer, not JSON."""

from __future__ import annotations

import json
from typing import Annotated, TypedDict

import pytest

from threadloom import START, AIMessageChunk, StateGraph, add_messages
from threadloom.models.answer_view import FinalAnswerView
from threadloom.models.openai import OpenAIChatModel


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 100])
def test_final_answer_text_is_decoded_across_any_chunking(size):
    answer = 'It is 18 °C, "sunny"\\ and\nwindy \u263a'
    raw = " " + json.dumps({"final_answer": answer})
    view = FinalAnswerView()
    assert "".join(view.feed(p) for p in _pieces(raw, size)) == answer


@pytest.mark.parametrize("size", [1, 4, 100])
def test_a_tool_call_shows_nothing(size):
    raw = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})
    view = FinalAnswerView()
    assert "".join(view.feed(p) for p in _pieces(raw, size)) == ""


class _JsonModel(OpenAIChatModel):
    """A json_schema-mode model whose provider stream is canned."""

    def _stream(self, msgs, tools, opts):
        raw = json.dumps({"final_answer": "Sunny in Paris."})
        for piece in _pieces(raw, 3):
            yield AIMessageChunk(content=piece, id="m1")
        yield AIMessageChunk(content="", id="m1",
                             usage_metadata={"input_tokens": 5, "output_tokens": 7,
                                             "total_tokens": 12})


def test_messages_mode_streams_the_answer_and_the_reply_parses():
    model = _JsonModel("x", base_url="http://127.0.0.1:9/v1", api_key="k",
                       tool_calling="json_schema")
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}

    class S(TypedDict):
        messages: Annotated[list, add_messages]

    g = StateGraph(S)
    g.add_node("model", lambda s: {"messages": [model.invoke(s["messages"], tools=[weather])]})
    g.add_edge(START, "model")
    events = list(g.compile().stream({"messages": [("user", "weather?")]},
                                     stream_mode=["messages", "values"]))
    shown = "".join(m.content for mode, (m, _) in
                    [(mode, p) for mode, p in events if mode == "messages"])
    assert shown == "Sunny in Paris."
    final = [p for mode, p in events if mode == "values"][-1]["messages"][-1]
    assert final.text == "Sunny in Paris." and not final.tool_calls
    assert final.usage_metadata["total_tokens"] == 12
