"""The package type-checks cleanly under mypy (settings in pyproject.toml [tool.mypy]).

STYLE asks for type hints on every public API and a type checker in CI; this test is
that check. The snippet tests make sure the public message constructors keep their real
signatures for users' type checkers (positional content works, wrong types are caught).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Two mypy processes must not share a cache directory at once (they can crash on it). Under
# pytest-xdist these tests stay on one worker (``--dist loadgroup``), one after the other,
# sharing that worker's cache; each worker has its own cache directory in any case.
pytestmark = pytest.mark.xdist_group("mypy")
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
CACHE_DIR = ROOT / ".mypy_cache" / _WORKER if _WORKER else ROOT / ".mypy_cache"


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(CACHE_DIR), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )


@pytest.mark.slow  # a mypy process: 20-30 s on a cold cache
def test_package_type_checks_clean() -> None:
    result = _mypy("threadloom")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_mypy_settings_live_in_pyproject() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["python_version"] == "3.11"
    assert config["ignore_missing_imports"] is True
    assert "disable_error_code" not in config


USER_CODE = """
from threadloom.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage

human = HumanMessage("hi", id="h1")
tool = ToolMessage("ok", tool_call_id="c1")
merged = AIMessageChunk("a") + AIMessageChunk("b")
reveal_type(human)
reveal_type(AIMessage("done"))
"""


@pytest.mark.slow  # a mypy process: 20-30 s on a cold cache
def test_message_constructors_accept_positional_content() -> None:
    result = _mypy("-c", USER_CODE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'Revealed type is "threadloom.messages.types.HumanMessage"' in result.stdout
    assert 'Revealed type is "threadloom.messages.types.AIMessage"' in result.stdout


@pytest.mark.slow  # a mypy process: 20-30 s on a cold cache
def test_message_constructors_still_reject_wrong_content() -> None:
    result = _mypy("-c", "from threadloom.messages import HumanMessage\nHumanMessage(42)\n")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[arg-type]" in result.stdout
