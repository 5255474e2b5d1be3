"""Breaking out of an agent's stream ends its run at once, leaving no task behind."""

from __future__ import annotations

import asyncio

from threadloom import ScriptedChatModel, create_agent, tool
from threadloom.engine.sync import _private_loop


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_breaking_out_of_agent_stream_leaves_no_pending_task():
    model = ScriptedChatModel([
        {"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}, "three"])
    agent = create_agent(model, [add])
    for _chunk in agent.stream({"messages": [("user", "hi")]}, stream_mode="messages"):
        break
    assert asyncio.all_tasks(_private_loop()) == set()
    assert len(model.calls) == 1  # the run stopped inside the first model call
