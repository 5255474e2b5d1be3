"""Graphs the server tests serve (imported by the server from this file's path)."""

from __future__ import annotations

import asyncio
import os
from typing import TypedDict

from threadloom import (
    END,
    START,
    AIMessage,
    MessagesState,
    ScriptedChatModel,
    StateGraph,
    create_agent,
    get_stream_writer,
    interrupt,
    tool,
)


def echo(state: MessagesState) -> dict:
    get_stream_writer()({"progress": "echoing"})
    return {"messages": [AIMessage(content="echo: " + str(state["messages"][-1].content))]}


_g = StateGraph(MessagesState)
_g.add_node("echo", echo)
_g.add_edge(START, "echo")
_g.add_edge("echo", END)
echo_graph = _g


class Ask(TypedDict, total=False):
    text: str
    answer: str


def boom(state: Ask) -> dict:
    if state["text"] == "boom":
        raise ValueError("kaboom")
    return {"text": state["text"] + "!"}


def ask(state: Ask) -> dict:
    return {"answer": str(interrupt({"question": "ok?", "text": state["text"]}))}


_h = StateGraph(Ask)
_h.add_node("boom", boom)
_h.add_node("ask", ask)
_h.add_edge(START, "boom")
_h.add_edge("boom", "ask")
_h.add_edge("ask", END)
human_graph = _h.compile()

SLOW_S = float(os.environ.get("TL_TEST_SLOW_S", "1.0"))


async def slow_step(state: Ask) -> dict:
    await asyncio.sleep(SLOW_S)
    return {"text": state["text"] + "."}


_k = StateGraph(Ask)
_k.add_node("slow", slow_step)
_k.add_node("slow2", slow_step)
_k.add_edge(START, "slow")
_k.add_edge("slow", "slow2")
_k.add_edge("slow2", END)
slow_graph = _k


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


def _reply(messages: list, tools: list) -> AIMessage:
    last = messages[-1]
    if last.type == "tool":
        return AIMessage(content=f"the sum is {last.content}")
    if "add" in str(last.content):
        return AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3},
                                                  "id": "call_1"}])
    return AIMessage(content=f"you said: {last.content}")


def make_agent():
    """A tool-calling agent on a scripted model (no network)."""
    return create_agent(ScriptedChatModel(_reply), [add], system_prompt="Be brief.")


class Ctx(TypedDict, total=False):
    text: str


def _inner(state: Ctx) -> dict:
    return {"text": state["text"] + "+inner"}


_sub = StateGraph(Ctx)
_sub.add_node("inner", _inner)
_sub.add_edge(START, "inner")
_sub.add_edge("inner", END)


def _outer(state: Ctx, runtime) -> dict:  # noqa: ANN001 - the engine's Runtime
    who = (runtime.context or {}).get("who", "nobody") if isinstance(runtime.context, dict) \
        else "nobody"
    return {"text": state["text"] + f"+outer({who})"}


_p = StateGraph(Ctx)
_p.add_node("outer", _outer)
_p.add_node("child", _sub.compile())
_p.add_edge(START, "outer")
_p.add_edge("outer", "child")
_p.add_edge("child", END)
nested_graph = _p


def _toned(state: Ctx, config) -> dict:  # noqa: ANN001 - the run's config
    tone = (config.get("configurable") or {}).get("tone", "plain")
    return {"text": state["text"] + f"+{tone}"}


_c = StateGraph(Ctx)
_c.add_node("toned", _toned)
_c.add_edge(START, "toned")
_c.add_edge("toned", END)
config_graph = _c


def tuple_reply(state: MessagesState) -> dict:
    return {"messages": [("ai", "echo: " + str(state["messages"][-1].content))]}


_t = StateGraph(MessagesState)
_t.add_node("reply", tuple_reply)
_t.add_edge(START, "reply")
_t.add_edge("reply", END)
tuple_graph = _t


def approve_reply(state: MessagesState) -> dict:
    answer = interrupt({"question": "approve?"})
    return {"messages": [AIMessage(content=f"approved: {answer}")]}


_p = StateGraph(MessagesState)
_p.add_node("approve", approve_reply)
_p.add_edge(START, "approve")
_p.add_edge("approve", END)
pause_graph = _p


class Approval(MessagesState, total=False):
    answer: str


def _answer(state: Approval) -> dict:
    return {"messages": [AIMessage(content="Hello! May I go on?")]}


def _approve(state: Approval) -> dict:
    return {"answer": str(interrupt("go on?"))}


_ap = StateGraph(Approval)
_ap.add_node("model", _answer)
_ap.add_node("approve", _approve)
_ap.add_edge(START, "model")
_ap.add_edge("model", "approve")
_ap.add_edge("approve", END)
approval_agent = _ap
"""docs/server.md's agent: answers, then asks for approval (interrupt)."""
