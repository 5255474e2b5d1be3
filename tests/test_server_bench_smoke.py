"""Smoke test of ``benchmarks/bench_server.py``: its graph and client against the real
server, a small burst, every stream complete."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from server_harness import running

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_server  # noqa: E402  (benchmarks/ is a folder of scripts)

pytestmark = pytest.mark.xdist_group("server")


def test_small_burst(tmp_path):
    (tmp_path / "bench_agent.py").write_text(bench_server.TL_GRAPH)
    with running(tmp_path, {"agent": f"{tmp_path / 'bench_agent.py'}:graph"}) as url:
        result = asyncio.run(bench_server.burst(url, 20, "agent"))
    assert result["failed"] == 0 and result["n"] == 20
    assert result["p50_first_ms"] is not None and result["p99_first_ms"] >= result["p50_first_ms"]
    assert "from langgraph.graph import" in bench_server.LG_GRAPH
