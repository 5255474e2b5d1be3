"""The thread-wide join stream (``GET /threads/{id}/stream``, the SDK's
``threads.join_stream``) against the real server: every run of the thread in turn, ids
unique across runs, ``Last-Event-ID`` resuming with no gap and no duplicate, the modes."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import httpx
import pytest
from langgraph_sdk import get_client, get_sync_client
from server_harness import GRAPHS, Subprocess, free_port, running

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("srv")) as base:
        yield base


async def _take(stream, count: int) -> list:
    if asyncio.iscoroutine(stream):  # the async client's join_stream is awaited first
        stream = await stream
    parts = []
    try:
        async for part in stream:
            parts.append(part)
            if len(parts) == count:
                break
    finally:
        await stream.aclose()  # the thread stream stays open until the client leaves
    return parts


def _ord(part) -> tuple[int, int]:
    head, _, tail = part.id.partition("-")
    return int(head), int(tail)


async def test_follows_each_run_then_resumes_exactly(url):
    client = get_client(url=url, api_key=None)
    tid = (await client.threads.create())["thread_id"]
    follow = asyncio.ensure_future(_take(client.threads.join_stream(tid), 4))
    await asyncio.sleep(0.3)  # the stream is open before the runs are made
    first = await client.runs.create(tid, "echo", input={"messages": [("user", "one")]})
    second = await client.runs.create(tid, "echo", input={"messages": [("user", "two")]})
    parts = await asyncio.wait_for(follow, 20)
    # each run: metadata, then its values (input and output): 2 runs -> 6; took 4
    assert [p.event for p in parts] == ["metadata", "values", "values", "metadata"]
    assert parts[0].data["run_id"] == first["run_id"]
    assert parts[3].data["run_id"] == second["run_id"]
    assert parts[2].data["messages"][-1]["content"] == "echo: one"
    await client.runs.join(tid, second["run_id"])

    everything = await _take(client.threads.join_stream(tid, last_event_id="-"), 6)
    assert [p.id for p in everything[:4]] == [p.id for p in parts]
    assert [_ord(p) for p in everything] == sorted(_ord(p) for p in everything)
    assert len({p.id for p in everything}) == 6
    assert everything[5].data["messages"][-1]["content"] == "echo: two"
    for cut in range(6):  # resuming after any event gives exactly the rest
        rest = await _take(client.threads.join_stream(tid, last_event_id=everything[cut].id),
                           5 - cut) if cut < 5 else []
        assert [(p.id, p.data) for p in rest] == [(p.id, p.data) for p in everything[cut + 1:]]

    third = await client.runs.create(tid, "echo", input={"messages": [("user", "three")]})
    await client.runs.join(tid, third["run_id"])
    after = await _take(client.threads.join_stream(tid, last_event_id=everything[5].id), 3)
    assert [p.event for p in after] == ["metadata", "values", "values"]
    assert after[0].data["run_id"] == third["run_id"]


async def test_modes_and_joining_a_running_run(url):
    client = get_client(url=url, api_key=None)
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "slow", input={"text": "s"})
    await asyncio.sleep(0.2)  # running: a stream without Last-Event-ID starts with it
    parts = await asyncio.wait_for(_take(client.threads.join_stream(tid), 4), 20)
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == run["run_id"]
    assert [p.data for p in parts[1:]] == [{"text": "s"}, {"text": "s."}, {"text": "s.."}]
    states = await _take(client.threads.join_stream(tid, last_event_id="-",
                                                    stream_mode="state_update"), 3)
    assert {p.event for p in states} == {"values"}
    life = await _take(client.threads.join_stream(tid, last_event_id="-",
                                                  stream_mode="lifecycle"), 1)
    assert life[0].event == "metadata"


def test_sync_client_and_bad_requests(url):
    client = get_sync_client(url=url, api_key=None)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "echo", input={"messages": [("user", "s")]})
    parts = []
    stream = client.threads.join_stream(tid, last_event_id="-")
    for part in stream:
        parts.append(part)
        if len(parts) == 3:
            break
    stream.close()
    assert [p.event for p in parts] == ["metadata", "values", "values"]
    assert httpx.get(f"{url}/threads/{tid}/stream",
                     headers={"Last-Event-ID": "nonsense"}).status_code == 422
    assert httpx.get(f"{url}/threads/{tid}/stream",
                     params={"stream_mode": "bogus"}).status_code == 422
    missing = httpx.get(f"{url}/threads/00000000-0000-0000-0000-000000000000/stream")
    assert missing.status_code == 404 and "not found" in missing.json()["detail"]


def test_open_streams_end_when_the_server_stops(tmp_path):
    port = free_port()
    server = Subprocess([f"echo={GRAPHS['echo']}", "--db", str(tmp_path / "s.db")], port).up()
    tid = httpx.post(f"{server.url}/threads", json={}).json()["thread_id"]
    got: list[bytes] = []

    def follow() -> None:
        with contextlib.suppress(httpx.HTTPError), httpx.stream(
                "GET", f"{server.url}/threads/{tid}/stream", timeout=30) as answer:
            for chunk in answer.iter_raw():
                got.append(chunk)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    time.sleep(0.5)
    started = time.monotonic()
    server.proc.terminate()  # SIGTERM: the open thread stream must not hold the exit
    assert server.proc.wait(timeout=10) in (0, -15)  # uvicorn re-raises the signal at exit
    assert time.monotonic() - started < 4  # a held stream would take the 5 s grace period
    reader.join(timeout=5)
    assert not reader.is_alive()
