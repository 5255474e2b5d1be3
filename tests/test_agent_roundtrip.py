"""Agent.from_dict(agent.to_dict()) with user code and with the local model."""

from __future__ import annotations

from typing import Any

import pytest

from threadloom import ScriptedChatModel, create_agent, init_chat_model, tool
from threadloom.agent.builder import Agent
from threadloom.errors import SecurityError


@tool
def double(x: int) -> int:
    """Double x."""
    return 2 * x


def count_calls(state: Any) -> None:
    state.set("messages", [])


def test_from_dict_takes_allowed_modules_for_user_code() -> None:
    model = ScriptedChatModel([{"tool_calls": [{"name": "double", "args": {"x": 2}}]}, "4"])
    agent = create_agent(model, [double], hooks={"before_llm": [count_calls]})
    data = agent.to_dict()
    with pytest.raises(SecurityError, match="Agent.from_dict"):
        Agent.from_dict(data)
    loaded = Agent.from_dict(data, allowed_modules=[__name__])
    assert [t.name for t in loaded.tools] == ["double"]
    out = loaded.run(messages="double 2")
    assert out["messages"][2].text == "4" and out["exit_reason"] == "text"


def test_the_local_model_round_trips() -> None:
    model = init_chat_model("local:smollm2")
    agent = create_agent(model, [double])
    data = agent.to_dict()
    loaded = Agent.from_dict(data, allowed_modules=[__name__])
    assert type(loaded.model) is type(model)
    assert loaded.model.to_dict() == model.to_dict()
