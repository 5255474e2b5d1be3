"""add_messages' error text for a missing id, and a pydantic messages state taking
``(role, content)`` tuples as input, as LangGraph's."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel

from threadloom import START, StateGraph, add_messages
from threadloom.messages import AnyMessage, HumanMessage, RemoveMessage


def test_removing_an_absent_id_says_so_in_langgraph_s_words():
    with pytest.raises(ValueError, match="Attempting to delete a message with an ID that "
                                         "doesn't exist .'2'."):
        add_messages([HumanMessage(content="Hello", id="1")], RemoveMessage(id="2"))


class Chat(BaseModel):
    messages: Annotated[list[AnyMessage], add_messages]


def test_pydantic_messages_state_takes_tuples_the_reducer_coerces():
    seen = []

    def node(state: Chat):
        seen.append(type(state).__name__)
        return {"messages": [("ai", "purr")]}

    g = StateGraph(Chat)
    g.add_node("n", node)
    g.add_edge(START, "n")
    out = g.compile().invoke({"messages": [("user", "meow")]})
    assert [(m.type, m.content) for m in out["messages"]] == [("human", "meow"), ("ai", "purr")]
    assert seen == ["Chat"]
