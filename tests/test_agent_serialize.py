"""Agent configuration to/from dict and YAML: by import path, no secrets, allowed modules only."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import pytest
import yaml
from pydantic import BaseModel

from threadloom import AIMessage, HumanMessage, OpenAIChatModel, ScriptedChatModel, create_agent
from threadloom import tool as make_tool
from threadloom.agent.middleware import before_model
from threadloom.agent.serialize import (
    agent_from_dict,
    agent_to_dict,
    from_yaml,
    load_path,
    model_to_dict,
    to_yaml,
    type_from_data,
    type_to_data,
)
from threadloom.errors import SecurityError, SerializationError
from threadloom.reducers import merge_lists

CANARY = "sk-CANARY-7d3a91e0b4"
HERE = (__name__,)


@make_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def count_llm_calls(state):
    """A before_llm hook."""
    state.set("calls", 1)


def keep_last(current, update):
    """A custom state handler."""
    return update


@before_model
def tag_model_calls(state):
    """A decorated middleware, stored by import path."""
    return None


class Answer(BaseModel):
    """A structured answer."""

    value: int


def _agent(model: Any, **kwargs: Any) -> Any:
    return create_agent(
        model, [add], system_prompt="You add numbers for {{ user }}.",
        required_variables=["user"], exit_conditions=["text", "add"], max_agent_steps=7,
        hooks={"before_llm": [count_llm_calls]}, middleware=[tag_model_calls],
        state_schema={"calls": {"type": int, "handler": keep_last}, "notes": {"type": list[str]}},
        name="adder", generation_kwargs={"temperature": 0.2, "max_tokens": 64}, **kwargs)


def _script() -> list[Any]:
    call = AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}])
    return [call]


def test_round_trip_through_yaml_gives_an_agent_that_runs_the_same():
    original = _agent(ScriptedChatModel(_script()))
    text = to_yaml(original)
    data = yaml.safe_load(text)
    params = data["init_parameters"]
    assert data["type"] == "threadloom.agent:Agent" and data["version"] == 1
    assert params["tools"] == [f"{__name__}:add"]
    assert params["hooks"] == {"before_llm": [f"{__name__}:count_llm_calls"]}
    assert params["middleware"] == [f"{__name__}:tag_model_calls"]
    assert params["state_schema"]["calls"] == {"type": "builtins:int",
                                               "handler": f"{__name__}:keep_last"}
    assert params["state_schema"]["notes"] == {
        "type": {"origin": "builtins:list", "args": ["builtins:str"]}}
    assert params["model"]["type"] == "threadloom.models.scripted:ScriptedChatModel"

    loaded = from_yaml(text, allowed_modules=HERE)
    assert agent_to_dict(loaded) == data
    inputs = {"messages": [HumanMessage("2+3?")], "user": "ana"}
    first, second = original.invoke(inputs), loaded.invoke(inputs)
    assert first["exit_reason"] == second["exit_reason"] == "add"
    assert first["calls"] == second["calls"] == 1
    assert [m.text for m in first["messages"]] == [m.text for m in second["messages"]]


def test_response_format_and_prompts_round_trip():
    agent = create_agent(ScriptedChatModel(["x"]), [], response_format=Answer,
                         user_prompt="Question: {{ q }}", required_variables="*")
    data = agent_to_dict(agent)
    assert data["init_parameters"]["response_format"] == f"{__name__}:Answer"
    loaded = agent_from_dict(data, allowed_modules=HERE)
    assert loaded.config["response_format"] is Answer
    assert loaded.config["user_prompt"] == "Question: {{ q }}"
    assert loaded.config["required_variables"] == "*"


def test_api_key_is_stored_as_its_environment_variable(monkeypatch):
    monkeypatch.setenv("THREADLOOM_TEST_API_KEY", CANARY)
    model = OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key=CANARY,
                            temperature=0.1)
    agent = create_agent(model, [add])
    text = to_yaml(agent)
    assert CANARY not in text
    stored = yaml.safe_load(text)["init_parameters"]["model"]
    assert stored["init_parameters"]["api_key"] == {"env": "THREADLOOM_TEST_API_KEY"}
    assert stored["init_parameters"]["temperature"] == 0.1

    loaded = from_yaml(text, allowed_modules=HERE)
    assert loaded.config["model"]._api_key.get_secret_value() == CANARY
    assert CANARY not in repr(loaded.config["model"])

    monkeypatch.delenv("THREADLOOM_TEST_API_KEY")
    with pytest.raises(ValueError, match="THREADLOOM_TEST_API_KEY"):
        from_yaml(text, allowed_modules=HERE)


def test_a_literal_key_from_nowhere_is_refused_and_a_model_without_key_stores_none(
        monkeypatch):
    model = OpenAIChatModel("gpt-4o-mini", api_key=CANARY)
    with pytest.raises(SecurityError, match="literal API key") as err:
        model_to_dict(model)
    assert CANARY not in str(err.value)
    monkeypatch.setenv("MY_KEY", CANARY)
    assert model_to_dict(model, api_key_env="MY_KEY")["init_parameters"]["api_key"] == {
        "env": "MY_KEY"}
    assert "api_key" not in model_to_dict(OpenAIChatModel("m"))["init_parameters"]


def test_secret_looking_values_are_refused_anywhere():
    headers = OpenAIChatModel("m", default_headers={"Authorization": f"Bearer {CANARY}"})
    with pytest.raises(SecurityError, match="default_headers.Authorization"):
        model_to_dict(headers)
    agent = create_agent(ScriptedChatModel(["x"]), [],
                         generation_kwargs={"extra_body": {"api_key": CANARY}})
    with pytest.raises(SecurityError, match="generation_kwargs.extra_body.api_key"):
        agent_to_dict(agent)


@pytest.mark.parametrize("url", [f"http://user:{CANARY}@127.0.0.1:1/v1",
                                 f"https://h.example/v1?api-key={CANARY}"])
def test_a_base_url_carrying_credentials_is_refused(url):
    with pytest.raises(SecurityError, match="model.base_url") as err:
        model_to_dict(OpenAIChatModel("m", base_url=url))
    assert CANARY not in str(err.value)
    plain = model_to_dict(OpenAIChatModel("m", base_url="http://user@127.0.0.1:1/v1?x=1"))
    assert plain["init_parameters"]["base_url"] == "http://user@127.0.0.1:1/v1?x=1"


def test_loading_refuses_modules_that_are_not_allowed_without_importing_them():
    data = agent_to_dict(_agent(ScriptedChatModel(["x"])))
    with pytest.raises(SecurityError, match=f"module {__name__!r} is not allowed"):
        agent_from_dict(data)

    assert "json.tool" not in sys.modules
    data["init_parameters"]["tools"] = ["json.tool:main"]
    with pytest.raises(SecurityError, match="'json.tool' is not allowed"):
        agent_from_dict(data, allowed_modules=HERE)
    assert "json.tool" not in sys.modules


def test_loading_refuses_objects_reexported_from_other_modules_and_private_names():
    with pytest.raises(SecurityError, match="not allowed"):
        load_path(f"{__name__}:sys.exit", HERE, "hook")
    with pytest.raises(SecurityError, match="private"):
        load_path(f"{__name__}:_agent", HERE, "hook")
    with pytest.raises(SecurityError, match="private"):
        load_path(f"{__name__}:add.__globals__", HERE, "tool")
    with pytest.raises(SerializationError, match="module:name"):
        load_path("os.system", HERE, "hook")
    with pytest.raises(SecurityError, match="not a class"):
        type_from_data("builtins:eval", HERE)


def test_unserializable_parts_get_clear_errors():
    def inner(a: int) -> int:
        """A local tool."""
        return a

    agent = create_agent(ScriptedChatModel(["x"]), [make_tool(inner)])
    with pytest.raises(SerializationError, match="module-level"):
        agent_to_dict(agent)
    with pytest.raises(SerializationError, match="callable script"):
        model_to_dict(ScriptedChatModel(lambda messages, tools: "x"))
    with pytest.raises(SerializationError, match="version"):
        agent_from_dict({"type": "threadloom.agent:Agent", "version": 99})


def test_yaml_loading_is_safe():
    with pytest.raises(yaml.YAMLError):
        from_yaml("!!python/object/apply:os.system ['echo hi']")


@pytest.mark.parametrize("tp", [int, str, list[int], dict[str, list[int]], int | None,
                                Any, Answer, type(None)])
def test_types_round_trip(tp):
    assert type_from_data(type_to_data(tp), HERE) == tp


def test_unsupported_types_are_refused():
    with pytest.raises(SerializationError):
        type_to_data(Annotated[list, merge_lists])


def test_each_path_must_name_the_right_kind_of_object():
    data = agent_to_dict(_agent(ScriptedChatModel(["x"])))
    params = data["init_parameters"]
    wrong = {**params, "model": {"type": "threadloom.checkpoint.memory:InMemoryCheckpointer",
                                 "init_parameters": {}}}
    with pytest.raises(SecurityError, match="is not a chat model class"):
        agent_from_dict({**data, "init_parameters": wrong}, allowed_modules=HERE)
    wrong = {**params, "hooks": {"before_llm": [f"{__name__}:Answer"]}}
    with pytest.raises(SecurityError, match="is not a function"):
        agent_from_dict({**data, "init_parameters": wrong}, allowed_modules=HERE)
    wrong = {**params, "middleware": [f"{__name__}:count_llm_calls"]}
    with pytest.raises(SecurityError, match="is not an AgentMiddleware"):
        agent_from_dict({**data, "init_parameters": wrong}, allowed_modules=HERE)
