"""ScriptedChatModel as the guides use it: CJK streaming, unique tool-call ids, OpenAI dicts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from threadloom import HumanMessage, InMemoryCheckpointer, ScriptedChatModel, create_agent, tool


def _texts(model: ScriptedChatModel) -> list[str]:
    return [c.text for c in model.stream([HumanMessage("x")]) if c.text]


def test_cjk_text_streams_character_by_character() -> None:
    text = "杭州今天天气晴朗，气温25°C。"
    pieces = _texts(ScriptedChatModel([text]))
    assert "".join(pieces) == text
    assert pieces[:3] == ["杭", "州", "今"] and len(pieces) > 10


def test_mixed_text_keeps_words_whole() -> None:
    text = "Hello 世界, nice day"
    pieces = _texts(ScriptedChatModel([text]))
    assert "".join(pieces) == text and pieces[0] == "Hello " and "世" in pieces


def _ids_in_a_process(history: list[str]) -> str:
    code = ("import sys\nfrom threadloom import ScriptedChatModel, HumanMessage\n"
            "m = ScriptedChatModel([{'tool_calls': [{'name': 'f', 'args': {}}]}])\n"
            "print(m.invoke([HumanMessage(t) for t in sys.argv[1:]]).tool_calls[0]['id'])")
    return subprocess.run([sys.executable, "-c", code, *history], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_tool_call_ids_differ_across_processes_for_a_grown_thread_and_stay_deterministic(
) -> None:
    first = _ids_in_a_process(["go"])
    later = _ids_in_a_process(["go", "done", "go"])  # the same thread, a later process
    assert first.startswith("call_") and first != later
    assert _ids_in_a_process(["go"]) == first


@tool
def f(x: int) -> int:
    """Echo x."""
    return x


def test_one_thread_never_holds_one_call_id_twice() -> None:
    cp = InMemoryCheckpointer()
    for _ in range(2):  # a fresh model per turn, as a restarted process would have
        model = ScriptedChatModel([{"tool_calls": [{"name": "f", "args": {"x": 1}}]}, "ok"])
        out = create_agent(model, [f], checkpointer=cp).invoke(
            {"messages": ["go"]}, thread_id="ids-1")
    ids = [c["id"] for m in out["messages"] if m.type == "ai" for c in m.tool_calls]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_openai_shaped_reply_dicts() -> None:
    model = ScriptedChatModel([
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": '{"x": 3}'}}]},
        {"role": "assistant", "content": "three"},
    ])
    out = create_agent(model, [f]).run(messages="go")
    assert out["messages"][1].tool_calls[0]["id"] == "c1"
    assert out["messages"][2].text == "3" and out["last_message"].text == "three"
    with pytest.raises(ValueError, match="role 'user'"):
        ScriptedChatModel([{"role": "user", "content": "x"}]).invoke([HumanMessage("x")])
