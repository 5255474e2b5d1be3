"""``stream_mode="messages"`` with a subgraph delivers each message once (H37).

As LangGraph 1.2: with ``subgraphs=False`` the subgraph's reply arrives once, whole, from
the parent's node; with ``subgraphs=True`` as token chunks only, under the subgraph's
namespace; never both.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

from threadloom import START, StateGraph
from threadloom.models import ScriptedChatModel
from threadloom.reducers import add_messages


class Chat(TypedDict):
    messages: Annotated[list, add_messages]


def chat_app(checkpointer: Any, how: str = "node"):
    model = ScriptedChatModel(["hello from child"] * 4)

    async def child_node(state: Chat) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    child = StateGraph(Chat)
    child.add_node("child_node", child_node)
    child.add_edge(START, "child_node")
    inner = child.compile()
    parent = StateGraph(Chat)
    if how == "node":
        parent.add_node("sub", inner)
    else:  # the documented pattern of a graph invoked inside a node function

        async def sub(state: Chat) -> dict[str, Any]:
            return await inner.ainvoke(state)

        parent.add_node("sub", sub)
    parent.add_edge(START, "sub")
    return parent.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("how", ["node", "inside_a_node"])
@pytest.mark.parametrize("subgraphs", [False, True])
def test_h37_subgraph_message_streams_once(memory_checkpointer, thread_id, subgraphs, how):
    app = chat_app(memory_checkpointer, how)
    events = list(app.stream({"messages": [("user", "hi")]}, thread_id=thread_id,
                             stream_mode="messages", subgraphs=subgraphs))
    [stored] = [m for m in app.get_state(thread_id=thread_id).values["messages"]
                if m.type == "ai"]
    assert stored.content == "hello from child"
    items = [(ev[0], *ev[1]) if subgraphs else ((), *ev) for ev in events]
    mine = [(ns, m, meta) for ns, m, meta in items if m.id == stored.id]
    assert mine
    if subgraphs:  # token chunks only, named by the subgraph's namespace
        assert all(type(m).__name__ == "AIMessageChunk" for _, m, _ in mine)
        assert len(mine) > 1
        assert "".join(m.content for _, m, _ in mine) == stored.content
        assert all(ns and ns[0].startswith("sub:") for ns, _, _ in mine)
        assert all(meta["langgraph_node"] == "child_node" for _, _, meta in mine)
    else:  # the whole message once, from the parent's node
        [(ns, m, meta)] = mine
        assert m.content == stored.content and type(m).__name__ != "AIMessageChunk"
        assert meta["langgraph_node"] == "sub"
