"""The OpenAI-compatible face, driven by the ``openai`` client: models, completions with
and without streaming, a conversation kept on a thread."""

from __future__ import annotations

import uuid

import openai
import pytest
from langgraph_sdk import get_sync_client
from server_harness import running

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("oai")) as base:
        yield base


@pytest.fixture
def client(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def test_models_list_the_assistants(client):
    assert sorted(m.id for m in client.models.list()) == ["agent", "echo", "human", "nested",
                                                          "slow"]


def test_completion_runs_the_agent(client):
    done = client.chat.completions.create(
        model="agent", messages=[{"role": "user", "content": "please add"}])
    assert done.choices[0].message.role == "assistant"
    assert done.choices[0].message.content == "the sum is 5"
    assert done.choices[0].finish_reason == "stop"


def test_streaming_completion(client):
    stream = client.chat.completions.create(
        model="agent", stream=True, messages=[{"role": "user", "content": "hello there"}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "you said: hello there"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_thread_keeps_the_conversation(client, url):
    thread = f"conv-{uuid.uuid4().hex[:8]}"
    history = [{"role": "user", "content": "first"}]
    raw = client.chat.completions.with_raw_response.create(model="echo", messages=history,
                                                           user=thread)
    one, tid = raw.parse(), raw.headers["x-thread-id"]  # the name's thread
    history += [{"role": "assistant", "content": one.choices[0].message.content},
                {"role": "user", "content": "second"}]
    two = client.chat.completions.create(model="echo", messages=history,
                                         extra_headers={"X-Thread-Id": tid})
    assert two.choices[0].message.content == "echo: second"
    state = get_sync_client(url=url, api_key=None).threads.get_state(tid)
    assert [m["content"] for m in state["values"]["messages"]] == [
        "first", "echo: first", "second", "echo: second"]


def test_unknown_model_and_bad_body(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="human", messages=[{"role": "user", "content": "x"}])
