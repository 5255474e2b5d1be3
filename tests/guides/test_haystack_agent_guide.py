"""Every example of the Haystack Agent guide (seeds/000), on ScriptedChatModel, with
threadloom's names (``chat_generator`` is ``model``, ``ChatMessage.from_user`` a
``HumanMessage``); each test asserts what the guide says happens."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

import pytest

from threadloom import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    ScriptedChatModel,
    State,
    SystemMessage,
    create_agent,
    hook,
    merge_lists,
    replace_values,
    tool,
)
from threadloom.agent.builder import Agent
from threadloom.prompts.sandbox import MissingVariablesError


@tool
def search(query: Annotated[str, "The search query"]) -> str:
    """Search for information on the web."""
    return ("In France, a 15% service charge is typically included, but leaving 5-10% extra "
            "is appreciated.")


@tool
def calculator(
    operation: Annotated[Literal["multiply", "percentage"],
                         "The mathematical operation to perform"],
    a: Annotated[float, "First number"],
    b: Annotated[float, "Second number"],
) -> float:
    """Perform mathematical calculations."""
    if operation == "multiply":
        return a * b
    elif operation == "percentage":
        return (a / 100) * b
    return 0


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def test_quick_start_two_tools_and_a_streaming_callback() -> None:
    printed: list[Any] = []
    model = ScriptedChatModel([_call("search", query="tip in France"),
                               _call("calculator", operation="percentage", a=10, b=85),
                               "Service is included; leaving about €8.50 extra is appreciated."])
    agent = create_agent(
        model, tools=[search, calculator], streaming_callback=printed.append,
        system_prompt=("You are a helpful assistant. Use the search tool to find information "
                       "about a user's question and the calculator tool to perform math."))
    result = agent.run(messages=[HumanMessage("Calculate the appropriate tip for an €85 meal "
                                              "in France")])
    assert result["last_message"].text.endswith("appreciated.")
    assert [m.text for m in result["messages"] if m.type == "tool"][1] == "8.5"
    schema = calculator.json_schema()
    assert schema["properties"]["operation"]["enum"] == ["multiply", "percentage"]
    assert schema["properties"]["a"]["description"] == "First number"
    assert printed and all(isinstance(c, AIMessageChunk) for c in printed)


class _NoTools:
    async def ainvoke(self, messages: Any) -> AIMessage:
        return AIMessage("x")


def test_a_generator_that_takes_no_tools_is_refused_at_init() -> None:
    with pytest.raises(TypeError, match="tools"):
        create_agent(_NoTools(), tools=[search])


@tool
def translate(
    text: Annotated[str, "The text to translate"],
    target_language: Annotated[str, "The language to translate to"],
) -> str:
    """Translate text to a target language."""
    return f"[Translated '{text}' to {target_language}]"


USER_PROMPT = """{% message role="user" %}
Translate the following document to {{ language }}: {{ document }}
{% endmessage %}"""


def test_templated_user_prompt_variables_become_run_inputs() -> None:
    model = ScriptedChatModel(["Il fait beau aujourd'hui et le soleil brille."])
    agent = create_agent(model, tools=[translate],
                         system_prompt="You are a helpful translation assistant.",
                         user_prompt=USER_PROMPT)
    result = agent.run(messages=[], language="French",
                       document="The weather is lovely today and the sun is shining.")
    sent = model.calls[0]["messages"]
    assert isinstance(sent[0], SystemMessage)  # the system prompt goes first
    assert sent[-1].text.strip() == ("Translate the following document to French: The weather "
                                     "is lovely today and the sun is shining.")
    assert result["last_message"].text.startswith("Il fait beau")


def test_required_variables_default_star_none_and_a_list() -> None:
    agent = create_agent(ScriptedChatModel(["x"] * 3), [translate], user_prompt=USER_PROMPT)
    with pytest.raises(MissingVariablesError):
        agent.run(messages=[], language="French")
    optional = create_agent(ScriptedChatModel(["x"]), [translate], user_prompt=USER_PROMPT,
                            required_variables=None)
    sent = optional.run(messages=[HumanMessage("first")], language="French")["messages"]
    assert sent[0].text == "first"  # the rendered prompt comes after the given messages
    assert sent[1].text.strip() == "Translate the following document to French:"
    listed = create_agent(ScriptedChatModel(["x"]), [translate], user_prompt=USER_PROMPT,
                          required_variables=["document"])
    assert listed.run(messages=[], document="d")["exit_reason"] == "text"


@pytest.mark.parametrize("name", ["messages", "streaming_callback"])
def test_template_variables_may_not_collide(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        create_agent(ScriptedChatModel(["x"]), [],
                     user_prompt=f'{{% message role="user" %}}{{{{ {name} }}}}{{% endmessage %}}')


@tool
def save_result(content: Annotated[str, "The result to save"]) -> str:
    """Save the final result."""
    return "saved"


def test_exit_conditions_text_and_a_tool_name() -> None:
    model = ScriptedChatModel([_call("save_result", content="r"), "never"])
    agent = create_agent(model, [save_result], exit_conditions=["save_result"])
    result = agent.run(messages=[HumanMessage("save it")])
    assert result["exit_reason"] == "save_result" and result["last_message"].type == "tool"
    assert len(model.calls) == 1


def test_an_exit_tool_that_errors_cancels_the_exit() -> None:
    @tool
    def flaky(x: int) -> str:
        """Fails."""
        raise RuntimeError("boom")

    model = ScriptedChatModel([_call("flaky", x=1), "recovered"])
    agent = create_agent(model, [flaky], exit_conditions=["flaky", "text"])
    result = agent.run(messages=[HumanMessage("go")])
    assert result["exit_reason"] == "text" and len(model.calls) == 2


def test_length_and_max_agent_steps_exit_reasons() -> None:
    cut = create_agent(ScriptedChatModel([{"content": "partial", "finish_reason": "length"}]), [])
    assert cut.run(messages="x")["exit_reason"] == "length"
    loop = ScriptedChatModel([_call("save_result", content=str(i)) for i in range(3)])
    result = create_agent(loop, [save_result], max_agent_steps=3).run(messages="x")
    assert result["exit_reason"] == "max_agent_steps" and result["step_count"] == 3


def test_an_empty_reply_is_no_text_exit() -> None:
    model = ScriptedChatModel(["", "now an answer"])
    result = create_agent(model, [search]).run(messages="x")
    assert result["exit_reason"] == "text" and result["last_message"].text == "now an answer"


@hook
def require_save(state: State) -> None:
    if state.get("tool_call_counts", {}).get("save_result", 0) == 0:
        state.set("messages", [SystemMessage("Call save_result before finishing.")])
        state.set("continue_run", True)  # keep the Agent running instead of stopping


def test_on_exit_forces_a_tool_before_finishing() -> None:
    model = ScriptedChatModel(["done", _call("save_result", content="r"), "done, saved"])
    agent = create_agent(model, tools=[save_result], hooks={"on_exit": [require_save]})
    result = agent.run(messages=[HumanMessage("work")])
    assert result["tool_call_counts"] == {"save_result": 1}
    assert result["last_message"].text == "done, saved" and result["exit_reason"] == "text"
    assert model.calls[1]["messages"][-1].text == "Call save_result before finishing."


def test_on_exit_continue_stays_bounded_by_max_agent_steps() -> None:
    always = hook(lambda state: state.set("continue_run", True))
    agent = create_agent(ScriptedChatModel(["a", "b", "c"]), [save_result],
                         hooks={"on_exit": [always]}, max_agent_steps=3)
    assert agent.run(messages="x")["exit_reason"] == "max_agent_steps"


def test_hooks_run_once_per_run_or_per_step_in_list_order() -> None:
    seen: list[str] = []

    def rec(name: str) -> Any:
        return hook(lambda state: seen.append(name))

    model = ScriptedChatModel([_call("save_result", content="r"), "ok"])
    agent = create_agent(model, [save_result], hooks={
        "before_run": [rec("before_run")], "before_llm": [rec("llm1"), rec("llm2")],
        "before_tool": [rec("before_tool")], "after_tool": [rec("after_tool")],
        "on_exit": [rec("on_exit")], "after_run": [rec("after_run")]})
    agent.run(messages="x")
    assert seen == ["before_run", "llm1", "llm2", "before_tool", "after_tool", "llm1", "llm2",
                    "on_exit", "after_run"]


def test_before_tool_veto_goes_back_to_the_llm() -> None:
    def confirm(state: State) -> None:
        pending = state.get("messages")[-1]
        state.set("messages", [AIMessage("The user declined.", id=pending.id)])

    model = ScriptedChatModel([_call("save_result", content="r"), "Nothing was saved."])
    result = create_agent(model, [save_result], hooks={"before_tool": [confirm]}).run(
        messages="x")
    assert result["tool_call_counts"]["save_result"] == 0
    assert result["last_message"].text == "Nothing was saved."


def test_reserved_keys_and_hook_readable_keys() -> None:
    for key in ("step_count", "token_usage", "tool_call_counts", "exit_reason", "continue_run",
                "stop_run", "tools", "hook_context", "context_tokens"):
        with pytest.raises(ValueError):
            create_agent(ScriptedChatModel(["x"]), [], state_schema={key: {"type": int}})
    seen: dict[str, Any] = {}

    def look(state: State) -> None:
        seen.update(tools=[t.name for t in state.get("tools")],
                    ctx=state.data.get("hook_context"), tokens=state.get("context_tokens"))

    agent = create_agent(ScriptedChatModel(["a"]), [save_result], hooks={"after_run": [look]})
    agent.run(messages="hello", hook_context={"queue": "q"})
    assert seen["tools"] == ["save_result"] and seen["ctx"] == {"queue": "q"}
    assert seen["tokens"] > 0


def test_stop_run_value_is_the_exit_reason() -> None:
    stop = hook(lambda state: state.set("stop_run", "budget_exceeded"))
    agent = create_agent(ScriptedChatModel(["never"]), [], hooks={"before_llm": [stop]})
    assert agent.run(messages="x")["exit_reason"] == "budget_exceeded"


def test_state_standalone_and_its_api() -> None:
    my_state = State(schema={"gh_repo_name": {"type": str}, "user_name": {"type": str}},
                     data={"gh_repo_name": "my_repo", "user_name": "my_user_name"})
    assert my_state.get("gh_repo_name") == "my_repo" and my_state.has("user_name")
    assert my_state.get("missing", "default") == "default"
    assert my_state.schema["messages"]["handler"] is not None  # messages is always there
    lists = State({"docs": {"type": list}, "n": {"type": int}})
    assert lists.schema["docs"]["handler"] is merge_lists
    assert lists.schema["n"]["handler"] is replace_values
    lists.set("docs", ["a"])
    lists.set("docs", ["b"])
    lists.set("docs", ["c"], handler_override=replace_values)
    assert lists.get("docs") == ["c"]
    restored = State.from_dict(my_state.to_dict())
    assert restored.data == my_state.data
    assert set(my_state.to_dict(skip_keys=["user_name"])["data"]["serialized_data"]) == {
        "gh_repo_name"}
    with pytest.raises(ValueError):
        State({"x": {"type": "not a type"}})


def test_state_schema_keys_are_run_inputs_and_outputs() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), [],
                         state_schema={"repo": {"type": str}, "found": {"type": list}})
    result = agent.run(messages="x", repo="haystack")
    assert result["repo"] == "haystack"
    assert {"messages", "last_message", "step_count", "token_usage", "tool_call_counts",
            "exit_reason"} <= set(result)


def test_run_async_matches_run_and_generation_kwargs_merge() -> None:
    model = ScriptedChatModel(["sync", "async"])
    agent = create_agent(model, [], generation_kwargs={"temperature": 0, "top_p": 1})
    first = agent.run(messages="x", generation_kwargs={"temperature": 1})
    second = asyncio.run(agent.run_async(messages="x"))
    assert set(first) == set(second)
    assert model.calls[0]["kwargs"]["temperature"] == 1 and model.calls[0]["kwargs"]["top_p"] == 1


def test_run_time_tools_by_name() -> None:
    model = ScriptedChatModel(["x"])
    create_agent(model, [search, calculator]).run(messages="x", tools=["search"])
    assert [t["function"]["name"] for t in model.calls[0]["tools"]] == ["search"]


def test_no_tools_is_a_plain_llm() -> None:
    model = ScriptedChatModel(["one reply", "never"])
    result = create_agent(model, []).run(messages="x")
    assert result["step_count"] == 1 and len(model.calls) == 1


def test_lifecycle_clone_and_serialization() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), [search], system_prompt="A")
    agent.warm_up()
    asyncio.run(agent.warm_up_async())
    agent.close()
    asyncio.run(agent.close_async())
    other = agent.clone(system_prompt="B")
    assert other.system_prompt == "B" and agent.system_prompt == "A"
    loaded = Agent.from_dict(agent.to_dict(), allowed_modules=[__name__])
    assert loaded.system_prompt == "A" and [t.name for t in loaded.tools] == ["search"]


# -- what the guide says around its examples ----------------------------------------------


def test_quick_start_in_haystack_spellings() -> None:
    # the quick start as a Haystack user types it: ChatMessage.from_user, a chat generator
    from threadloom.agent import ChatGeneratorModel
    from threadloom.messages import BaseMessage

    class Generator:  # a Haystack-style chat generator: run(messages, tools) -> replies
        def __init__(self) -> None:
            self.replies = [BaseMessage.from_assistant(tool_calls=[
                {"name": "calculator", "args": {"operation": "percentage", "a": 10, "b": 85},
                 "id": "c1"}]), BaseMessage.from_assistant("About €8.50.")]

        def run(self, messages: list[Any], tools: Any = None) -> dict[str, Any]:
            return {"replies": [self.replies.pop(0)]}

    agent = create_agent(ChatGeneratorModel(Generator()), tools=[search, calculator],
                         system_prompt="You are a helpful assistant.")
    result = agent.run(messages=[BaseMessage.from_user(
        "Calculate the appropriate tip for an €85 meal in France")])
    assert result["last_message"].text == "About €8.50."
    assert result["messages"][0].is_from("user")
    assert [m.tool_call_result.result for m in result["messages"] if m.is_from("tool")] == [
        "8.5"]
    assert result["messages"][1].tool_calls[0].tool_name == "calculator"


def test_tracing_spans_run_step_and_llm() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from threadloom.agent.tracing import SPAN_LLM, SPAN_RUN, SPAN_STEP, set_tracer_provider

    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    set_tracer_provider(provider)
    try:
        model = ScriptedChatModel([_call("search", query="tip"), "done"])
        create_agent(model, [search]).run(messages="x")
    finally:
        set_tracer_provider(None)
        provider.shutdown()
    spans = {s.name: s for s in memory.get_finished_spans()}
    run, step, llm = spans[SPAN_RUN], spans[SPAN_STEP], spans[SPAN_LLM]
    assert llm.parent.span_id == step.context.span_id
    assert step.parent.span_id == run.context.span_id
    attrs = dict(run.attributes or {})
    assert attrs["threadloom.agent.step_count"] == 2
    assert list(attrs["threadloom.agent.exit_conditions"]) == ["text"]


def test_streaming_callback_can_also_get_tool_results() -> None:
    from threadloom import ToolMessage

    got: list[Any] = []
    model = ScriptedChatModel([_call("search", query="tip"), "done"])
    create_agent(model, [search], streaming_callback=got.append,
                 enable_streaming_callback_passthrough=True).run(messages="x")
    assert [type(c) for c in got if not isinstance(c, AIMessageChunk)] == [ToolMessage]
    assert [c.name for c in got if isinstance(c, ToolMessage)] == ["search"]


def test_on_exit_skipped_at_max_agent_steps_and_after_run_always_runs() -> None:
    seen: list[str] = []
    on_exit = hook(lambda state: seen.append("on_exit"))

    def after_run(state: State) -> None:
        seen.append("after_run")
        state.set("continue_run", True)  # no effect here

    loop = ScriptedChatModel([_call("save_result", content=str(i)) for i in range(2)] + ["x"])
    result = create_agent(loop, [save_result], max_agent_steps=2,
                          hooks={"on_exit": [on_exit], "after_run": [after_run]}).run(
        messages="x")
    assert result["exit_reason"] == "max_agent_steps" and seen == ["after_run"]
    seen.clear()
    result = create_agent(ScriptedChatModel(["done", "never"]), [],
                          hooks={"on_exit": [on_exit], "after_run": [after_run]}).run(
        messages="x")
    assert result["exit_reason"] == "text" and result["step_count"] == 1
    assert seen == ["on_exit", "after_run"]


def test_a_vetoed_exit_tool_does_not_end_the_run() -> None:
    def veto(state: State) -> None:
        pending = state.get("messages")[-1]
        state.set("messages", [AIMessage("Not now.", id=pending.id)])

    model = ScriptedChatModel([_call("save_result", content="r"), "I did not save it."])
    result = create_agent(model, [save_result], exit_conditions=["save_result", "text"],
                          hooks={"before_tool": [veto]}).run(messages="x")
    assert result["exit_reason"] == "text" and result["tool_call_counts"]["save_result"] == 0
    assert len(model.calls) == 2
    looping = ScriptedChatModel([_call("save_result", content=str(i)) for i in range(3)])
    result = create_agent(looping, [save_result], exit_conditions=["save_result"],
                          hooks={"before_tool": [veto]}, max_agent_steps=3).run(messages="x")
    assert result["exit_reason"] == "max_agent_steps"  # bounded, as the guide says


def test_token_usage_sums_every_replys_meta_usage() -> None:
    from threadloom.messages import BaseMessage

    model = ScriptedChatModel([
        BaseMessage.from_assistant(tool_calls=[{"name": "search", "args": {"query": "q"},
                                                "id": "c1"}],
                                   meta={"usage": {"prompt_tokens": 10, "completion_tokens": 2,
                                                   "total_tokens": 12}}),
        BaseMessage.from_assistant("ok", meta={"usage": {"prompt_tokens": 20,
                                                         "completion_tokens": 3,
                                                         "total_tokens": 23}})])
    result = create_agent(model, [search]).run(messages="x")
    assert result["token_usage"] == {"prompt_tokens": 30, "completion_tokens": 5,
                                     "total_tokens": 35}
    assert result["step_count"] == 2 and result["tool_call_counts"] == {"search": 1}


def keep_hook(state: State) -> None:
    """A module-level hook (importable, so to_dict can name it)."""


def print_chunk(chunk: Any) -> None:
    """A module-level streaming callback."""


def join_notes(current: Any, new: Any) -> Any:
    return f"{current or ''}{new}"


def test_to_dict_from_dict_keeps_every_part() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), [search, calculator], system_prompt="S",
                         user_prompt='{% message role="user" %}{{ q }}{% endmessage %}',
                         exit_conditions=["text", "search"], max_agent_steps=7,
                         state_schema={"notes": {"type": str, "handler": join_notes}},
                         hooks={"before_llm": [keep_hook]}, streaming_callback=print_chunk)
    data = agent.to_dict()
    assert data == agent.to_dict() and isinstance(data, dict)
    loaded = Agent.from_dict(data, allowed_modules=[__name__])
    assert loaded.to_dict() == data
    assert (loaded.system_prompt, loaded.user_prompt) == ("S", agent.user_prompt)
    assert loaded.exit_conditions == ["text", "search"] and loaded.max_agent_steps == 7
    assert loaded.config["streaming_callback"] is print_chunk
    assert loaded.config["hooks"] == {"before_llm": [keep_hook]}
    assert loaded.resolved_state_schema["notes"]["handler"] is join_notes
    assert [t.name for t in loaded.tools] == ["search", "calculator"]


def test_clone_per_request_shares_no_state() -> None:
    base = create_agent(ScriptedChatModel(["a", "b"]), [search], system_prompt="base")
    first = base.clone(system_prompt="user 1")
    second = base.clone(system_prompt="user 2", max_agent_steps=3)
    assert (first.system_prompt, second.system_prompt, base.system_prompt) == (
        "user 1", "user 2", "base")
    assert second.max_agent_steps == 3 and base.max_agent_steps == 100
    assert first is not base and first.tools == base.tools


def test_run_time_tools_as_tool_objects() -> None:
    model = ScriptedChatModel(["x"])
    create_agent(model, [search]).run(messages="x", tools=[calculator])
    assert [t["function"]["name"] for t in model.calls[0]["tools"]] == ["calculator"]


def test_a_chat_generator_whose_run_takes_no_tools_is_refused_at_init() -> None:
    from threadloom.agent import ChatGeneratorModel

    class TextOnly:  # run(messages) only: no tools parameter
        def run(self, messages: list[Any]) -> dict[str, Any]:
            return {"replies": [AIMessage("text")]}

    with pytest.raises(TypeError, match="TextOnly does not accept tools"):
        create_agent(ChatGeneratorModel(TextOnly()), tools=[search])
    assert create_agent(ChatGeneratorModel(TextOnly())).run(
        messages="x")["last_message"].text == "text"  # no tools: a plain LLM


def test_a_template_variable_may_not_be_a_state_schema_key() -> None:
    with pytest.raises(ValueError, match="already defined in the state schema"):
        create_agent(ScriptedChatModel(["x"]), [], state_schema={"language": {"type": str}},
                     user_prompt=USER_PROMPT)


def test_content_filter_is_an_exit_reason() -> None:
    model = ScriptedChatModel([{"content": "part", "finish_reason": "content_filter"}, "never"])
    result = create_agent(model, [search]).run(messages="x")
    assert result["exit_reason"] == "content_filter" and len(model.calls) == 1


def test_after_tool_rewrites_the_result_before_the_next_llm_call() -> None:
    from threadloom import ToolMessage

    def redact(state: State) -> None:
        last = state.get("messages")[-1]
        if isinstance(last, ToolMessage):
            short = last.model_copy(update={"content": last.text[:10] + "…"})
            state.set("messages", [short])  # same id: replaces the result

    model = ScriptedChatModel([_call("search", query="tip"), "ok"])
    result = create_agent(model, [search], hooks={"after_tool": [redact]}).run(messages="x")
    sent = model.calls[1]["messages"][-1]
    assert sent.type == "tool" and sent.text == "In France,…"
    assert [m.text for m in result["messages"] if m.type == "tool"] == ["In France,…"]
