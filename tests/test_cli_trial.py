"""The command line as a new user met it (issue 14, "The CLI, while it moves"): which file a
command reads, continuing a turn after Ctrl-C, and what a thread's state is when a command
cannot act on it (model settings: ``test_cli_model_settings``).

Each test reproduces one report; see the comment at its top.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from threadloom.checkpoint.sqlite import SqliteCheckpointer

TESTS = Path(__file__).resolve().parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(COLUMNS="200", PYTHONPATH=os.pathsep.join([str(TESTS),
                                                          os.environ.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def proc(*args: str, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args], cwd=cwd,
                          env=env or _env(), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    return lines[0]


def _demo_thread(out: str) -> str:
    return re.search(r"^thread: (\S+)$", out, re.MULTILINE).group(1)


def _rows(table: str) -> list[str]:
    return [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]


# -- 1. one place to look: the commands find the demo's file, and name the file ------------

def test_after_the_demo_threads_commands_find_its_file_and_name_it(work):
    # Reported: after `threadloom demo`, `threadloom threads list` looked for threadloom.db
    # and said there was none, though the demo had written threadloom-demo.db beside it.
    demo = proc("demo", "--scripted", "Show the processing orders", cwd=work)
    assert demo.returncode == 0, demo.stderr
    thread = _demo_thread(demo.stdout)
    alone = proc("threads", "list", cwd=work)
    assert alone.returncode == 0, alone.stderr
    assert "threads in 'threadloom-demo.db'" in alone.stdout and _rows(alone.stdout) == [thread]

    # a run of the user's own graph makes threadloom.db: the demo's thread is still found
    ran = proc("run", "cli_graphs:counter", "-i", '{"n": 1}', "-t", "r1", cwd=work)
    assert ran.returncode == 0 and ran.stdout.startswith("thread r1 | db threadloom.db")
    both = proc("threads", "list", cwd=work)
    assert both.returncode == 0, both.stderr
    assert "threads in 'threadloom.db'" in both.stdout
    assert "threads in 'threadloom-demo.db'" in both.stdout
    assert _rows(both.stdout) == ["r1", thread]

    shown = proc("threads", "show", thread, cwd=work)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["thread_id"] == thread
    assert shown.stderr.strip() == f"(thread {thread} is in 'threadloom-demo.db')"
    history = proc("threads", "history", thread, cwd=work)
    assert history.returncode == 0, history.stderr
    assert f"history of {thread} in 'threadloom-demo.db'" in history.stdout
    assert "in 'threadloom.db'" in proc("threads", "history", "r1", cwd=work).stdout

    ghost = proc("threads", "show", "ghost", cwd=work)
    assert ghost.returncode == 1
    assert one_error_line(ghost) == ("error: no thread 'ghost' in 'threadloom.db' or "
                                     "'threadloom-demo.db'")
    gone = proc("threads", "delete", thread, cwd=work)
    assert gone.returncode == 0, gone.stderr
    assert gone.stdout.strip() == f"deleted thread {thread} from 'threadloom-demo.db'"
    assert SqliteCheckpointer(work / "threadloom-demo.db").list_threads() == []
    assert SqliteCheckpointer(work / "threadloom.db").list_threads() == ["r1"]


def test_resume_and_run_find_the_file_holding_the_thread(work):
    paused = proc("run", "cli_graphs:review", "-i", '{"draft": "cats"}', "-t", "r1", cwd=work)
    assert paused.returncode == 0, paused.stderr
    demo = proc("demo", "--scripted", "Please cancel order 1003", cwd=work)
    assert demo.returncode == 0, demo.stderr
    thread = _demo_thread(demo.stdout)
    # the demo's thread from the demo's file; the review thread from threadloom.db
    answered = proc("resume", thread, "--approve", cwd=work)
    assert answered.returncode == 0, answered.stderr
    assert "| db threadloom-demo.db" in answered.stdout.splitlines()[0]
    done = proc("resume", "r1", "--value", '"yes"', "--graph", "cli_graphs:review", cwd=work)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "thread r1 | db threadloom.db"
    assert '"verdict": "human said yes"' in done.stdout
    # no file here at all: the message names both defaults
    empty = work / "empty"
    empty.mkdir()
    nothing = proc("threads", "list", cwd=empty)
    assert nothing.returncode == 1
    assert one_error_line(nothing) == (
        "error: no checkpoint database at 'threadloom.db' or 'threadloom-demo.db' (run a "
        "graph or the demo first, or pass --db PATH)")
    assert list(empty.iterdir()) == []


# -- 2. Ctrl-C during the demo, and the command it prints ----------------------------------

class StallingModel:
    """A loopback OpenAI-compatible server whose first chat request hangs until
    ``release`` is set; every later one answers ``ANSWER`` (streamed or not)."""

    ANSWER = "Order 1004 cost 287.00 USD."

    def __init__(self) -> None:
        self.first = threading.Event()
        self.release = threading.Event()
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.requests.append(body)
                if len(outer.requests) == 1:
                    outer.first.set()
                    outer.release.wait(60)
                try:
                    self._answer(bool(body.get("stream")))
                except OSError:  # the client that asked is gone (Ctrl-C)
                    pass

            def _answer(self, stream: bool) -> None:
                base = {"id": "c1", "created": 0, "model": "stall"}
                if stream:
                    chunks = [{**base, "object": "chat.completion.chunk", "choices": [
                        {"index": 0, "delta": {"role": "assistant", "content": outer.ANSWER},
                         "finish_reason": None}]},
                        {**base, "object": "chat.completion.chunk", "choices": [
                            {"index": 0, "delta": {}, "finish_reason": "stop"}]}]
                    data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
                    payload, kind = (data + "data: [DONE]\n\n").encode(), "text/event-stream"
                else:
                    payload = json.dumps({**base, "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": outer.ANSWER},
                         "finish_reason": "stop"}]}).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stalling():
    server = StallingModel()
    yield server
    server.close()


def test_ctrl_c_in_the_demo_prints_a_command_that_continues_the_turn(work, stalling):
    # Reported: Ctrl-C during the demo printed "continue with: threadloom demo --resume ID",
    # and that command appended the demo's default question as a new turn instead of
    # continuing the interrupted one.
    env = _env(OPENAI_BASE_URL=stalling.base_url, OPENAI_API_KEY="sk-test")
    question = "What did order 1004 cost?"
    child = subprocess.Popen(
        [sys.executable, "-m", "threadloom.cli", "demo", "--model", "openai:stall", question],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert stalling.first.wait(60), "the demo never called its model"
        time.sleep(0.3)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, (out, err)
    thread = re.search(r"\| thread (\S+) \|", out).group(1)
    assert "Traceback" not in err
    assert f"continue it with `threadloom demo --resume {thread}`\n" in err
    stalling.release.set()

    resumed = proc("demo", "--resume", thread, cwd=work, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "you:" not in resumed.stdout  # no new question was asked
    assert f"continuing the interrupted turn of thread {thread}" in resumed.stdout
    assert StallingModel.ANSWER in resumed.stdout and "exit reason: text" in resumed.stdout
    shown = json.loads(proc("threads", "show", thread, cwd=work).stdout)
    messages = shown["values"]["messages"]
    assert [m["content"] for m in messages if m["type"] == "human"] == [question]
    assert messages[-1]["type"] == "ai" and messages[-1]["content"] == StallingModel.ANSWER
    assert shown["next"] == []


def test_demo_resume_with_a_question_finishes_the_interrupted_turn_first(work, stalling):
    env = _env(OPENAI_BASE_URL=stalling.base_url, OPENAI_API_KEY="sk-test")
    child = subprocess.Popen(
        [sys.executable, "-m", "threadloom.cli", "demo", "--model", "openai:stall", "first?"],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert stalling.first.wait(60)
        time.sleep(0.3)
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    thread = re.search(r"\| thread (\S+) \|", out).group(1)
    stalling.release.set()
    resumed = proc("demo", "--resume", thread, "second?", cwd=work, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.index("continuing the interrupted turn") < resumed.stdout.index(
        "you: second?")
    messages = json.loads(proc("threads", "show", thread, cwd=work).stdout)["values"][
        "messages"]
    assert [(m["type"], m["content"]) for m in messages] == [
        ("human", "first?"), ("ai", StallingModel.ANSWER),
        ("human", "second?"), ("ai", StallingModel.ANSWER)]


def test_ctrl_c_at_the_approval_prompt_prints_how_to_answer(work):
    # Ctrl-C at the prompt ended with click's bare "Aborted!".
    from terminal import demo_on_a_terminal

    text = demo_on_a_terminal(work, "Please cancel order 1006", [b"\x03"]).decode(
        errors="replace")
    thread = re.search(r"\| thread (\S+) \|", text).group(1)
    assert "Aborted!" not in text
    assert (f"interrupted: thread {thread} keeps its last checkpoint; answer it with "
            f"`threadloom resume {thread} --approve` (or --reject \"reason\")") in text
    answered = proc("resume", thread, "--approve", cwd=work)
    assert answered.returncode == 0 and "Order 1006 is now cancelled" in answered.stdout


# -- 3. a thread's state, and what to type ---------------------------------------------------

def test_run_without_input_on_a_paused_thread_says_so(work):
    # Reported: `threadloom run M:A --thread ID` without --input started a new run on a
    # paused thread without a word.
    assert proc("run", "cli_graphs:review", "-i", '{"draft": "cats"}', "-t", "r1", "--db",
                "c.db", cwd=work).returncode == 0
    before = json.loads(proc("threads", "show", "r1", "--db", "c.db", cwd=work).stdout)
    again = proc("run", "cli_graphs:review", "-t", "r1", "--db", "c.db", cwd=work)
    assert again.returncode == 1
    assert one_error_line(again) == (
        "error: thread 'r1' is paused at node 'review', waiting for an answer to "
        '{"question": "publish this?", "draft": "draft about cats"}: answer it with '
        "`threadloom resume r1 --value JSON --graph cli_graphs:review --db c.db` (or give "
        "--input JSON to start a new run on it)")
    assert json.loads(proc("threads", "show", "r1", "--db", "c.db", cwd=work).stdout) == before
    # --input given: a new run, as before (and as in LangGraph)
    anew = proc("run", "cli_graphs:review", "-i", '{"draft": "dogs"}', "-t", "r1", "--db",
                "c.db", cwd=work)
    assert anew.returncode == 0 and "draft about dogs" in anew.stdout


def test_run_without_input_on_a_stopped_or_finished_thread(work):
    assert proc("run", "cli_graphs:stopping", "-i", '{"n": 1}', "-t", "s1", "--db", "c.db",
                cwd=work).returncode == 0
    stopped = proc("run", "cli_graphs:stopping", "-t", "s1", "--db", "c.db", cwd=work)
    assert stopped.returncode == 1
    assert one_error_line(stopped) == (
        "error: thread 's1' stopped before node 'double' (its run has not finished): "
        "continue it with `threadloom run cli_graphs:stopping --thread s1 --input null "
        "--db c.db` (or give --input JSON to start a new run on it)")
    going = proc("run", "cli_graphs:stopping", "-t", "s1", "-i", "null", "--db", "c.db",
                 cwd=work)
    assert going.returncode == 0 and "[step 2] double" in going.stdout
    # finished: a new run on it, said on stderr
    finished = proc("run", "cli_graphs:counter", "-t", "s1", "--db", "c.db", cwd=work)
    assert finished.returncode == 0, finished.stderr
    assert finished.stderr.strip() == (
        "(thread s1 finished at step 2: this run starts on its state with input {})")


def test_resume_on_a_thread_with_nothing_pending_says_its_state(work):
    # Reported: `resume ID --approve` on a finished thread said it was "not started by the
    # demo", though nothing was pending.
    demo = proc("demo", "--scripted", "Show the processing orders", cwd=work)
    thread = _demo_thread(demo.stdout)
    finished = proc("resume", thread, "--approve", cwd=work)
    assert finished.returncode == 1
    line = one_error_line(finished)
    assert "not started by the demo" not in line
    assert re.fullmatch(
        rf"error: thread '{thread}' has no pending interrupt to answer: it finished at step "
        rf"\d+; ask a next question with `threadloom demo --resume {thread} \"next "
        r"question\"`", line), line

    assert proc("run", "cli_graphs:counter", "-i", '{"n": 1}', "-t", "c1", "--db", "c.db",
                cwd=work).returncode == 0
    other = proc("resume", "c1", "--approve", "--db", "c.db", cwd=work)
    assert other.returncode == 1
    assert one_error_line(other) == (
        "error: thread 'c1' has no pending interrupt to answer: it finished at step 2; "
        "start a new run on it with `threadloom run MODULE:ATTR --thread c1 --input JSON "
        "--db c.db`")
    graph = proc("resume", "c1", "--value", "1", "--graph", "cli_graphs:counter", "--db",
                 "c.db", cwd=work)
    assert graph.returncode == 1
    assert one_error_line(graph) == (
        "error: thread 'c1' has no pending interrupt to answer: it finished at step 2; "
        "start a new run on it with `threadloom run cli_graphs:counter --thread c1 --input "
        "JSON --db c.db`")


def test_resume_of_another_graphs_paused_thread_names_node_and_question(work):
    assert proc("run", "cli_graphs:review", "-i", '{"draft": "cats"}', "-t", "r1", "--db",
                "c.db", cwd=work).returncode == 0
    answered = proc("resume", "r1", "--approve", "--db", "c.db", cwd=work)
    assert answered.returncode == 1
    assert one_error_line(answered) == (
        "error: thread 'r1' in 'c.db' was not started by the demo: it is paused at node "
        "'review', waiting for an answer to {\"question\": \"publish this?\", \"draft\": "
        "\"draft about cats\"}; answer it with `threadloom resume r1 --value JSON --graph "
        "MODULE:ATTR --db c.db`")
