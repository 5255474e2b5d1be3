"""``graph.step_timeout``, as LangGraph's: a super-step past it has its running tasks
cancelled and the run raises ``TimeoutError``; a consumer that is slow to read the
stream does not stretch the step's deadline."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest

from threadloom import StateGraph
from threadloom.types import START


class S(TypedDict):
    hello: str


def _graph(cancelled: list[bool]) -> Any:
    async def slow(state: S) -> None:
        try:
            await asyncio.sleep(3)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def quick(state: S) -> S:
        await asyncio.sleep(0.2)
        return {"hello": "1"}

    b = StateGraph(S)
    b.add_node("slow", slow)
    b.add_node("quick", quick)
    b.add_edge(START, "slow")
    b.add_edge(START, "quick")
    app = b.compile()
    app.step_timeout = 0.5
    return app


@pytest.mark.parametrize("hang", [0.1, 0.6])
def test_a_step_past_its_timeout_is_cancelled_and_raises(hang: float) -> None:
    cancelled: list[bool] = []
    app = _graph(cancelled)
    seen: list[Any] = []

    async def main() -> None:
        async for chunk in app.astream({"hello": "world"}, stream_mode="updates"):
            seen.append(chunk)
            await asyncio.sleep(hang)  # a slow consumer

    with pytest.raises(TimeoutError, match="step_timeout"):
        asyncio.run(main())
    assert seen == [{"quick": {"hello": "1"}}] and cancelled == [True]


def test_a_sync_run_times_out_too_and_no_timeout_means_none() -> None:
    cancelled: list[bool] = []
    app = _graph(cancelled)
    with pytest.raises(TimeoutError):
        app.invoke({"hello": "world"})
    app.step_timeout = None
    b = StateGraph(S)
    b.add_node("a", lambda s: {"hello": "a"})
    b.add_edge(START, "a")
    fast = b.compile()
    fast.step_timeout = 5
    assert fast.invoke({"hello": "x"}) == {"hello": "a"}
