"""The threadloom side of every workload, written against the public API (DESIGN.md).

Each function takes a :class:`harness.Counts` and returns ``{metric name: value}`` under
the same metric names as the peer side (peers.py), which builds the same graph, state
and inputs. Importing this module fails while threadloom's graph names are missing; the agent
names are imported by the agent workloads (W4-W6) only. Either ImportError is reported by
run.py as "threadloom side not available" and the peers still run.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

import harness as h

from threadloom import (
    END,
    START,
    AIMessage,
    InMemoryCheckpointer,
    MessagesState,
    SqliteCheckpointer,
    StateGraph,
)


class _Counter(TypedDict):
    n: int


def _incr(state: _Counter) -> dict[str, int]:
    return {"n": state["n"] + 1}


def _thread(tag: str, i: int, limit: int | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"configurable": {"thread_id": f"{tag}-{i}"}}
    if limit is not None:
        config["recursion_limit"] = limit
    return config


# --- W1, W2: graph engine overhead ---------------------------------------------------


def w1(c: h.Counts) -> dict[str, float]:
    """W1: a chain of `w1_nodes` nodes each adding 1 to ``n``; us per node-step."""
    builder = StateGraph(_Counter)
    names = [f"node_{i}" for i in range(c.w1_nodes)]
    for name in names:
        builder.add_node(name, _incr)
    builder.add_edge(START, names[0])
    for a, b in zip(names, names[1:], strict=False):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    graph = builder.compile()
    limit = {"recursion_limit": c.w1_nodes + 10}
    if graph.invoke({"n": 0}, limit)["n"] != c.w1_nodes:
        raise RuntimeError("W1 threadloom graph did not run every node")
    times = h.time_calls(lambda _i: graph.invoke({"n": 0}, limit), c.w1_invokes)
    return {h.W1_STEP: h.median_per(times, c.w1_nodes, 1e6)}


def w2(c: h.Counts) -> dict[str, float]:
    """W2: an a -> b -> a loop of `w2_steps` super-steps; us per super-step, no
    checkpointer and with InMemoryCheckpointer (a new thread per run)."""
    out: dict[str, float] = {}
    for metric, saver in ((h.W2_PLAIN, None), (h.W2_MEMORY, InMemoryCheckpointer())):
        builder = StateGraph(_Counter)
        builder.add_node("a", _incr)
        builder.add_node("b", _incr)
        builder.add_edge(START, "a")
        builder.add_edge("a", "b")
        builder.add_conditional_edges("b", lambda s: END if s["n"] >= c.w2_steps else "a")
        graph = builder.compile(checkpointer=saver)

        def run(i: int, graph: Any = graph, tag: str = metric) -> None:
            if graph.invoke({"n": 0}, _thread(tag, i, c.w2_steps + 10))["n"] != c.w2_steps:
                raise RuntimeError("W2 threadloom loop stopped at the wrong step")

        run(-1)  # warm-up
        times = h.time_calls(run, c.w2_invokes)
        out[metric] = h.median_per(times, c.w2_steps, 1e6)
    return out


# --- W3, W7: conversation storage ----------------------------------------------------


def _reply_graph(checkpointer: Any) -> Any:
    def reply(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(content=h.make_text(10_000 + len(state["messages"])))]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


def w3(c: h.Counts) -> dict[str, float]:
    """W3: one thread, `w3_turns` turns (user + assistant message of 200 chars) on
    SqliteCheckpointer over a file; MB on disk and ms per turn at each mark."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w3.sqlite"
        saver = SqliteCheckpointer(str(path))
        try:
            graph = _reply_graph(saver)
            config = _thread("w3", 0)
            out: dict[str, float] = {}

            def turn(i: int) -> None:
                graph.invoke({"messages": [("user", h.make_text(i))]}, config)

            def measure_disk(i: int) -> None:
                if i + 1 in c.w3_marks:
                    out[h.w3_mb(i + 1)] = h.sqlite_bytes(path) / 1e6

            times = h.time_calls(turn, c.w3_turns, after=measure_disk)
            final = graph.get_state(config).values["messages"]
            if len(final) != 2 * c.w3_turns:
                raise RuntimeError(f"W3 threadloom thread holds {len(final)} messages")
            for mark in c.w3_marks:
                out[h.w3_ms(mark)] = h.window_mean(times, mark, c.w3_window) * 1e3
        finally:
            close = getattr(saver, "close", None)
            if close is not None:
                close()
    return out


def w7(c: h.Counts) -> dict[str, float]:
    """W7: `w7_threads` threads of `w7_turns` turns (2 messages of 200 chars each) in
    InMemoryCheckpointer; KB of resident memory per thread. Run in a fresh process."""
    graph = _reply_graph(InMemoryCheckpointer())

    def fill(thread: str, seed: int) -> None:
        config = {"configurable": {"thread_id": thread}}
        for turn in range(c.w7_turns):
            graph.invoke({"messages": [("user", h.make_text(seed + turn))]}, config)

    fill("warm-up", -100)
    before = h.settled_rss()
    for t in range(c.w7_threads):
        fill(f"t{t}", t * 100)
    after = h.settled_rss()
    last = graph.get_state({"configurable": {"thread_id": f"t{c.w7_threads - 1}"}})
    if len(last.values["messages"]) != 2 * c.w7_turns:
        raise RuntimeError("W7 threadloom thread does not hold its messages")
    return {h.W7_PER_THREAD: (after - before) / c.w7_threads / 1024}


# --- W4, W5, W6: the agent -------------------------------------------------------------


def _script(messages: list[Any], tools: Any = None) -> AIMessage:
    """The shared agent script as a ScriptedChatModel callable (stateless, so one model
    serves every run, concurrent ones included)."""
    results = 0
    for m in reversed(messages):
        if m.type == "human":
            break
        results += m.type == "tool"
    x = h.agent_decision(results)
    if x is None:
        return AIMessage(content=h.AGENT_ANSWER)
    call = {"name": h.TOOL_NAME, "args": {"x": x}, "id": h.tool_call_id(x), "type": "tool_call"}
    return AIMessage(content="", tool_calls=[call])


class _Delayed:
    """Wraps a chat model so each async call first awaits `delay_s` (a slow provider)."""

    def __init__(self, inner: Any, delay_s: float) -> None:
        self._inner = inner
        self._delay_s = delay_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self._delay_s)
        return await self._inner.ainvoke(*args, **kwargs)

    async def astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        await asyncio.sleep(self._delay_s)
        async for chunk in self._inner.astream(*args, **kwargs):
            yield chunk


def _agent(delay_s: float = 0.0, checkpointer: Any = None) -> Any:
    # imported here so the graph workloads run even before the agent package exists
    from threadloom import ScriptedChatModel, create_agent, tool

    # No call log: the peers' scripted models keep none either (and a real model has none).
    model: Any = ScriptedChatModel(_script, record_calls=False)
    if delay_s:
        model = _Delayed(model, delay_s)
    return create_agent(model, tools=[tool(h.bump)], checkpointer=checkpointer)


def _check(result: dict[str, Any]) -> None:
    # user, then 3 x (assistant tool call, tool result), then the answer
    if len(result["messages"]) != 2 + 2 * h.AGENT_TOOL_CALLS:
        raise RuntimeError(f"threadloom agent run produced {len(result['messages'])} messages")


def _agent_ms(c: h.Counts, saver: Any, tag: str) -> float:
    agent = _agent(checkpointer=saver)

    def run(i: int) -> None:
        _check(agent.invoke({"messages": [("user", "go")]}, _thread(tag, i)))

    run(-1)
    return h.median_per(h.time_calls(run, c.agent_runs), 1, 1e3)


def w4(c: h.Counts) -> dict[str, float]:
    """W4: create_agent with a scripted model (3 tool calls then an answer); ms per run
    without a checkpointer and with InMemoryCheckpointer (a new thread per run)."""
    return {
        h.AGENT_PLAIN: _agent_ms(c, None, "plain"),
        h.AGENT_MEMORY: _agent_ms(c, InMemoryCheckpointer(), "memory"),
    }


def w5(c: h.Counts) -> dict[str, float]:
    """W5: the W4 agent without a checkpointer (the Haystack comparison); ms per run."""
    return {h.AGENT_PLAIN: _agent_ms(c, None, "w5")}


def w6(c: h.Counts) -> dict[str, float]:
    """W6: `w6_runs` concurrent `ainvoke` runs whose model awaits `w6_delay_s` per call;
    total seconds."""
    agent = _agent(delay_s=c.w6_delay_s)

    async def one() -> None:
        _check(await agent.ainvoke({"messages": [("user", "go")]}))

    return {h.w6_total(c): h.concurrent_seconds(one, c.w6_runs)}
