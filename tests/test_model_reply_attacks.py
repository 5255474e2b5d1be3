"""Malformed 200 replies and hostile tool-call lists, over real HTTP on loopback (issue 17).

A provider (or a proxy in front of it) can answer 200 with anything: an HTML page, a
JSON string or list, ``choices`` as an object, ``usage`` as a string, SSE lines that are
not JSON, arguments nested 100,000 deep. Each must be a ``ModelError`` naming the model
and its URL and what was wrong, on every path (invoke, stream, streamed invoke, async),
never a raw ``AttributeError``/``KeyError``/``RecursionError`` from the model node.

Tool calls: two calls sharing an id each run and each gets its own result; a reply with
more calls than the model's ``max_tool_calls`` (default 128) runs none.
"""

from __future__ import annotations

import asyncio
from typing import Any

import model_fixtures
import pytest
from providers_server import Reply, json_reply, sse_body

from threadloom import create_agent, tool
from threadloom.errors import ModelError
from threadloom.messages import AIMessage, HumanMessage, ToolMessage
from threadloom.models.tool_calls import MAX_TOOL_CALLS

_server_instance = model_fixtures._server_instance
_http_client = model_fixtures._http_client
provider_server = model_fixtures.provider_server
openai_model = model_fixtures.openai_model

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000
OK_CHOICE = {"index": 0, "message": {"role": "assistant", "content": "hi"},
             "finish_reason": "stop"}


def _call(call_id: str, name: str = "get_weather", args: str = '{"city": "Oslo"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _tool_reply(calls: list[dict[str, Any]]) -> Reply:
    return json_reply({"id": "r1", "model": "m", "choices": [{"index": 0, "finish_reason":
                      "tool_calls", "message": {"role": "assistant", "content": None,
                                                "tool_calls": calls}}]})


def _chunk(**fields: Any) -> dict[str, Any]:
    return {"id": "r1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            **fields}


def _sse(raw: bytes) -> Reply:
    return Reply(200, raw, "text/event-stream")


PLAIN = {  # name -> (reply, words the error must contain)
    "an HTML page": (Reply(200, b"<html><body>502 Bad gateway</body></html>", "text/html"),
                     "not JSON"),
    "HTML labelled JSON": (Reply(200, b"<html>oops</html>"), "not JSON"),
    "a JSON string": (Reply(200, b'"hello"'), "JSON string"),
    "a JSON list": (Reply(200, b"[1, 2]"), "JSON list"),
    "JSON null": (Reply(200, b"null"), "JSON null"),
    "choices an object": (json_reply({"choices": {"0": OK_CHOICE}}), "choices"),
    "choices of strings": (json_reply({"choices": ["x"]}), "choices[0]"),
    "message a string": (json_reply({"choices": [{"message": "x"}]}), "message"),
    "usage a string": (json_reply({"choices": [OK_CHOICE], "usage": "lots"}), "usage"),
    "token count text": (json_reply({"choices": [OK_CHOICE], "usage": {"prompt_tokens": "x"}}),
                         "malformed reply"),
    "tool_calls an object": (json_reply({"choices": [{"message": {
        "role": "assistant", "tool_calls": {"a": 1}}}]}), "malformed reply"),
    "content an object": (json_reply({"choices": [{"message": {
        "role": "assistant", "content": {"a": 1}}}]}), "malformed reply"),
    "arguments 100,000 deep": (_tool_reply([_call("c1", args=DEEP)]), "nested too deeply"),
    "body 100,000 deep": (Reply(200, b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
                          "nested too deeply"),
}

STREAMED = {
    "SSE garbage": (_sse(b"data: {not json\n\ndata: [DONE]\n\n"), "malformed stream chunk"),
    "a chunk that is a list": (_sse(b"data: [1, 2]\n\ndata: [DONE]\n\n"),
                               "malformed stream chunk"),
    "a chunk that is a string": (_sse(b'data: "x"\n\ndata: [DONE]\n\n'),
                                 "malformed stream chunk"),
    "chunk choices an object": (_sse(sse_body([_chunk(choices={"a": 1}), "[DONE]"])),
                                "malformed stream chunk"),
    "stream usage a string": (_sse(sse_body([_chunk(choices=[], usage="lots"), "[DONE]"])),
                              "malformed stream usage"),
    "HTML as an event stream": (_sse(b"<html>oops</html>"), "without a single chunk"),
    "streamed arguments 100,000 deep": (_sse(sse_body([_chunk(choices=[{"index": 0, "delta": {
        "tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": DEEP}}]
    }}]), "[DONE]"])), "nested too deeply"),
}


def _assert_model_error(exc: BaseException, server: Any, words: str) -> None:
    assert type(exc) is ModelError, f"{type(exc).__name__}: {exc}"
    text = str(exc)
    assert "model 'test-model' at " + server.base_url in text, text
    assert words in text, text
    assert len(text) < 800, text  # a short line, not the whole body


@pytest.mark.parametrize("name", list(PLAIN))
@pytest.mark.parametrize("path", ["invoke", "ainvoke"])
def test_a_malformed_reply_is_a_model_error(provider_server, openai_model, name, path):
    reply, words = PLAIN[name]
    provider_server.queue(reply)
    model = openai_model()
    with pytest.raises(Exception) as caught:
        if path == "invoke":
            model.invoke([HumanMessage("hi")])
        else:
            asyncio.run(model.ainvoke([HumanMessage("hi")]))
    _assert_model_error(caught.value, provider_server, words)


async def _drain(model: Any) -> None:
    async for _ in model.astream([HumanMessage("hi")]):
        pass


@pytest.mark.parametrize("name", list(STREAMED))
@pytest.mark.parametrize("path", ["stream", "astream", "streamed invoke"])
def test_a_malformed_stream_is_a_model_error(provider_server, openai_model, name, path):
    reply, words = STREAMED[name]
    provider_server.queue(reply)
    if name.startswith("streamed arguments") and path != "streamed invoke":
        words = ""  # the chunks themselves are fine; only assembling them parses the args
    model = openai_model(streaming=path == "streamed invoke")
    try:
        if path == "stream":
            list(model.stream([HumanMessage("hi")]))
        elif path == "astream":
            asyncio.run(_drain(model))
        else:
            model.invoke([HumanMessage("hi")])
    except Exception as exc:  # noqa: BLE001 - checked below
        _assert_model_error(exc, provider_server, words)
    else:
        assert not words, f"{name} via {path}: no error"


# -- tool calls ---------------------------------------------------------------------------

def test_two_calls_with_one_id_each_run_and_each_get_a_result(provider_server, openai_model):
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        ran.append(city)
        return f"sunny in {city}"

    provider_server.queue(
        _tool_reply([_call("dup", args='{"city": "Oslo"}'), _call("dup", args='{"city": "Rome"}')]),
        json_reply({"choices": [OK_CHOICE]}),
    )
    agent = create_agent(openai_model(), tools=[get_weather])
    messages = agent.invoke({"messages": [HumanMessage("weather?")]})["messages"]
    asked = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    ids = [c["id"] for c in asked.tool_calls]
    assert ids[0] == "dup" and ids[1] != "dup" and len(set(ids)) == 2
    results = {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}
    assert sorted(ran) == ["Oslo", "Rome"]
    assert results == {ids[0]: "sunny in Oslo", ids[1]: "sunny in Rome"}
    sent = provider_server.requests[-1]["json"]["messages"]  # what the model saw back
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


def test_a_reply_over_the_tool_call_cap_runs_nothing(provider_server, openai_model):
    ran: list[int] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        ran.append(1)
        return "sunny"

    many = [_call(f"c{i}") for i in range(10_000)]
    provider_server.queue(_tool_reply(many))
    agent = create_agent(openai_model(), tools=[get_weather])
    with pytest.raises(ModelError, match=rf"10000 tool calls, more than max_tool_calls="
                                         rf"{MAX_TOOL_CALLS}; none was run"):
        agent.invoke({"messages": [HumanMessage("weather?")]})
    assert ran == []

    raised = openai_model()
    raised.max_tool_calls = 200  # configurable per model
    provider_server.queue(_tool_reply(many[:200]))
    assert len(raised.invoke([HumanMessage("hi")]).tool_calls) == 200
    provider_server.queue(_tool_reply(many[:201]))
    with pytest.raises(ModelError, match="201 tool calls"):
        raised.invoke([HumanMessage("hi")])
    uncapped = openai_model()
    uncapped.max_tool_calls = None
    provider_server.queue(_tool_reply(many[:1000]))
    assert len(uncapped.invoke([HumanMessage("hi")]).tool_calls) == 1000


def test_the_cap_holds_for_streamed_replies(provider_server, openai_model):
    deltas = [{"index": i, "id": f"c{i}", "function": {"name": "get_weather",
                                                       "arguments": "{}"}} for i in range(300)]
    body = sse_body([_chunk(choices=[{"index": 0, "delta": {"tool_calls": deltas}}]), "[DONE]"])
    provider_server.queue(_sse(body))
    with pytest.raises(ModelError, match="300 tool calls"):
        openai_model(streaming=True).invoke([HumanMessage("hi")])


def test_the_agent_streaming_callback_path_keeps_the_models_own_cap(provider_server,
                                                                    openai_model):
    """With ``streaming_callback`` the agent assembles the reply itself; it must apply the
    model's ``max_tool_calls`` (raised or lowered), not the default cap."""
    deltas = [{"index": i, "id": f"c{i}", "function": {"name": "get_weather",
                                                       "arguments": '{"city": "Oslo"}'}}
              for i in range(150)]
    body = sse_body([_chunk(choices=[{"index": 0, "delta": {"tool_calls": deltas}}]),
                     _chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
                     "[DONE]"])
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        ran.append(city)
        return "sunny"

    raised = openai_model(streaming=True)
    raised.max_tool_calls = 200
    provider_server.queue(_sse(body))
    provider_server.queue(_sse(sse_body([
        _chunk(choices=[{"index": 0, "delta": {"role": "assistant", "content": "done"}}]),
        _chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]), "[DONE]"])))
    chunks: list[Any] = []
    agent = create_agent(raised, tools=[get_weather], streaming_callback=chunks.append)
    out = agent.invoke({"messages": [HumanMessage("weather?")]})
    assert len(ran) == 150 and out["messages"][-1].content == "done" and chunks

    lowered = openai_model(streaming=True)
    lowered.max_tool_calls = 100
    provider_server.queue(_sse(body))
    agent = create_agent(lowered, tools=[get_weather], streaming_callback=chunks.append)
    with pytest.raises(ModelError, match="150 tool calls, more than max_tool_calls=100"):
        agent.invoke({"messages": [HumanMessage("weather?")]})
