"""The agent as the Haystack Agent guide and the LangChain agents guide describe it
(issue 16): tool dicts as state updates, middleware state, vetoes, required variables."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from threadloom import (
    AgentState,
    AIMessage,
    InjectedState,
    ScriptedChatModel,
    ToolMessage,
    create_agent,
    tool,
)
from threadloom.agent.middleware import AgentMiddleware
from threadloom.prompts.sandbox import MissingVariablesError


class ShopState(AgentState):
    cart: list[str]
    total_price: float


@tool
def add_to_cart(item: str, price: float, state: Annotated[dict, InjectedState]) -> Any:
    """Add an item to the cart."""
    return {"cart": [*state.get("cart", []), item],
            "total_price": state.get("total_price", 0.0) + price, "messages": []}


@tool
def lookup(city: str, state: Annotated[dict, InjectedState]) -> Any:
    """Weather data as a dict (keys that are not state keys)."""
    return {"city": city, "sky": "sunny"}


@tool
def plain_dict(city: str) -> Any:
    """A dict whose keys are state keys, from a tool that does not read the state."""
    return {"cart": [city]}


@tool
def f(x: int) -> int:
    """Echo x."""
    return x


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


def test_shopping_cart_dict_is_a_state_update_with_one_tool_message() -> None:
    model = ScriptedChatModel([_call("add_to_cart", item="Python", price=49.9), "Added."])
    agent = create_agent(model, [add_to_cart], state_schema=ShopState)
    out = agent.invoke({"messages": [("user", "add a Python book")], "cart": [],
                        "total_price": 0.0})
    assert out["cart"] == ["Python"]
    assert out["total_price"] == pytest.approx(49.9)
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    assert "cart" in tool_messages[0].text and "total_price" in tool_messages[0].text
    assert tool_messages[0].tool_call_id == out["messages"][1].tool_calls[0]["id"]


def test_two_cart_calls_accumulate_through_the_state() -> None:
    model = ScriptedChatModel([_call("add_to_cart", item="a", price=1.0),
                               _call("add_to_cart", item="b", price=2.0), "ok"])
    agent = create_agent(model, [add_to_cart], state_schema=ShopState)
    out = agent.invoke({"messages": ["x"], "cart": [], "total_price": 0.0})
    assert out["cart"] == ["a", "b"] and out["total_price"] == pytest.approx(3.0)


@pytest.mark.parametrize("which", ["lookup", "plain_dict"])
def test_data_dicts_stay_json(which: str) -> None:
    model = ScriptedChatModel([_call(which, city="Paris"), "ok"])
    agent = create_agent(model, [lookup, plain_dict], state_schema=ShopState)
    out = agent.invoke({"messages": ["x"], "cart": [], "total_price": 0.0})
    assert out["cart"] == []
    assert '"Paris"' in out["messages"][2].text


class Budget(AgentState):
    budget: int
    note: str


class Mw(AgentMiddleware):
    state_schema = Budget

    def before_model(self, state: Any, runtime: Any) -> dict | None:
        return {"note": f"budget {state['budget']}"}


def test_middleware_state_schema_keys_join_the_state() -> None:
    agent = create_agent(ScriptedChatModel(["hi"]), [], middleware=[Mw()])
    out = agent.invoke({"messages": ["x"], "budget": 3})
    assert out["budget"] == 3 and out["note"] == "budget 3"


class Wins(AgentState):
    note: list[str]


def test_create_agent_state_schema_wins_over_middleware() -> None:
    agent = create_agent(ScriptedChatModel(["hi"]), [], middleware=[Mw()], state_schema=Wins)
    hints = agent.builder.state_schema.__annotations__
    assert hints["note"] == list[str] and "budget" in hints


def _veto_hook(state: Any) -> None:
    last = state.get("messages")[-1]
    state.set("messages", [AIMessage(content="The user said no.", id=last.id)])


def test_before_tool_veto_goes_back_to_the_model() -> None:
    model = ScriptedChatModel([_call("f", x=1), "Understood, nothing was done."])
    agent = create_agent(model, [f], hooks={"before_tool": [_veto_hook]})
    out = agent.run(messages="do it")
    assert out["exit_reason"] == "text"
    assert out["last_message"].text == "Understood, nothing was done."
    assert out["tool_call_counts"].get("f", 0) == 0 and out["step_count"] == 2
    assert len(model.calls) == 2


def test_veto_is_bounded_by_max_agent_steps() -> None:
    model = ScriptedChatModel([_call("f", x=1), _call("f", x=2), "never"])
    agent = create_agent(model, [f], hooks={"before_tool": [_veto_hook]}, max_agent_steps=2)
    out = agent.run(messages="do it")
    assert out["exit_reason"] == "max_agent_steps" and len(model.calls) == 2


def test_required_variables_default_is_every_variable() -> None:
    agent = create_agent(ScriptedChatModel(["x"]), [],
                         user_prompt='{% message role="user" %}{{ doc }}{% endmessage %}')
    with pytest.raises(MissingVariablesError, match="doc"):
        agent.run(messages=[])
    assert agent.run(messages=[], doc="text")["exit_reason"] == "text"
    optional = create_agent(ScriptedChatModel(["x"]), [], required_variables=None,
                            user_prompt='{% message role="user" %}{{ doc }}!{% endmessage %}')
    assert optional.run(messages=[])["messages"][0].text == "!"


def _stop(state: Any) -> None:
    state.set("stop_run", "budget_exceeded")


@tool
def final_answer(answer: str) -> str:
    """Give the final answer."""
    return answer


class Log:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def hook(self, name: str) -> Any:
        def record(state: Any) -> None:
            self.seen.append(name)
        return record


def test_before_llm_stop_skips_the_model_call_and_on_exit_but_not_after_run() -> None:
    log = Log()
    model = ScriptedChatModel([_call("f", x=1)])
    agent = create_agent(model, [f], hooks={"before_llm": [_stop, log.hook("later")],
                                            "on_exit": [log.hook("on_exit")],
                                            "after_run": [log.hook("after_run")]})
    out = agent.run(messages="hi")
    assert out["exit_reason"] == "budget_exceeded" and out["step_count"] == 0
    assert model.calls == [] and log.seen == ["later", "after_run"]


@pytest.mark.parametrize("point", ["after_llm", "before_tool", "after_tool"])
def test_mid_step_stop_runs_this_steps_tools_then_stops_before_the_next_call(point: str) -> None:
    log = Log()
    model = ScriptedChatModel([_call("f", x=1), "never"])
    agent = create_agent(model, [f], hooks={point: [_stop], "on_exit": [log.hook("on_exit")]})
    out = agent.run(messages="hi")
    assert out["exit_reason"] == "budget_exceeded" and len(model.calls) == 1
    assert out["tool_call_counts"]["f"] == 1 and out["last_message"].type == "tool"
    assert log.seen == [] and "stop_run" not in out


@pytest.mark.parametrize("point", ["after_tool", "on_exit"])
def test_a_natural_exit_in_the_same_step_keeps_its_reason(point: str) -> None:
    model = ScriptedChatModel([_call("final_answer", answer="a")])
    agent = create_agent(model, [final_answer], exit_conditions=["final_answer"],
                         hooks={point: [_stop]})
    assert agent.run(messages="q")["exit_reason"] == "final_answer"


def test_stop_after_on_exit_continues_is_the_reason() -> None:
    def go_on(state: Any) -> None:
        state.set("messages", [AIMessage(content="keep going")])
        state.set("continue_run", True)

    model = ScriptedChatModel([_call("final_answer", answer="a"), "never"])
    agent = create_agent(model, [final_answer], exit_conditions=["final_answer"],
                         hooks={"after_tool": [_stop], "on_exit": [go_on]})
    out = agent.run(messages="q")
    assert out["exit_reason"] == "budget_exceeded" and len(model.calls) == 1
    assert out["last_message"].text == "keep going"


def test_max_agent_steps_on_the_last_step_wins_over_a_stop() -> None:
    model = ScriptedChatModel([_call("f", x=1)])
    agent = create_agent(model, [f], max_agent_steps=1, hooks={"after_tool": [_stop]})
    assert agent.run(messages="hi")["exit_reason"] == "max_agent_steps"


def test_stop_set_by_an_after_run_hook_is_ignored() -> None:
    agent = create_agent(ScriptedChatModel(["done"]), [], hooks={"after_run": [_stop]})
    assert agent.run(messages="hi")["exit_reason"] == "text"


def test_hooks_read_the_offered_tools_the_hook_context_and_zero_counts() -> None:
    seen: list[Any] = []

    def look(state: Any) -> None:
        seen.append((state.get("tools"), state.data.get("hook_context"),
                     dict(state.get("tool_call_counts"))))

    @tool
    def g(x: int) -> int:
        """Echo x."""
        return x

    model = ScriptedChatModel([_call("f", x=1), "done"])
    agent = create_agent(model, [f, g], hooks={"before_llm": [look], "after_tool": [look]})
    out = agent.run(messages="hi", hook_context={"ws": "conn"})
    assert [[t.name for t in tools] for tools, _, _ in seen] == [["f", "g"]] * 3
    assert all(ctx == {"ws": "conn"} for _, ctx, _ in seen)
    assert [counts for _, _, counts in seen] == [{"f": 0, "g": 0}, {"f": 1, "g": 0},
                                                 {"f": 1, "g": 0}]
    assert out["tool_call_counts"] == {"f": 1, "g": 0}
    assert "tools" not in out and "hook_context" not in out


def test_run_time_tool_subset_is_what_hooks_see() -> None:
    seen: list[Any] = []
    agent = create_agent(ScriptedChatModel(["x"]), [f, final_answer],
                         hooks={"before_llm": [lambda s: seen.append(
                             [t.name for t in s.get("tools")])]})
    agent.run(messages="hi", tools=["f"])
    assert seen == [["f"]]


@pytest.mark.parametrize("key", ["structured_response", "step_count", "last_message"])
def test_agent_owned_keys_are_refused_as_input_and_in_state_schema(key: str) -> None:
    agent = create_agent(ScriptedChatModel(["x"]), [])
    with pytest.raises(ValueError, match=key):
        agent.invoke({"messages": ["hi"], key: 5})
    with pytest.raises(ValueError, match=key):
        create_agent(ScriptedChatModel(["x"]), [], state_schema={key: {"type": int}})


def test_state_refuses_invalid_schemas_and_skips_keys() -> None:
    from threadloom import State
    with pytest.raises(ValueError, match="messages"):
        State({"messages": {"type": list[str]}})
    with pytest.raises(ValueError, match="Python type"):
        State({"x": {"type": "str"}})
    with pytest.raises(ValueError, match="not found in schema"):
        State({}).set("any_key", 1)
    state = State({"n": {"type": int}, "k": {"type": str}}, {"n": 1, "k": "a"})
    assert set(state.to_dict(skip_keys=["n"])["schema"]) == {"k", "messages"}
    assert state.to_dict(skip_keys=["n"])["data"]["serialized_data"] == {"k": "a"}


def test_hook_objects_and_the_haystack_lifecycle_names() -> None:
    import asyncio

    class Counter:
        def __init__(self) -> None:
            self.ran = self.warmed = self.warmed_async = self.closed = 0

        def run(self, state: Any) -> None:
            self.ran += 1

        def warm_up(self) -> None:
            self.warmed += 1

        async def warm_up_async(self) -> None:
            self.warmed_async += 1

        def close(self) -> None:
            self.closed += 1

    h = Counter()
    agent = create_agent(ScriptedChatModel(["a", "b"]), [f],
                         hooks={"before_llm": [h], "on_exit": [h]})
    agent.warm_up()
    assert h.warmed == 1  # one object under two points is warmed once
    agent.run(messages="hi")
    assert h.warmed == 2 and h.ran == 2  # run() warms up first, as Haystack's
    assert asyncio.run(agent.run_async(messages="hi"))["exit_reason"] == "text"
    assert h.warmed_async == 1
    asyncio.run(agent.close_async())
    assert h.closed == 1
    assert agent.exit_conditions == ["text"] and agent.max_agent_steps == 100
    with pytest.raises(TypeError, match="callable 'run'"):
        create_agent(ScriptedChatModel(["x"]), [], hooks={"before_llm": [object()]})


def test_create_agent_streaming_callback_gets_every_chunk_and_tool_results() -> None:
    from threadloom import AIMessageChunk

    got: list[Any] = []
    model = ScriptedChatModel([_call("f", x=7), "The answer is seven."])
    agent = create_agent(model, [f], streaming_callback=got.append)
    out = agent.run(messages="hi")
    assert got and all(isinstance(c, AIMessageChunk) for c in got)
    assert "".join(c.text for c in got) == out["last_message"].text
    got.clear()
    model = ScriptedChatModel([_call("f", x=7), "ok"])
    agent = create_agent(model, [f], streaming_callback=got.append,
                         enable_streaming_callback_passthrough=True)
    agent.run(messages="hi")
    tool_results = [c for c in got if isinstance(c, ToolMessage)]
    assert [m.text for m in tool_results] == ["7"]
    run_time: list[Any] = []
    model = ScriptedChatModel(["ok"])
    agent = create_agent(model, [], streaming_callback=got.append)
    got.clear()
    agent.run(messages="hi", streaming_callback=run_time.append)
    assert run_time and not got  # the run's own callback wins


class _NoToolsModel:
    async def ainvoke(self, messages: Any) -> AIMessage:
        return AIMessage("hi")


@pytest.mark.parametrize(("args", "kwargs", "words"), [
    ((42,), {}, ["model", "42", "ainvoke"]),
    ((ScriptedChatModel(["x"]), [5]), {}, ["tools[0]", "5", "int"]),
    ((_NoToolsModel(), [f]), {}, ["model", "'tools'", "['f']"]),
    ((_NoToolsModel(), []), {}, ["model", "'tools'", "ainvoke"]),
])
def test_build_time_errors_name_the_argument(args: Any, kwargs: Any, words: list[str]) -> None:
    with pytest.raises(TypeError) as caught:
        create_agent(*args, **kwargs)
    assert all(w in str(caught.value) for w in words), str(caught.value)


def test_render_budget_can_be_raised_and_its_error_says_how() -> None:
    from threadloom.prompts import RenderBudgetError

    loop = '{% message role="user" %}{% for i in range(n) %}x{% endfor %}{% endmessage %}'
    tight = create_agent(ScriptedChatModel(["ok"]), [], user_prompt=loop,
                         render_budget={"max_steps": 50})
    with pytest.raises(RenderBudgetError, match=r"create_agent\(render_budget=\{'max_steps'"):
        tight.run(messages=[], n=200)
    roomy = create_agent(ScriptedChatModel(["ok"]), [], user_prompt=loop,
                         render_budget={"max_steps": 500})
    assert roomy.run(messages=[], n=200)["messages"][0].text == "x" * 200
    with pytest.raises(TypeError, match="render_budget"):
        create_agent(ScriptedChatModel(["ok"]), [], render_budget={"steps": 5})
