"""Human approval of tool calls (approval_hook): approve, edit, reject; in one process and
across two processes sharing a SQLite checkpoint."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from threadloom import Command
from threadloom.agent import create_agent
from threadloom.agent.approval import approval_hook
from threadloom.agent.requests import check_tool_pairs
from threadloom.checkpoint.memory import InMemoryCheckpointer
from threadloom.models import ScriptedChatModel

AGENT_SETUP = textwrap.dedent('''
    from threadloom.agent import create_agent
    from threadloom.agent.approval import approval_hook
    from threadloom.checkpoint.sqlite import SqliteCheckpointer
    from threadloom.models import ScriptedChatModel

    def build(db, log, script):
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            with open(log, "a") as f:
                f.write(f"{to}|{body}\\n")
            return f"sent to {to}"

        def lookup(name: str) -> str:
            """Look up an address."""
            return f"{name}@example.com"

        return create_agent(ScriptedChatModel(script), tools=[send_email, lookup],
                            hooks={"before_tool": [approval_hook(["send_email"])]},
                            checkpointer=SqliteCheckpointer(db))

    FIRST = [{"content": "", "tool_calls": [
        {"name": "lookup", "args": {"name": "bob"}, "id": "c1"},
        {"name": "send_email", "args": {"to": "bob@example.com", "body": "hi"}, "id": "c2"}]}]
''')

FIRST_PROCESS = textwrap.dedent('''
    import json, sys
    db, log = sys.argv[1], sys.argv[2]
    sys.path.insert(0, sys.argv[3])
    from agent_setup import FIRST, build
    agent = build(db, log, FIRST)
    out = agent.run("email bob", thread_id="T")
    print(json.dumps({"interrupt": out["__interrupt__"][0].value,
                      "messages": [m.type for m in out["messages"]]}))
''')


def _load_setup(folder: Path) -> Any:
    """Import the shared agent setup module (the same file both processes load)."""
    path = folder / "agent_setup.py"
    if not path.exists():
        path.write_text(AGENT_SETUP)
    spec = importlib.util.spec_from_file_location(f"agent_setup_{folder.name}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.parametrize(("decision", "sent", "tool_text"), [
    ({"approve": True}, ["bob@example.com|hi"], "sent to bob@example.com"),
    ({"edit": {"c2": {"to": "ann@example.com", "body": "hello"}}}, ["ann@example.com|hello"],
     "sent to ann@example.com"),
    ({"reject": "not today"}, [], "Rejected by user: not today"),
])
def test_approval_across_two_processes(tmp_path: Path, decision: dict[str, Any],
                                       sent: list[str], tool_text: str) -> None:
    db, log = str(tmp_path / "threads.db"), tmp_path / "sent.log"
    setup = _load_setup(tmp_path)
    script = tmp_path / "first.py"
    script.write_text(FIRST_PROCESS)
    done = subprocess.run([sys.executable, str(script), db, str(log), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout.strip().splitlines()[-1])
    assert [c["id"] for c in first["interrupt"]["tool_calls"]] == ["c2"]
    assert first["messages"] == ["human", "ai"]
    assert not log.exists()

    agent = setup.build(db, str(log), ["All done."])
    assert agent.get_state(thread_id="T").next == ("tools",)
    out = agent.invoke(Command(resume=decision), thread_id="T")
    assert out["exit_reason"] == "text" and out["last_message"].text == "All done."
    assert (log.read_text().splitlines() if log.exists() else []) == sent
    results = {m.tool_call_id: m for m in out["messages"] if m.type == "tool"}
    assert results["c1"].text == "bob@example.com"
    assert results["c2"].text == tool_text
    assert (results["c2"].status == "error") == ("reject" in decision)
    assert check_tool_pairs(out["messages"]) == []


def test_approval_in_process_edit_single_call_shorthand(thread_id: str) -> None:
    ran: list[dict[str, Any]] = []

    def transfer(amount: int) -> str:
        """Transfer money."""
        ran.append({"amount": amount})
        return f"moved {amount}"

    model = ScriptedChatModel([
        {"content": "", "tool_calls": [{"name": "transfer", "args": {"amount": 900},
                                        "id": "t1"}]}, "ok"])
    agent = create_agent(model, tools=[transfer], hooks={"before_tool": [approval_hook()]},
                         checkpointer=InMemoryCheckpointer())
    paused = agent.run("pay", thread_id=thread_id)
    assert paused["__interrupt__"][0].value["tool_calls"][0]["args"] == {"amount": 900}
    out = agent.invoke(Command(resume={"edit": {"amount": 90}}), thread_id=thread_id)
    assert ran == [{"amount": 90}]
    assert out["messages"][1].tool_calls[0]["args"] == {"amount": 90}


def test_approval_only_for_listed_tools_and_bad_decision(thread_id: str) -> None:
    def safe() -> str:
        """Safe."""
        return "safe"

    model = ScriptedChatModel([
        {"content": "", "tool_calls": [{"name": "safe", "args": {}, "id": "s"}]}, "fine"])
    agent = create_agent(model, tools=[safe],
                         hooks={"before_tool": [approval_hook(["other_tool"])]},
                         checkpointer=InMemoryCheckpointer())
    assert agent.run("x", thread_id=thread_id)["exit_reason"] == "text"

    model2 = ScriptedChatModel([
        {"content": "", "tool_calls": [{"name": "safe", "args": {}, "id": "s"}]}, "fine"])
    agent2 = create_agent(model2, tools=[safe], hooks={"before_tool": [approval_hook()]},
                          checkpointer=InMemoryCheckpointer())
    agent2.run("x", thread_id="t2")
    with pytest.raises(ValueError, match="approval decision"):
        agent2.invoke(Command(resume="yes"), thread_id="t2")


def test_sqlite_thread_resumes_with_pairs_valid(tmp_path: Path) -> None:
    setup = _load_setup(tmp_path)
    agent = setup.build(str(tmp_path / "x.db"), str(tmp_path / "log"), [*setup.FIRST, "done"])
    agent.run("email bob", thread_id="Z")
    out = agent.invoke(Command(resume={"approve": False}), thread_id="Z")
    assert check_tool_pairs(out["messages"]) == []
    assert "not approved" in [m for m in out["messages"] if m.type == "tool"][1].text
    agent.checkpointer.close()
