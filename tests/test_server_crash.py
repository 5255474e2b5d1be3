"""A server killed with SIGKILL mid-run: on restart the run resumes from its last
checkpoint and ends ``success``; nothing is lost (real subprocesses, real SQLite)."""

from __future__ import annotations

import time

import httpx
import pytest
from server_harness import HERE, Subprocess, free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("server")]


def _args(db):
    return [f"slow={HERE / 'server_graphs.py'}:slow_graph", "--db", str(db)]


def test_sigkill_mid_run_resumes_on_restart(tmp_path):
    db = tmp_path / "crash.db"
    port = free_port()
    first = Subprocess(_args(db), port, env={"TL_TEST_SLOW_S": "1.5"}).up()
    c = httpx.Client(base_url=first.url, timeout=30)
    tid = c.post("/threads", json={}).json()["thread_id"]
    run = c.post(f"/threads/{tid}/runs", json={"assistant_id": "slow", "input": {"text": "k"},
                                                "stream_mode": ["values"]}).json()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until the first node's checkpoint is saved
        state = c.get(f"/threads/{tid}/state").json()
        if state["values"].get("text") == "k.":
            break
        time.sleep(0.05)
    assert state["next"] == ["slow2"]
    first.kill()
    second = Subprocess(_args(db), port, env={"TL_TEST_SLOW_S": "0.2"}).up()
    try:
        c = httpx.Client(base_url=second.url, timeout=30)
        out = c.get(f"/threads/{tid}/runs/{run['run_id']}/join").json()
        assert out == {"text": "k.."}
        got = c.get(f"/threads/{tid}/runs/{run['run_id']}").json()
        assert got["status"] == "success"
        with c.stream("GET", f"/threads/{tid}/runs/{run['run_id']}/stream") as r:
            body = r.read().decode()
        assert '"attempt":2' in body
        ids = [int(line[4:]) for line in body.splitlines() if line.startswith("id: ")]
        assert ids == sorted(set(ids))  # no duplicate id across the two processes
        assert c.get(f"/threads/{tid}").json()["status"] == "idle"
    finally:
        second.stop()


def _frames(body):
    out = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((fields["event"], fields.get("data"), fields.get("id")))
    return out


def test_sse_ids_are_never_reused_after_sigkill(tmp_path):
    """The client saw ids the killed server had not written yet: the recovered attempt
    numbers its events past them, so Last-Event-ID resume skips nothing."""
    db = tmp_path / "ids.db"
    port = free_port()
    first = Subprocess(_args(db), port, env={"TL_TEST_SLOW_S": "1.5"}).up()
    c = httpx.Client(base_url=first.url, timeout=30)
    tid = c.post("/threads", json={}).json()["thread_id"]
    run = c.post(f"/threads/{tid}/runs", json={"assistant_id": "slow", "input": {"text": "k"},
                                                "stream_mode": ["values"]}).json()
    seen = []
    with c.stream("GET", f"/threads/{tid}/runs/{run['run_id']}/stream") as r:
        buf = ""
        for chunk in r.iter_text():
            buf += chunk
            seen = _frames(buf)
            if any(e == "values" and '"k."' in (d or "") for e, d, _ in seen):
                first.kill()  # at once: the last events are likely still in memory
                break
    last = max(int(i) for _, _, i in seen if i)
    second = Subprocess(_args(db), port, env={"TL_TEST_SLOW_S": "0.2"}).up()
    try:
        c = httpx.Client(base_url=second.url, timeout=30)
        with c.stream("GET", f"/threads/{tid}/runs/{run['run_id']}/stream",
                      headers={"Last-Event-ID": str(last)}) as r:
            rest = _frames(r.read().decode())
        assert rest[0][0] == "metadata" and '"attempt":2' in rest[0][1]
        assert all(int(i) > last for _, _, i in rest)
        assert rest[-1][0] == "values" and '"k.."' in rest[-1][1]
        with c.stream("GET", f"/threads/{tid}/runs/{run['run_id']}/stream") as r:
            ids = [int(i) for _, _, i in _frames(r.read().decode())]
        assert ids == sorted(set(ids))
    finally:
        second.stop()


def test_sigterm_ends_open_streams_cleanly(tmp_path):
    """SIGTERM while a client streams: the stream ends as a complete response (no
    'ASGI callable returned without completing response'), the run is recovered later."""
    db = tmp_path / "term.db"
    port = free_port()
    server = Subprocess(_args(db) + ["--log-level", "info"], port,
                        env={"TL_TEST_SLOW_S": "3"}).up()
    c = httpx.Client(base_url=server.url, timeout=30)
    tid = c.post("/threads", json={}).json()["thread_id"]
    with c.stream("POST", f"/threads/{tid}/runs/stream", json={
            "assistant_id": "slow", "input": {"text": "t"}, "stream_mode": ["values"]}) as r:
        chunks = r.iter_text()
        assert "event: metadata" in next(chunks)
        server.proc.terminate()
        rest = "".join(chunks)  # raises RemoteProtocolError on an incomplete response
    assert "event: error" not in rest
    server.proc.wait(timeout=20)
    log = server.output()
    assert "without completing response" not in log and "Traceback" not in log, log
