"""Bullets of the server's brief not proven elsewhere: the pluggable authenticate hook
(sync and async, from ``--auth`` or ``langgraph.json``'s ``auth.path``), digests compared
in constant time (every key compared, whichever matches), ``interrupt_after`` pausing and
resuming, SSE ids only on resumable streams (as ``langgraph dev``), and a graph compiled
with a checkpointer of its own served on the server's."""

from __future__ import annotations

import json
import textwrap

import httpx
import pytest
from langgraph_sdk import get_client
from server_harness import HERE, running

from threadloom.server import auth as auth_module
from threadloom.server.auth import KeyAuth, hash_key
from threadloom.server.config import ServerConfig

pytestmark = pytest.mark.xdist_group("server")

HOOK = '''
from threadloom.server import Principal

async def hook(headers):
    user = headers.get("x-user")
    if user in ("ann", "bob"):
        return Principal(user)
    if user == "reader":
        return Principal("ann", frozenset({"threads:read"}))
    return None

def sync_hook(headers):
    return Principal("ann") if headers.get("x-user") == "ann" else None
'''


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("audit")) as base:
        yield base


@pytest.mark.parametrize("attr", ["hook", "sync_hook"])
def test_an_authenticate_hook_replaces_keys(tmp_path, attr):
    (tmp_path / "auth.py").write_text(HOOK)
    with running(tmp_path, auth_spec=f"{tmp_path / 'auth.py'}:{attr}") as base:
        assert httpx.post(base + "/threads", json={}).status_code == 401
        assert httpx.get(base + "/ok").status_code == 200
        ann = httpx.Client(base_url=base, headers={"x-user": "ann"})
        tid = ann.post("/threads", json={}).json()["thread_id"]
        assert ann.get(f"/threads/{tid}").status_code == 200
        if attr == "sync_hook":
            return
        bob = httpx.Client(base_url=base, headers={"x-user": "bob"})
        assert bob.get(f"/threads/{tid}").status_code == 404  # another owner's: as missing
        reader = httpx.Client(base_url=base, headers={"x-user": "reader"})
        assert reader.get(f"/threads/{tid}").status_code == 200
        denied = reader.post(f"/threads/{tid}/runs", json={"assistant_id": "echo"})
        assert denied.status_code == 403


def test_langgraph_json_auth_path_and_binding(tmp_path):
    (tmp_path / "auth.py").write_text(HOOK)
    (tmp_path / "langgraph.json").write_text(json.dumps({
        "dependencies": ["."], "graphs": {"echo": f"{HERE / 'server_graphs.py'}:echo_graph"},
        "auth": {"path": "./auth.py:hook"}}))
    cfg = ServerConfig.build([], config=str(tmp_path / "langgraph.json"), host="0.0.0.0")  # noqa: S104
    hook = cfg.auth_hook()
    assert hook is not None
    cfg.check_address(hook)  # a hook, like keys, allows another address


def test_every_key_is_compared_whichever_matches(monkeypatch):
    keys = KeyAuth([{"sha256": hash_key(k), "principal": k} for k in ("a", "b", "c")])
    calls: list[tuple[bytes, bytes]] = []
    real = auth_module.hmac.compare_digest

    def counting(x: bytes, y: bytes) -> bool:
        calls.append((x, y))
        return real(x, y)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", counting)
    for key, expected in (("a", "a"), ("c", "c"), ("zz", None)):
        calls.clear()
        found = keys({"x-api-key": key})
        assert (found.identity if found else None) == expected
        assert len(calls) == 3  # no early exit: the time does not tell which key matched
        assert all(len(x) == len(y) == 32 for x, y in calls)  # digests, never the key


async def test_interrupt_after_pauses_then_resumes(url):
    client = get_client(url=url, api_key=None)
    tid = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(tid, "human", input={"text": "x"}, interrupt_after=["boom"])
    assert out == {"text": "x!"}
    assert (await client.threads.get_state(tid))["next"] == ["ask"]
    assert (await client.threads.get(tid))["status"] == "interrupted"
    out = await client.runs.wait(tid, "human", input=None)
    assert out["__interrupt__"][0]["value"] == {"question": "ok?", "text": "x!"}


async def test_sse_ids_only_on_resumable_streams(url):
    client = get_client(url=url, api_key=None)
    plain = [p async for p in client.runs.stream(None, "echo", input={"messages": [
        ("user", "a")]}, stream_mode="updates")]
    assert plain and all(p.id is None for p in plain)
    tid = (await client.threads.create())["thread_id"]
    resumable = [p async for p in client.runs.stream(tid, "echo", input={"messages": [
        ("user", "a")]}, stream_mode="updates", stream_resumable=True)]
    assert [p.id for p in resumable] == [str(i) for i in range(1, len(resumable) + 1)]


def test_a_graph_compiled_with_its_own_checkpointer_runs_on_the_servers(tmp_path):
    (tmp_path / "own.py").write_text(textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(HERE)!r})
        from server_graphs import human_graph
        from threadloom import InMemoryCheckpointer
        graph = human_graph.builder.compile(InMemoryCheckpointer())
    '''))
    graphs = {"own": f"{tmp_path / 'own.py'}:graph"}
    with running(tmp_path, graphs) as base:
        c = httpx.Client(base_url=base)
        tid = c.post("/threads", json={}).json()["thread_id"]
        out = c.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "own",
                                                        "input": {"text": "y"}})
        assert out.json()["__interrupt__"]
    with running(tmp_path, graphs) as base:  # a new server process state, the same files
        c = httpx.Client(base_url=base)
        state = c.get(f"/threads/{tid}/state").json()
        assert state["values"] == {"text": "y!"} and state["next"] == ["ask"]
        out = c.post(f"/threads/{tid}/runs/wait", json={
            "assistant_id": "own", "command": {"resume": "ok"}}).json()
        assert out == {"text": "y!", "answer": "ok"}


async def test_store_and_crons_answer_404_through_the_sdk(url):
    client = get_client(url=url, api_key=None)
    tid = (await client.threads.create())["thread_id"]
    calls = [client.store.put_item(["ns"], "k", {"v": 1}),
             client.store.search_items(["ns"]),
             client.crons.create("echo", schedule="* * * * *"),
             client.crons.create_for_thread(tid, "echo", schedule="* * * * *"),
             client.crons.search()]
    for call in calls:
        with pytest.raises(httpx.HTTPStatusError) as err:
            await call
        assert err.value.response.status_code == 404
        assert err.value.response.json() == {"detail": "Not Found"}
    info = httpx.get(url + "/info").json()["flags"]
    assert info["store"] is False and info["crons"] is False


async def test_run_metadata_and_config_reach_the_run_and_its_events(url):
    client = get_client(url=url, api_key=None)
    tid = (await client.threads.create())["thread_id"]
    parts = [p async for p in client.runs.stream(
        tid, "echo", input={"messages": [("user", "x")]}, stream_mode="messages-tuple",
        metadata={"m": "one"}, config={"configurable": {"user_id": "ann"}, "tags": ["t1"]})]
    meta = next(p.data[1] for p in parts if p.event == "messages")
    assert meta["m"] == "one" and meta["thread_id"] == tid and meta["graph_id"] == "echo"
    run = (await client.runs.list(tid))[0]
    assert run["metadata"] == {"m": "one"}
    assert run["kwargs"]["config"]["configurable"]["user_id"] == "ann"


async def test_reconnect_mid_run_with_last_event_id_no_gap_no_duplicate(url):
    client = get_client(url=url, api_key=None)
    tid = (await client.threads.create())["thread_id"]
    modes = ["values", "updates", "tasks"]
    seen = []
    stream = client.runs.stream(tid, "slow", input={"text": "r"}, stream_mode=modes,
                                stream_resumable=True)
    async for part in stream:  # the first few events, then the client drops
        seen.append(part)
        if len(seen) == 3:
            break
    await stream.aclose()
    run_id = seen[0].data["run_id"]
    assert (await client.runs.get(tid, run_id))["status"] == "running"  # still going
    rest = [p async for p in client.runs.join_stream(tid, run_id, last_event_id=seen[-1].id)]
    whole = [p async for p in client.runs.join_stream(tid, run_id)]  # after the end
    assert [p.id for p in seen + rest] == [p.id for p in whole]
    assert [(p.event, p.data) for p in seen + rest] == [(p.event, p.data) for p in whole]
    assert whole[-1].event == "values" and whole[-1].data == {"text": "r.."}
