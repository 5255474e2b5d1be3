"""A run whose preparation fails never stays ``running``: an unknown node in
``interrupt_before``/``interrupt_after`` is refused at creation (422 naming it), and any
other failure before the graph starts ends the run ``error`` with an ``error`` event,
its thread free again. Stateless runs keep their thread with ``on_completion="keep"``.
(Real server, the unmodified ``langgraph_sdk`` client.)"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_client
from server_harness import running

pytestmark = pytest.mark.xdist_group("server")

HUMAN = {"text": "hi"}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("srv")) as base:
        yield base


@pytest.fixture
def client(url):
    return get_client(url=url, api_key=None)


@pytest.mark.parametrize("field", ["interrupt_before", "interrupt_after"])
async def test_unknown_interrupt_node_is_refused_at_creation(client, field):
    thread = await client.threads.create()
    with pytest.raises(httpx.HTTPStatusError) as info:
        await client.runs.wait(thread["thread_id"], "human", input=HUMAN,
                               **{field: ["nope"]})
    assert info.value.response.status_code == 422
    assert "nope" in info.value.response.json()["detail"]
    assert (await client.threads.get(thread["thread_id"]))["status"] == "idle"
    assert await client.runs.list(thread["thread_id"]) == []
    # a known node and "*" still work
    out = await client.runs.wait(thread["thread_id"], "human", input=HUMAN,
                                 **{field: ["boom"]})
    assert out["text"] in ("hi", "hi!")


async def test_failure_while_preparing_ends_the_run_as_error(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "human", input=HUMAN,
                                   config={"configurable": "not a mapping"})
    out = await client.runs.join(tid, run["run_id"])
    assert out["__error__"]["error"] == "TypeError"
    got = await client.runs.get(tid, run["run_id"])
    assert got["status"] == "error"
    parts = [p async for p in client.runs.join_stream(tid, run["run_id"])]
    assert [p.event for p in parts] == ["metadata", "error"]
    assert (await client.threads.get(tid))["status"] != "busy"
    # the thread takes the next run
    out = await client.runs.wait(tid, "human", input=HUMAN)
    assert out["text"] == "hi!"


@pytest.mark.parametrize("how", ["wait", "stream", "create"])
async def test_stateless_run_keeps_its_thread_on_completion_keep(client, url, how):
    body = {"messages": [{"role": "user", "content": "k"}]}
    if how == "wait":
        await client.runs.wait(None, "echo", input=body, on_completion="keep")
    elif how == "stream":
        [p async for p in client.runs.stream(None, "echo", input=body, on_completion="keep")]
    else:
        run = await client.runs.create(None, "echo", input=body, on_completion="keep")
        await client.runs.join(run["thread_id"], run["run_id"])
    found = await client.threads.search(limit=100)
    kept = [t for t in found if (t.get("values") or {}).get("messages")
            and t["values"]["messages"][0]["content"] == "k"]
    assert kept, "the stateless run's thread was deleted despite on_completion=keep"
    state = await client.threads.get_state(kept[0]["thread_id"])
    assert state["values"]["messages"][-1]["content"] == "echo: k"
    for t in kept:
        await client.threads.delete(t["thread_id"])
