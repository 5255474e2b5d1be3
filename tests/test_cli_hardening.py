"""CLI defects of the attack run (issue 17): ``models pull`` does not follow a planted
``.part`` symlink, a JSON nesting bomb is a usage error naming the flag, and ``run`` /
``draw`` say in ``--help`` that they import and run user code."""

from __future__ import annotations

import hashlib
import os

import pytest
from typer.testing import CliRunner

from threadloom.cli import app
from threadloom.models.local import LOCAL_MODELS

runner = CliRunner()
SPEC = LOCAL_MODELS["smollm2"]


@pytest.mark.parametrize("planted", [".part", ""])
def test_models_pull_does_not_follow_a_planted_symlink(tmp_path, monkeypatch,
                                                       planted: str) -> None:
    monkeypatch.setenv("THREADLOOM_CACHE_DIR", str(tmp_path / "cache"))
    models = tmp_path / "cache" / "models"
    models.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, models / (SPEC.filename + planted))
    result = runner.invoke(app, ["models", "pull", "smollm2"])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious"
    target = models / SPEC.filename
    assert not target.is_symlink()
    assert hashlib.sha256(target.read_bytes()).hexdigest() == SPEC.sha256
    assert sorted(p.name for p in models.iterdir()) == sorted(
        {SPEC.filename, SPEC.filename + planted})  # no temporary directory left behind


@pytest.mark.parametrize("depth", [150, 100_000])
@pytest.mark.parametrize("from_file", [False, True])
def test_json_nesting_bomb_is_a_usage_error_naming_the_flag(work, depth: int,
                                                            from_file: bool) -> None:
    bomb = "[" * depth + "]" * depth
    arg = bomb
    if from_file:
        (work / "bomb.json").write_text(bomb)
        arg = "@bomb.json"
    result = runner.invoke(app, ["run", "cli_graphs:counter", "--input", arg, "--db",
                                 str(work / "x.sqlite")])
    assert result.exit_code == 2, result.output
    assert "--input" in result.output and "nested too deeply" in result.output
    assert "RecursionError" not in result.output
    assert not (work / "x.sqlite").exists()


def test_json_input_of_ordinary_depth_still_runs(work) -> None:
    nested = '{"n": 1, "log": [' + '["x", ' * 20 + '"y"' + "]" * 20 + "]}"
    result = runner.invoke(app, ["run", "cli_graphs:counter", "--input", nested, "--db",
                                 str(work / "ok.sqlite")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", ["run", "draw"])
def test_help_says_it_imports_and_runs_user_code(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "imports MODULE" in text and "top-level code" in text
    assert "code you trust" in text
