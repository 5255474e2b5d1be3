"""What the ``threadloom`` command line prints stays valid, printable and free of secrets,
whatever odd value a user passes or a graph produces; odd targets get one clear line.

Each test reproduces a tester's report; see the comment at its top.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from threadloom.cli import app
from threadloom.cli.common import CliError, parse_json_arg
from threadloom.cli.render import dumps
from threadloom.cli.view import RunView
from threadloom.errors import ModelError
from threadloom.models import OpenAIChatModel
from threadloom.models.openai_wire import map_error
from threadloom.redact import mask_url, mask_urls

TESTS = Path(__file__).resolve().parent
runner = CliRunner()

GRAPHS = '''
import math
from typing import Annotated, TypedDict
import operator

from threadloom import END, START, StateGraph
from cli_graphs import counter_builder as graph


class S(TypedDict, total=False):
    x: float
    note: str
    log: Annotated[list[str], operator.add]


def _odd(state: S) -> dict:
    return {"x": math.inf, "note": "lone \\ud800 surrogate", "log": [str(-math.inf)]}


_b = StateGraph(S)
_b.add_node("odd", _odd)
_b.add_edge(START, "odd")
_b.add_edge("odd", END)
odd = _b.compile()


_n = StateGraph(S)
_n.add_node("n\\ud800", _odd)
_n.add_edge(START, "n\\ud800")
_n.add_edge("n\\ud800", END)
odd_name = _n.compile()


def factory_none():
    return None


def factory_list():
    return [1, 2]
'''


@pytest.fixture
def work(work):
    """The shared ``work`` directory, holding ``g.py``."""
    (work / "g.py").write_text(GRAPHS)
    return work


def proc(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m threadloom.cli ARGS`` with a real (strict UTF-8) stdout."""
    full = dict(os.environ, **(env or {}), PYTHONIOENCODING="utf-8", COLUMNS="200",
                PYTHONPATH=os.pathsep.join([str(TESTS), str(cwd),
                                            os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, errors="strict")


def one_error_line(stderr: str) -> str:
    """The single ``error: ...`` line of ``stderr`` (and assert there is nothing else)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    return lines[0]


def _json_after(prefix: str, stdout: str) -> object:
    """The JSON on the line of ``stdout`` starting with ``prefix`` (strictly parsed)."""
    line = next(ln for ln in stdout.splitlines() if ln.startswith(prefix))
    return json.loads(line[len(prefix):], parse_constant=lambda c: pytest.fail(c))


# -- 1. numbers that overflow to infinity ----------------------------------------------------

@pytest.mark.parametrize(("text", "number"), [
    ('{"n": 1e999}', "1e999"), ('{"n": -1e999}', "-1e999"), ("[1E+400]", "1E+400")])
def test_a_number_overflowing_to_infinity_is_refused(text, number):
    # Reported: `run -i '{"n": 1e999}'` ran and printed `final state: {"n": Infinity}`.
    with pytest.raises(CliError) as info:
        parse_json_arg(text, "--input")
    message = str(info.value)
    assert info.value.code == 2 and "\n" not in message
    assert message.startswith("--input is not valid JSON") and number in message, message


def test_an_integer_too_long_to_read_is_one_clear_error():
    with pytest.raises(CliError) as info:
        parse_json_arg("[" + "9" * 5000 + "]", "--value")
    assert info.value.code == 2 and str(info.value).startswith("--value is not valid JSON")


def test_small_and_ordinary_numbers_still_parse():
    assert parse_json_arg('{"a": 1e-999, "b": 1.5e300, "c": 12}', "--input") == {
        "a": 0.0, "b": 1.5e300, "c": 12}


def test_run_refuses_an_overflowing_input_and_saves_nothing(work):
    result = runner.invoke(app, ["run", "g:graph", "-i", '{"n": 1e999}', "-t", "j",
                                 "--db", "j.db"])
    assert result.exit_code == 2, result.output
    assert "1e999" in result.output and not (work / "j.db").exists()


@pytest.mark.parametrize(("value", "shown"), [
    (math.inf, '"Infinity"'), (-math.inf, '"-Infinity"'), (math.nan, '"NaN"')])
def test_dumps_renders_non_finite_floats_as_strings(value, shown):
    text = dumps({"x": value, "deep": [{"y": value}]}, indent=None)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(c))  # strict JSON
    assert text == f'{{"x": {shown}, "deep": [{{"y": {shown}}}]}}'


def test_a_graph_that_makes_infinity_prints_valid_json(work):
    # A graph may produce a non-finite float itself: the run happened, so it is shown
    # (as the string "Infinity"), not refused, and every printed JSON is valid.
    result = proc("run", "g:odd", "-t", "o", "--db", "o.db", "-s", "updates", cwd=work)
    assert result.returncode == 0, result.stderr
    final = _json_after("final state: ", result.stdout)
    assert final == {"x": "Infinity", "note": "lone \ud800 surrogate", "log": ["-inf"]}
    assert _json_after("  update: ", result.stdout)["x"] == "Infinity"
    shown = proc("threads", "show", "o", "--db", "o.db", cwd=work)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout, parse_constant=lambda c: pytest.fail(c))["values"][
        "x"] == "Infinity"


# -- 2. lone surrogates ----------------------------------------------------------------------

def test_dumps_escapes_lone_surrogates_and_keeps_other_text_readable():
    text = dumps({"log": ["\ud800", "é ✓ 😀"], "\udfff": 1}, indent=None)
    text.encode("utf-8")  # printable
    assert "\\ud800" in text and "é ✓ 😀" in text
    assert json.loads(text) == {"log": ["\ud800", "é ✓ 😀"], "\udfff": 1}


def test_run_and_show_print_a_lone_surrogate_escaped(work):
    # Reported: the run completed and saved, then `error: UnicodeEncodeError: 'utf-8'
    # codec can't encode character '\ud800'`; `threads show U1` failed the same way.
    result = proc("run", "g:graph", "-i", '{"n":0,"log":["\\ud800"]}', "-t", "U1",
                  "--db", "u.db", "-s", "updates", cwd=work)
    assert result.returncode == 0, result.stderr
    assert '"log": ["\\ud800", "inc 0", "double"]' in result.stdout
    assert _json_after("final state: ", result.stdout)["log"][0] == "\ud800"
    shown = proc("threads", "show", "U1", "--db", "u.db", cwd=work)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["values"]["log"][0] == "\ud800"


class _Bytes:
    """A text stream that, like a real UTF-8 stdout, refuses lone surrogates."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, text: str) -> int:
        self.data += text.encode("utf-8")
        return len(text)

    def flush(self) -> None:
        pass


def test_run_view_writes_tokens_and_tool_results_with_lone_surrogates():
    from threadloom.messages import AIMessageChunk, ToolMessage

    out = _Bytes()
    with RunView(out, quiet_s=60) as view:
        view.handle("messages", (AIMessageChunk(content="a\ud800b", id="m1"), {"node": "n"}))
        view.handle("messages", (ToolMessage("x\udfffy", tool_call_id="c", name="t"),
                                 {"node": "n"}))
    text = out.data.decode("utf-8")
    assert "a\\ud800b" in text and "t: x\\udfffy" in text


def test_any_other_output_escapes_what_stdout_cannot_encode(work):
    # The console script's stdout writes a lone surrogate as a backslash escape: here in
    # a node name that `draw` prints as Mermaid text.
    result = proc("draw", "g:odd_name", cwd=work)
    assert result.returncode == 0, result.stderr
    assert "n\\ud800" in result.stdout


# -- 3. credentials in OPENAI_BASE_URL -------------------------------------------------------

@pytest.mark.parametrize(("url", "masked"), [
    ("http://user:SeCrEt@127.0.0.1:1/v1", "http://user:***@127.0.0.1:1/v1"),
    ("https://u:p%40SeCrEt@host/v1?api-key=SeCrEt&x=1", "https://u:***@host/v1?api-key=***&x=1"),
    ("http://h/v1?token=SeCrEt&Signature=SeCrEt", "http://h/v1?token=***&Signature=***"),
    ("http://user:Se@Cr@Et@h:8/v1", "http://user:***@h:8/v1"),
    ("http://h:8080/v1", "http://h:8080/v1"), ("http://user@h/v1", "http://user@h/v1"),
    ("the OpenAI API", "the OpenAI API"),
])
def test_mask_url(url, masked):
    assert mask_url(url) == masked
    assert mask_urls(f"at {url}: cannot connect") == f"at {masked}: cannot connect"


def test_mask_urls_masks_a_known_secret_quoted_alone():
    text = "auth failed for password 'p@SeCrEt' and SeCrEt2"
    assert mask_urls(text, "http://u:p%40SeCrEt@h/v1?key=SeCrEt2", None) == (
        "auth failed for password '***' and ***")


SECRET_URL = "http://user:SeCrEt@127.0.0.1:1/v1"


def test_openai_errors_and_repr_never_show_the_url_password():
    model = OpenAIChatModel("m", base_url=SECRET_URL, api_key="k", max_retries=0)
    assert "SeCrEt" not in repr(model) and "user:***@127.0.0.1:1" in repr(model)
    with pytest.raises(ModelError) as info:
        model.invoke("hi")
    message = str(info.value)
    assert "SeCrEt" not in message and "at http://user:***@127.0.0.1:1/v1" in message


def test_openai_error_from_the_environment_url_is_masked(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", SECRET_URL + "?api_key=SeCrEt")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel("m", max_retries=0)
    assert "SeCrEt" not in model.where and "api_key=***" in model.where
    with pytest.raises(ModelError) as info:
        model.invoke("hi")
    assert "SeCrEt" not in str(info.value) and "user:***@" in str(info.value)


def test_map_error_masks_urls_the_provider_echoes():
    import httpx

    request = httpx.Request("POST", SECRET_URL + "/chat/completions")
    response = httpx.Response(401, request=request, json={
        "message": f"bad credentials for {SECRET_URL} (password SeCrEt)"})
    exc = openai.AuthenticationError("401", response=response, body=response.json())
    message = str(map_error(exc, where="model 'm' at x", known=[SECRET_URL]))
    assert "SeCrEt" not in message and "user:***@127.0.0.1" in message


def test_demo_error_never_prints_the_url_password(work):
    # Reported: `error: ModelError: model 'gpt-4o-mini' at http://user:SeCrEt@127.0.0.1:1/v1:
    # cannot connect`.
    result = proc("demo", "--db", "d.db", "--model", "openai:gpt-4o-mini", "hi", cwd=work,
                  env={"OPENAI_BASE_URL": SECRET_URL, "OPENAI_API_KEY": "x"})
    assert result.returncode == 1
    assert "SeCrEt" not in result.stdout + result.stderr
    assert "user:***@127.0.0.1:1/v1" in one_error_line(result.stderr)


def test_any_error_the_cli_prints_has_url_credentials_masked(work):
    from threadloom.cli.common import describe as _describe

    text = _describe(RuntimeError(f"cannot reach {SECRET_URL}."))
    assert text == "RuntimeError: cannot reach http://user:***@127.0.0.1:1/v1."


# -- 4. a factory returning something else -----------------------------------------------------

@pytest.mark.parametrize(("attr", "what"), [("factory_none", "None"), ("factory_list", "a list")])
def test_a_factory_returning_no_graph_says_so(work, attr, what):
    # Reported: `run g:factory_none` said "g:factory_none is a NoneType".
    result = runner.invoke(app, ["run", f"g:{attr}", "--db", "c.db"])
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert f"the factory 'g:{attr}' returned {what}, not a StateGraph or CompiledGraph" in line
    assert "NoneType" not in line


# -- 5. draw -o DIRECTORY --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["somedir", "pics.png"])
def test_draw_to_a_directory_is_one_line(work, name):
    # Reported: `draw g:graph -o /tmp/somedir` gave a raw IsADirectoryError.
    (work / name).mkdir()
    result = runner.invoke(app, ["draw", "g:graph", "-o", name])
    assert result.exit_code == 1
    line = one_error_line(result.stderr)
    assert f"cannot write {name!r}: it is a directory" in line and "IsADirectory" not in line
