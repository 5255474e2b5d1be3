"""Small graphs the CLI tests run through ``threadloom run`` / ``draw`` / ``resume``."""

from __future__ import annotations

import asyncio
import operator
import time
from pathlib import Path
from typing import Annotated, TypedDict

from threadloom import END, START, Command, StateGraph, get_stream_writer, interrupt
from threadloom.models import ScriptedChatModel


class Counter(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]


def _inc(state: Counter) -> dict:
    get_stream_writer()({"progress": state.get("n", 0)})
    return {"n": state.get("n", 0) + 1, "log": [f"inc {state.get('n', 0)}"]}


def _double(state: Counter) -> dict:
    return {"n": state["n"] * 2, "log": ["double"]}


def _route(state: Counter) -> str:
    return "double" if state["n"] < 10 else END


builder = StateGraph(Counter)
builder.add_node("inc", _inc)
builder.add_node("double", _double)
builder.add_edge(START, "inc")
builder.add_conditional_edges("inc", _route, {"double": "double", END: END})
builder.add_edge("double", END)

counter_builder = builder
"""An uncompiled StateGraph (the CLI compiles it with its SQLite checkpointer)."""
counter = builder.compile(name="counter")
"""The same graph compiled without a checkpointer."""
stopping = builder.compile(interrupt_before=["double"], name="stopping")
"""The same graph stopping before ``double`` (no interrupt: ``--input null`` continues)."""


class Review(TypedDict, total=False):
    draft: str
    verdict: str


def _write(state: Review) -> dict:
    return {"draft": f"draft about {state.get('draft', 'nothing')}"}


def _review(state: Review) -> dict:
    answer = interrupt({"question": "publish this?", "draft": state["draft"]})
    return {"verdict": f"human said {answer}"}


_review_builder = StateGraph(Review)
_review_builder.add_node("write", _write)
_review_builder.add_node("review", _review)
_review_builder.add_edge(START, "write")
_review_builder.add_edge("write", "review")
_review_builder.add_edge("review", END)
review = _review_builder.compile(name="review")
"""Pauses in ``review`` with ``interrupt()``; resumed with ``--value``."""


class Chat(TypedDict, total=False):
    topic: str
    reply: str


def _chat(state: Chat) -> dict:
    model = ScriptedChatModel(["tokens stream one word at a time"])
    return {"reply": model.invoke([("user", state.get("topic", "hi"))]).text}


_chat_builder = StateGraph(Chat)
_chat_builder.add_node("chat", _chat)
_chat_builder.add_edge(START, "chat")
_chat_builder.add_edge("chat", END)
chat = _chat_builder.compile(name="chat")
"""One node calling a (scripted) chat model: its tokens reach the ``messages`` stream."""


class Slow(TypedDict, total=False):
    done: Annotated[list[str], operator.add]


async def _fast(state: Slow) -> dict:
    return {"done": ["fast"]}


async def _slow(state: Slow) -> dict:
    await asyncio.sleep(float(state.get("done", ["", ""])[0] == "fast") * 30)
    return {"done": ["slow"]}


_slow_builder = StateGraph(Slow)
_slow_builder.add_node("fast", _fast)
_slow_builder.add_node("slow", _slow)
_slow_builder.add_edge(START, "fast")
_slow_builder.add_edge("fast", "slow")
_slow_builder.add_edge("slow", END)
slow = _slow_builder.compile(name="slow")
"""``fast`` then a ``slow`` node that sleeps 30 s: for Ctrl-C and the progress line."""


class Ticker(TypedDict, total=False):
    n: int
    stop: int
    pause: float
    until: str


def _tick(state: Ticker) -> dict:
    until = state.get("until")
    if until:  # wait (at most 60 s) for the test to create this file
        deadline = time.monotonic() + 60
        while not Path(until).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        time.sleep(state.get("pause", 1.0))
    return {"n": state.get("n", 0) + 1}


def _again(state: Ticker) -> str:
    return "tick" if state["n"] < state.get("stop", 3) else END


_ticker_builder = StateGraph(Ticker)
_ticker_builder.add_node("tick", _tick)
_ticker_builder.add_edge(START, "tick")
_ticker_builder.add_conditional_edges("tick", _again, {"tick": "tick", END: END})
ticker = _ticker_builder.compile(name="ticker")
"""Sleeps ``pause`` s (default 1) per step, or waits for the file ``until`` to exist,
until ``n`` reaches ``stop``, saving each step: a run that holds its thread's lease for a
while, for tests of concurrent CLI commands."""


def make_counter() -> object:
    """A factory without arguments (the CLI calls it)."""
    return builder


not_a_graph = 42

__all__ = ["Command", "chat", "counter", "counter_builder", "make_counter", "review", "slow",
           "ticker"]
