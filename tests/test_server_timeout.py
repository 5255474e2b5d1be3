"""A run that outlives the server's run timeout (``--run-timeout``; LangGraph's
``BG_JOB_TIMEOUT_SECS``) ends ``timeout``, its stream with an ``error`` event, its
thread ``error`` with the steps it saved: the thread stays resumable."""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client
from server_harness import running

from threadloom.server.state import Limits

pytestmark = pytest.mark.xdist_group("server")


async def test_a_run_past_its_timeout_ends_timeout_and_the_thread_resumes(tmp_path):
    with running(tmp_path, limits=Limits(run_timeout_s=1.5)) as url:
        client = get_client(url=url, api_key=None)
        tid = (await client.threads.create())["thread_id"]
        parts = [p async for p in client.runs.stream(tid, "slow", input={"text": "a"},
                                                     stream_mode="updates")]
        assert parts[-1].event == "error" and parts[-1].data["error"] == "TimeoutError"
        assert "1.5" in parts[-1].data["message"]
        assert [p.data for p in parts if p.event == "updates"] == [{"slow": {"text": "a."}}]
        run = (await client.runs.list(tid))[0]
        assert run["status"] == "timeout"
        thread = await client.threads.get(tid)
        assert thread["status"] == "error" and thread["values"] == {"text": "a."}
        assert (await client.threads.get_state(tid))["next"] == ["slow2"]
        out = await client.runs.wait(tid, "slow", input=None)  # one step left: in time
        assert out == {"text": "a.."}
        assert (await client.threads.get(tid))["status"] == "idle"


def test_the_run_timeout_option():
    from threadloom.server.serve import parser

    assert parser().parse_args(["a:b"]).run_timeout == 86400.0  # LangGraph's default
    assert parser().parse_args(["a:b", "--run-timeout", "30"]).run_timeout == 30.0
