"""``threadloom serve`` from the command line: a ``langgraph.json`` project as
``langgraph dev`` reads it, the address refusal, a spec that does not load."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from langgraph_sdk import get_sync_client
from server_harness import HERE, free_port, wait_up

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("server")]


def _cli(*args, cwd=None, **kw):
    return subprocess.Popen([sys.executable, "-m", "threadloom.cli", "serve", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def test_serves_a_langgraph_json_project(tmp_path):
    (tmp_path / "agent.py").write_text(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
        "from server_graphs import echo_graph as graph\n")
    (tmp_path / "langgraph.json").write_text(json.dumps({
        "dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}, "env": {}}))
    port = free_port()
    proc = _cli("--config", "langgraph.json", "--port", str(port), "--db", "t.db", cwd=tmp_path)
    try:
        wait_up(f"http://127.0.0.1:{port}")
        client = get_sync_client(url=f"http://127.0.0.1:{port}", api_key=None)
        out = client.runs.wait(None, "agent", input={"messages": [("user", "cli")]})
        assert out["messages"][-1]["content"] == "echo: cli"
        assert (tmp_path / "t.db").exists() and (tmp_path / "t.server.db").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_refusals_are_one_line_and_exit_2(tmp_path):
    proc = _cli("--host", "0.0.0.0", f"{HERE / 'server_graphs.py'}:echo_graph", cwd=tmp_path)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "without API keys" in out
    proc = _cli(f"{HERE / 'server_graphs.py'}:missing", cwd=tmp_path)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "no attribute 'missing'" in out
