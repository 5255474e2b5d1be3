"""The peer side of every workload: LangGraph, LangChain `create_agent`, Haystack `Agent`.

Each function takes a :class:`harness.Counts` and returns ``{metric name: value}`` under
the same metric names as the threadloom side (tl_workloads.py). Peer packages are imported
inside the functions, so this module imports even when a peer is not installed; run.py
checks ``harness.peer_available`` before calling.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, TypedDict

import harness as h

# Haystack sends anonymous telemetry by default; a benchmark must not touch the network.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


class _Counter(TypedDict):
    n: int


def _incr(state: _Counter) -> dict[str, int]:
    return {"n": state["n"] + 1}


# --- W1, W2: graph engine overhead (LangGraph StateGraph) ----------------------------


def w1_langgraph(c: h.Counts) -> dict[str, float]:
    """W1: a chain of `w1_nodes` nodes each adding 1 to ``n``; us per node-step."""
    from langgraph.graph import END, START, StateGraph

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
        raise RuntimeError("W1 peer graph did not run every node")
    times = h.time_calls(lambda _i: graph.invoke({"n": 0}, limit), c.w1_invokes)
    return {h.W1_STEP: h.median_per(times, c.w1_nodes, 1e6)}


def _w2_graph(c: h.Counts, checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(_Counter)
    builder.add_node("a", _incr)
    builder.add_node("b", _incr)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_conditional_edges("b", lambda s: END if s["n"] >= c.w2_steps else "a")
    return builder.compile(checkpointer=checkpointer)


def w2_langgraph(c: h.Counts) -> dict[str, float]:
    """W2: an a -> b -> a loop of `w2_steps` super-steps; us per super-step, no
    checkpointer and with LangGraph's InMemorySaver (a new thread per run)."""
    from langgraph.checkpoint.memory import InMemorySaver

    out: dict[str, float] = {}
    for metric, saver in ((h.W2_PLAIN, None), (h.W2_MEMORY, InMemorySaver())):
        graph = _w2_graph(c, saver)

        def run(i: int, graph: Any = graph, tag: str = metric) -> None:
            config = {
                "recursion_limit": c.w2_steps + 10,
                "configurable": {"thread_id": f"{tag}-{i}"},
            }
            if graph.invoke({"n": 0}, config)["n"] != c.w2_steps:
                raise RuntimeError("W2 peer loop stopped at the wrong step")

        run(-1)  # warm-up
        times = h.time_calls(run, c.w2_invokes)
        out[metric] = h.median_per(times, c.w2_steps, 1e6)
    return out


# --- W3, W7: conversation storage ----------------------------------------------------


def _reply_graph(checkpointer: Any) -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [AIMessage(content=h.make_text(10_000 + len(state["messages"])))]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


def w3_langgraph(c: h.Counts) -> dict[str, float]:
    """W3: one thread, `w3_turns` turns (user + assistant message of 200 chars) on
    LangGraph's SqliteSaver over a file; MB on disk and ms per turn at each mark."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w3.sqlite"
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            graph = _reply_graph(SqliteSaver(conn))
            config = {"configurable": {"thread_id": "w3"}}
            out: dict[str, float] = {}

            def turn(i: int) -> None:
                graph.invoke({"messages": [("user", h.make_text(i))]}, config)

            def measure_disk(i: int) -> None:
                if i + 1 in c.w3_marks:
                    out[h.w3_mb(i + 1)] = h.sqlite_bytes(path) / 1e6

            times = h.time_calls(turn, c.w3_turns, after=measure_disk)
            final = graph.get_state(config).values["messages"]
            if len(final) != 2 * c.w3_turns:
                raise RuntimeError(f"W3 peer thread holds {len(final)} messages")
            for mark in c.w3_marks:
                out[h.w3_ms(mark)] = h.window_mean(times, mark, c.w3_window) * 1e3
        finally:
            conn.close()
    return out


def w7_langgraph(c: h.Counts) -> dict[str, float]:
    """W7: `w7_threads` threads of `w7_turns` turns (2 messages of 200 chars each) in
    LangGraph's InMemorySaver; KB of resident memory per thread. Run in a fresh process."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = _reply_graph(saver)

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
        raise RuntimeError("W7 peer thread does not hold its messages")
    return {h.W7_PER_THREAD: (after - before) / c.w7_threads / 1024}


# --- W4, W6: LangChain create_agent ----------------------------------------------------


@functools.cache
def _langchain_model_class() -> type:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedLangChainModel(BaseChatModel):
        """Replays the shared agent script; `delay_s` is awaited per async call."""

        delay_s: float = 0.0

        @property
        def _llm_type(self) -> str:
            return "threadloom-bench-scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self  # the script already knows its one tool

        def _reply(self, messages: list[Any]) -> ChatResult:
            results = 0
            for m in reversed(messages):
                if m.type == "human":
                    break
                results += m.type == "tool"
            x = h.agent_decision(results)
            if x is None:
                msg = AIMessage(content=h.AGENT_ANSWER)
            else:
                call = {"name": h.TOOL_NAME, "args": {"x": x}, "id": h.tool_call_id(x)}
                msg = AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
            return ChatResult(generations=[ChatGeneration(message=msg)])

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            return self._reply(messages)

        async def _agenerate(self, messages: list[Any], stop: Any = None,
                             run_manager: Any = None, **kwargs: Any) -> ChatResult:
            await asyncio.sleep(self.delay_s)
            return self._reply(messages)

    return ScriptedLangChainModel


def _langchain_agent(delay_s: float = 0.0, checkpointer: Any = None) -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    model = _langchain_model_class()(delay_s=delay_s)
    return create_agent(model, tools=[tool(h.bump)], checkpointer=checkpointer)


def _check_agent_messages(messages: list[Any]) -> None:
    # user, then 3 x (assistant tool call, tool result), then the answer
    if len(messages) != 2 + 2 * h.AGENT_TOOL_CALLS:
        raise RuntimeError(f"peer agent run produced {len(messages)} messages")


def w4_langchain(c: h.Counts) -> dict[str, float]:
    """W4: LangChain `create_agent`, scripted model (3 tool calls then an answer);
    ms per run without a checkpointer and with InMemorySaver (a new thread per run)."""
    from langgraph.checkpoint.memory import InMemorySaver

    out: dict[str, float] = {}
    for metric, saver in ((h.AGENT_PLAIN, None), (h.AGENT_MEMORY, InMemorySaver())):
        agent = _langchain_agent(checkpointer=saver)

        def run(i: int, agent: Any = agent, tag: str = metric) -> None:
            config = {"configurable": {"thread_id": f"{tag}-{i}"}}
            result = agent.invoke({"messages": [("user", "go")]}, config)
            _check_agent_messages(result["messages"])

        run(-1)
        out[metric] = h.median_per(h.time_calls(run, c.agent_runs), 1, 1e3)
    return out


def w6_langchain(c: h.Counts) -> dict[str, float]:
    """W6: `w6_runs` concurrent `ainvoke` runs of LangChain `create_agent` whose model
    awaits `w6_delay_s` per call; total seconds."""
    agent = _langchain_agent(delay_s=c.w6_delay_s)

    async def one() -> None:
        result = await agent.ainvoke({"messages": [("user", "go")]})
        _check_agent_messages(result["messages"])

    return {h.w6_total(c): h.concurrent_seconds(one, c.w6_runs)}


# --- W5, W6: Haystack Agent --------------------------------------------------------------


@functools.cache
def _haystack_generator_class() -> type:
    from haystack import component
    from haystack.dataclasses import ChatMessage, ChatRole, ToolCall

    @component
    class ScriptedHaystackGenerator:
        """A ChatGenerator that replays the shared agent script."""

        def __init__(self, delay_s: float = 0.0) -> None:
            self.delay_s = delay_s

        def _reply(self, messages: list[ChatMessage]) -> dict[str, list[ChatMessage]]:
            results = 0
            for m in reversed(messages):
                if m.role == ChatRole.USER:
                    break
                results += m.role == ChatRole.TOOL
            x = h.agent_decision(results)
            if x is None:
                return {"replies": [ChatMessage.from_assistant(h.AGENT_ANSWER)]}
            call = ToolCall(tool_name=h.TOOL_NAME, arguments={"x": x}, id=h.tool_call_id(x))
            return {"replies": [ChatMessage.from_assistant(tool_calls=[call])]}

        @component.output_types(replies=list[ChatMessage])
        def run(self, messages: list[ChatMessage], tools: Any = None,
                generation_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
            return self._reply(messages)

        @component.output_types(replies=list[ChatMessage])
        async def run_async(self, messages: list[ChatMessage], tools: Any = None,
                            generation_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
            await asyncio.sleep(self.delay_s)
            return self._reply(messages)

    return ScriptedHaystackGenerator


def _haystack_agent(delay_s: float = 0.0) -> Any:
    from haystack.components.agents import Agent
    from haystack.tools import Tool

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    bump_tool = Tool(name=h.TOOL_NAME, description=h.TOOL_DESCRIPTION, parameters=schema,
                     function=h.bump)
    generator = _haystack_generator_class()(delay_s=delay_s)
    agent = Agent(chat_generator=generator, tools=[bump_tool])
    agent.warm_up()
    return agent


def w5_haystack(c: h.Counts) -> dict[str, float]:
    """W5: Haystack `Agent`, scripted generator (3 tool calls then an answer); ms per run."""
    from haystack.dataclasses import ChatMessage

    agent = _haystack_agent()

    def run(_i: int) -> None:
        result = agent.run(messages=[ChatMessage.from_user("go")])
        _check_agent_messages(result["messages"])

    run(-1)
    return {h.AGENT_PLAIN: h.median_per(h.time_calls(run, c.agent_runs), 1, 1e3)}


def w6_haystack(c: h.Counts) -> dict[str, float]:
    """W6: `w6_runs` concurrent Haystack `Agent.run_async` runs whose generator awaits
    `w6_delay_s` per call; total seconds."""
    from haystack.dataclasses import ChatMessage

    agent = _haystack_agent(delay_s=c.w6_delay_s)

    async def one() -> None:
        result = await agent.run_async(messages=[ChatMessage.from_user("go")])
        _check_agent_messages(result["messages"])

    return {h.w6_total(c): h.concurrent_seconds(one, c.w6_runs)}
