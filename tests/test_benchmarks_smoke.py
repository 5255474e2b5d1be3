"""Smoke test of the benchmark harness: `python benchmarks/run.py W1 --quick`.

Needs only threadloom. The peer column either holds a LangGraph figure (peer installed)
or says "not installed" (the `bench` extra is absent): both are asserted, neither skipped.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "run.py"
HEADER = "| workload | metric"

sys.path.insert(0, str(ROOT / "benchmarks"))
import harness  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)


@pytest.fixture(scope="module")
def w1_quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str],
                                                                 dict]:
    out = tmp_path_factory.mktemp("bench") / "w1.json"
    proc = subprocess.run(
        [sys.executable, str(RUN), "W1", "--quick", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )
    data = json.loads(out.read_text()) if out.exists() else {}
    return proc, data


def test_w1_quick_exits_0_and_prints_the_table(w1_quick):
    proc, data = w1_quick
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith(HEADER))
    assert "| threadloom |" in header and "peer / threadloom" in header
    assert data["threadloom_import_error"] is None


def test_w1_quick_threadloom_side_measures_node_steps(w1_quick):
    _, data = w1_quick
    [row] = [r for r in data["results"] if r["workload"] == "W1"]
    assert row["metric"] == "us per node-step"
    assert isinstance(row["threadloom"], float)
    assert 0 < row["threadloom"] < 100_000  # a trivial node-step takes well under 0.1 s


def test_w1_quick_peer_column_is_a_figure_or_not_installed(w1_quick):
    proc, data = w1_quick
    [row] = [r for r in data["results"] if r["workload"] == "W1"]
    assert row["peer"] == "LangGraph"
    if harness.peer_available("langgraph"):
        assert isinstance(row["peer_value"], float) and row["peer_value"] > 0
        w1_line = next(line for line in proc.stdout.splitlines() if line.startswith("| W1"))
        assert w1_line.rstrip(" |").endswith("x")  # the ratio cell, e.g. "12.3x"
    else:
        assert row["peer_value"] == "not installed"
        assert "not installed" in proc.stdout


def test_unknown_workload_is_a_usage_error():
    proc = subprocess.run([sys.executable, str(RUN), "W9", "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "unknown workload" in proc.stderr and "W9" in proc.stderr


def test_rounds_report_each_sides_median():
    import run  # benchmarks/run.py

    rounds = [{"ms": 3.0, "MB": 1.0}, {"ms": 1.0, "MB": 9.0}, {"ms": 2.0, "MB": 2.0}]
    assert run.median_result(rounds) == {"ms": 2.0, "MB": 2.0}
    assert run.median_result([{"ms": 1.0}, "error: ValueError: x"]) == "error: ValueError: x"
    proc = subprocess.run([sys.executable, str(RUN), "W1", "--rounds", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "--rounds must be at least 1" in proc.stderr


def test_harness_helpers_follow_the_workload_definitions():
    assert len(harness.make_text(7)) == 200
    assert harness.make_text(7) == harness.make_text(7) != harness.make_text(8)
    # the scripted agent calls the tool with x = 0, 1, 2, then answers
    assert [harness.agent_decision(n) for n in range(5)] == [0, 1, 2, None, None]
    assert harness.window_mean([1.0, 2.0, 3.0, 4.0, 5.0, 9.0], 5, 2) == 4.5
    assert harness.ratio_cell(2.0, 30.0) == "15.0x"
    assert harness.ratio_cell("not available", 30.0) == "n/a"
    assert harness.format_value(0.01234) == "0.0123" and harness.format_value(1234.4) == "1,234"
    assert harness.QUICK.w1_nodes == harness.FULL.w1_nodes == 100


def test_peer_available_and_table_rendering():
    assert harness.peer_available("psutil") is (importlib.util.find_spec("psutil") is not None)
    with pytest.raises(KeyError):
        harness.peer_available("no-such-peer")
    table = harness.render_table([["W1", "us per node-step", "10", "LangGraph", "280", "28.0x"]])
    lines = table.splitlines()
    assert lines[0].startswith(HEADER) and lines[1].startswith("|---")
    assert lines[2].split("|")[3].strip() == "10"
    assert len({len(line) for line in lines}) == 1  # columns are aligned
