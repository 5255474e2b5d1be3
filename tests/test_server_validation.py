"""Requests the server must answer with a clear 4xx, never a 500 or a silent success:
a run stream's malformed ``Last-Event-ID`` (422), a run from a ``checkpoint_id`` the
thread lacks (404), and a replay from a checkpoint that pauses (the state with its
``__interrupt__``, as ``langgraph dev``). Real server, unmodified ``langgraph_sdk``."""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_client
from server_harness import running

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("srv")) as base:
        yield base


@pytest.fixture
def client(url):
    return get_client(url=url, api_key=None)


async def _paused_thread(client):
    tid = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(tid, "human", input={"text": "hi"})
    assert out["__interrupt__"]
    return tid, await client.threads.get_history(tid)


async def test_replay_from_a_paused_checkpoint_gives_state_and_interrupt(client):
    tid, history = await _paused_thread(client)
    paused = history[0]["checkpoint"]["checkpoint_id"]  # next == ["ask"]
    out = await client.runs.wait(tid, "human", input=None, checkpoint_id=paused)
    assert out["text"] == "hi!" and out["__interrupt__"][0]["value"]["question"] == "ok?"
    parts = [p async for p in client.runs.stream(tid, "human", input=None,
                                                  checkpoint_id=paused)]
    last = [p.data for p in parts if p.event == "values"][-1]
    assert last["text"] == "hi!" and last["__interrupt__"]


async def test_unknown_checkpoint_id_is_404(client, url):
    tid, _ = await _paused_thread(client)
    with pytest.raises(httpx.HTTPStatusError) as info:
        await client.runs.wait(tid, "human", input=None,
                               checkpoint_id="1f0c0000-0000-6000-8000-000000000000")
    assert info.value.response.status_code == 404
    assert "Checkpoint" in info.value.response.json()["detail"]
    r = httpx.post(f"{url}/threads/{tid}/runs", json={
        "assistant_id": "human", "checkpoint": {"checkpoint_id": "nope"}})
    assert r.status_code == 404
    assert (await client.threads.get(tid))["status"] != "busy"


@pytest.mark.parametrize("bad", ["abc", "1-2", "-", "12x"])
async def test_run_stream_rejects_a_malformed_last_event_id(client, url, bad):
    tid, _ = await _paused_thread(client)
    run = (await client.runs.list(tid))[0]
    r = httpx.get(f"{url}/threads/{tid}/runs/{run['run_id']}/stream",
                  headers={"Last-Event-ID": bad})
    assert r.status_code == 422 and "Last-Event-ID" in r.json()["detail"]
    ok = httpx.get(f"{url}/threads/{tid}/runs/{run['run_id']}/stream",
                   headers={"Last-Event-ID": "1"})
    assert ok.status_code == 200 and "event: metadata" not in ok.text
