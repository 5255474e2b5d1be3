"""Haystack's spellings on threadloom's agent parts (issue 16): what a Haystack user types
(``msg.is_from("user")``, ``msg.tool_call_result.result``, ``ChatMessage.from_user``,
a chat generator, a tool taking ``state: State``) works on threadloom's own objects."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from threadloom import (
    AIMessage,
    HumanMessage,
    ScriptedChatModel,
    Tool,
    ToolMessage,
    create_agent,
    tool,
)
from threadloom.agent import ChatGeneratorModel, State
from threadloom.messages import BaseMessage, ChatRole, SystemMessage


def weather(location: str) -> dict[str, Any]:
    """Weather of a city."""
    return {"weather": "sunny", "location": location}


def _call(name: str, args: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


# -- messages ----------------------------------------------------------------------------


def test_factories_build_threadloom_messages() -> None:
    user = BaseMessage.from_user("hi", meta={"k": 1})
    system = BaseMessage.from_system("be brief")
    ai = BaseMessage.from_assistant("ok", meta={"model": "m"}, tool_calls=[_call("w", {"a": 1})])
    result = BaseMessage.from_tool("done", origin=ai.tool_calls[0], error=True)
    assert isinstance(user, HumanMessage) and user.text == "hi" and user.meta == {"k": 1}
    assert isinstance(system, SystemMessage) and system.text == "be brief"
    assert isinstance(ai, AIMessage) and ai.meta == {"model": "m"}
    assert isinstance(result, ToolMessage)
    assert (result.tool_call_id, result.name, result.status) == ("c1", "w", "error")
    assert BaseMessage.from_tool({"a": 1}, origin=ai.tool_calls[0]).text == '{"a": 1}'


def test_is_from_takes_a_role_or_its_string() -> None:
    messages = [HumanMessage("u"), SystemMessage("s"), AIMessage("a"),
                ToolMessage("t", tool_call_id="c")]
    roles = ["user", "system", "assistant", "tool"]
    for message, role in zip(messages, roles, strict=True):
        assert message.is_from(role) and message.is_from(ChatRole(role))
        assert [r for r in roles if message.is_from(r)] == [role]
    assert ChatRole.USER == "user"
    with pytest.raises(ValueError, match="Unknown chat role"):
        HumanMessage("u").is_from("human being")


def test_tool_call_and_tool_call_result_views() -> None:
    ai = AIMessage("", tool_calls=[_call("w", {"a": 1}), _call("v", {}, "c2")])
    assert ai.tool_call is not None
    assert (ai.tool_call.tool_name, ai.tool_call.arguments, ai.tool_call.id) == ("w", {"a": 1},
                                                                                "c1")
    assert ai.tool_call == ai.tool_calls[0]  # still the plain dict's value
    assert AIMessage("x").tool_call is None and HumanMessage("x").tool_call is None
    done = ToolMessage("42", tool_call_id="c1", name="w")
    result = done.tool_call_result
    assert result is not None and done.tool_call_results == [result]
    assert (result.result, result.error, result.origin.tool_name, result.origin.id) == (
        "42", False, "w", "c1")
    assert ToolMessage("no", tool_call_id="c1", status="error").tool_call_result.error
    assert HumanMessage("x").tool_call_result is None and AIMessage("x").tool_call_results == []
    # the stored message is unchanged: no new fields
    assert set(done.model_dump()) == set(ToolMessage("x", tool_call_id="c").model_dump())


# -- a Haystack chat generator as the model --------------------------------------------


class Generator:
    """A Haystack-style chat generator, with lifecycle methods that count their calls."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.seen: list[Any] = []
        self.events: list[str] = []

    def run(self, messages: list[Any], tools: Any = None) -> dict[str, Any]:
        self.seen.append((list(messages), tools))
        return {"replies": [self.replies.pop(0)]}

    def warm_up(self) -> None:
        self.events.append("warm_up")

    def close(self) -> None:
        self.events.append("close")

    async def close_async(self) -> None:
        self.events.append("close_async")


def test_chat_generator_runs_the_loop_and_gets_the_lifecycle() -> None:
    generator = Generator([AIMessage("", tool_calls=[_call("weather", {"location": "Rome"})]),
                           BaseMessage.from_assistant("Sunny in Rome")])
    agent = create_agent(ChatGeneratorModel(generator), [weather])
    agent.warm_up()
    assert generator.events == ["warm_up"]
    out = agent.run([BaseMessage.from_user("Weather in Rome?")])
    assert out["last_message"].text == "Sunny in Rome"
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]
    assert out["messages"][2].tool_call_result.result == '{"weather": "sunny", "location": "Rome"}'
    assert generator.seen[0][1][0]["function"]["name"] == "weather"  # tools offered
    agent.close()
    asyncio.run(agent.close_async())
    assert generator.events[-2:] == ["close", "close_async"]  # async prefers close_async


def test_chat_generator_without_run_is_refused() -> None:
    with pytest.raises(TypeError, match="run"):
        ChatGeneratorModel(object())


# -- State -------------------------------------------------------------------------------


def test_state_get_returns_a_copy_and_data_is_live() -> None:
    state = State({"items": {"type": list}}, {"items": [1, 2]})
    state.get("items").append(3)
    assert state.get("items") == [1, 2]
    state.data["items"].append(3)
    assert state.get("items") == [1, 2, 3]
    lock = threading.Lock()  # a value that cannot be deep-copied comes back as it is
    assert State({"hook_context": {"type": Any}}, {"hook_context": lock}).get(
        "hook_context") is lock


def test_state_default_messages_entry_is_a_list_of_messages() -> None:
    state = State({})
    assert state.schema["messages"]["type"] == list[BaseMessage]
    assert State({"messages": {"type": list[BaseMessage]}}).schema["messages"]["type"] == (
        list[BaseMessage])


# -- tools taking the live State -------------------------------------------------------


def test_tool_with_a_state_parameter_reads_and_writes_agent_state() -> None:
    seen: list[Any] = []

    def remember(city: str, state: State) -> str:
        """Remember a city."""
        seen.append((type(state).__name__, state.get("city")))
        state.set("city", city)
        return f"noted {city}"

    t = tool(remember)
    assert "state" not in t.json_schema()["properties"]  # hidden from the model
    model = ScriptedChatModel([{"tool_calls": [{"name": "remember", "args": {"city": "Oslo"}}]},
                               "done"])
    agent = create_agent(model, [t], state_schema={"city": {"type": str}})
    out = agent.invoke({"messages": [HumanMessage("go")], "city": "Bergen"})
    assert seen == [("State", "Bergen")]
    assert out["city"] == "Oslo"
    assert [m.text for m in out["messages"] if m.type == "tool"] == ["noted Oslo"]


def test_state_parameter_spellings_and_a_caller_given_state() -> None:
    def optional(city: str, state: State | None = None) -> str:
        return city

    def postponed(city: str, state: State) -> str:
        return city

    for fn in (optional, postponed):
        assert "state" not in tool(fn).json_schema()["properties"]
    given = State({"city": {"type": str}})

    def setter(city: str, state: State) -> str:
        state.set("city", city)
        return "ok"

    assert tool(setter).invoke({"city": "Lima"}, state=given) == "ok"  # no Command
    assert given.get("city") == "Lima"


# -- exit conditions, reserved keys, attributes -----------------------------------------


def test_exit_condition_on_a_tool_given_at_run_time() -> None:
    model = ScriptedChatModel([{"tool_calls": [{"name": "weather", "args": {"location": "X"}}]},
                               "never"])
    agent = create_agent(model, [], exit_conditions=["weather"], max_agent_steps=5)
    out = agent.invoke({"messages": [HumanMessage("w?")]}, tools=[tool(weather)])
    assert (out["exit_reason"], out["step_count"]) == ("weather", 1)
    assert out["last_message"].type == "tool"


def test_max_agent_steps_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    call = {"tool_calls": [{"name": "weather", "args": {"location": "X"}}]}
    agent = create_agent(ScriptedChatModel(lambda m, t: call), [weather], max_agent_steps=2)
    with caplog.at_level(logging.WARNING):
        out = agent.run([HumanMessage("loop")])
    assert out["exit_reason"] == "max_agent_steps"
    assert "Agent reached maximum agent steps" in caplog.text


def test_reserved_key_message_and_state_schema_attribute() -> None:
    with pytest.raises(ValueError, match="reserved for Agent internal state"):
        create_agent(ScriptedChatModel(["x"]), state_schema={"step_count": {"type": int}})
    schema = {"foo": {"type": str}}
    assert create_agent(ScriptedChatModel(["x"]), state_schema=schema).state_schema == schema
    assert create_agent(ScriptedChatModel(["x"])).state_schema is None


class AsyncGenerator(Generator):
    """A generator with ``run_async``: async runs use it, sync runs keep ``run``."""

    async def run_async(self, messages: list[Any], tools: Any = None) -> dict[str, Any]:
        self.events.append("run_async")
        return {"replies": [self.replies.pop(0)]}


def test_sync_runs_call_run_and_async_runs_call_run_async() -> None:
    generator = AsyncGenerator(["one", "two"])
    agent = create_agent(ChatGeneratorModel(generator), [])
    assert agent.run([HumanMessage("a")])["last_message"].text == "one"
    assert "run_async" not in generator.events and len(generator.seen) == 1
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("b")]}))
    assert out["last_message"].text == "two"
    assert generator.events.count("run_async") == 1 and len(generator.seen) == 1


def test_async_run_without_run_async_uses_run() -> None:
    generator = Generator(["only run"])
    agent = create_agent(ChatGeneratorModel(generator), [])
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("b")]}))
    assert out["last_message"].text == "only run" and len(generator.seen) == 1


def test_generator_usage_in_meta_counts_and_context_tokens_start_at_zero() -> None:
    first = BaseMessage.from_assistant(
        tool_calls=[_call("weather", {"location": "X"})],
        meta={"usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    second = BaseMessage.from_assistant("Done.", meta={"usage": {"prompt_tokens": 20,
                                                                 "completion_tokens": 8}})
    seen: list[Any] = []

    def capture(state: State) -> None:
        seen.append(state.get("context_tokens"))

    agent = create_agent(ChatGeneratorModel(Generator([first, second])), [weather],
                         hooks={"before_llm": [capture]})
    out = agent.run([HumanMessage("w?")])
    assert seen == [0, 15]  # 0 before any call of the run, then the last call's size
    # Haystack sums each reply's meta["usage"] keys as given (the second has no total)
    assert out["token_usage"] == {"prompt_tokens": 30, "completion_tokens": 13,
                                  "total_tokens": 15}


def test_generator_usage_sums_nested_keys_and_stays_empty_without_counts() -> None:
    first = BaseMessage.from_assistant(
        tool_calls=[_call("weather", {"location": "X"})],
        meta={"usage": {"prompt_tokens": 4, "completion_tokens_details": {"reasoning": 2}}})
    second = BaseMessage.from_assistant("Done.", meta={"usage": {
        "prompt_tokens": 3, "completion_tokens_details": {"reasoning": 5}, "model": "m"}})
    agent = create_agent(ChatGeneratorModel(Generator([first, second])), [weather])
    assert agent.run([HumanMessage("w?")])["token_usage"] == {
        "prompt_tokens": 7, "completion_tokens_details": {"reasoning": 7}, "model": "m"}
    # a reply whose meta["usage"] is empty counts nothing: token_usage stays {} (Haystack)
    empty = BaseMessage.from_assistant("Hello", meta={"usage": {}})
    out = create_agent(ChatGeneratorModel(Generator([empty])), [weather]).run("hi")
    assert out["token_usage"] == {} and out["tool_call_counts"] == {"weather": 0}


def test_threadloom_model_usage_keys_and_a_hook_writing_token_usage() -> None:
    def add_ten(state: State) -> None:
        usage = state.get("token_usage")
        state.set("token_usage", {**usage, "input_tokens": usage["input_tokens"] + 10})

    model = ScriptedChatModel([{"content": "hi", "usage": {"input_tokens": 7,
                                                           "output_tokens": 2}}])
    out = create_agent(model, hooks={"after_llm": [add_ten]}).run("x")
    assert out["token_usage"] == {"input_tokens": 17, "output_tokens": 2, "total_tokens": 9}


def test_tool_concurrency_limit_bounds_parallel_calls_with_and_without_hooks() -> None:
    running, peak = [0], [0]

    @tool
    async def slow(n: int) -> int:
        """Count overlapping calls."""
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.01)
        running[0] -= 1
        return n

    calls = [_call("slow", {"n": i}, f"s{i}") for i in range(5)]
    for hooks in (None, {"before_tool": [lambda state: None]}):
        peak[0] = 0
        model = ScriptedChatModel([{"content": "", "tool_calls": calls}, "done"])
        agent = create_agent(model, [slow], tool_concurrency_limit=2, hooks=hooks)
        assert agent.tool_concurrency_limit == 2
        out = agent.run("go")
        assert out["tool_call_counts"] == {"slow": 5} and peak[0] == 2
    kept = create_agent(ScriptedChatModel(["x"]), [weather], tool_concurrency_limit=3)
    again = type(kept).from_dict(kept.to_dict(), allowed_modules=[__name__])
    assert again.tool_concurrency_limit == 3
    with pytest.raises(ValueError, match="tool_concurrency_limit must be greater than or equal"):
        create_agent(ScriptedChatModel(["x"]), [slow], tool_concurrency_limit=0)


def test_resolved_state_schema_is_haystacks() -> None:
    from threadloom.reducers import merge_lists, replace_values

    seen: dict[str, Any] = {}

    def keep(state: State) -> None:
        seen.update(state.schema)

    agent = create_agent(ScriptedChatModel(["x"]), state_schema={"foo": {"type": str}},
                         user_prompt="{{ topic }}", hooks={"before_llm": [keep]})
    schema = agent.resolved_state_schema
    assert schema["foo"] == {"type": str}  # as given, as Haystack's
    assert schema["messages"] == {"type": list[BaseMessage], "handler": merge_lists}
    assert schema["step_count"] == {"type": int, "handler": replace_values}
    assert schema["tool_call_counts"]["type"] == dict[str, int] and "topic" in schema
    assert {"step_count", "token_usage", "tool_call_counts", "exit_reason", "stop_run",
            "continue_run", "tools", "hook_context", "context_tokens"} <= set(schema)
    assert not {"last_message", "jump_to", "structured_response"} & set(schema)
    agent.run(topic="t")
    # the hooks' State holds those keys and threadloom's own (last_message, jump_to, ...)
    assert set(schema) <= set(seen)
    assert {"last_message", "jump_to", "structured_response"} <= set(seen)
    assert seen["foo"] == {"type": str, "handler": replace_values}


class Echo:
    """A generator with plain __init__ parameters kept as same-named attributes."""

    def __init__(self, prefix: str = "echo", *, times: int = 1) -> None:
        self.prefix = prefix
        self.times = times

    def run(self, messages: list[Any], tools: Any = None) -> dict[str, Any]:
        return {"replies": [AIMessage(f"{self.prefix}: {messages[-1].text}" * self.times)]}


def test_generator_agent_to_dict_from_dict_and_clone() -> None:
    agent = create_agent(ChatGeneratorModel(Echo("hey", times=1)), [weather],
                         system_prompt="be kind", exit_conditions=["text", "weather"],
                         state_schema={"foo": {"type": str}}, max_agent_steps=7)
    data = agent.to_dict()
    generator = data["init_parameters"]["model"]["init_parameters"]["generator"]
    assert generator == {"type": f"{__name__}:Echo",
                         "init_parameters": {"prefix": "hey", "times": 1}}
    clone = agent.clone()
    assert clone is not agent and clone.to_dict() == data
    changed = agent.clone(max_agent_steps=3)
    assert changed.max_agent_steps == 3
    assert {k for k in data["init_parameters"] if data["init_parameters"][k] != changed.to_dict()[
        "init_parameters"][k]} == {"max_agent_steps"}
    restored = type(agent).from_dict(data, allowed_modules=[__name__])
    assert restored.run([HumanMessage("hi")])["last_message"].text == "hey: hi"


def test_generator_that_cannot_be_written_says_why() -> None:
    class Local:
        def __init__(self, secret_client: Any) -> None:
            self.client = secret_client

        def run(self, messages: list[Any], tools: Any = None) -> dict[str, Any]:
            return {"replies": [AIMessage("x")]}

    from threadloom.errors import SerializationError

    with pytest.raises(SerializationError, match="not importable|local|module-level"):
        create_agent(ChatGeneratorModel(Local(object()))).to_dict()


def test_tool_built_in_code_is_written_by_its_function_path() -> None:
    built = Tool("weather_tool", "Weather of a city.", func=weather)
    agent = create_agent(ScriptedChatModel(["x"]), [built])
    data = agent.to_dict()
    assert data["init_parameters"]["tools"] == [{
        "type": "threadloom.tools:Tool", "init_parameters": {
            "name": "weather_tool", "description": "Weather of a city.",
            "return_direct": False, "func": f"{__name__}:weather"}}]
    restored = type(agent).from_dict(data, allowed_modules=[__name__])
    assert [t.name for t in restored.tools] == ["weather_tool"]
    assert restored.tools[0].func is weather
    from threadloom.errors import SecurityError

    with pytest.raises(SecurityError, match="not allowed"):
        type(agent).from_dict(data)  # the function's module must be allowed


def test_is_valid_type_and_validate_schema() -> None:
    from typing import Optional, Union

    from threadloom.agent.state import is_valid_type, validate_schema

    for good in (str, list, list[int], dict[str, list[int]], Optional[str],  # noqa: UP045
                 str | None, Union[int, str], Any, Generator):  # noqa: UP007
        assert is_valid_type(good), good
    for bad in ("str", 42, [1], None, len, lambda x: x, Union, Generator([])):
        assert not is_valid_type(bad), bad
    validate_schema({"n": {"type": list}, "messages": {"type": list[HumanMessage]}})
    with pytest.raises(ValueError, match="must be a Python type"):
        validate_schema({"n": {"type": "not_a_type"}})
    with pytest.raises(ValueError, match="missing a 'type' entry"):
        validate_schema({"n": {"handler": max}})
    with pytest.raises(ValueError, match="must be callable or None"):
        validate_schema({"n": {"type": list, "handler": "nope"}})
    with pytest.raises(ValueError, match="messages"):
        validate_schema({"messages": {"type": list[str]}})


def test_sync_streaming_callback_in_an_async_run_warns(caplog: pytest.LogCaptureFixture) -> None:
    chunks: list[Any] = []

    def on_chunk(chunk: Any) -> None:
        chunks.append(chunk)

    async def on_chunk_async(chunk: Any) -> None:
        chunks.append(chunk)

    agent = create_agent(ScriptedChatModel(["hello there"] * 3), [])
    with caplog.at_level(logging.WARNING):
        agent.run([HumanMessage("a")], streaming_callback=on_chunk)  # sync run: fine
        assert "sync streaming callback" not in caplog.text
        asyncio.run(agent.ainvoke({"messages": [HumanMessage("b")]},
                                  streaming_callback=on_chunk_async))
        assert "sync streaming callback" not in caplog.text
        asyncio.run(agent.ainvoke({"messages": [HumanMessage("c")]},
                                  streaming_callback=on_chunk))
    assert "A sync streaming callback is used in an async run" in caplog.text
    assert chunks  # every callback still got its chunks
