"""Hooks around the agent loop: order, the live State, user state schemas, rewriting and
vetoing tool calls."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel

from threadloom import AIMessage, ToolMessage
from threadloom.agent import AgentState, State, create_agent, hook
from threadloom.agent.approval import pending_tool_calls
from threadloom.checkpoint.memory import InMemoryCheckpointer
from threadloom.models import ScriptedChatModel
from threadloom.reducers import merge_lists, replace_values


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def one_tool_then(answer: str, **args: Any) -> ScriptedChatModel:
    call = {"name": "add", "args": args or {"a": 1, "b": 2}, "id": "c1"}
    return ScriptedChatModel([{"content": "", "tool_calls": [call]}, answer])


def test_hook_points_run_in_loop_order_and_list_order() -> None:
    events: list[str] = []

    def rec(name: str) -> Any:
        return lambda state: events.append(name)

    hooks = {point: [rec(point)] for point in (
        "before_run", "before_llm", "after_llm", "before_tool", "after_tool", "on_exit",
        "after_run")}
    hooks["before_llm"].append(rec("before_llm#2"))
    create_agent(one_tool_then("3"), tools=[add], hooks=hooks).run("1+2?")
    assert events == [
        "before_run", "before_llm", "before_llm#2", "after_llm", "before_tool", "after_tool",
        "before_llm", "before_llm#2", "after_llm", "on_exit", "after_run"]


def test_marked_hooks_as_a_list_and_async_hooks() -> None:
    events: list[str] = []

    @hook("before_llm")
    async def first(state: State) -> None:
        events.append(f"llm:{state.get('step_count')}")

    @hook("after_run")
    def last(state: State, context: Any) -> None:
        events.append(f"end:{context}")

    create_agent(ScriptedChatModel(["x"]), hooks=[first, last]).run("q", hook_context="ctx")
    assert events == ["llm:0", "end:ctx"]


def test_state_api_inside_hooks() -> None:
    seen: dict[str, Any] = {}

    def after_llm(state: State) -> None:
        seen["has_messages"] = state.has("messages")
        seen["steps"] = state.get("step_count")
        seen["usage"] = state.get("token_usage")["total_tokens"]
        seen["data_keys"] = {"messages", "step_count"} <= set(state.data)
        state.set("notes", ["from after_llm"])
        state.set("notes", ["again"])
        state.set("score", 3)

    schema = {"notes": {"type": list[str]}, "score": {"type": int}}
    model = ScriptedChatModel([{"content": "hi", "usage": {"input_tokens": 7,
                                                           "output_tokens": 2}}])
    out = create_agent(model, state_schema=schema, hooks={"after_llm": [after_llm]}).run("x")
    assert seen == {"has_messages": True, "steps": 1, "usage": 9, "data_keys": True}
    assert out["notes"] == ["from after_llm", "again"]  # merge_lists by default
    assert out["score"] == 3


def test_dict_schema_handler_and_override_and_input() -> None:
    def before_run(state: State) -> None:
        state.set("docs", ["b"])
        state.set("total", 5)
        state.set("tags", ["only"], handler_override=replace_values)

    schema = {"docs": {"type": list, "handler": merge_lists},
              "total": {"type": int, "handler": lambda a, b: (a or 0) + b},
              "tags": {"type": list}}
    agent = create_agent(ScriptedChatModel(["ok"]), state_schema=schema,
                         hooks={"before_run": [before_run]})
    out = agent.invoke({"messages": ["x"], "docs": ["a"], "total": 1, "tags": ["t1", "t2"]})
    assert out["docs"] == ["a", "b"]
    assert out["total"] == 6
    assert out["tags"] == ["only"]


def test_typed_dict_schema_extending_agent_state() -> None:
    class MyState(AgentState):
        visits: Annotated[int, lambda a, b: (a or 0) + b]
        city: str

    def before_llm(state: State) -> dict[str, Any]:
        return {"visits": 1}

    agent = create_agent(ScriptedChatModel(["a", "b"]), state_schema=MyState,
                         hooks={"before_llm": [before_llm]},
                         checkpointer=InMemoryCheckpointer())
    out = agent.invoke({"messages": ["x"], "city": "Oslo"}, thread_id="t")
    assert out["visits"] == 1 and out["city"] == "Oslo"
    assert agent.invoke({"messages": ["y"]}, thread_id="t")["visits"] == 2


def test_pydantic_schema_defaults() -> None:
    class Extra(BaseModel):
        language: str = "en"
        retries: int = 0

    seen: list[Any] = []
    agent = create_agent(ScriptedChatModel(["a"]), state_schema=Extra,
                         hooks={"before_llm": [lambda s: seen.append(s.get("language"))]})
    out = agent.run("x")
    assert seen == ["en"] and out["language"] == "en" and out["retries"] == 0


@pytest.mark.parametrize("schema", [
    {"step_count": {"type": str}},
    {"messages": {"type": list}},
    {"jump_to": {"type": str}},
])
def test_reserved_keys_are_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="reserved"):
        create_agent(ScriptedChatModel(["x"]), state_schema=schema)


def test_reserved_key_redefined_in_a_typed_dict() -> None:
    class Bad(TypedDict):
        exit_reason: int

    with pytest.raises(ValueError, match="exit_reason"):
        create_agent(ScriptedChatModel(["x"]), state_schema=Bad)


def test_before_tool_rewrites_a_call_and_the_new_args_run() -> None:
    def before_tool(state: State) -> None:
        ai = state.get("messages")[-1]
        calls = [{**c, "args": {"a": 10, "b": 20}} for c in ai.tool_calls]
        state.set("messages", [ai.model_copy(update={"tool_calls": calls})])

    agent = create_agent(one_tool_then("30"), tools=[add], hooks={"before_tool": [before_tool]})
    out = agent.run("x")
    assert [m.text for m in out["messages"] if m.type == "tool"] == ["30"]
    assert out["messages"][1].tool_calls[0]["args"] == {"a": 10, "b": 20}


def test_before_tool_vetoes_one_call_by_answering_it() -> None:
    ran: list[str] = []

    def spy(q: str) -> str:
        """Spy."""
        ran.append(q)
        return q

    def veto(state: State) -> None:
        for c in pending_tool_calls(state):
            if c["args"]["q"] == "bad":
                state.set("messages", [ToolMessage(content="vetoed", tool_call_id=c["id"],
                                                   name="spy", status="error")])

    calls = [{"name": "spy", "args": {"q": "bad"}, "id": "c1"},
             {"name": "spy", "args": {"q": "good"}, "id": "c2"}]
    model = ScriptedChatModel([{"content": "", "tool_calls": calls}, "ok"])
    out = create_agent(model, tools=[spy], hooks={"before_tool": [veto]}).run("x")
    assert ran == ["good"]
    results = [(m.tool_call_id, m.text) for m in out["messages"] if m.type == "tool"]
    assert results == [("c1", "vetoed"), ("c2", "good")]
    assert out["tool_call_counts"] == {"spy": 1}


def test_before_tool_removes_a_call_from_the_message() -> None:
    ran: list[str] = []

    def spy(q: str) -> str:
        """Spy."""
        ran.append(q)
        return q

    def drop_first(state: State) -> None:
        ai = state.get("messages")[-1]
        state.set("messages", [ai.model_copy(update={"tool_calls": ai.tool_calls[1:]})])

    calls = [{"name": "spy", "args": {"q": "a"}, "id": "c1"},
             {"name": "spy", "args": {"q": "b"}, "id": "c2"}]
    model = ScriptedChatModel([{"content": "", "tool_calls": calls}, "ok"])
    out = create_agent(model, tools=[spy], hooks={"before_tool": [drop_first]}).run("x")
    assert ran == ["b"]
    assert [c["id"] for c in out["messages"][1].tool_calls] == ["c2"]


def test_after_tool_rewrites_fresh_results() -> None:
    def redact(state: State) -> None:
        fixed = [m.model_copy(update={"content": "[redacted]"})
                 for m in state.get("messages") if m.type == "tool"]
        state.set("messages", fixed)

    model = one_tool_then("done")
    out = create_agent(model, tools=[add], hooks={"after_tool": [redact]}).run("x")
    assert [m.text for m in out["messages"] if m.type == "tool"] == ["[redacted]"]
    assert [m.text for m in model.calls[1]["messages"] if m.type == "tool"] == ["[redacted]"]


def test_hook_removes_messages_and_persists(thread_id: str) -> None:
    from threadloom import RemoveMessage

    def trim(state: State) -> None:
        msgs = state.get("messages")
        if len(msgs) > 2:
            state.set("messages", [RemoveMessage(id=m.id) for m in msgs[:-1]])

    model = ScriptedChatModel(["a", "b"])
    agent = create_agent(model, hooks={"before_llm": [trim]}, checkpointer=InMemoryCheckpointer())
    agent.run("one", thread_id=thread_id)
    out = agent.run("two", thread_id=thread_id)
    assert [m.text for m in model.calls[1]["messages"]] == ["two"]
    assert [m.text for m in out["messages"]] == ["two", "b"]


def test_unknown_hook_point_and_bad_jump() -> None:
    with pytest.raises(ValueError, match="unknown hook point"):
        create_agent(ScriptedChatModel(["x"]), hooks={"before_lunch": [lambda s: None]})
    agent = create_agent(ScriptedChatModel(["x"]),
                         hooks={"before_llm": [lambda s: {"jump_to": "nowhere"}]})
    with pytest.raises(ValueError, match="jump_to"):
        agent.run("x")


def test_hook_sees_ai_message_after_llm() -> None:
    seen: list[str] = []
    model = ScriptedChatModel([AIMessage("answer")])
    create_agent(model, hooks={"after_llm": [lambda s: seen.append(
        s.get("messages")[-1].text)]}).run("x")
    assert seen == ["answer"]
