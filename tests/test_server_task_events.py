"""The ``tasks`` and ``debug`` stream modes through the official client, in the shapes
LangGraph 1.x streams them (measured on ``langgraph`` itself): a task's start
``{id, name, input, triggers}`` and its result ``{id, name, error, result, interrupts}``
(also for a task that paused on ``interrupt()`` or raised); ``debug`` wraps checkpoints
and tasks as ``{step, timestamp, type, payload}``. And a replay's first ``values``
event: the checkpoint's state before its input is applied."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client
from server_harness import running

pytestmark = pytest.mark.xdist_group("server")

START_KEYS = {"id", "name", "input", "triggers"}
RESULT_KEYS = {"id", "name", "error", "result", "interrupts"}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("tasks")) as base:
        yield base


@pytest.fixture
def client(url):
    return get_client(url=url, api_key=None)


async def _stream(client, tid, **kw):
    return [(p.event, p.data) async for p in client.runs.stream(tid, "human", **kw)]


async def test_tasks_mode_has_start_and_result_of_every_task(client):
    tid = (await client.threads.create())["thread_id"]
    tasks = [d for e, d in await _stream(client, tid, input={"text": "x"},
                                         stream_mode="tasks") if e == "tasks"]
    assert [set(t) for t in tasks] == [START_KEYS, RESULT_KEYS, START_KEYS, RESULT_KEYS]
    boom_start, boom_done, ask_start, ask_done = tasks
    assert boom_start["name"] == "boom" and boom_start["input"] == {"text": "x"}
    assert boom_start["triggers"] == ["branch:to:boom"]
    assert boom_done == {"id": boom_start["id"], "name": "boom", "error": None,
                         "result": {"text": "x!"}, "interrupts": []}
    assert ask_done["id"] == ask_start["id"] and ask_done["result"] == {}
    assert ask_done["interrupts"][0]["value"] == {"question": "ok?", "text": "x!"}
    resumed = [d for e, d in await _stream(client, tid, command={"resume": "y"},
                                           stream_mode="tasks") if e == "tasks"]
    assert resumed[-1]["result"] == {"answer": "y"} and resumed[-1]["interrupts"] == []


async def test_tasks_mode_result_of_a_task_that_raises(client):
    tid = (await client.threads.create())["thread_id"]
    parts = await _stream(client, tid, input={"text": "boom"}, stream_mode="tasks")
    done = [d for e, d in parts if e == "tasks" and "result" in d]
    assert len(done) == 1 and done[0]["name"] == "boom" and done[0]["result"] == {}
    assert "kaboom" in done[0]["error"] and done[0]["interrupts"] == []
    assert parts[-1][0] == "error"


async def test_debug_mode_wraps_checkpoints_and_tasks(client):
    tid = (await client.threads.create())["thread_id"]
    debug = [d for e, d in await _stream(client, tid, input={"text": "x"},
                                         stream_mode="debug") if e == "debug"]
    assert all(set(d) == {"step", "timestamp", "type", "payload"} for d in debug)
    steps = [(d["type"], d["step"]) for d in debug]
    assert [s for s in steps if s[0] == "checkpoint"] == [
        ("checkpoint", -1), ("checkpoint", 0), ("checkpoint", 1)]
    # (the engine sends a step's checkpoint before its task results; LangGraph after)
    assert [s for s in steps if s[0] != "checkpoint"] == [
        ("task", 1), ("task_result", 1), ("task", 2), ("task_result", 2)]
    assert steps.index(("checkpoint", 0)) < steps.index(("task", 1))
    assert steps.index(("task_result", 1)) < steps.index(("task", 2))
    by_type = {d["type"]: d["payload"] for d in debug}
    assert set(by_type["task"]) == START_KEYS and set(by_type["task_result"]) == RESULT_KEYS
    assert by_type["task_result"]["interrupts"][0]["value"]["text"] == "x!"
    first_result = next(d["payload"] for d in debug if d["type"] == "task_result")
    assert first_result["result"] == {"text": "x!"} and first_result["error"] is None
    assert {"config", "parent_config", "values", "metadata", "next", "tasks"} <= set(
        by_type["checkpoint"])
    resumed = [d for e, d in await _stream(client, tid, command={"resume": "y"},
                                           stream_mode="debug") if e == "debug"]
    assert [(d["type"], d["step"]) for d in resumed if d["type"] != "checkpoint"] == [
        ("task", 2), ("task_result", 2)]
    assert [d["payload"]["metadata"]["step"] for d in resumed if d["type"] == "checkpoint"
            ] == [d["step"] for d in resumed if d["type"] == "checkpoint"] == [2]


async def test_a_replay_streams_the_saved_state_first(client):
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "human", input={"text": "x"})
    history = await client.threads.get_history(tid)
    by_step = {h["metadata"]["step"]: h["checkpoint_id"] for h in history}
    values = [d for e, d in await _stream(client, tid, input=None, checkpoint_id=by_step[-1],
                                          stream_mode="values") if e == "values"]
    assert values[:3] == [{}, {"text": "x"}, {"text": "x!"}]  # as LangGraph: no duplicate
    values = [d for e, d in await _stream(client, tid, input=None, checkpoint_id=by_step[0],
                                          stream_mode="values") if e == "values"]
    assert values[:2] == [{"text": "x"}, {"text": "x!"}]
    assert values[-1]["__interrupt__"][0]["value"]["text"] == "x!"


async def test_checkpoints_mode(client):
    tid = (await client.threads.create())["thread_id"]
    saved = [d for e, d in await _stream(client, tid, input={"text": "x"},
                                         stream_mode="checkpoints") if e == "checkpoints"]
    assert [c["metadata"]["step"] for c in saved] == [-1, 0, 1]
    assert saved[-1]["next"] == ["ask"] and saved[-1]["values"] == {"text": "x!"}
    assert saved[-1]["config"]["configurable"]["thread_id"] == tid
    assert saved[-1]["parent_config"]["configurable"]["checkpoint_id"] == \
        saved[-2]["config"]["configurable"]["checkpoint_id"]
