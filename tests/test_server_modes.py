"""Run options through the official client: subgraph streams, ``interrupt_before``,
``context``, ``command`` with ``update``/``goto``, the ``messages``/``tasks`` modes,
``cancel_many`` and deleting runs."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk import get_client
from server_harness import running

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("modes")) as base:
        yield base


@pytest.fixture
def client(url):
    return get_client(url=url, api_key=None)


async def test_subgraph_events_are_named_by_namespace(client):
    parts = [p async for p in client.runs.stream(None, "nested", input={"text": "t"},
                                                 stream_mode="updates", stream_subgraphs=True,
                                                 context={"who": "ann"})]
    names = [p.event for p in parts]
    assert names[0] == "metadata" and "updates" in names
    nested = [p for p in parts if p.event.startswith("updates|child")]
    assert nested and nested[0].data == {"inner": {"text": "t+outer(ann)+inner"}}
    aid = (await client.assistants.search(graph_id="nested"))[0]["assistant_id"]
    assert list(await client.assistants.get_subgraphs(aid)) == ["child"]


async def test_interrupt_before_and_command_update_goto(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    out = await client.runs.wait(tid, "nested", input={"text": "a"}, interrupt_before=["child"])
    assert out == {"text": "a+outer(nobody)"}
    assert (await client.threads.get_state(tid))["next"] == ["child"]
    assert (await client.threads.get(tid))["status"] == "interrupted"
    out = await client.runs.wait(tid, "nested", command={"update": {"text": "b"}})
    assert out["text"].startswith("b+") and out["text"].endswith("+inner")  # engine's rule
    out = await client.runs.wait(tid, "nested", command={"update": {"text": "c"},
                                                         "goto": "child"})
    assert out == {"text": "c+inner"}


async def test_messages_and_tasks_modes(client):
    parts = [p async for p in client.runs.stream(
        None, "agent", input={"messages": [("user", "hello")]},
        stream_mode=["messages", "tasks"])]
    names = {p.event for p in parts}
    assert {"messages/metadata", "messages/partial", "tasks"} <= names
    partial = [p.data for p in parts if p.event == "messages/partial"]
    assert partial[-1][0]["content"] == "you said: hello" and partial[-1][0]["type"] == "ai"
    tasks = [p.data for p in parts if p.event == "tasks"]
    assert any(t.get("name") == "model" for t in tasks)


async def test_a_whole_message_is_messages_complete(client):
    # as LangGraph's server: the tool's result is one whole message, not a token chunk
    parts = [p async for p in client.runs.stream(
        None, "agent", input={"messages": [("user", "please add")]}, stream_mode="messages")]
    complete = [p.data[0] for p in parts if p.event == "messages/complete"]
    assert [m["type"] for m in complete] == ["tool"] and complete[0]["content"] == "5"
    partial = [p.data[0] for p in parts if p.event == "messages/partial"]
    assert partial and {m["type"] for m in partial} == {"ai"}
    assert partial[-1]["content"] == "the sum is 5"


async def test_cancel_many_and_delete_run(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    a = await client.runs.create(tid, "slow", input={"text": "x"})
    b = await client.runs.create(tid, "slow", input={"text": "y"})
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.runs.delete(tid, a["run_id"])
    assert err.value.response.status_code == 409
    await client.runs.cancel_many(thread_id=tid)
    await client.runs.join(tid, b["run_id"])
    statuses = {r["run_id"]: r["status"] for r in await client.runs.list(tid)}
    assert statuses == {a["run_id"]: "interrupted", b["run_id"]: "interrupted"}
    await client.runs.delete(tid, a["run_id"])
    assert [r["run_id"] for r in await client.runs.list(tid)] == [b["run_id"]]


async def _stream_then_drop(client, tid, **kw):
    stream = client.runs.stream(tid, "slow", input={"text": "d"}, stream_mode="updates", **kw)
    async for part in stream:
        run_id = part.data["run_id"]  # the metadata event; then the client goes away
        break
    await stream.aclose()
    return run_id


async def test_a_client_that_disconnects_does_not_stop_the_run(client):
    tid = (await client.threads.create())["thread_id"]
    run_id = await _stream_then_drop(client, tid)
    assert await client.runs.join(tid, run_id) == {"text": "d.."}
    assert (await client.runs.get(tid, run_id))["status"] == "success"


async def test_on_disconnect_cancel_stops_it(client):
    tid = (await client.threads.create())["thread_id"]
    run_id = await _stream_then_drop(client, tid, on_disconnect="cancel")
    for _ in range(100):
        status = (await client.runs.get(tid, run_id))["status"]
        if status not in ("pending", "running"):
            break
        await asyncio.sleep(0.05)
    assert status == "interrupted"
