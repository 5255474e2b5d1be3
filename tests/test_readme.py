"""Every ```python block of README.md runs, each in a fresh interpreter.

A block preceded by a ``<!-- no-test -->`` line is skipped, but only when it needs a
network or an API key and says so in a comment inside the block (so a reader knows why it
is not run); a skip marker on any other block is a failure. A line such as
``print(expr)   # {'n': 3}`` whose comment is a Python literal is also an expected output:
that value must be one of the lines the block printed.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
TIMEOUT_S = 120
NO_TEST = "<!-- no-test -->"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_PRINT_WITH_RESULT = re.compile(r"^\s*print\(.*\)\s+#\s*(?P<expected>.+?)\s*$")
_NEEDS_OUTSIDE = re.compile(r"api[ _-]?key|network|internet|OPENAI_API_KEY|OPENAI_BASE_URL",
                            re.I)


@dataclass(frozen=True)
class Block:
    """One ```python block: its code, the README line it starts on, and its skip marker."""

    code: str
    line: int
    no_test: bool


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a markdown text, in order."""
    blocks = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(match.group(1), line, before == NO_TEST))
    return blocks


def expected_outputs(code: str) -> list[object]:
    """Values written as ``print(...)  # <literal>`` in a block."""
    out = []
    for line in code.splitlines():
        match = _PRINT_WITH_RESULT.match(line)
        if match is None:
            continue
        try:
            out.append(ast.literal_eval(match.group("expected")))
        except (ValueError, SyntaxError):
            continue  # a prose comment, not an expected value
    return out


def _literal(line: str) -> object:
    try:
        return ast.literal_eval(line.strip())
    except (ValueError, SyntaxError):
        return line.strip()


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_readme_has_python_examples():
    assert [b for b in BLOCKS if not b.no_test], "README.md has no runnable ```python block"


def test_block_parser_sees_markers_and_expected_outputs():
    text = ("intro\n```python\nprint(1 + 1)  # 2\n```\n"
            f"{NO_TEST}\n```python\n# needs an API key\nx = 1\n```\n")
    first, second = python_blocks(text)
    assert (first.line, first.no_test, second.no_test) == (2, False, True)
    assert expected_outputs(first.code) == [2]
    assert expected_outputs("print(x)  # the final state") == []


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{b.line}" for b in BLOCKS])
def test_readme_block_runs(block: Block, tmp_path: pathlib.Path):
    if block.no_test:
        assert _NEEDS_OUTSIDE.search(block.code), (
            f"README.md:{block.line} is marked {NO_TEST} but does not say (in a comment in "
            "the block) that it needs a network or an API key; only such blocks may skip")
        pytest.skip(f"README.md:{block.line} needs a network or an API key")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}  # the examples run offline
    proc = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, (
        f"README.md:{block.line} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    printed = [_literal(line) for line in proc.stdout.splitlines()]
    for value in expected_outputs(block.code):
        assert value in printed, (
            f"README.md:{block.line}: expected a printed {value!r}; got:\n{proc.stdout}")
