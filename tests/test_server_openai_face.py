"""The OpenAI face as the ``openai`` client sees it: errors in OpenAI's shape (the client
shows the text), replies of nodes that return whole (tuple) messages also when
streamed, a paused graph answered with ``finish_reason="interrupt"``, thread names per
principal, ``GET /v1/models/{id}``, ``n>1`` refused. Real server, keys for two users."""

from __future__ import annotations

import json
import uuid

import httpx
import openai
import pytest
from langgraph_sdk import get_sync_client
from server_harness import GRAPHS, HERE, running

pytestmark = pytest.mark.xdist_group("server")
G = {"echo": GRAPHS["echo"], "tuples": f"{HERE / 'server_graphs.py'}:tuple_graph",
     "pause": f"{HERE / 'server_graphs.py'}:pause_graph",
     "human": GRAPHS["human"]}
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oai")
    import hashlib
    keys = tmp / "keys.json"
    keys.write_text(json.dumps({"keys": [
        {"sha256": hashlib.sha256(k.encode()).hexdigest(), "principal": p}
        for k, p in (("alice-key", "alice"), ("bob-key", "bob"))]}))
    with running(tmp, G, keys_file=str(keys)) as base:
        yield base


def _client(url, key="alice-key"):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=30)


@pytest.mark.parametrize("stream", [False, True])
def test_errors_have_openai_shape(url, stream):
    c = _client(url)
    with pytest.raises(openai.NotFoundError) as info:
        c.chat.completions.create(model="nope", messages=USER, stream=stream)
    assert "nope" in info.value.message and info.value.code == "model_not_found"
    with pytest.raises(openai.UnprocessableEntityError) as info:
        c.chat.completions.create(model="echo", messages=[], stream=stream)
    assert "messages" in info.value.message and info.value.param == "messages"
    with pytest.raises(openai.BadRequestError) as info:
        c.chat.completions.create(model="echo", messages=USER, n=2, stream=stream)
    assert "n=1" in info.value.message
    r = httpx.post(url + "/v1/chat/completions", json={"model": "nope", "messages": USER},
                   headers={"authorization": "Bearer alice-key"})
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_get_one_model(url):
    c = _client(url)
    assert c.models.retrieve("echo").id == "echo"
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("nope")


@pytest.mark.parametrize("stream", [False, True])
def test_tuple_messages_reply_streamed_or_not(url, stream):
    c = _client(url)
    out = c.chat.completions.create(model="tuples", messages=USER, stream=stream)
    if stream:
        chunks = list(out)
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        assert chunks[-1].choices[0].finish_reason == "stop"
    else:
        text = out.choices[0].message.content
    assert text == "echo: hi"


@pytest.mark.parametrize("stream", [False, True])
def test_a_paused_graph_answers_finish_reason_interrupt(url, stream):
    c = _client(url)
    out = c.chat.completions.create(model="pause", messages=USER, stream=stream,
                                    user=f"p-{uuid.uuid4().hex[:6]}")
    if stream:
        chunks = [ch for ch in out if ch.choices]
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
        finish = chunks[-1].choices[0].finish_reason
    else:
        text, finish = out.choices[0].message.content, out.choices[0].finish_reason
        assert out.choices[0].message.interrupts[0]["value"] == {"question": "approve?"}
    assert finish == "interrupt" and json.loads(text) == {"question": "approve?"}


def test_thread_names_are_per_principal(url):
    name = f"conv-{uuid.uuid4().hex[:6]}"
    alice, bob = _client(url), _client(url, "bob-key")
    one = alice.chat.completions.with_raw_response.create(model="echo", messages=USER,
                                                          user=name)
    two = bob.chat.completions.with_raw_response.create(
        model="echo", messages=[{"role": "user", "content": "yo"}],
        metadata={"thread_id": name})
    assert two.parse().choices[0].message.content == "echo: yo"
    a_tid, b_tid = one.headers["x-thread-id"], two.headers["x-thread-id"]
    assert a_tid != b_tid
    sdk = get_sync_client(url=url, api_key="alice-key")
    assert [m["content"] for m in sdk.threads.get_state(a_tid)["values"]["messages"]] == [
        "hi", "echo: hi"]
    again = alice.chat.completions.create(model="echo", user=name, messages=[
        *USER, {"role": "assistant", "content": "echo: hi"},
        {"role": "user", "content": "more"}])
    assert again.choices[0].message.content == "echo: more"
    assert len(sdk.threads.get_state(a_tid)["values"]["messages"]) == 4
    with pytest.raises(openai.NotFoundError):  # a thread id of alice's, named by bob
        bob.chat.completions.create(model="echo", messages=USER,
                                    extra_headers={"X-Thread-Id": a_tid})
