"""The history a model is sent: tool-call pairing (H04), system prompt placement (H24),
token usage (H25)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from threadloom import AIMessage, Command, HumanMessage, SystemMessage, ToolMessage, interrupt
from threadloom.agent import create_agent
from threadloom.agent.approval import approval_hook
from threadloom.agent.requests import check_tool_pairs, repair_tool_pairs
from threadloom.checkpoint.memory import InMemoryCheckpointer
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.messages import AIMessageChunk, BaseMessage
from threadloom.models import BaseChatModel, ScriptedChatModel


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


# --- repair_tool_pairs ------------------------------------------------------------------


def test_repair_fills_missing_drops_orphans_and_orders() -> None:
    ai = AIMessage(content="", id="a", tool_calls=[call("f", "c1"), call("g", "c2")])
    r2 = ToolMessage(content="two", tool_call_id="c2", id="t2")
    orphan = ToolMessage(content="?", tool_call_id="zz", id="t9")
    dup = ToolMessage(content="again", tool_call_id="c2", id="t3")
    later = HumanMessage("next", id="h2")
    history = [HumanMessage("hi", id="h1"), orphan, ai, r2, dup, later]
    fixed = repair_tool_pairs(history)
    assert [m.type for m in fixed] == ["human", "ai", "tool", "tool", "human"]
    assert [m.tool_call_id for m in fixed if m.type == "tool"] == ["c1", "c2"]
    assert fixed[2].status == "error" and "interrupted" in fixed[2].text
    assert fixed[3] is r2
    assert check_tool_pairs(history) and check_tool_pairs(fixed) == []


def test_repair_keeps_a_valid_history_as_is() -> None:
    ai = AIMessage(content="", id="a", tool_calls=[call("f", "c1"), call("g", "c2")])
    history: list[BaseMessage] = [
        HumanMessage("hi", id="h"), ai, ToolMessage(content="1", tool_call_id="c1", id="t1"),
        ToolMessage(content="2", tool_call_id="c2", id="t2"), AIMessage("done", id="b")]
    assert repair_tool_pairs(history) is history
    swapped = [history[0], ai, history[3], history[2], history[4]]
    assert [m.id for m in repair_tool_pairs(swapped)] == ["h", "a", "t1", "t2", "b"]


# --- H04 -----------------------------------------------------------------------------------


class Tools:
    """needs_ok / free with run counters."""

    def __init__(self) -> None:
        self.free_runs = 0
        self.needs_ok_runs = 0

    def free(self) -> str:
        """Runs freely."""
        self.free_runs += 1
        return "ok"

    def needs_ok(self) -> str:
        """Needs a human's approval inside the tool."""
        decision = interrupt("approve?")
        if decision.get("decision") == "reject":
            raise PermissionError("rejected by user")
        self.needs_ok_runs += 1
        return "done"


def both_then(answer: str) -> ScriptedChatModel:
    return ScriptedChatModel([
        {"content": "", "tool_calls": [call("needs_ok", "c1"), call("free", "c2")]}, answer])


def assert_pairs_after_ai(messages: list[BaseMessage]) -> None:
    assert check_tool_pairs(messages) == []
    index = next(i for i, m in enumerate(messages) if m.type == "ai" and m.tool_calls)
    assert [m.tool_call_id for m in messages[index + 1:index + 3]] == ["c1", "c2"]


def test_h04_rejected_by_approval_hook(thread_id: str) -> None:
    tools = Tools()
    model = both_then("I did not run needs_ok.")
    agent = create_agent(model, tools=[tools.free, tools.needs_ok],
                         hooks={"before_tool": [approval_hook(["needs_ok"])]},
                         checkpointer=InMemoryCheckpointer())
    paused = agent.run("do both", thread_id=thread_id)
    assert [c["id"] for c in paused["__interrupt__"][0].value["tool_calls"]] == ["c1"]
    assert tools.free_runs == 0
    out = agent.invoke(Command(resume={"reject": "too risky"}), thread_id=thread_id)
    assert out["exit_reason"] == "text" and tools.free_runs == 1
    sent = model.calls[1]["messages"]
    assert_pairs_after_ai(sent)
    rejected = next(m for m in sent if m.type == "tool" and m.tool_call_id == "c1")
    assert rejected.status == "error" and "Rejected by user: too risky" in rejected.text
    assert_pairs_after_ai(agent.get_state(thread_id=thread_id).values["messages"])


def test_h04_interrupt_inside_a_tool_then_reject(thread_id: str) -> None:
    tools = Tools()
    model = both_then("noted")
    agent = create_agent(model, tools=[tools.free, tools.needs_ok],
                         checkpointer=InMemoryCheckpointer())
    paused = agent.run("do both", thread_id=thread_id)
    assert paused["__interrupt__"][0].value == "approve?"
    assert tools.free_runs == 1
    saved = agent.get_state(thread_id=thread_id).values["messages"]
    assert [m.tool_call_id for m in saved if m.type == "tool"] == ["c2"]
    out = agent.invoke(Command(resume={"decision": "reject"}), thread_id=thread_id)
    assert tools.free_runs == 1 and tools.needs_ok_runs == 0
    assert out["exit_reason"] == "text"
    sent = model.calls[1]["messages"]
    assert_pairs_after_ai(sent)
    first = next(m for m in sent if m.type == "tool" and m.tool_call_id == "c1")
    assert first.status == "error" and "rejected by user" in first.text


def test_h04_paused_thread_continued_with_a_new_message(thread_id: str) -> None:
    """The variant 'process killed mid-tools, restarted, invoked again'."""
    tools = Tools()
    model = both_then("starting over")
    agent = create_agent(model, tools=[tools.free, tools.needs_ok],
                         checkpointer=InMemoryCheckpointer())
    agent.run("do both", thread_id=thread_id)
    out = agent.run("forget it, just say hi", thread_id=thread_id)
    assert out["exit_reason"] == "text" and tools.free_runs == 1
    sent = model.calls[1]["messages"]
    assert_pairs_after_ai(sent)
    filled = next(m for m in sent if m.type == "tool" and m.tool_call_id == "c1")
    assert filled.status == "error" and "interrupted" in filled.text
    assert sent[-1].text == "forget it, just say hi"
    persisted = agent.get_state(thread_id=thread_id).values["messages"]
    assert_pairs_after_ai(persisted)
    assert [m.type for m in persisted] == ["human", "ai", "tool", "tool", "human", "ai"]


# --- H24 -----------------------------------------------------------------------------------


def test_h24_one_system_message_first_on_a_persisted_thread(tmp_path: Any) -> None:
    model = ScriptedChatModel(["short", "again short"])
    cp = SqliteCheckpointer(str(tmp_path / "t.db"))
    agent = create_agent(model, system_prompt="You are terse.", checkpointer=cp)
    agent.run("hi", thread_id="T")
    agent.run("and again", thread_id="T")
    for sent in (c["messages"] for c in model.calls):
        systems = [i for i, m in enumerate(sent) if m.type == "system"]
        assert systems == [0] and sent[0].text == "You are terse."
    assert [m.type for m in model.calls[1]["messages"]] == ["system", "human", "ai", "human"]
    stored = agent.get_state(thread_id="T").values["messages"]
    assert all(m.type != "system" for m in stored) and len(stored) == 4
    cp.close()


@pytest.mark.parametrize("merge", [True, False])
def test_h24_hook_adds_a_system_message(merge: bool) -> None:
    def french(state: Any) -> None:
        state.set("messages", [SystemMessage("answer in French")])

    model = ScriptedChatModel(["oui"])
    agent = create_agent(model, system_prompt="You are terse.", merge_system_messages=merge,
                         hooks={"before_llm": [french]})
    agent.run("hi")
    sent = model.calls[0]["messages"]
    if merge:
        assert [m.type for m in sent] == ["system", "human"]
        assert sent[0].text == "You are terse.\n\nanswer in French"
    else:
        assert [(m.type, m.text) for m in sent] == [
            ("system", "You are terse."), ("human", "hi"), ("system", "answer in French")]


# --- H25 -----------------------------------------------------------------------------------


class UsageModel(BaseChatModel):
    """Streams 5 content chunks; usage either on a final usage-only chunk (S1) or as
    running totals on every chunk (S2). The first call asks for a tool."""

    def __init__(self, style: str) -> None:
        self.style = style
        self.calls = 0

    def _stream(self, msgs: list[BaseMessage], tools: Any,
                opts: dict[str, Any]) -> Iterator[AIMessageChunk]:
        self.calls += 1
        mid = f"m{self.calls}"
        for k in range(1, 6):
            usage = None
            if self.style == "S2":
                usage = {"input_tokens": 713, "output_tokens": k, "total_tokens": 713 + k}
            yield AIMessageChunk(content=f"w{k} " if self.calls > 1 else "", id=mid,
                                 usage_metadata=usage)
        if self.calls == 1:
            yield AIMessageChunk(content="", id=mid, tool_call_chunks=[
                {"name": "echo", "args": "{}", "id": "c1", "index": 0}])
        meta = {"finish_reason": "tool_calls" if self.calls == 1 else "stop"}
        final = {"input_tokens": 713, "output_tokens": 5, "total_tokens": 718}
        yield AIMessageChunk(content="", id=mid, response_metadata=meta,
                             usage_metadata=final if self.style == "S1" else None)


def echo() -> str:
    """Echo."""
    return "echo"


EXPECTED = {"input_tokens": 1426, "output_tokens": 10, "total_tokens": 1436}


@pytest.mark.parametrize("style", ["S1", "S2"])
@pytest.mark.parametrize("mode", [None, ["values", "messages"], "messages", "updates",
                                  ["updates", "messages", "custom"]])
def test_h25_usage_summed_once_per_call(style: str, mode: Any, thread_id: str) -> None:
    agent = create_agent(UsageModel(style), tools=[echo], checkpointer=InMemoryCheckpointer())
    if mode is None:
        out = agent.invoke({"messages": [("user", "go")]}, thread_id=thread_id)
    else:
        events = list(agent.stream({"messages": [("user", "go")]}, thread_id=thread_id,
                                   stream_mode=mode))
        if "messages" in mode:
            assert any(isinstance(e, tuple) for e in events)
        out = agent.get_state(thread_id=thread_id).values
    assert out["token_usage"] == EXPECTED
    assert out["step_count"] == 2


async def test_h25_async_stream_values(thread_id: str) -> None:
    agent = create_agent(UsageModel("S1"), tools=[echo])
    last: dict[str, Any] = {}
    async for mode, chunk in agent.astream({"messages": [("user", "go")]},
                                           stream_mode=["values", "messages"]):
        if mode == "values":
            last = chunk
    assert last["token_usage"] == EXPECTED
