"""A checkpointer subclass's overridden async methods run in async runs (as LangGraph
calls ``aput``/``aget_tuple``), and a cancelled ``durability="exit"`` run still saves
its exit checkpoint through them."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from threadloom import InMemoryCheckpointer, StateGraph


class S(TypedDict):
    hello: str


def _graph(node: Any, cp: InMemoryCheckpointer) -> Any:
    b = StateGraph(S)
    b.add_node("agent", node)
    b.set_entry_point("agent")
    b.set_finish_point("agent")
    return b.compile(checkpointer=cp)


class Logged(InMemoryCheckpointer):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        self.calls.append("aput")
        await asyncio.sleep(0.05)
        return await super().aput(config, checkpoint, metadata, versions)

    async def aget_tuple(self, config: Any) -> Any:
        self.calls.append("aget_tuple")
        return await super().aget_tuple(config)


def test_an_async_run_calls_the_overridden_async_methods() -> None:
    cp = Logged()
    app = _graph(lambda s: {"hello": s["hello"] + "!"}, cp)
    cfg = {"configurable": {"thread_id": "t"}}
    assert asyncio.run(app.ainvoke({"hello": "hi"}, cfg)) == {"hello": "hi!"}
    assert cp.calls.count("aput") == len(list(cp.list(cfg))) == 3  # input, START, agent
    assert asyncio.run(app.aget_state(cfg)).values == {"hello": "hi!"}
    assert "aget_tuple" in cp.calls
    assert InMemoryCheckpointer.inline_io and not Logged.inline_io


def test_a_cancelled_exit_run_saves_its_checkpoint_through_aput() -> None:
    cp = Logged()
    started = []

    async def slow(state: S) -> S:
        started.append(True)
        await asyncio.sleep(5)
        return {"hello": "never"}

    app = _graph(slow, cp)
    cfg = {"configurable": {"thread_id": "t"}}

    async def main() -> None:
        run = asyncio.create_task(app.ainvoke({"hello": "hi"}, cfg, durability="exit"))
        while not started:
            await asyncio.sleep(0.01)
        assert "aput" not in cp.calls  # nothing saved before the exit
        run.cancel()
        try:
            await run
        except asyncio.CancelledError:
            pass
        else:  # pragma: no cover - the run must not finish
            raise AssertionError("the run was not cancelled")

    asyncio.run(main())
    assert cp.calls.count("aput") == 1
    saved = cp.get_tuple(cfg)
    assert saved is not None and saved.checkpoint["next"] == ["agent"]
    assert app.get_state(cfg).values == {"hello": "hi"}
