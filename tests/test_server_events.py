"""``stream_mode="events"`` (LangChain's callback events, astream_events v2 shapes)
through the unmodified ``langgraph_sdk`` client against the real server: the graph's and
each node's ``on_chain_start``/``on_chain_end``, the model's ``on_chat_model_stream``
tokens, parent ids linking them, and the other modes beside it unchanged."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client, get_sync_client
from server_harness import running

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("events")) as base:
        yield base


async def test_agent_events_nodes_and_tokens(url):
    client = get_client(url=url, api_key=None)
    thread = await client.threads.create()
    parts = [p async for p in client.runs.stream(
        thread["thread_id"], "agent", input={"messages": [("user", "add please")]},
        stream_mode=["events", "values"])]
    run_id = parts[0].data["run_id"]
    events = [p.data for p in parts if p.event == "events"]
    assert {p.event for p in parts} == {"metadata", "events", "values"}
    assert set(events[0]) == {"event", "name", "run_id", "tags", "metadata", "data",
                              "parent_ids"}
    first, last = events[0], events[-1]
    assert (first["event"], first["run_id"], first["parent_ids"]) == \
        ("on_chain_start", run_id, [])
    assert first["data"]["input"]["messages"] == [["user", "add please"]]
    assert last["event"] == "on_chain_end" and last["run_id"] == run_id
    assert last["data"]["output"]["messages"][-1]["content"] == "the sum is 5"
    assert first["metadata"]["thread_id"] == thread["thread_id"]

    nodes = [(e["event"], e["name"]) for e in events[1:-1]
             if e["event"] in ("on_chain_start", "on_chain_end")]
    starts = [n for kind, n in nodes if kind == "on_chain_start"]
    assert starts[:4] == ["before_run", "model", "tools", "model"]
    assert [n for kind, n in nodes if kind == "on_chain_end"] == starts
    model_start = next(e for e in events if e["event"] == "on_chain_start"
                       and e["name"] == "model")
    assert model_start["parent_ids"] == [run_id] and model_start["tags"] == ["graph:step:2"]
    assert model_start["metadata"]["langgraph_node"] == "model"
    assert model_start["metadata"]["langgraph_step"] == 2  # before_run is step 1
    model_end = next(e for e in events if e["event"] == "on_chain_end" and e["name"] == "model")
    assert model_end["run_id"] == model_start["run_id"]
    assert model_end["data"]["output"]["messages"][-1]["tool_calls"][0]["name"] == "add"

    tokens = [e for e in events if e["event"] == "on_chat_model_stream"]
    text = "".join(e["data"]["chunk"]["content"] for e in tokens)
    assert text == "the sum is 5"
    assert all(e["data"]["chunk"]["type"] == "AIMessageChunk" for e in tokens)
    last_model = [e for e in events if e["event"] == "on_chain_start"
                  and e["name"] == "model"][-1]
    assert tokens[-1]["parent_ids"] == [run_id, last_model["run_id"]]
    assert tokens[-1]["metadata"]["langgraph_node"] == "model"
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["messages"][-1]["content"] == "the sum is 5"

    replay = [p async for p in client.runs.join_stream(thread["thread_id"], run_id)]
    assert [p.data for p in replay if p.event == "events"] == events  # the same ids again


def test_events_alone_sync(url):
    client = get_sync_client(url=url, api_key=None)
    parts = list(client.runs.stream(None, "echo", input={"messages": [("user", "yo")]},
                                    stream_mode="events"))
    assert [p.event for p in parts] == ["metadata"] + ["events"] * 6
    assert [(p.data["event"], p.data["name"]) for p in parts[1:]] == [  # LangGraph's order
        ("on_chain_start", "LangGraph"), ("on_chain_start", "echo"),
        ("on_chain_stream", "echo"), ("on_chain_end", "echo"),
        ("on_chain_stream", "LangGraph"), ("on_chain_end", "LangGraph")]
    assert parts[4].data["data"]["output"]["messages"][0]["content"] == "echo: yo"
    assert parts[3].data["data"]["chunk"] == parts[4].data["data"]["output"]
    assert parts[5].data["data"]["chunk"] == {"echo": parts[4].data["data"]["output"]}
    assert parts[5].data["run_id"] == parts[1].data["run_id"]
