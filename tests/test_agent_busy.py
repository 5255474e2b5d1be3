"""A second run on a busy thread: a clear ThreadBusyError, or a wait with busy_timeout."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from threadloom import ScriptedChatModel, SqliteCheckpointer, create_agent, tool
from threadloom.errors import ThreadBusyError


def _slow_agent(delay: float, cp: Any, **kwargs: Any) -> Any:
    @tool
    async def wait() -> str:
        """Wait a while."""
        await asyncio.sleep(delay)
        return "waited"

    def reply(messages: Any, tools: Any) -> Any:
        if messages[-1].type == "tool":
            return "done"
        return {"tool_calls": [{"name": "wait", "args": {}}]}

    return create_agent(ScriptedChatModel(reply), [wait], checkpointer=cp, **kwargs)


async def _two_runs(agent: Any, thread_id: str) -> list[Any]:
    first = asyncio.create_task(agent.ainvoke({"messages": ["one"]}, thread_id=thread_id))
    await asyncio.sleep(0.05)
    second = asyncio.create_task(agent.ainvoke({"messages": ["two"]}, thread_id=thread_id))
    return list(await asyncio.gather(first, second, return_exceptions=True))


def test_busy_thread_error_says_what_is_going_on_and_how_to_wait(tmp_path: Path) -> None:
    cp = SqliteCheckpointer(str(tmp_path / "busy.db"))
    agent = _slow_agent(0.3, cp)
    first, second = asyncio.run(_two_runs(agent, "busy-1"))
    assert first["exit_reason"] == "text"
    assert isinstance(second, ThreadBusyError)
    text = str(second)
    assert "busy-1" in text and "busy_timeout" in text and "300" not in text


def test_busy_timeout_makes_the_second_run_wait(tmp_path: Path) -> None:
    cp = SqliteCheckpointer(str(tmp_path / "wait.db"))
    agent = _slow_agent(0.3, cp, busy_timeout=5)
    first, second = asyncio.run(_two_runs(agent, "busy-2"))
    assert first["exit_reason"] == second["exit_reason"] == "text"
    history = agent.get_state(thread_id="busy-2").values["messages"]
    assert [m.text for m in history if m.type != "ai" or m.text] == [
        "one", "waited", "done", "two", "waited", "done"]


def test_busy_timeout_that_runs_out_says_how_long_it_waited(tmp_path: Path) -> None:
    cp = SqliteCheckpointer(str(tmp_path / "out.db"))
    agent = _slow_agent(0.6, cp, busy_timeout=0.1)
    _, second = asyncio.run(_two_runs(agent, "busy-3"))
    assert isinstance(second, ThreadBusyError) and "0.1s" in str(second)


@pytest.mark.parametrize("timeout", [None, 0])
def test_no_busy_timeout_fails_at_once(tmp_path: Path, timeout: Any) -> None:
    cp = SqliteCheckpointer(str(tmp_path / "now.db"))
    agent = _slow_agent(0.3, cp, busy_timeout=timeout)
    started = time.monotonic()
    _, second = asyncio.run(_two_runs(agent, "busy-4"))
    assert isinstance(second, ThreadBusyError) and time.monotonic() - started < 2
