"""Defects a new user's trial found, each reproduced with the unmodified clients:
a refused run that relabelled its thread, client thread ids not checked as UUIDs,
``state_updated_at`` sorting, ``threads.prune``, ``after_seconds``, ``webhook``."""

from __future__ import annotations

import uuid

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


async def test_refused_run_leaves_the_thread_as_it_was(client):
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "human", input={"text": "hi"})  # pauses in "ask"
    before = await client.threads.get(tid)
    assert before["metadata"]["graph_id"] == "human"
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.runs.wait(tid, "echo", input={"messages": [("user", "x")]})
    assert err.value.response.status_code == 409
    assert "human" in err.value.response.text
    after = await client.threads.get(tid)
    assert after["metadata"] == before["metadata"]
    assert after["status"] == before["status"] == "interrupted"
    assert after["values"] == before["values"]
    # the thread still resumes on its own graph
    out = await client.runs.wait(tid, "human", command={"resume": "yes"})
    assert out["answer"] == "yes"


async def test_a_graph_whose_state_covers_the_thread_runs_on_it(client):
    """Not refused: as on LangGraph's server, another graph may run on a thread when its
    state has a channel for every value the thread holds (here both use ``Ask``)."""
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "slow", input={"text": "a"})
    out = await client.runs.wait(tid, "human", input={"text": "b"})
    assert out["text"] == "b!"
    assert (await client.threads.get(tid))["metadata"]["graph_id"] == "human"


async def test_thread_id_must_be_a_uuid(client):
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.threads.create(thread_id="not-a-uuid")
    assert err.value.response.status_code == 422
    assert "thread_id" in err.value.response.text
    tid = str(uuid.uuid4())
    assert (await client.threads.create(thread_id=tid))["thread_id"] == tid


async def test_search_sorts_by_state_updated_at(client):
    a = (await client.threads.create(metadata={"sorted": "yes"}))["thread_id"]
    b = (await client.threads.create(metadata={"sorted": "yes"}))["thread_id"]
    await client.runs.wait(a, "echo", input={"messages": [("user", "x")]})
    for sort_by in ("thread_id", "status", "created_at", "updated_at", "state_updated_at"):
        found = await client.threads.search(metadata={"sorted": "yes"}, sort_by=sort_by,
                                            sort_order="desc")
        assert {t["thread_id"] for t in found} == {a, b}
    found = await client.threads.search(metadata={"sorted": "yes"},
                                        sort_by="state_updated_at", sort_order="desc")
    assert found[0]["thread_id"] == a


async def test_prune_deletes_or_keeps_the_latest_checkpoint(client):
    gone = (await client.threads.create())["thread_id"]
    kept = (await client.threads.create())["thread_id"]
    for tid in (gone, kept):
        await client.runs.wait(tid, "echo", input={"messages": [("user", "one")]})
        await client.runs.wait(tid, "echo", input={"messages": [("user", "two")]})
    before = await client.threads.get_state(kept)
    assert len(await client.threads.get_history(kept, limit=100)) > 1
    assert await client.threads.prune([gone, str(uuid.uuid4())]) == {"pruned_count": 1}
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.threads.get(gone)
    assert err.value.response.status_code == 404
    assert await client.threads.prune([kept], strategy="keep_latest") == {"pruned_count": 1}
    history = await client.threads.get_history(kept, limit=100)
    assert len(history) == 1
    after = await client.threads.get_state(kept)
    assert after["values"] == before["values"]
    assert after["checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]
    out = await client.runs.wait(kept, "echo", input={"messages": [("user", "three")]})
    assert [m["content"] for m in out["messages"]][-1] == "echo: three"
