"""The real server driven by the unmodified official client, ``langgraph_sdk`` (async
``get_client`` and sync ``get_sync_client``): assistants, threads, runs streamed, waited
and joined, interrupts resumed with ``command``, errors, state and history."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from server_harness import running

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("srv")) as base:
        yield base


@pytest.fixture
def client(url):
    return get_client(url=url, api_key=None)


@pytest.fixture
def sync_client(url):
    return get_sync_client(url=url, api_key=None)


def _events(parts):
    return [(p.event, p.data) for p in parts]


async def test_assistants(client):
    found = await client.assistants.search(graph_id="echo")
    assert [a["graph_id"] for a in found] == ["echo"]
    aid = found[0]["assistant_id"]
    assert str(uuid.UUID(aid)) == aid
    got = await client.assistants.get(aid)
    assert got["name"] == "echo" and got["version"] == 1
    graph = await client.assistants.get_graph(aid)
    assert {n["id"] for n in graph["nodes"]} == {"__start__", "echo", "__end__"}
    assert {"source": "__start__", "target": "echo"} in graph["edges"]
    schemas = await client.assistants.get_schemas(aid)
    assert "messages" in schemas["state_schema"]["properties"]
    assert await client.assistants.get_subgraphs(aid) == {}
    assert len(await client.assistants.search(limit=10)) == 5


async def test_stream_modes_and_state(client):
    thread = await client.threads.create(metadata={"who": "ann"})
    parts = [p async for p in client.runs.stream(
        thread["thread_id"], "echo", input={"messages": [{"role": "user", "content": "hi"}]},
        stream_mode=["values", "updates", "messages-tuple", "custom"])]
    names = [p.event for p in parts]
    assert names[0] == "metadata" and "end" not in names
    assert names.count("values") == 2 and "updates" in names and "custom" in names
    chunk, meta = next(p.data for p in parts if p.event == "messages")
    assert chunk["type"] == "ai" and chunk["content"] == "echo: hi"
    assert meta["langgraph_node"] == "echo"
    last = [p.data for p in parts if p.event == "values"][-1]
    assert [m["type"] for m in last["messages"]] == ["human", "ai"]
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"] == last and state["next"] == []
    assert state["checkpoint"]["thread_id"] == thread["thread_id"]
    history = await client.threads.get_history(thread["thread_id"], limit=5)
    assert len(history) >= 2 and history[0]["checkpoint_id"] == state["checkpoint_id"]
    got = await client.threads.get(thread["thread_id"])
    assert got["status"] == "idle" and got["metadata"]["graph_id"] == "echo"
    assert got["values"] == last


async def test_wait_create_join_and_list(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    out = await client.runs.wait(tid, "echo", input={"messages": [("user", "one")]})
    assert out["messages"][-1]["content"] == "echo: one"
    run = await client.runs.create(tid, "echo", input={"messages": [("user", "two")]})
    assert run["status"] == "pending" and run["multitask_strategy"] == "enqueue"
    joined = await client.runs.join(tid, run["run_id"])
    assert [m["content"] for m in joined["messages"]][-1] == "echo: two"
    got = await client.runs.get(tid, run["run_id"])
    assert got["status"] == "success"
    runs = await client.runs.list(tid)
    assert [r["run_id"] for r in runs][0] == run["run_id"] and len(runs) == 2
    again = [p async for p in client.runs.join_stream(tid, run["run_id"])]
    assert [p.event for p in again][0] == "metadata" and again[-1].event == "values"


async def test_resumable_stream_replay_no_gap_no_duplicate(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    parts = [p async for p in client.runs.stream(
        tid, "slow", input={"text": "a"}, stream_mode=["values", "updates", "debug"],
        stream_resumable=True)]
    ids = [int(p.id) for p in parts]
    assert ids == list(range(1, len(parts) + 1))  # unique, in order
    run_id = parts[0].data["run_id"]
    for cut in (1, 3, len(parts) - 1):
        rest = [p async for p in client.runs.join_stream(tid, run_id,
                                                         last_event_id=str(cut))]
        assert [int(p.id) for p in rest] == ids[cut:]
        assert _events(rest) == _events(parts[cut:])
    only = [p async for p in client.runs.join_stream(tid, run_id, stream_mode="updates")]
    assert {p.event for p in only} <= {"metadata", "updates"}


async def test_join_stream_while_running_then_replay(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "slow", input={"text": "b"},
                                   stream_mode=["values", "updates"])
    live = [p async for p in client.runs.join_stream(tid, run["run_id"])]
    assert live[-1].event == "values" and live[-1].data == {"text": "b.."}
    ids = [int(p.id) for p in live]
    assert ids == sorted(set(ids))
    later = [p async for p in client.runs.join_stream(tid, run["run_id"])]
    assert _events(later) == _events(live)


async def test_interrupt_and_resume(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    parts = [p async for p in client.runs.stream(tid, "human", input={"text": "x"},
                                                 stream_mode=["values", "updates"])]
    interrupt_part = [p for p in parts if p.event == "updates" and "__interrupt__" in p.data]
    assert interrupt_part[0].data["__interrupt__"][0]["value"] == {"question": "ok?",
                                                                    "text": "x!"}
    assert parts[-1].data["__interrupt__"]
    got = await client.threads.get(tid)
    assert got["status"] == "interrupted" and got["interrupts"]
    state = await client.threads.get_state(tid)
    assert state["next"] == ["ask"] and state["tasks"][0]["interrupts"]
    out = await client.runs.wait(tid, "human", command={"resume": "yes"})
    assert out == {"text": "x!", "answer": "yes"}
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_error_event_names_node_and_thread_stays_resumable(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    parts = [p async for p in client.runs.stream(tid, "human", input={"text": "boom"},
                                                 stream_mode="updates")]
    assert parts[-1].event == "error"
    assert parts[-1].data["error"] == "ValueError" and parts[-1].data["node"] == "boom"
    assert "kaboom" in parts[-1].data["message"] and parts[-1].data["step"] == 1
    got = await client.threads.get(tid)
    assert got["status"] == "error" and got["error"]["node"] == "boom"
    runs = await client.runs.list(tid)
    assert runs[0]["status"] == "error"
    await client.threads.update_state(tid, {"text": "fine"})
    out = await client.runs.wait(tid, "human", input=None)
    assert out["__interrupt__"][0]["value"]["text"] == "fine!"


async def test_cancel_interrupt_then_resume_and_rollback(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "slow", input={"text": "c"})
    await asyncio.sleep(0.3)
    await client.runs.cancel(tid, run["run_id"], wait=True)
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
    assert (await client.threads.get(tid))["status"] == "interrupted"
    out = await client.runs.wait(tid, "slow", input=None)
    assert out == {"text": "c.."}
    run = await client.runs.create(tid, "slow", input={"text": "d"})
    await asyncio.sleep(1.4)
    await client.runs.cancel(tid, run["run_id"], wait=True, action="rollback")
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.runs.get(tid, run["run_id"])
    assert err.value.response.status_code == 404
    state = await client.threads.get_state(tid)
    assert state["values"] == {"text": "c.."} and state["next"] == []


async def test_multitask_strategies(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    first = await client.runs.create(tid, "slow", input={"text": "e"})
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.runs.create(tid, "slow", input={"text": "f"}, multitask_strategy="reject")
    assert err.value.response.status_code == 409
    assert "already running" in err.value.response.json()["detail"]
    queued = await client.runs.create(tid, "echo", input={"messages": [("user", "q")]},
                                      multitask_strategy="enqueue")
    assert (await client.runs.get(tid, queued["run_id"]))["status"] == "pending"
    interrupting = await client.runs.create(tid, "slow", input={"text": "g"},
                                            multitask_strategy="interrupt")
    await client.runs.join(tid, interrupting["run_id"])
    statuses = {r["run_id"]: r["status"] for r in await client.runs.list(tid)}
    assert statuses[first["run_id"]] == "interrupted"
    assert statuses[queued["run_id"]] == "interrupted"
    assert statuses[interrupting["run_id"]] == "success"
    later = await client.runs.create(tid, "slow", input={"text": "h"})
    await asyncio.sleep(0.2)
    rolling = await client.runs.create(tid, "slow", input={"text": "i"},
                                       multitask_strategy="rollback")
    out = await client.runs.join(tid, rolling["run_id"])
    assert out["text"] == "i.."
    assert later["run_id"] not in {r["run_id"] for r in await client.runs.list(tid)}


async def test_if_not_exists_and_unknown_ids(client):
    tid = str(uuid.uuid4())
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.runs.wait(tid, "echo", input={"messages": [("user", "x")]})
    assert err.value.response.status_code == 404 and tid in err.value.response.json()["detail"]
    out = await client.runs.wait(tid, "echo", input={"messages": [("user", "x")]},
                                 if_not_exists="create")
    assert out["messages"][-1]["content"] == "echo: x"
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.runs.wait(tid, "nope", input={})
    assert err.value.response.status_code == 404 and "nope" in err.value.response.json()["detail"]
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.runs.get(tid, str(uuid.uuid4()))
    assert err.value.response.status_code == 404


async def test_stateless_runs(client):
    out = await client.runs.wait(None, "echo", input={"messages": [("user", "solo")]})
    assert out["messages"][-1]["content"] == "echo: solo"
    parts = [p async for p in client.runs.stream(None, "echo",
                                                 input={"messages": [("user", "s2")]})]
    assert parts[0].event == "metadata" and parts[-1].event == "values"
    made = await client.runs.create_batch([
        {"assistant_id": "echo", "input": {"messages": [("user", "b1")]}},
        {"assistant_id": "echo", "input": {"messages": [("user", "b2")]}}])
    assert len(made) == 2 and all(r["status"] == "pending" for r in made)


async def test_threads_search_count_patch_copy_delete(client):
    mark = uuid.uuid4().hex
    a = await client.threads.create(metadata={"mark": mark, "n": 1})
    await client.threads.create(metadata={"mark": mark, "n": 2})
    found = await client.threads.search(metadata={"mark": mark})
    assert len(found) == 2 and found[0]["metadata"]["n"] == 2  # newest first
    assert await client.threads.count(metadata={"mark": mark}) == 2
    assert len(await client.threads.search(metadata={"mark": mark}, limit=1)) == 1
    patched = await client.threads.update(a["thread_id"], metadata={"extra": True})
    assert patched["metadata"] == {"mark": mark, "n": 1, "extra": True}
    await client.runs.wait(a["thread_id"], "echo", input={"messages": [("user", "c")]})
    copy = await client.threads.copy(a["thread_id"])
    state = await client.threads.get_state(copy["thread_id"])
    assert [m["content"] for m in state["values"]["messages"]] == ["c", "echo: c"]
    await client.threads.delete(a["thread_id"])
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.threads.get(a["thread_id"])
    assert err.value.response.status_code == 404
    busy = await client.threads.search(status="busy")
    assert all(t["status"] == "busy" for t in busy)


async def test_update_state_as_node_and_time_travel(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "echo", input={"messages": [("user", "first")]})
    history = await client.threads.get_history(tid)
    first_input = history[-1]
    done = await client.threads.update_state(
        tid, {"messages": [{"role": "assistant", "content": "edited"}]}, as_node="echo")
    assert done["checkpoint"]["checkpoint_id"]
    state = await client.threads.get_state(tid)
    assert state["values"]["messages"][-1]["content"] == "edited"
    old = await client.threads.get_state(tid, checkpoint_id=first_input["checkpoint_id"])
    assert old["next"] == ["__start__"]  # the input checkpoint, as LangGraph
    out = await client.runs.wait(tid, "echo", input=None,
                                 checkpoint_id=first_input["checkpoint_id"])
    assert [m["content"] for m in out["messages"]] == ["first", "echo: first"]


async def test_agent_with_tool_calls_streams_tokens(client):
    thread = await client.threads.create()
    parts = [p async for p in client.runs.stream(
        thread["thread_id"], "agent", input={"messages": [("user", "please add")]},
        stream_mode=["messages-tuple", "updates"])]
    tokens = "".join(p.data[0]["content"] for p in parts if p.event == "messages"
                     and p.data[0]["type"] in ("AIMessageChunk", "ai"))
    assert "the sum is 5" in tokens
    state = await client.threads.get_state(thread["thread_id"])
    types = [m["type"] for m in state["values"]["messages"]]
    assert types == ["human", "ai", "tool", "ai"]


def test_sync_client_flow(sync_client):
    thread = sync_client.threads.create()
    tid = thread["thread_id"]
    parts = list(sync_client.runs.stream(tid, "human", input={"text": "s"},
                                         stream_mode="updates", stream_resumable=True))
    assert parts[0].event == "metadata" and "__interrupt__" in parts[-1].data
    rest = list(sync_client.runs.join_stream(tid, parts[0].data["run_id"],
                                             last_event_id=parts[1].id))
    assert [p.id for p in rest] == [p.id for p in parts[2:]]
    out = sync_client.runs.wait(tid, "human", command={"resume": "ok"})
    assert out["answer"] == "ok"
    run = sync_client.runs.create(tid, "human", input={"text": "t"})
    assert sync_client.runs.join(tid, run["run_id"])["__interrupt__"]
    assert sync_client.threads.get(tid)["status"] == "interrupted"
    assert sync_client.assistants.search(graph_id="human")[0]["graph_id"] == "human"
    assert sync_client.threads.get_state(tid)["next"] == ["ask"]
    sync_client.threads.delete(tid)
