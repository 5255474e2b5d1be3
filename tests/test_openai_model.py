"""OpenAIChatModel, non-streamed: real `openai` client -> loopback server -> recorded payloads.

Every non-stream fixture in tests/fixtures/providers is replayed here; the README there
says what each must prove. Streams are in test_openai_stream.py.
"""

from __future__ import annotations

import json

import model_fixtures
import pytest
from providers_server import json_reply, load_fixture

from threadloom.errors import (
    ContentFilterError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    RateLimitError,
)
from threadloom.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from threadloom.models import OpenAIChatModel, init_chat_model, tool_to_openai

# the shared pytest fixtures (a loopback server per module, a model factory)
_server_instance = model_fixtures._server_instance
_http_client = model_fixtures._http_client
provider_server = model_fixtures.provider_server
openai_model = model_fixtures.openai_model

WEATHER = model_fixtures.WEATHER


def call(server, make, fixture, **kw):
    server.queue(fixture)
    return make(**kw).invoke([HumanMessage("hi")], tools=[WEATHER])


# -- replies --------------------------------------------------------------------------------
def test_openai_text_with_usage_and_null_refusal(provider_server, openai_model):
    msg = call(provider_server, openai_model, "openai-chat-text.json")
    body = load_fixture("openai-chat-text")["body"]
    assert msg.content == body["choices"][0]["message"]["content"]
    assert msg.refusal is None and msg.tool_calls == []
    assert msg.finish_reason == "stop"
    assert msg.usage == {"input_tokens": 14, "output_tokens": 37, "total_tokens": 51,
                         "output_token_details": {"reasoning": 0}}
    assert msg.response_metadata["id"] == body["id"]  # provider id kept apart...
    assert msg.id != body["id"] and msg.id.startswith("msg_")  # ...from our unique id


def test_openai_single_tool_call_null_content(provider_server, openai_model):
    msg = call(provider_server, openai_model, "openai-chat-tool-call-single.json")
    assert msg.content == "" and msg.text == ""
    assert msg.finish_reason == "tool_calls"
    [tc] = msg.tool_calls
    assert tc["name"] == "get_weather" and isinstance(tc["args"], dict)
    assert tc["args"] == {"city": "San Francisco", "state": "CA"}
    assert tc["id"] == "call_CUdUoJpsWWVdxXntucvnol1M"


def test_openai_parallel_calls_without_index(provider_server, openai_model):
    msg = call(provider_server, openai_model, "openai-chat-tool-calls-parallel.json")
    assert [c["name"] for c in msg.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert len({c["id"] for c in msg.tool_calls}) == 2
    assert msg.tool_calls[1]["args"] == {"ticker": "AAPL", "exchange": "NASDAQ"}


@pytest.mark.parametrize("fixture,text", [("openai-chat-length.json", '{"'),
                                          ("ollama-chat-length.json", "Hello")])
def test_length_is_surfaced_not_parsed(provider_server, openai_model, fixture, text):
    msg = call(provider_server, openai_model, fixture)
    assert msg.finish_reason == "length"
    assert msg.content == text  # truncated JSON stays text: nothing parsed it
    assert msg.tool_calls == [] and msg.invalid_tool_calls == []


def test_ollama_length_metadata(provider_server, openai_model):
    msg = call(provider_server, openai_model, "ollama-chat-length.json")
    assert msg.response_metadata["id"] == "chatcmpl-20"
    assert msg.response_metadata["system_fingerprint"] == "fp_ollama"


def test_openai_refusal_is_not_empty_text(provider_server, openai_model):
    msg = call(provider_server, openai_model, "openai-chat-refusal.json")
    assert msg.refusal == "I'm very sorry, but I can't assist with that."
    assert msg.content == ""


def test_azure_filter_annotations_are_tolerated(provider_server, openai_model):
    msg = call(provider_server, openai_model, "azure-chat-content-filter-annotations.json")
    body = load_fixture("azure-chat-content-filter-annotations")["body"]
    assert msg.content == body["choices"][0]["message"]["content"]
    meta = msg.response_metadata
    assert meta["prompt_filter_results"] == body["prompt_filter_results"]
    assert meta["content_filter_results"] == body["choices"][0]["content_filter_results"]


def test_ollama_tool_call_with_reasoning(provider_server, openai_model):
    msg = call(provider_server, openai_model, "ollama-chat-tool-call.json")
    assert msg.content == ""
    assert msg.reasoning_content and msg.reasoning_content.startswith("The conversation")
    [tc] = msg.tool_calls
    assert tc["id"] == "call_o2vnpxrw" and tc["args"] == {"city": "Paris", "country": "France"}
    assert msg.usage == {"input_tokens": 206, "output_tokens": 194, "total_tokens": 400}


@pytest.mark.parametrize("fixture", ["vllm-chat-tool-call.json",
                                     "vllm-chat-tool-call-empty-content.json"])
def test_vllm_tool_call_tolerates_extension_keys(provider_server, openai_model, fixture):
    msg = call(provider_server, openai_model, fixture)
    raw = load_fixture(fixture)["body"]["choices"][0]["message"]["tool_calls"][0]
    [tc] = msg.tool_calls
    assert tc["id"] == raw["id"] and tc["args"] == json.loads(raw["function"]["arguments"])
    assert msg.content == ""  # no empty text part
    assert msg.reasoning_content is None


def test_vllm_cached_tokens(provider_server, openai_model):
    msg = call(provider_server, openai_model, "vllm-chat-tool-call-empty-content.json")
    assert msg.usage["input_token_details"] == {"cache_read": 32}


def test_lmstudio_numeric_tool_id(provider_server, openai_model):
    msg = call(provider_server, openai_model, "lmstudio-chat-tool-call.json")
    [tc] = msg.tool_calls
    assert tc["id"] == "910617247" and tc["name"] == "say_to_user"
    assert msg.reasoning_content  # LM Studio's "reasoning" field


def test_gemini_empty_tool_id_is_synthesized_and_reused(provider_server, openai_model):
    model = openai_model()
    provider_server.queue("gemini-openai-compat-tool-call-empty-id.json")
    msg = model.invoke("what time is it?")
    [tc] = msg.tool_calls
    assert tc["id"] and tc["id"].startswith("call_")
    provider_server.queue("openai-chat-text.json")
    model.invoke(["what time is it?", msg, ToolMessage("12:00", tool_call_id=tc["id"])])
    sent = provider_server.last_json["messages"]
    assert sent[1]["tool_calls"][0]["id"] == tc["id"] == sent[2]["tool_call_id"]
    assert "thought_signature" in json.dumps(sent[1])  # Gemini's extra_content echoed


def test_deepseek_reasoning_and_cache_usage(provider_server, openai_model):
    msg = call(provider_server, openai_model, "deepseek-chat-reasoning.json")
    assert msg.reasoning_content.startswith("Okay, the user is asking")
    assert msg.content.startswith("Crossing the street safely")
    assert msg.usage["output_token_details"] == {"reasoning": 415}
    assert msg.usage["total_tokens"] == 801


def test_deepseek_reasoning_with_parallel_calls_and_echo(provider_server, openai_model):
    model = openai_model(include_reasoning=True)
    provider_server.queue("deepseek-chat-reasoning-tool-calls-parallel.json")
    msg = model.invoke("My guess is 4")
    assert msg.content and msg.reasoning_content
    assert [c["name"] for c in msg.tool_calls] == ["get_player_name", "roll_dice"]
    provider_server.queue("openai-chat-text.json")
    tools = [ToolMessage("{}", tool_call_id=c["id"]) for c in msg.tool_calls]
    model.invoke(["My guess is 4", msg, *tools])
    echoed = provider_server.last_json["messages"][1]
    assert echoed["reasoning_content"] == msg.reasoning_content  # as the request_hint shows


# -- errors ---------------------------------------------------------------------------------
def test_rate_limit(provider_server, openai_model):
    with pytest.raises(RateLimitError) as info:
        call(provider_server, openai_model, "openai-error-429-rate-limit.json")
    err = info.value
    assert err.status_code == 429 and err.code == "rate_limit_exceeded" and err.retryable
    assert "429" in str(err) and "try again in 644ms" in str(err)


def test_client_retries_with_its_own_settings(provider_server, openai_model):
    limited = load_fixture("openai-error-429-rate-limit")["body"]
    provider_server.queue(json_reply(limited, 429, {"retry-after-ms": "5"}),
                          "openai-chat-text.json")
    msg = openai_model(max_retries=1).invoke("hi")
    assert msg.finish_reason == "stop" and len(provider_server.requests) == 2


def test_azure_prompt_filter_is_content_filter_error(provider_server, openai_model):
    with pytest.raises(ContentFilterError) as info:
        call(provider_server, openai_model, "azure-error-400-content-filter-prompt.json")
    assert info.value.status_code == 400 and info.value.code == "content_filter"
    assert info.value.body["innererror"]["code"] == "ResponsibleAIPolicyViolation"


def test_groq_tool_use_failed_is_retryable(provider_server, openai_model):
    with pytest.raises(ModelHTTPError) as info:
        call(provider_server, openai_model, "groq-error-400-tool-use-failed.json")
    err = info.value
    assert type(err) is ModelHTTPError and err.retryable and err.code == "tool_use_failed"
    assert "failed_generation" in err.body


@pytest.mark.parametrize("fixture,needle,code", [
    ("openai-error-400-tool-call-sequence.json", "call_WZJmK4VPpI5IkLUMFNNf3pED", None),
    ("openai-error-400-orphan-tool-message.json", "preceeding message", None),
    ("deepseek-error-400-insufficient-tool-messages.json", "insufficient tool messages",
     "invalid_request_error"),
])
def test_bad_request_not_retryable(provider_server, openai_model, fixture, needle, code):
    with pytest.raises(ModelHTTPError) as info:
        call(provider_server, openai_model, fixture)
    err = info.value
    assert type(err) is ModelHTTPError and not err.retryable
    assert err.status_code == 400 and err.code == code
    assert "HTTP 400" in str(err) and needle in str(err)


def test_server_error(provider_server, openai_model):
    with pytest.raises(ModelHTTPError) as info:
        call(provider_server, openai_model, "openai-error-500-server-error.json")
    assert info.value.status_code == 500 and info.value.retryable
    assert "The server had an error" in str(info.value)


def test_timeout(provider_server):
    import socket

    sock = socket.socket()  # accepts connections, never answers
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1",
                                api_key="k", timeout=0.3, max_retries=0)
        with pytest.raises(ModelTimeoutError, match="timed out"):
            model.invoke("hi")
    finally:
        sock.close()


def test_unreachable_server_is_model_error():
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    with pytest.raises(ModelError, match="cannot connect"):
        model.invoke("hi")


# -- requests -------------------------------------------------------------------------------
def test_request_wire_format(provider_server, openai_model):
    provider_server.queue("openai-chat-text.json")
    history = [SystemMessage("be terse"), HumanMessage("weather?"),
               AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"},
                                          "id": "c1"}]),
               ToolMessage("10.05", tool_call_id="c1")]
    openai_model(temperature=0.2, top_k=5).invoke(history, tools=[WEATHER],
                                                  tool_choice="get_weather")
    req = provider_server.requests[-1]
    body = req["json"]
    assert req["path"].endswith("/chat/completions")
    assert body["model"] == "test-model" and body["temperature"] == 0.2
    assert body["top_k"] == 5  # unknown to the client: sent through extra_body
    assert body["tools"] == [WEATHER]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assistant = body["messages"][2]
    assert assistant["content"] == ""  # H23: always a content key, "" by default
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "10.05"}
    assert "stream" not in body


def test_empty_content_null_option(provider_server, openai_model):
    provider_server.queue("openai-chat-text.json")
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    openai_model(empty_content=None).invoke(["q", ai, ToolMessage("r", tool_call_id="c1")])
    assert provider_server.last_json["messages"][1]["content"] is None


@pytest.mark.parametrize("merge", [True, False])
def test_merge_system_messages(provider_server, openai_model, merge):
    provider_server.queue("openai-chat-text.json")
    history = [SystemMessage("You are terse."), HumanMessage("hi"), AIMessage("hello"),
               SystemMessage("answer in French")]
    openai_model(merge_system_messages=merge).invoke(history)
    roles = [m["role"] for m in provider_server.last_json["messages"]]
    if merge:
        assert roles == ["system", "user", "assistant"]
        assert provider_server.last_json["messages"][0]["content"] == \
            "You are terse.\n\nanswer in French"
    else:
        assert roles == ["system", "user", "assistant", "system"]


def test_tools_from_objects():
    class Tool:
        name = "add"
        description = "Add two numbers."

        def json_schema(self):
            return {"type": "object", "properties": {"a": {"type": "integer"}}}

    class Legacy:
        name = "sub"
        description = "Subtract."
        args_schema = {"type": "object", "properties": {}}

    assert tool_to_openai(Tool()) == {"type": "function", "function": {
        "name": "add", "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}
    assert tool_to_openai(Legacy())["function"]["parameters"] == {"type": "object",
                                                                  "properties": {}}
    assert tool_to_openai(WEATHER) is WEATHER
    with pytest.raises(TypeError, match="no 'name'"):
        tool_to_openai(object())


def test_api_key_is_masked_and_env_honoured(monkeypatch, provider_server):
    model = OpenAIChatModel("m", base_url=provider_server.base_url, api_key="sk-SECRET-99")
    assert "SECRET" not in repr(model) and "SECRET" not in str(vars(model))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", provider_server.base_url)
    provider_server.queue("openai-chat-text.json")
    OpenAIChatModel("m", max_retries=0).invoke("hi")
    assert provider_server.requests[-1]["headers"]["authorization"] == "Bearer sk-from-env"


def test_init_chat_model(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    m = init_chat_model("openai:gpt-4o-mini", temperature=0)
    assert isinstance(m, OpenAIChatModel) and m.model == "gpt-4o-mini"
    assert m.generation_kwargs == {"temperature": 0}
    assert init_chat_model("gpt-4o").model == "gpt-4o"
    o = init_chat_model("ollama:llama3:8b")
    assert o.model == "llama3:8b" and o.base_url == "http://localhost:11434/v1"
    assert o.client.api_key == "ollama"
    with pytest.raises(ValueError, match="local, ollama, openai"):
        init_chat_model("nope:model")


def test_init_chat_model_local_is_lazy_local_model():
    from threadloom.models.local import LocalChatModel

    m = init_chat_model("local:smollm2")  # builds only: the server starts on first use
    assert isinstance(m, LocalChatModel)


# -- reported cases (non-streamed) ----------------------------------------------------------
def completion(message, finish="tool_calls"):
    return json_reply({"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                    "finish_reason": finish}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 2,
                                 "total_tokens": 5}})


def wire_call(call_id, arguments, name="write_file"):
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


TRUNCATED = '{"path":"a.txt","content":"hel'


@pytest.mark.parametrize("finish,calls", [
    ("length", [wire_call("c1", TRUNCATED)]),                              # A
    ("tool_calls", [wire_call("c1", TRUNCATED)]),                          # B
    ("length", [wire_call("c0", '{"path":"ok.txt"}'), wire_call("c1", TRUNCATED)]),  # C
])
def test_h14_truncated_calls_are_never_runnable(provider_server, openai_model, finish, calls):
    provider_server.queue(completion({"content": None, "tool_calls": calls}, finish))
    model = openai_model()
    msg = model.invoke("write a file")
    assert msg.tool_calls == []
    assert [c["id"] for c in msg.invalid_tool_calls] == [c["id"] for c in calls]
    for bad in msg.invalid_tool_calls:
        assert "truncated" in bad["error"] and "again in full" in bad["error"]
        assert bad["args"] is None and "hel" in msg.invalid_tool_calls[-1]["error"]
    # the truncated text is never sent back as arguments
    provider_server.queue("openai-chat-text.json")
    model.invoke(["write a file", msg])
    for sent in provider_server.last_json["messages"][1].get("tool_calls", []):
        assert sent["function"]["arguments"] in ("", "{}")


@pytest.mark.parametrize("arguments", ['{"city": "Oslo"}', {"city": "Oslo"},
                                       json.dumps(json.dumps({"city": "Oslo"}))])
def test_h22_arguments_string_object_double_encoded(provider_server, openai_model, arguments):
    provider_server.queue(completion({"content": None,
                                      "tool_calls": [wire_call("c1", arguments, "w")]}))
    model = openai_model()
    msg = model.invoke("weather in Oslo")
    assert msg.tool_calls[0]["args"] == {"city": "Oslo"}
    provider_server.queue("openai-chat-text.json")
    model.invoke(["weather in Oslo", msg])
    sent = provider_server.last_json["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert isinstance(sent, str) and json.loads(sent) == {"city": "Oslo"}


def test_h22_non_object_arguments_are_invalid_not_a_crash(provider_server, openai_model):
    provider_server.queue(completion({"content": None,
                                      "tool_calls": [wire_call("c1", "[1,2]", "w")]}))
    msg = openai_model().invoke("x")
    assert msg.tool_calls == [] and msg.invalid_tool_calls[0]["id"] == "c1"


def test_h23_null_content_with_calls(provider_server, openai_model):
    provider_server.queue(completion({"content": None,
                                      "tool_calls": [wire_call("c1", "{}", "w")]}))
    msg = openai_model().invoke("x")
    assert msg.content == "" and msg.text == "" and msg.tool_calls[0]["id"] == "c1"


# -- tool calling without native support ----------------------------------------------------
def test_json_schema_tool_calling(provider_server, openai_model):
    provider_server.queue(completion(
        {"content": '{"name": "get_weather", "arguments": {"city": "Oslo"}}'}, "stop"))
    msg = openai_model(tool_calling="json_schema").invoke("weather?", tools=[WEATHER])
    body = provider_server.last_json
    assert "tools" not in body and body["response_format"]["type"] == "json_schema"
    assert [(c["name"], c["args"]) for c in msg.tool_calls] == [("get_weather",
                                                                 {"city": "Oslo"})]
    assert msg.usage["total_tokens"] == 5


def test_json_schema_final_answer(provider_server, openai_model):
    provider_server.queue(completion({"content": '{"final_answer": "It is sunny."}'}, "stop"))
    msg = openai_model(tool_calling="json_schema").invoke("weather?", tools=[WEATHER])
    assert msg.content == "It is sunny." and msg.tool_calls == []


def test_auto_tool_calling_accepts_json_text_calls(provider_server, openai_model):
    provider_server.queue(completion(
        {"content": '{"name": "get_weather", "arguments": {"city": "Oslo"}}'}, "stop"))
    msg = openai_model(tool_calling="auto").invoke("weather?", tools=[WEATHER])
    assert provider_server.last_json["tools"] == [WEATHER]  # native tools still sent
    assert msg.tool_calls[0]["args"] == {"city": "Oslo"}


def test_bad_tool_calling_mode():
    with pytest.raises(ValueError, match="tool_calling"):
        OpenAIChatModel("m", tool_calling="grammar")
