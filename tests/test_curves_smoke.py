"""Smoke test of the cost curves: ``python benchmarks/curves.py --quick`` (both sides when
the ``bench`` extra is installed; the PostgreSQL curves need the test server)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CURVES = ROOT / "benchmarks" / "curves.py"

sys.path.insert(0, str(ROOT / "benchmarks"))
import curves  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)
import harness  # noqa: E402


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str],
                                                                 dict]:
    out = tmp_path_factory.mktemp("curves") / "curves.json"
    proc = subprocess.run([sys.executable, str(CURVES), "--quick", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    return proc, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.postgres
def test_every_curve_runs_on_both_sides(quick_run):
    proc, data = quick_run
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert set(data["results"]) == set(curves.CURVES)
    for name, result in data["results"].items():
        sizes = [str(n) for n in curves.CURVES[name].quick_sizes]
        assert list(result["threadloom"]) == sizes
        for figures in result["threadloom"].values():
            assert all(isinstance(v, float) and v > 0 for v in figures.values()), figures
        if harness.peer_available(curves.CURVES[name].peer):
            assert list(result["LangGraph"]) == sizes


@pytest.mark.postgres
def test_table_gives_ratios_growth_orders_and_statements(quick_run):
    proc, data = quick_run
    lines = proc.stdout.splitlines()
    assert any(line.startswith("| C1 ") and "SQL statements per super-step" in line
               for line in lines)
    assert sum("growth order" in line for line in lines) >= len(curves.CURVES)
    pg = data["results"]["C1"]["threadloom"]["50"]
    assert pg[curves.PG_TRIPS] < 2  # one round trip per step, plus the run's own


def test_growth_order_is_the_exponent_between_the_two_largest_sizes():
    assert curves.growth_order({10: 5.0, 100: 5.0, 1000: 5.0}) == 0
    assert curves.growth_order({1: 9.0, 10: 1.0, 100: 10.0}) == pytest.approx(1.0)
    assert curves.growth_order({10: 1.0}) is None


def test_unknown_curve_is_a_usage_error():
    proc = subprocess.run([sys.executable, str(CURVES), "C9", "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "unknown curve" in proc.stderr
