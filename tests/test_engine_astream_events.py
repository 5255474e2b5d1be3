"""``CompiledGraph.astream_events(input, config, version="v2")``: LangChain's callback
events for a graph run, as LangGraph graphs give them."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, TypedDict

import pytest

from threadloom import AIMessageChunk, MessagesState, ScriptedChatModel, StateGraph
from threadloom.types import START


class S(TypedDict):
    value: int


def _graph(started: list[str]) -> Any:
    async def one(state: S) -> S:
        started.append("one")
        return {"value": state["value"] + 1}

    async def two(state: S) -> S:
        started.append("two")
        await asyncio.sleep(5)
        return {"value": 0}

    b = StateGraph(S)
    b.add_node("one", one)
    b.add_node("two", two)
    b.add_edge(START, "one")
    b.add_edge("one", "two")
    return b.compile()


async def _events(graph: Any, inp: Any, **kw: Any) -> list[dict[str, Any]]:
    kw.setdefault("version", "v2")
    return [e async for e in graph.astream_events(inp, **kw)]


def test_events_of_a_two_node_run() -> None:
    b = StateGraph(S)
    b.add_node("one", lambda s: {"value": s["value"] + 1})
    b.add_node("two", lambda s: {"value": s["value"] * 10})
    b.add_edge(START, "one")
    b.add_edge("one", "two")
    events = asyncio.run(_events(b.compile(), {"value": 1}, config={"run_id": "r1"}))
    assert [(e["event"], e["name"]) for e in events] == [
        ("on_chain_start", "LangGraph"),
        ("on_chain_start", "one"), ("on_chain_stream", "one"), ("on_chain_end", "one"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_start", "two"), ("on_chain_stream", "two"), ("on_chain_end", "two"),
        ("on_chain_stream", "LangGraph"),
        ("on_chain_end", "LangGraph")]
    root = [e for e in events if e["name"] == "LangGraph"]
    assert {e["run_id"] for e in root} == {"r1"} and all(not e["parent_ids"] for e in root)
    assert [e["data"]["chunk"] for e in root if e["event"] == "on_chain_stream"] == [
        {"one": {"value": 2}}, {"two": {"value": 20}}]
    assert root[-1]["data"]["output"] == {"value": 20}
    node = [e for e in events if e["name"] == "one"]
    assert all(e["parent_ids"] == ["r1"] for e in node)
    assert node[0]["metadata"]["langgraph_node"] == "one"
    assert node[0]["tags"] == ["graph:step:1"]


def test_model_tokens_are_chat_model_stream_events_and_filters_apply() -> None:
    model = ScriptedChatModel(["hello there"] * 3)
    b = StateGraph(MessagesState)
    b.add_node("chat", lambda s: {"messages": [model.invoke(s["messages"])]})
    b.add_edge(START, "chat")
    app = b.compile()
    events = asyncio.run(_events(app, {"messages": [("user", "hi")]}))
    tokens = [e for e in events if e["event"] == "on_chat_model_stream"]
    assert tokens and all(isinstance(e["data"]["chunk"], AIMessageChunk) for e in tokens)
    assert "".join(e["data"]["chunk"].text for e in tokens) == "hello there"
    only = asyncio.run(_events(app, {"messages": [("user", "hi")]},
                               include_types=["chat_model"]))
    assert only and {e["event"] for e in only} == {"on_chat_model_stream"}
    named = asyncio.run(_events(app, {"messages": [("user", "hi")]},
                                include_names=["LangGraph"], exclude_tags=["nothing"]))
    assert {e["name"] for e in named} == {"LangGraph"}


def test_closing_the_events_stops_the_run() -> None:
    started: list[str] = []
    graph = _graph(started)

    async def main() -> dict[str, Any]:
        async with contextlib.aclosing(graph.astream_events({"value": 1}, version="v2")) as s:
            async for event in s:
                if event["event"] == "on_chain_stream" and not event["parent_ids"]:
                    return event
        raise AssertionError("no graph stream event")

    first = asyncio.run(asyncio.wait_for(main(), 3))
    assert first["data"]["chunk"] == {"one": {"value": 2}}
    assert started in (["one"], ["one", "two"])  # two may start; it is cancelled, not awaited


def test_bad_arguments_are_refused() -> None:
    graph = _graph([])
    with pytest.raises(ValueError, match="version='v2'"):
        asyncio.run(_events(graph, {"value": 1}, version="v1"))
    with pytest.raises(ValueError, match="stream_mode"):
        asyncio.run(_events(graph, {"value": 1}, stream_mode="values"))
