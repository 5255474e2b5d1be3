"""``model.bind_tools(tools)`` / ``bind(**kw)``, as LangChain code calls them inside
LangGraph nodes: the bound arguments reach every call, a call's own arguments win."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from threadloom import (
    AIMessage,
    AIMessageChunk,
    MessagesState,
    ScriptedChatModel,
    StateGraph,
    ToolMessage,
    ToolNode,
    tool,
    tools_condition,
)
from threadloom.models import BoundChatModel
from threadloom.types import START


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """Get the local time of a city."""
    return f"noon in {city}"


def _model(seen: list[Any]) -> ScriptedChatModel:
    def reply(messages: list[Any], tools: list[dict] | None) -> Any:
        seen.append([t["function"]["name"] for t in tools or []])
        if isinstance(messages[-1], ToolMessage):
            return f"It is {messages[-1].content}."
        return {"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]}

    return ScriptedChatModel(reply)


def test_the_langgraph_tutorial_chatbot_with_bound_tools() -> None:
    seen: list[Any] = []
    llm_with_tools = _model(seen).bind_tools([get_weather])
    assert isinstance(llm_with_tools, BoundChatModel)

    def chatbot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm_with_tools.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_node("tools", ToolNode([get_weather]))
    builder.add_edge(START, "chatbot")
    builder.add_conditional_edges("chatbot", tools_condition)
    builder.add_edge("tools", "chatbot")
    out = builder.compile().invoke({"messages": [("user", "Weather in Paris?")]})
    assert [type(m).__name__ for m in out["messages"]] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert out["messages"][-1].content == "It is sunny in Paris."
    assert seen == [["get_weather"], ["get_weather"]]  # the tools reached both calls


def test_bound_tools_stream_tokens_in_a_messages_run() -> None:
    llm = _model([]).bind_tools([get_weather])

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    chunks = [c for c, _ in builder.compile().stream(
        {"messages": [("user", "hi")]}, stream_mode="messages")]
    assert chunks and all(isinstance(c, AIMessageChunk) for c in chunks)
    assert sum(chunks[1:], chunks[0]).tool_calls[0]["name"] == "get_weather"


def test_a_calls_own_arguments_win_and_bindings_chain() -> None:
    seen: list[Any] = []
    llm = _model(seen).bind_tools([get_weather])
    llm.invoke("hi", tools=[get_time])
    llm.bind_tools([get_time, get_weather]).invoke("hi")
    asyncio.run(llm.ainvoke("hi"))
    list(llm.stream("hi"))
    assert seen == [["get_time"], ["get_time", "get_weather"], ["get_weather"],
                    ["get_weather"]]
    bound = llm.bind(tool_choice="required")
    assert bound.kwargs == {"tools": [get_weather], "tool_choice": "required"}
    assert bound.supports_tools is True and bound.name == llm.bound_model.name  # its own
    assert isinstance(llm.invoke("hi"), AIMessage)


def test_the_local_model_binds_too_and_caps_its_replies() -> None:
    local = pytest.importorskip("threadloom.models.local")
    model = local.LocalChatModel()  # nothing loads until the first call
    assert model.generation_kwargs["max_tokens"] == local.DEFAULT_MAX_TOKENS == 512
    assert local.LocalChatModel(max_tokens=None).generation_kwargs["max_tokens"] is None
    bound = model.bind_tools([get_weather])
    assert isinstance(bound, BoundChatModel) and bound.kwargs["tools"] == [get_weather]
    assert model.with_structured_output(dict).method == "function_calling"
