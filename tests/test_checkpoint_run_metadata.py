"""A run's ``config["metadata"]`` and plain ``configurable`` keys are in each of its
checkpoints' metadata, as LangGraph's checkpointers record them; secret-named keys never
are (SECURITY.md 13)."""

from __future__ import annotations

from typing import TypedDict

import pytest

from threadloom import StateGraph
from threadloom.types import START


class S(TypedDict):
    x: int


@pytest.fixture(params=["memory", "sqlite"])
def cp(request, tmp_path):
    from threadloom import InMemoryCheckpointer, SqliteCheckpointer

    if request.param == "memory":
        return InMemoryCheckpointer()
    return SqliteCheckpointer(str(tmp_path / "t.db"))


def test_run_keys_are_recorded_and_found_by_filter(cp) -> None:
    b = StateGraph(S)
    b.add_node("a", lambda s: {"x": s["x"] + 1})
    b.add_edge(START, "a")
    app = b.compile(checkpointer=cp)
    cfg = {"configurable": {"thread_id": "t1", "user_id": "u1", "n": 3, "flag": True,
                            "api_key": "sk-CANARY-123", "auth_token": "CANARY",
                            "__private": "x", "nested": {"no": 1}, "nul": "a\x00b"},
           "metadata": {"tenant": "acme", "step": 99}}
    app.invoke({"x": 0}, cfg)
    history = list(app.get_state_history(cfg))
    assert [s.metadata for s in history] == [
        {"source": s, "step": n, "parents": {}, "tenant": "acme", "user_id": "u1",
         "n": 3, "flag": True, "nul": "ab"}
        for s, n in (("loop", 1), ("loop", 0), ("input", -1))]
    other = {"configurable": {"thread_id": "t2", "user_id": "u2"}}
    app.invoke({"x": 5}, other)
    found = {t.config["configurable"]["thread_id"] for t in cp.list(None, filter={"user_id": "u1"})}
    assert found == {"t1"}
    assert all("CANARY" not in repr(t.metadata) for t in cp.list(None))
    app.update_state(other, {"x": 7})
    assert app.get_state(other).metadata["user_id"] == "u2"
