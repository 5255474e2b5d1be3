"""``messages`` mode sends a message once: not again when a node returns messages of
its input (a node returning the state), nor when a parent writes what a subgraph sent."""

from __future__ import annotations

from threadloom import START, Command, InMemoryCheckpointer, MessagesState, StateGraph
from threadloom.messages import AIMessage


def _graph(to_emit, checkpointer=None):
    def call_model(state):
        return {"messages": to_emit.pop(0)}

    def route(state):
        return Command(goto="node_2", graph=Command.PARENT)

    sub = StateGraph(MessagesState)
    sub.add_node(call_model)
    sub.add_node(route)
    sub.add_edge(START, "call_model")
    sub.add_edge("call_model", "route")
    g = StateGraph(MessagesState)
    g.add_node("node_1", sub.compile())
    g.add_node("node_2", lambda state: state)
    g.add_edge(START, "node_1")
    return g.compile(checkpointer=checkpointer)


def test_a_node_returning_its_input_messages_sends_none_of_them():
    app = _graph([AIMessage("hi", id="1")])
    chunks = [c for _, c in app.stream({"messages": "hi"}, stream_mode="messages",
                                       subgraphs=True)]
    assert [(m.id, meta["langgraph_node"]) for m, meta in chunks] == [("1", "call_model")]


def test_state_of_earlier_runs_is_not_sent_again():
    app = _graph([AIMessage("bye", id="1"), AIMessage("bye again", id="2")],
                 InMemoryCheckpointer())
    cfg = {"configurable": {"thread_id": "t"}}
    for text, want in (("hi", "1"), ("hi again", "2")):
        chunks = [c for _, c in app.stream({"messages": text}, cfg, stream_mode="messages",
                                           subgraphs=True)]
        assert [m.id for m, _ in chunks] == [want]
