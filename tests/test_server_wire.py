"""The server's answers to bad input, auth, owners, limits, CORS and addresses, over
real HTTP on loopback."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from server_harness import running

from threadloom.server.auth import KeyAuth, Principal, hash_key, scope_for
from threadloom.server.config import ConfigError, ServerConfig
from threadloom.server.state import Limits

pytestmark = pytest.mark.xdist_group("server")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running(tmp_path_factory.mktemp("wire"), limits=Limits(max_body_bytes=20_000,
                                                                max_event_bytes=5_000)) as base:
        yield base


def test_errors_are_json_with_detail(url):
    c = httpx.Client(base_url=url)
    bad = c.post("/threads", content=b"{nope", headers={"content-type": "application/json"})
    assert bad.status_code == 422 and bad.json() == {"detail": "Invalid JSON in request body"}
    empty = c.post("/threads/search", content=b"")
    assert empty.status_code == 422
    field = c.post("/threads/search", json={"limit": "x"})
    assert field.status_code == 422 and field.json()["detail"].startswith("limit:")
    mode = c.post("/runs/wait", json={"assistant_id": "echo", "stream_mode": ["nope"]})
    assert mode.status_code == 422 and "stream_mode" in mode.json()["detail"]
    both = c.post("/runs/wait", json={"assistant_id": "echo", "input": {},
                                      "command": {"resume": 1}})
    assert both.status_code == 422 and "command" in both.json()["detail"]
    tid = str(uuid.uuid4())
    missing = c.get(f"/threads/{tid}")
    assert missing.status_code == 404 and tid in missing.json()["detail"]
    rid = str(uuid.uuid4())
    thread = c.post("/threads", json={}).json()
    run = c.get(f"/threads/{thread['thread_id']}/runs/{rid}")
    assert run.status_code == 404 and rid in run.json()["detail"]
    assert c.get("/assistants/not-a-uuid").status_code == 422
    nowhere = c.get("/store/items", params={"namespace": "a"})
    assert nowhere.status_code == 404 and nowhere.json() == {"detail": "Not Found"}
    assert c.post("/runs/crons", json={}).status_code == 404
    wrong = c.put("/threads")
    assert wrong.status_code == 405 and "detail" in wrong.json()
    assert c.get(f"/threads/{thread['thread_id']}/runs?limit=abc").status_code == 422
    dup = c.post("/threads", json={"thread_id": thread["thread_id"]})
    assert dup.status_code == 409
    same = c.post("/threads", json={"thread_id": thread["thread_id"], "if_exists": "do_nothing"})
    assert same.status_code == 200 and same.json()["thread_id"] == thread["thread_id"]


def test_size_limits(url):
    c = httpx.Client(base_url=url)
    big = c.post("/threads", json={"metadata": {"x": "y" * 30_000}})
    assert big.status_code == 413 and "limit" in big.json()["detail"]
    thread = c.post("/threads", json={}).json()
    out = c.post(f"/threads/{thread['thread_id']}/runs/wait", json={
        "assistant_id": "echo", "input": {"messages": [{"role": "user", "content": "z" * 4000}]}})
    assert out.status_code == 200
    tid = thread["thread_id"]
    run_id = c.get(f"/threads/{tid}/runs").json()[0]["run_id"]
    with c.stream("GET", f"/threads/{tid}/runs/{run_id}/stream") as r:
        body = r.read().decode()
    assert "EventTooLarge" in body  # the last values event (two 4000-char messages)


def test_info_ok_and_openapi(url):
    c = httpx.Client(base_url=url)
    assert c.get("/ok").json() == {"ok": True}
    assert c.get("/info").json()["flags"]["crons"] is False
    spec = c.get("/openapi.json").json()
    assert "/threads/{thread_id}/runs/stream" in spec["paths"]


def test_cors_off_by_default(url):
    r = httpx.options(url + "/threads", headers={"Origin": "http://evil.example",
                                                 "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in r.headers


def test_cors_when_configured(tmp_path):
    with running(tmp_path, cors_origins=["http://ui.example"]) as base:
        r = httpx.options(base + "/threads", headers={"Origin": "http://ui.example",
                                                      "Access-Control-Request-Method": "POST"})
        assert r.headers["access-control-allow-origin"] == "http://ui.example"


def _keys(tmp_path, entries):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": entries}))
    return str(path)


def test_api_keys_owners_and_scopes(tmp_path):
    keys = _keys(tmp_path, [
        {"sha256": hash_key("alice-key"), "principal": "alice"},
        {"sha256": hash_key("bob-key"), "principal": "bob"},
        {"sha256": hash_key("reader-key"), "principal": "alice",
         "scopes": ["threads:read", "assistants:read"]}])
    with running(tmp_path, keys_file=keys) as base:
        anon = httpx.post(base + "/threads", json={})
        assert anon.status_code == 401 and anon.json()["detail"]
        assert httpx.get(base + "/ok").status_code == 200  # health checks stay open
        wrong = httpx.post(base + "/threads", json={}, headers={"X-Api-Key": "guess"})
        assert wrong.status_code == 401
        alice = httpx.Client(base_url=base, headers={"Authorization": "Bearer alice-key"})
        bob = httpx.Client(base_url=base, headers={"X-Api-Key": "bob-key"})
        reader = httpx.Client(base_url=base, headers={"X-Api-Key": "reader-key"})
        tid = alice.post("/threads", json={"metadata": {"o": 1}}).json()["thread_id"]
        assert alice.post(f"/threads/{tid}/runs/wait", json={
            "assistant_id": "echo", "input": {"messages": [("user", "a")]}}).status_code == 200
        theirs = bob.get(f"/threads/{tid}")
        assert theirs.status_code == 404 and tid in theirs.json()["detail"]
        assert bob.post(f"/threads/{tid}/runs", json={"assistant_id": "echo"}).status_code == 404
        assert bob.post("/threads/search", json={}).json() == []
        runs = alice.get(f"/threads/{tid}/runs").json()
        assert bob.get(f"/threads/{tid}/runs/{runs[0]['run_id']}").status_code == 404
        assert reader.get(f"/threads/{tid}").status_code == 200
        denied = reader.post(f"/threads/{tid}/runs", json={"assistant_id": "echo"})
        assert denied.status_code == 403 and "runs:write" in denied.json()["detail"]
        hijack = bob.post("/threads", json={"thread_id": tid})
        assert hijack.status_code == 409


def test_key_file_rules(tmp_path):
    with pytest.raises(ValueError, match="plain key"):
        KeyAuth([{"key": "x", "sha256": hash_key("x"), "principal": "p"}])
    with pytest.raises(ValueError, match="64 hex"):
        KeyAuth([{"sha256": "abc", "principal": "p"}])
    with pytest.raises(ValueError, match="unknown scopes"):
        KeyAuth([{"sha256": hash_key("x"), "principal": "p", "scopes": ["root"]}])
    auth = KeyAuth([{"sha256": hash_key("k"), "principal": "p", "scopes": ["threads:*"]}])
    found = auth({"authorization": "Bearer k"})
    assert found == Principal("p", frozenset({"threads:*"}))
    assert found.allows("threads:write") and not found.allows("runs:write")
    assert auth({"authorization": "Bearer nope"}) is None
    assert scope_for("POST", "/threads/abc/history") == "threads:read"
    assert scope_for("POST", "/threads/abc/runs/wait") == "runs:write"


def test_refuses_other_address_without_keys(tmp_path):
    cfg = ServerConfig(graphs={"e": "x:y"}, host="0.0.0.0")  # noqa: S104 - the refusal
    with pytest.raises(ConfigError, match="without API keys"):
        cfg.check_address(None)
    ServerConfig(graphs={"e": "x:y"}, host="127.0.0.1").check_address(None)
    ServerConfig(graphs={"e": "x:y"}, host="::1").check_address(None)


def test_langgraph_json(tmp_path):
    (tmp_path / "agent.py").write_text("from server_graphs import echo_graph as graph\n")
    (tmp_path / ".env").write_text("TL_TEST_FROM_ENV=yes\n")
    (tmp_path / "langgraph.json").write_text(json.dumps({
        "dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}, "env": ".env"}))
    cfg = ServerConfig.build([], config=str(tmp_path / "langgraph.json"))
    assert cfg.graphs == {"agent": "./agent.py:graph"} and cfg.base_dir == tmp_path
    assert cfg.env == {"TL_TEST_FROM_ENV": "yes"}
    with pytest.raises(ConfigError, match="graphs"):
        (tmp_path / "bad.json").write_text("{}")
        ServerConfig.build([], config=str(tmp_path / "bad.json"))
    with pytest.raises(ConfigError, match="MODULE:ATTR"):
        ServerConfig.build(["nocolon"])
