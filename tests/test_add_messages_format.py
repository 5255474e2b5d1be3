"""``add_messages(format="langchain-openai")`` (LangGraph's): the merged messages'
content in OpenAI's format; and a tool call's ``type`` is always ``"tool_call"``."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

from threadloom import END, START, StateGraph, add_messages
from threadloom.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ"}}
URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,QQ"}}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages(format="langchain-openai")]


def test_a_graph_stores_openai_format_content(any_backend: Any) -> None:
    def node(state: State) -> dict[str, Any]:
        return {"messages": [
            HumanMessage([{"type": "text", "text": "look", "cache_control": {"x": 1}}, IMAGE]),
            AIMessage([{"type": "tool_use", "name": "see", "input": {"q": 1}, "id": "u1"}]),
            HumanMessage([{"type": "tool_result", "tool_use_id": "u1", "content": [IMAGE]},
                          {"type": "text", "text": "and?"}]),
        ]}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    app = builder.compile(checkpointer=any_backend)
    config = {"configurable": {"thread_id": "t"}}
    out = app.invoke({"messages": [("user", "hi")]}, config)["messages"]
    assert [m.type for m in out] == ["human", "human", "ai", "tool", "human"]
    assert out[0].content == "hi"
    assert out[1].content == [{"type": "text", "text": "look"}, URL]
    assert out[2].content == "" and out[2].tool_calls == [
        {"name": "see", "args": {"q": 1}, "id": "u1", "type": "tool_call"}]
    assert (out[3].tool_call_id, out[3].content) == ("u1", [URL])
    assert out[4].content == [{"type": "text", "text": "and?"}]
    assert len({m.id for m in out}) == 5 and all(m.id for m in out)
    assert app.get_state(config).values["messages"] == out


def test_the_reducer_and_its_errors() -> None:
    reducer = add_messages(format="langchain-openai")
    assert reducer.__name__ == "add_messages"
    assert reducer([], [HumanMessage("x", id="1")]) == [HumanMessage("x", id="1")]
    with pytest.raises(ValueError, match="Unrecognized format"):
        add_messages(format="anthropic")


def test_a_tool_calls_type_is_always_tool_call() -> None:
    for args in ({}, {"a": object()}):  # the fast path and pydantic's
        msg = AIMessage("", tool_calls=[{"name": "f", "args": args, "id": "1",
                                         "type": "tool_calls"}])
        assert msg.tool_calls[0]["type"] == "tool_call"
    assert ToolMessage("x", tool_call_id="1").status == "success"
