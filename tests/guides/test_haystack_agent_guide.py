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
