"""Model settings a new user got wrong, refused at once with what is wrong (issue 14, "The
CLI, while it moves"): a malformed ``base_url`` or ``OPENAI_BASE_URL`` names its scheme,
host or port instead of "cannot connect" after retries; an unknown local model name lists
the known ones.

Each test reproduces one report; see the comment at its top.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from threadloom.checkpoint.sqlite import SqliteCheckpointer

TESTS = Path(__file__).resolve().parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def proc(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(("url", "needle"), [
    ("htp://127.0.0.1:9/v1", "its scheme 'htp' is not http or https"),
    ("not a url", "it has no scheme (expected http:// or https://)"),
    ("http:///v1", "it names no host"),
    ("http://127.0.0.1:port/v1", "its port 'port' is not a number"),
    ("http://my host/v1", "its host 'my host' is not a host name"),
    ("localhost:11434/v1", "it has no scheme (expected http:// or https://, e.g. "
                           "'http://localhost:11434/v1')"),
    ("u:SeCrEt@host/v1", "its scheme 'u' is not http or https"),
])
def test_a_malformed_base_url_is_refused_at_construction(url, needle):
    # Reported: "htp://...", "not a url" and "http:///v1" all reported "cannot connect"
    # after 1.4 s of retries.
    from threadloom.models import OpenAIChatModel, init_chat_model

    started = time.monotonic()
    with pytest.raises(ValueError, match="base_url") as info:
        OpenAIChatModel("m", base_url=url, api_key="k")
    assert needle in str(info.value) and "SeCrEt" not in str(info.value)
    assert repr(url) in str(info.value) or "SeCrEt" in url
    with pytest.raises(ValueError, match=re.escape(needle)):
        init_chat_model("openai:m", base_url=url, api_key="k")
    assert time.monotonic() - started < 0.5


def test_a_malformed_openai_base_url_is_named_with_its_variable(monkeypatch, work):
    from threadloom.models import OpenAIChatModel

    monkeypatch.setenv("OPENAI_BASE_URL", "htp://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match=r"OPENAI_BASE_URL 'htp://127\.0\.0\.1:9/v1'"):
        OpenAIChatModel("m", api_key="k")
    result = proc("demo", "--model", "openai:m", "hi", cwd=work,
                  env=_env(OPENAI_BASE_URL="http://user:SeCrEt@/v1", OPENAI_API_KEY="k"))
    assert result.returncode == 2
    line = one_error_line(result)
    assert "OPENAI_BASE_URL 'http://user:***@/v1'" in line and "names no host" in line
    assert "SeCrEt" not in result.stderr and "you: hi" not in result.stdout
    assert not (work / "threadloom-demo.db").exists() or SqliteCheckpointer(
        work / "threadloom-demo.db").list_threads() == []


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/v1", "https://api.example.com/v1",
                                 "HTTP://[::1]:8080/v1", "http://localhost:11434/v1"])
def test_well_formed_base_urls_are_kept(url):
    from threadloom.models import OpenAIChatModel

    assert OpenAIChatModel("m", base_url=url, api_key="k").base_url == url


def test_an_unknown_local_model_name_lists_the_known_ones(tmp_path):
    # Reported: init_chat_model("local:llama-7b") said "model file not found (model_path=)".
    from threadloom.errors import ModelError
    from threadloom.models import init_chat_model
    from threadloom.models.local import LOCAL_MODELS

    known = ", ".join(sorted(LOCAL_MODELS))
    with pytest.raises(ModelError) as info:
        init_chat_model("local:llama-7b")  # refused when made, not at the first call
    assert str(info.value) == (
        f"unknown local model 'llama-7b': the known names are {known}; or pass the path of "
        "a GGUF file")
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelError) as info:
        init_chat_model(f"local:{missing}").invoke("hi")
    assert str(info.value) == (
        f"model file not found: {str(missing)!r} (a GGUF path; the known model names are "
        f"{known})")
