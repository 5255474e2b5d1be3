"""The code stays ruff-clean (the rules are in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "threadloom", "tests", "benchmarks", "notebooks"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
