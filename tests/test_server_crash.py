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
