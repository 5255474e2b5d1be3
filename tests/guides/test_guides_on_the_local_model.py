"""The guide examples that fit a real model, on the local one (SmolLM2-135M through
llama.cpp, offline): the same code as the ScriptedChatModel tests of
``test_haystack_agent_guide.py`` and ``test_langchain_agents_guide.py``, asserting
structure (nodes, message kinds and counts, exit reasons), never wording."""

from __future__ import annotations

from typing import Any

import pytest
from test_haystack_agent_guide import USER_PROMPT, calculator, search, translate
from test_langchain_agents_guide import get_time, get_weather

from threadloom import AIMessageChunk, HumanMessage, ToolMessage, create_agent

pytestmark = pytest.mark.slow

local = pytest.importorskip("threadloom.models.local")

EXITS = {"text", "length", "content_filter", "max_agent_steps"}


@pytest.fixture(scope="module")
def model() -> Any:
    m = local.LocalChatModel(temperature=0, seed=7, max_tokens=48)  # short: CI time
    yield m
    m.close()


def test_haystack_quick_start(model: Any) -> None:
    printed: list[Any] = []
    agent = create_agent(
        model, tools=[search, calculator], streaming_callback=printed.append,
        max_agent_steps=2,
        system_prompt=("You are a helpful assistant. Use the search tool to find information "
                       "about a user's question and the calculator tool to perform math."))
    result = agent.run(messages=[HumanMessage("Calculate the appropriate tip for an €85 meal "
                                              "in France")])
    assert result["exit_reason"] in EXITS and 1 <= result["step_count"] <= 2
    assert result["last_message"] is result["messages"][-1]
    assert printed and all(isinstance(c, (AIMessageChunk, ToolMessage)) for c in printed)
    assert set(result["tool_call_counts"]) <= {"search", "calculator"}


def test_haystack_templated_user_prompt(model: Any) -> None:
    agent = create_agent(model, tools=[translate], max_agent_steps=1,
                         system_prompt="You are a helpful translation assistant.",
                         user_prompt=USER_PROMPT)
    result = agent.run(messages=[], language="French",
                       document="The weather is lovely today and the sun is shining.")
    first = result["messages"][0]
    assert first.type == "human" and "French" in first.text  # the rendered prompt
    assert result["exit_reason"] in EXITS


def test_langchain_updates_stream_alternates_model_and_tools(model: Any) -> None:
    agent = create_agent(model=model, tools=[get_weather, get_time], max_agent_steps=2,
                         system_prompt="你是一个乐于助人的助手。")
    steps = list(agent.stream({"messages": [HumanMessage(content="杭州现在天气怎么样？几点了？")]},
                              stream_mode="updates"))
    names = [name for chunk in steps for name in chunk]
    assert names[0] == "model" and set(names) <= {"model", "tools"}
    for before, after in zip(names, names[1:], strict=False):
        assert (before, after) != ("tools", "tools")
    for chunk in steps:
        if "tools" in chunk:
            assert all(isinstance(m, ToolMessage) for m in chunk["tools"]["messages"])


def test_langchain_values_grow_and_messages_stream_tokens(model: Any) -> None:
    agent = create_agent(model=model, tools=[], max_agent_steps=1)
    counts = [len(chunk["messages"]) for chunk in agent.stream(
        {"messages": [HumanMessage(content="用一句话介绍菜鸟教程")]}, stream_mode="values")]
    assert counts == [1, 2]
    pieces = []
    for chunk, meta in agent.stream({"messages": [HumanMessage(content="Say hello.")]},
                                    stream_mode="messages"):
        assert isinstance(chunk, AIMessageChunk) and meta["langgraph_node"] == "model"
        if chunk.content:
            pieces.append(chunk.content)
    assert len(pieces) > 1  # token by token
