"""``threads.copy`` through the unmodified ``langgraph_sdk`` client against the real
server: the copy has every checkpoint of the source (its whole history, the same ids),
its pending interrupt resumes on the copy alone, and the source is untouched."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client, get_sync_client
from server_harness import running

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("srv")) as base:
        yield base


def _brief(history):
    return [(h["checkpoint_id"], h["values"], h["next"], h["metadata"].get("step"))
            for h in history]


async def test_copy_has_the_whole_history_and_resumes_apart(url):
    client = get_client(url=url, api_key=None)
    src = (await client.threads.create(metadata={"who": "cy"}))["thread_id"]
    await client.runs.wait(src, "human", input={"text": "t"})
    history = await client.threads.get_history(src, limit=50)
    assert len(history) >= 2
    copy = await client.threads.copy(src)
    tid = copy["thread_id"]
    assert tid != src and copy["metadata"]["who"] == "cy"
    assert copy["status"] == "interrupted" and copy["interrupts"]
    copied = await client.threads.get_history(tid, limit=50)
    assert _brief(copied) == _brief(history)
    assert all(h["checkpoint"]["thread_id"] == tid for h in copied)
    older = history[-1]["checkpoint_id"]  # a past checkpoint is there too
    assert (await client.threads.get_state(tid, checkpoint_id=older))["values"] == \
        history[-1]["values"]

    out = await client.runs.wait(tid, "human", command={"resume": "yes"})
    assert out == {"text": "t!", "answer": "yes"}
    assert (await client.threads.get_state(src))["next"] == ["ask"]  # source untouched
    assert len(await client.threads.get_history(src, limit=50)) == len(history)
    assert (await client.threads.get(tid))["status"] == "idle"


def test_copy_of_an_agent_thread_sync(url):
    client = get_sync_client(url=url, api_key=None)
    src = client.threads.create()["thread_id"]
    client.runs.wait(src, "agent", input={"messages": [("user", "add please")]})
    client.runs.wait(src, "agent", input={"messages": [("user", "again")]})
    copy = client.threads.copy(src)
    assert _brief(client.threads.get_history(copy["thread_id"], limit=100)) == \
        _brief(client.threads.get_history(src, limit=100))
    out = client.runs.wait(copy["thread_id"], "agent",
                           input={"messages": [("user", "third")]})
    assert out["messages"][-1]["content"] == "you said: third"
    assert len(out["messages"]) == len(client.threads.get_state(src)["values"]["messages"]) + 2
