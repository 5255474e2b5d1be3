"""Haystack ``Agent`` behaviours a Haystack program relies on (issue 16, the peer's
``test/components/agents`` tests): each test reproduces one peer case on threadloom's
own parts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from threadloom import HumanMessage, ScriptedChatModel, create_agent


def weather(location: str) -> str:
    """Weather of a city."""
    return f"sunny in {location}"


# -- streaming callbacks (Haystack's select_streaming_callback) ---------------------------


async def _async_chunk(chunk: Any) -> None:
    return None


def test_a_sync_run_refuses_an_async_streaming_callback() -> None:
    agent = create_agent(ScriptedChatModel(["hello"] * 4), [weather],
                         streaming_callback=_async_chunk)
    with pytest.raises(ValueError, match="The init callback cannot be a coroutine"):
        agent.run([HumanMessage("Hello")])
    with pytest.raises(ValueError, match="The init callback cannot be a coroutine"):
        agent.invoke({"messages": [HumanMessage("Hello")]})
    plain = create_agent(ScriptedChatModel(["hello"] * 4), [weather])
    with pytest.raises(ValueError, match="The runtime callback cannot be a coroutine"):
        plain.run([HumanMessage("Hello")], streaming_callback=_async_chunk)
    with pytest.raises(ValueError, match="The runtime callback cannot be a coroutine"):
        list(plain.stream({"messages": [HumanMessage("Hello")]},
                          streaming_callback=_async_chunk))
    # the async run takes it
    seen: list[Any] = []

    async def collect(chunk: Any) -> None:
        seen.append(chunk)

    out = asyncio.run(plain.run_async([HumanMessage("Hello")], streaming_callback=collect))
    assert out["exit_reason"] == "text" and seen


# -- tool calls read as Haystack's ToolCall ----------------------------------------------


def _tool_call_names(message: Any) -> list[tuple[str, Any, str]]:
    return [(c.tool_name, c.arguments, c.id) for c in message.tool_calls]


def test_tool_calls_read_as_haystack_tool_calls_in_a_before_tool_hook() -> None:
    # the peer's test_runs_before_tools_when_model_calls_a_tool
    from threadloom.agent import State, hook

    @hook
    def record_tool_calls(state: State) -> None:
        pending = state.data["messages"][-1].tool_calls
        state.set("trace", [tc.tool_name for tc in pending])

    model = ScriptedChatModel([
        {"tool_calls": [{"name": "weather", "args": {"location": "Oslo"}}]}, "done"])
    agent = create_agent(model, [weather], state_schema={"trace": {"type": list}},
                         hooks={"before_tool": [record_tool_calls]})
    out = agent.run(messages=[HumanMessage("hi")])
    assert out["trace"] == ["weather"] and out["tool_call_counts"]["weather"] == 1


def test_every_built_tool_call_reads_as_a_haystack_tool_call() -> None:
    import json

    from threadloom import AIMessage, InMemoryCheckpointer
    from threadloom.messages import AIMessageChunk, BaseMessage, message_from_openai

    call = {"name": "weather", "args": {"location": "Oslo"}, "id": "c1"}
    built = [
        AIMessage("", tool_calls=[call]),
        AIMessage.model_validate({"content": "", "tool_calls": [call]}),
        BaseMessage.from_assistant(tool_calls=[call]),
        ScriptedChatModel([AIMessage("", tool_calls=[call])]).invoke("x"),
        ScriptedChatModel([{"tool_calls": [call]}]).invoke("x"),
        message_from_openai({"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "weather", "arguments": json.dumps(call["args"])}}]}),
        (AIMessageChunk("", tool_call_chunks=[{"name": "weather", "args": '{"location": ',
                                               "id": "c1", "index": 0}])
         + AIMessageChunk("", tool_call_chunks=[{"name": None, "args": '"Oslo"}', "id": None,
                                                 "index": 0}])).to_message(),
    ]
    for message in built:
        assert _tool_call_names(message) == [("weather", {"location": "Oslo"}, "c1")], message
        assert message.tool_calls == [{**call, "type": "tool_call"}]  # still the dict
    # a checkpoint round trip keeps the bytes and gives the view back
    agent = create_agent(ScriptedChatModel([{"tool_calls": [call]}, "done"]), [weather],
                         checkpointer=InMemoryCheckpointer())
    agent.invoke({"messages": [HumanMessage("hi")]}, thread_id="t")
    stored = agent.get_state(thread_id="t").values["messages"][1]
    assert _tool_call_names(stored) == [("weather", {"location": "Oslo"}, "c1")]
    assert json.loads(stored.model_dump_json())["tool_calls"][0]["name"] == "weather"


# -- the hooks' State: Haystack's schema, messages appended while hooks run ---------------


def test_hooks_append_messages_as_haystack_and_the_graph_merges_by_id() -> None:
    from threadloom import AIMessage, RemoveMessage, SystemMessage
    from threadloom.agent import State
    from threadloom.reducers import replace_values

    seen: list[list[str]] = []

    def inject(state: State) -> None:
        if state.get("step_count") == 0:
            state.set("messages", [SystemMessage("A")])
            state.set("messages", [SystemMessage("B")])
            seen.append([m.text for m in state.data["messages"]])

    def edit_last(state: State) -> None:
        last = state.data["messages"][-1]
        state.set("messages", [last.model_copy(update={"content": last.text + "!"})])
        seen.append([m.text for m in state.data["messages"]])  # appended while hooks run

    agent = create_agent(ScriptedChatModel(["hello"]), [],
                         hooks={"before_llm": [inject], "after_run": [edit_last]})
    out = agent.run(messages=[HumanMessage("hi")])
    assert seen[0] == ["hi", "A", "B"]
    assert seen[1] == ["hi", "A", "B", "hello", "hello!"]
    # settled as the graph merges: the same id replaced the reply
    assert [m.text for m in out["messages"]] == ["hi", "A", "B", "hello!"]
    assert out["last_message"].text == "hello!"

    def drop_system(state: State) -> None:
        msgs = state.data["messages"]
        state.set("messages", [RemoveMessage(id=m.id) for m in msgs if m.type == "system"])

    def rewrite(state: State) -> None:  # Haystack's way to replace the list
        state.set("messages", [HumanMessage("BRIEF")], handler_override=replace_values)

    model = ScriptedChatModel(["ok", "ok"])
    hooks = {"before_run": [inject], "before_llm": [drop_system]}
    out = create_agent(model, [], hooks=hooks).run(messages=[HumanMessage("hi")])
    assert [m.text for m in model.calls[0]["messages"]] == ["hi"]
    assert [m.text for m in out["messages"]] == ["hi", "ok"]
    out = create_agent(ScriptedChatModel(["ok"]), [], hooks={"before_run": [rewrite]}).run(
        messages=[HumanMessage("hi")])
    assert [m.text for m in out["messages"]] == ["BRIEF", "ok"]
    assert isinstance(out["messages"][1], AIMessage)


# -- to_dict names the streaming callback (the Haystack guide's serialization list) ------


def print_chunk(chunk: Any) -> None:
    """A module-level streaming callback (importable by path)."""


def test_to_dict_writes_the_streaming_callback_and_from_dict_imports_it_if_allowed() -> None:
    from threadloom.agent.builder import Agent
    from threadloom.errors import SecurityError

    agent = create_agent(ScriptedChatModel(["x"]), [weather], streaming_callback=print_chunk,
                         enable_streaming_callback_passthrough=True)
    params = agent.to_dict()["init_parameters"]
    assert params["streaming_callback"] == f"{__name__}:print_chunk"
    assert params["enable_streaming_callback_passthrough"] is True
    loaded = Agent.from_dict(agent.to_dict(), allowed_modules=[__name__])
    assert loaded.config["streaming_callback"] is print_chunk
    assert loaded.config["enable_streaming_callback_passthrough"] is True
    with pytest.raises(SecurityError):
        Agent.from_dict(agent.to_dict())  # this module is not allowed
    assert "streaming_callback" not in create_agent(ScriptedChatModel(["x"])).to_dict()[
        "init_parameters"]


# -- a chat generator without a tools parameter (the Haystack guide, Agent.__init__) -----


class _NoToolsGenerator:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def run(self, messages: list[Any]) -> dict[str, Any]:
        from threadloom import AIMessage

        self.calls.append({"messages": list(messages)})
        return {"replies": [AIMessage("plain reply")]}


def test_a_generator_without_tools_is_refused_tools_at_build_and_runs_without() -> None:
    from threadloom.agent import ChatGeneratorModel

    generator = _NoToolsGenerator()
    model = ChatGeneratorModel(generator)
    assert model.supports_tools is False
    with pytest.raises(TypeError, match="_NoToolsGenerator does not accept tools parameter "
                                        "in its run method"):
        create_agent(model, [weather])
    out = create_agent(model).run(messages=[HumanMessage("Hello")])
    assert out["last_message"].text == "plain reply" and out["exit_reason"] == "text"
    out = asyncio.run(create_agent(model).run_async(messages=[HumanMessage("Hello")]))
    assert out["last_message"].text == "plain reply" and len(generator.calls) == 2
