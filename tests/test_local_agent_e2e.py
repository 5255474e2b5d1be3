"""A real agent on the real local model (SmolLM2-135M through llama.cpp), offline.

Asserts structure, never wording: a tool call that validates against the tool's schema,
the tool's result in the history, a non-empty final answer, SQLite checkpoints, a resumed
thread, and real token chunks in the ``messages`` stream mode.
"""

from __future__ import annotations

import sqlite3

import jsonschema
import pytest

from threadloom import (
    AIMessage,
    AIMessageChunk,
    SqliteCheckpointer,
    ToolMessage,
    create_agent,
    tool,
)

pytestmark = pytest.mark.slow

local = pytest.importorskip("threadloom.models.local")


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: the city name
    """
    return f"It is 18 C and sunny in {city}."


@pytest.fixture(scope="module")
def model():
    m = local.LocalChatModel(temperature=0, seed=7)
    yield m
    m.close()


def test_agent_calls_a_tool_answers_and_resumes_from_sqlite(model, tmp_path):
    db = tmp_path / "agent.db"
    agent = create_agent(
        model, [get_weather], checkpointer=SqliteCheckpointer(str(db)), max_agent_steps=4,
        system_prompt="You are a helpful assistant. Use tools when useful.",
    )
    chunks, nodes = [], []
    for mode, payload in agent.stream(
        {"messages": [("user", "What is the weather in Paris?")]},
        thread_id="e2e", stream_mode=["messages", "updates"],
    ):
        if mode == "messages":
            chunks.append(payload)
        else:
            nodes.extend(payload)
    state = agent.get_state(thread_id="e2e").values
    messages = state["messages"]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls, "the model made no tool call"
    schema = get_weather.json_schema()
    for call in calls:
        assert call["name"] == "get_weather"
        jsonschema.validate(call["args"], schema)
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert results and all(r.status == "success" for r in results)
    assert {r.tool_call_id for r in results} == {c["id"] for c in calls}
    final = messages[-1]
    assert isinstance(final, AIMessage) and final.text.strip() and not final.tool_calls
    assert state["exit_reason"] == "text"
    assert state["tool_call_counts"]["get_weather"] == len(calls)
    # the updates stream reads as the LangChain guide shows it (bookkeeping steps that
    # changed nothing a user sees are left out): model, tools, ..., model
    assert nodes[:2] == ["model", "tools"] and nodes[-1] == "model"
    tokens = [(c, meta) for c, meta in chunks if isinstance(c, AIMessageChunk)]
    assert len(tokens) >= 3
    assert all(meta["langgraph_node"] == "model" and meta["thread_id"] == "e2e"
               for _, meta in tokens)
    assert {meta["langgraph_node"] for c, meta in chunks if isinstance(c, ToolMessage)} == {"tools"}

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    reopened = create_agent(model, [get_weather], checkpointer=SqliteCheckpointer(str(db)),
                            max_agent_steps=4)
    assert len(list(reopened.get_state_history(thread_id="e2e"))) >= 5
    out = reopened.invoke({"messages": [("user", "Thanks! And in Rome?")]}, thread_id="e2e")
    assert out["messages"][: len(messages)] == messages
    assert len(out["messages"]) > len(messages) + 1
    assert out["last_message"].text.strip()
    assert out["exit_reason"] in ("text", "max_agent_steps")
