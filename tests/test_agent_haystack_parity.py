"""Haystack ``Agent`` behaviours a Haystack program relies on (issue 16, the peer's
``test/components/agents`` tests): each test reproduces one peer case on threadloom's
own parts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from threadloom import HumanMessage, ScriptedChatModel, create_agent


def weather(location: str) -> str:
    """Weather of a city."""
    return f"sunny in {location}"


# -- streaming callbacks (Haystack's select_streaming_callback) ---------------------------


async def _async_chunk(chunk: Any) -> None:
    return None


def test_a_sync_run_refuses_an_async_streaming_callback() -> None:
    agent = create_agent(ScriptedChatModel(["hello"] * 4), [weather],
                         streaming_callback=_async_chunk)
    with pytest.raises(ValueError, match="The init callback cannot be a coroutine"):
        agent.run([HumanMessage("Hello")])
    with pytest.raises(ValueError, match="The init callback cannot be a coroutine"):
        agent.invoke({"messages": [HumanMessage("Hello")]})
    plain = create_agent(ScriptedChatModel(["hello"] * 4), [weather])
    with pytest.raises(ValueError, match="The runtime callback cannot be a coroutine"):
        plain.run([HumanMessage("Hello")], streaming_callback=_async_chunk)
    with pytest.raises(ValueError, match="The runtime callback cannot be a coroutine"):
        list(plain.stream({"messages": [HumanMessage("Hello")]},
                          streaming_callback=_async_chunk))
    # the async run takes it
    seen: list[Any] = []

    async def collect(chunk: Any) -> None:
        seen.append(chunk)

    out = asyncio.run(plain.run_async([HumanMessage("Hello")], streaming_callback=collect))
    assert out["exit_reason"] == "text" and seen
