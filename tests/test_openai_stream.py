"""OpenAIChatModel streaming: recorded SSE streams and the reported stream cases.

Each stream fixture is served both from its ``.json`` ``chunks`` and its raw ``.jsonl``
lines. Assertions compare the streamed chunks, their sum, and ``invoke`` inside a graph
run that streams ``messages`` (which streams internally).
"""

from __future__ import annotations

import json
from typing import Annotated, TypedDict

import model_fixtures
import pytest
from providers_server import load_fixture, stream_reply

from threadloom.engine.graph import StateGraph
from threadloom.messages import AIMessageChunk, HumanMessage
from threadloom.reducers import add_messages
from threadloom.types import END, START

_server_instance = model_fixtures._server_instance
_http_client = model_fixtures._http_client
provider_server = model_fixtures.provider_server
openai_model = model_fixtures.openai_model


def both(name):
    return pytest.mark.parametrize("fixture", [f"{name}.json", f"{name}.jsonl"])


def run_stream(server, make, fixture, **kw):
    server.queue(fixture)
    chunks = list(make(**kw).stream([HumanMessage("hi")]))
    assert len({c.id for c in chunks}) == 1  # one message id on every chunk
    return chunks, sum(chunks).to_message()


def chunk(delta=None, finish=None, usage=None, choices=True):
    body = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] \
        if choices else []
    if usage is not None:
        body["usage"] = usage
    return body


def tool_delta(args, index=None, id=None, name=None):  # noqa: A002 (wire name)
    call = {"function": {"arguments": args}}
    if index is not None:
        call["index"] = index
    if id is not None:
        call.update(id=id, type="function")
    if name is not None:
        call["function"]["name"] = name
    return chunk({"tool_calls": [call]})


# -- recorded streams -----------------------------------------------------------------------
@both("openai-stream-text-usage")
def test_text_with_usage_only_chunk(provider_server, openai_model, fixture):
    chunks, msg = run_stream(provider_server, openai_model, fixture)
    expected = "".join(c["choices"][0]["delta"].get("content") or ""
                       for c in load_fixture("openai-stream-text-usage")["chunks"][:-1]
                       if isinstance(c, dict) and c["choices"])
    assert msg.content == expected and len(chunks) > 5
    assert msg.usage == {"input_tokens": 14, "output_tokens": 30, "total_tokens": 44,
                         "output_token_details": {"reasoning": 0}}
    assert sum(c.usage_metadata is not None for c in chunks) == 1  # usage travels once
    assert msg.finish_reason == "stop"
    body = provider_server.last_json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


@both("openai-stream-tool-call-deltas")
def test_tool_args_over_seven_deltas(provider_server, openai_model, fixture):
    chunks, msg = run_stream(provider_server, openai_model, fixture)
    [tc] = msg.tool_calls
    assert tc == {"name": "get_weather", "args": {"city": "New York City"},
                  "id": "call_4XzlGBLtUe9dy3GVNV4jhq7h", "type": "tool_call"}
    assert sum(bool(c.tool_call_chunks) for c in chunks) >= 7


@both("openai-stream-tool-calls-parallel")
def test_parallel_calls_by_index(provider_server, openai_model, fixture):
    _, msg = run_stream(provider_server, openai_model, fixture)
    assert [c["name"] for c in msg.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert msg.tool_calls[0]["args"] == {"city": "Edinburgh", "country": "GB", "units": "c"}
    assert len({c["id"] for c in msg.tool_calls}) == 2


@both("openai-stream-length")
def test_length_on_empty_delta(provider_server, openai_model, fixture):
    _, msg = run_stream(provider_server, openai_model, fixture)
    assert msg.finish_reason == "length" and msg.content == '{"'
    assert msg.usage["total_tokens"] == 80


@both("openai-stream-refusal")
def test_refusal_accumulated_apart(provider_server, openai_model, fixture):
    _, msg = run_stream(provider_server, openai_model, fixture)
    assert msg.refusal.startswith("I'm sorry, I can't assist") and msg.content == ""


@both("azure-stream-content-filter")
def test_azure_stream_blocked(provider_server, openai_model, fixture):
    _, msg = run_stream(provider_server, openai_model, fixture)
    assert msg.finish_reason == "content_filter"
    assert msg.content == "Hey Jude, better"  # partial text already streamed
    assert msg.response_metadata["prompt_filter_results"][0]["prompt_index"] == 0
    assert msg.response_metadata["content_filter_results"]["protected_material_text"][
        "filtered"] is True


@both("ollama-stream-tool-calls-parallel")
def test_ollama_calls_whole_in_one_chunk(provider_server, openai_model, fixture):
    _, msg = run_stream(provider_server, openai_model, fixture)
    assert [(c["id"], c["args"]) for c in msg.tool_calls] == [
        ("call_wteop8bt", {"command": "ls"}), ("call_rk2xye1l", {"command": "ls -l"})]
    assert msg.finish_reason == "tool_calls" and msg.usage is None and msg.content == ""


@both("vllm-stream-tool-call-quirks")
def test_vllm_trailing_empty_delta_and_usage_everywhere(provider_server, openai_model, fixture):
    _, msg = run_stream(provider_server, openai_model, fixture)
    [tc] = msg.tool_calls  # the trailing arguments:"" delta added no call
    assert tc["name"] == "searchGoogle" and tc["args"] == {"query": "latest news on ai"}
    assert msg.usage == {"input_tokens": 226, "output_tokens": 20, "total_tokens": 246}


@both("deepseek-stream-reasoning")
def test_deepseek_reasoning_then_content(provider_server, openai_model, fixture):
    chunks, msg = run_stream(provider_server, openai_model, fixture)
    assert msg.reasoning_content.startswith('Hmm, the user just said "Hello')
    assert msg.content == "Hello there! 😊 How can I help you today?"
    first_text = next(i for i, c in enumerate(chunks) if c.content)
    assert all(not c.reasoning_content for c in chunks[first_text:])
    assert msg.usage["total_tokens"] == 218  # usage on the finish chunk itself


def test_llamacpp_partial_reasoning_with_timings(provider_server, openai_model):
    chunks, msg = run_stream(provider_server, openai_model,
                             "llamacpp-stream-reasoning-timings-partial.json")
    assert [c.reasoning_content for c in chunks if c.reasoning_content] == [" it", " handles"]
    assert msg.finish_reason is None and msg.content == ""


# -- reported cases -------------------------------------------------------------------------
def test_h19_deltas_without_index(provider_server, openai_model):
    provider_server.queue(stream_reply([
        tool_delta("", id="call_1", name="get_weather"), tool_delta('{"city":'),
        tool_delta('"Paris"}'), chunk(finish="tool_calls")]))
    msg = openai_model(streaming=True).invoke("weather?")
    assert msg.tool_calls == [{"name": "get_weather", "args": {"city": "Paris"},
                               "id": "call_1", "type": "tool_call"}]


def test_h20_every_call_says_index_0(provider_server, openai_model):
    provider_server.queue(stream_reply([
        tool_delta('{"path":"a"}', index=0, id="c_a", name="write_file"),
        tool_delta('{"path":"b"}', index=0, id="c_b", name="write_file"),
        chunk(finish="tool_calls")]))
    chunks = list(openai_model().stream("write"))
    msg = sum(chunks).to_message()
    assert [(c["id"], c["name"], c["args"]) for c in msg.tool_calls] == [
        ("c_a", "write_file", {"path": "a"}), ("c_b", "write_file", {"path": "b"})]


def test_h22_arguments_object_and_double_encoded_in_stream(provider_server, openai_model):
    provider_server.queue(stream_reply([
        tool_delta({"city": "Oslo"}, index=0, id="c1", name="w"),
        tool_delta(json.dumps(json.dumps({"city": "Oslo"})), index=1, id="c2", name="w"),
        chunk(finish="tool_calls")]))
    msg = openai_model(streaming=True).invoke("x")
    assert [c["args"] for c in msg.tool_calls] == [{"city": "Oslo"}, {"city": "Oslo"}]


@pytest.mark.parametrize("style", ["S1", "S2"])
def test_h25_usage_final_chunk_or_cumulative(provider_server, openai_model, style):
    if style == "S1":
        chunks = [chunk({"content": f"w{k}"}) for k in range(5)]
        chunks.append(chunk(choices=False, usage={"prompt_tokens": 713,
                                                  "completion_tokens": 5, "total_tokens": 718}))
    else:
        chunks = [chunk({"content": f"w{k}"}, usage={"prompt_tokens": 713,
                                                     "completion_tokens": k,
                                                     "total_tokens": 713 + k})
                  for k in range(1, 6)]
    provider_server.queue(stream_reply(chunks))
    streamed = list(openai_model().stream("x"))
    expected = {"input_tokens": 713, "output_tokens": 5, "total_tokens": 718}
    assert sum(streamed).usage_metadata == expected  # summing chunks does not double count
    provider_server.queue(stream_reply(chunks))
    assert openai_model(streaming=True).invoke("x").usage == expected


def test_h14_streamed_call_cut_by_length_is_not_runnable(provider_server, openai_model):
    provider_server.queue(stream_reply([
        tool_delta('{"path":"a.txt"}', index=0, id="c1", name="write_file"),
        tool_delta('{"path":"b.txt","content":"hel', index=1, id="c2", name="write_file"),
        chunk(finish="length")]))
    msg = openai_model(streaming=True).invoke("write")
    assert msg.tool_calls == []
    assert [c["id"] for c in msg.invalid_tool_calls] == ["c1", "c2"]
    for bad in msg.invalid_tool_calls:
        assert "truncated" in bad["error"] and "again in full" in bad["error"]
        assert bad["args"] is None  # raw text lives only inside the error


async def test_async_stream_and_invoke(provider_server, openai_model):
    model = openai_model()
    provider_server.queue("openai-stream-tool-call-deltas.jsonl")
    chunks = [c async for c in model.astream("weather?")]
    assert sum(chunks).to_message().tool_calls[0]["args"] == {"city": "New York City"}
    provider_server.queue("openai-chat-text.json")
    msg = await model.ainvoke("hi")
    assert msg.usage["total_tokens"] == 51


# -- token streaming into a graph run -------------------------------------------------------
class S(TypedDict):
    messages: Annotated[list, add_messages]


def graph_with(model, use_async=False):
    def node(state):
        return {"messages": [model.invoke(state["messages"])]}

    async def anode(state):
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(S)
    g.add_node("llm", anode if use_async else node)
    g.add_edge(START, "llm")
    g.add_edge("llm", END)
    return g.compile()


@pytest.mark.parametrize("use_async", [False, True])
async def test_invoke_streams_tokens_into_messages_mode(provider_server, openai_model,
                                                        use_async):
    app = graph_with(openai_model(), use_async)
    provider_server.queue("openai-stream-text-usage.jsonl")
    events = [e async for e in app.astream({"messages": [("user", "hi")]},
                                          stream_mode=["messages", "updates"])]
    tokens = [e[1] for e in events if e[0] == "messages"]
    [update] = [e[1] for e in events if e[0] == "updates"]
    final = update["llm"]["messages"][0]
    assert len(tokens) > 5 and all(isinstance(c, AIMessageChunk) for c, _ in tokens)
    assert {c.id for c, _ in tokens} == {final.id}  # streamed once, same id as the result
    assert "".join(c.text for c, _ in tokens) == final.content
    assert tokens[0][1]["langgraph_node"] == "llm"
    assert final.usage["total_tokens"] == 44
    assert provider_server.last_json["stream"] is True


def test_invoke_outside_messages_mode_does_not_stream(provider_server, openai_model):
    app = graph_with(openai_model())
    provider_server.queue("openai-chat-text.json")
    out = app.invoke({"messages": [("user", "hi")]})
    assert out["messages"][-1].finish_reason == "stop"
    assert "stream" not in provider_server.last_json


def test_h19_in_messages_mode_partial_chunks_then_one_message(provider_server, openai_model):
    provider_server.queue(stream_reply([
        tool_delta("", id="call_1", name="get_weather"), tool_delta('{"city":'),
        tool_delta('"Paris"}'), chunk(finish="tool_calls")]))
    app = graph_with(openai_model())
    events = list(app.stream({"messages": [("user", "hi")]}, stream_mode=["messages", "values"]))
    tool_chunks = [c for mode, (c, *_) in [e for e in events if e[0] == "messages"]
                   if c.tool_call_chunks]
    assert len(tool_chunks) == 3
    final = events[-1][1]["messages"][-1]
    assert final.tool_calls[0]["args"] == {"city": "Paris"} and final.id == tool_chunks[0].id


def test_every_provider_fixture_is_replayed_by_a_test():
    from pathlib import Path

    here = Path(__file__).parent
    sources = "".join((here / f).read_text() for f in
                      ("test_openai_model.py", "test_openai_stream.py", "test_cassette.py"))
    fixtures = sorted(p.name.split(".")[0] for p in (here / "fixtures" / "providers").iterdir()
                      if p.suffix in (".json", ".jsonl"))
    assert len(fixtures) >= 40
    assert [f for f in fixtures if f'"{f}' not in sources] == []


S1_CUMULATIVE = ["", '{"q": "a', '{"q": "ab', '{"q": "abc"}']
S2_FULL_RESEND = ['{"q": ', '"abc"}', '{"q": "abc"}']


@pytest.mark.parametrize("pieces", [S1_CUMULATIVE, S2_FULL_RESEND], ids=["cumulative", "resend"])
@pytest.mark.parametrize("path", ["invoke", "sum"])
def test_h45_arguments_resent_cumulatively_or_in_full(provider_server, openai_model, pieces,
                                                       path):
    deltas = [tool_delta(pieces[0], index=0, id="c1", name="search")]
    deltas += [tool_delta(p, index=0) for p in pieces[1:]]
    provider_server.queue(stream_reply([*deltas, chunk(finish="tool_calls")]))
    if path == "invoke":
        msg = openai_model(streaming=True).invoke("find")
    else:
        msg = sum(openai_model().stream("find")).to_message()
    assert [(c["id"], c["name"], c["args"]) for c in msg.tool_calls] == [
        ("c1", "search", {"q": "abc"})]
    assert msg.invalid_tool_calls == []


def test_h45_ordinary_deltas_still_append(provider_server, openai_model):
    provider_server.queue(stream_reply([
        tool_delta('{"q": "a', index=0, id="c1", name="search"), tool_delta('bc"}', index=0),
        chunk(finish="tool_calls")]))
    msg = openai_model(streaming=True).invoke("find")
    assert msg.tool_calls[0]["args"] == {"q": "abc"}
