"""Idempotency keys survive a crash: a tools step re-run after kill -9 sees the same keys.

The run (``tests/crash_worker.py``, graph ``tools``) asks for two ``charge`` calls; the
tool books each charge in a ledger file keyed by its ``InjectedIdempotencyKey`` (the
deduplicating external system). The child is SIGKILLed after both charges were booked
but before the tools step's checkpoint; a new process resumes the thread, the tools step
runs again, and the ledger still holds exactly one charge per call.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import pytest
from crash_worker import CALLS, kill9, lines, run_job, spawn, tool_loop, wait_until

from threadloom import AIMessage, Command, StateGraph, interrupt
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.messages import ToolMessage
from threadloom.reducers import MessagesState
from threadloom.tools import InjectedIdempotencyKey, tool


@pytest.mark.slow
def test_a_tool_call_keeps_its_idempotency_key_across_a_crash(tmp_path: Path) -> None:
    effects, ledger = str(tmp_path / "effects"), str(tmp_path / "ledger")
    job = {"graph": "tools", "backend": {"kind": "sqlite", "path": str(tmp_path / "t.db")},
           "thread_id": "order-42", "input": {"messages": ["pay"]}, "effects": effects,
           "ledger": ledger, "slow_s": 120}
    child = spawn(job)
    wait_until(lambda: len(lines(ledger)) == 2, child)  # both booked; call_b is asleep
    kill9(child)
    first = [line.split()[1] for line in lines(effects)]
    assert len(first) == 2

    final = run_job({**job, "input": None, "slow_s": 0, "result": str(tmp_path / "out.json")})

    attempts = [line.split()[1] for line in lines(effects)]
    assert len(attempts) == 4  # the tools step really ran twice...
    assert Counter(attempts) == Counter(first * 2)  # ...with the same two keys
    booked = [line.split() for line in lines(ledger)]
    assert sorted(amount for _, amount in booked) == ["5", "7"]  # one charge per call
    keys = {key for key, _ in booked}
    assert keys == set(first) and len(keys) == 2
    for key in keys:  # thread : step (checkpoint-derived) : tool call id
        thread, step, call = key.split(":")
        assert thread == "order-42" and call in {c for c, _ in CALLS} and step
    assert [m.get("content", "") for m in final["messages"]] == [
        "pay", "", "charged 5", "charged 7", "done"]


class _Rounds:
    """An agent that asks for one ``charge`` per round, two rounds, and a tool that can
    pause (``interrupt``) on its first attempt at round 2, which makes the step run again."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.pause_round_2 = False

    def graph(self) -> StateGraph:
        rounds = self

        @tool
        def charge(rnd: int, key: Annotated[str, InjectedIdempotencyKey]) -> str:
            """Charge once per round.

            Args:
                rnd: the round.
            """
            rounds.keys.append(key)
            if rnd == 2 and rounds.pause_round_2:
                rounds.pause_round_2 = False
                interrupt("confirm")
            return f"charged {rnd}"

        def agent(state: MessagesState) -> dict:
            done = sum(isinstance(m, ToolMessage) for m in state["messages"])
            if done == 2:
                return {"messages": [AIMessage("done")]}
            call = {"name": "charge", "args": {"rnd": done + 1}, "id": f"call_{done + 1}"}
            return {"messages": [AIMessage("", tool_calls=[call])]}

        return tool_loop(MessagesState, agent, [charge])


def test_the_key_is_stable_when_a_forked_run_is_resumed(tmp_path: Path) -> None:
    """A run started from a past checkpoint (time travel), paused in a later tools step and
    resumed: the re-run call must get the key its first attempt got."""
    rounds = _Rounds()
    cp = SqliteCheckpointer(str(tmp_path / "fork.db"))
    app = rounds.graph().compile(checkpointer=cp)
    app.invoke({"messages": [("user", "pay")]}, thread_id="t")
    start = [h for h in app.get_state_history(thread_id="t") if h.next == ("agent",)][-1]
    rounds.keys.clear()
    rounds.pause_round_2 = True
    out = app.invoke(None, start.config)  # replay from the input checkpoint: a fork
    assert out["__interrupt__"][0].value == "confirm"
    app.invoke(Command(resume="ok"), thread_id="t")
    round_2 = [k for k in rounds.keys if k.endswith(":call_2")]
    assert len(round_2) == 2
    assert round_2[0] == round_2[1], round_2
    cp.close()
