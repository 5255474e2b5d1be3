"""What wrap_model_call / wrap_tool_call middleware receive (ModelRequest, ToolCallRequest),
and the request message list."""

from __future__ import annotations

from typing import Any

from threadloom import AIMessage, HumanMessage, SystemMessage, ToolMessage
from threadloom.agent import ModelRequest, ToolCallRequest, create_agent
from threadloom.agent.middleware import wrap_model_call, wrap_tool_call
from threadloom.agent.requests import request_messages
from threadloom.models import ScriptedChatModel


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def test_request_messages_put_the_system_prompt_first() -> None:
    history = [HumanMessage("hi"), SystemMessage("be brief"), AIMessage("ok")]
    plain = request_messages("You are terse.", history)
    assert [m.type for m in plain] == ["system", "human", "system", "ai"]
    merged = request_messages("You are terse.", history, merge=True)
    assert [m.type for m in merged] == ["system", "human", "ai"]
    assert merged[0].text == "You are terse.\n\nbe brief"
    assert request_messages(None, history) == history


def test_wrap_model_call_sees_and_overrides_the_request() -> None:
    seen: list[ModelRequest] = []

    @wrap_model_call
    async def spy(request: ModelRequest, handler: Any) -> AIMessage:
        seen.append(request)
        return await handler(request.override(system_prompt="Overridden.",
                                              generation_kwargs={"temperature": 0}))

    model = ScriptedChatModel(["x"])
    agent = create_agent(model, tools=[add], system_prompt="Original {{ who }}.",
                         middleware=[spy], generation_kwargs={"temperature": 1})
    agent.run("hi", who="me")
    request = seen[0]
    assert request.system_prompt == "Original me."
    assert [m.text for m in request.messages] == ["hi"]  # history only, no system prompt
    assert [t.name for t in request.tools] == ["add"]
    assert request.generation_kwargs == {"temperature": 1}
    assert request.state["messages"][0].text == "hi"
    assert model.calls[0]["messages"][0].text == "Overridden."
    assert model.calls[0]["kwargs"] == {"temperature": 0}


def test_wrap_model_call_can_answer_without_the_model() -> None:
    @wrap_model_call
    async def cached(request: ModelRequest, handler: Any) -> AIMessage:
        return AIMessage("from cache")

    model = ScriptedChatModel([])
    out = create_agent(model, middleware=[cached]).run("hi")
    assert out["last_message"].text == "from cache" and model.calls == []


def test_wrap_tool_call_sees_each_call_and_may_replace_the_result() -> None:
    seen: list[ToolCallRequest] = []

    @wrap_tool_call
    async def guard(request: ToolCallRequest, handler: Any) -> Any:
        seen.append(request)
        if request.tool_call["args"]["a"] < 0:
            return ToolMessage(content="negative numbers refused",
                               tool_call_id=request.tool_call["id"], status="error")
        return await handler(request)

    calls = [{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"},
             {"name": "add", "args": {"a": -1, "b": 2}, "id": "c2"}]
    model = ScriptedChatModel([{"content": "", "tool_calls": calls}, "done"])
    out = create_agent(model, tools=[add], middleware=[guard]).run("x")
    assert sorted(r.tool_call["id"] for r in seen) == ["c1", "c2"]
    assert all(r.tool is not None and r.tool.name == "add" for r in seen)
    results = [(m.tool_call_id, m.text, m.status) for m in out["messages"] if m.type == "tool"]
    assert results == [("c1", "3", "success"), ("c2", "negative numbers refused", "error")]
