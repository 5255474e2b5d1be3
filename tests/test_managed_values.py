"""Managed values (LangGraph's ``RemainingSteps``, ``IsLastStep``): filled per node call
and router call, never stored, never in the output, writes to them dropped."""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, TypedDict

from threadloom import END, START, StateGraph
from threadloom.engine.managed import IsLastStep, RemainingSteps


class Loop(TypedDict):
    n: Annotated[int, operator.add]
    remaining_steps: RemainingSteps
    last: NotRequired[IsLastStep]


def test_nodes_and_routers_see_the_steps_left_and_nothing_is_stored(any_backend: Any) -> None:
    seen: list[tuple[int, bool]] = []
    routed: list[int] = []

    def work(state: Loop) -> dict[str, Any]:
        seen.append((state["remaining_steps"], state["last"]))
        return {"n": 1, "remaining_steps": 99}  # dropped: not a channel

    def again(state: Loop) -> str:
        routed.append(state["remaining_steps"])
        return END if state["remaining_steps"] <= 2 else "work"

    builder = StateGraph(Loop)
    assert set(builder.managed) == {"remaining_steps", "last"}
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", again)
    app = builder.compile(checkpointer=any_backend)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 5}
    out = app.invoke({"n": 0, "remaining_steps": 7}, config)
    assert out == {"n": 4}
    assert seen == [(5, False), (4, False), (3, False), (2, False)]
    assert routed == [5, 4, 3, 2]
    assert "remaining_steps" not in app.get_state(config).values


def test_is_last_step_is_true_in_the_last_step_allowed() -> None:
    class S(TypedDict):
        last: IsLastStep
        steps: Annotated[list, operator.add]

    def node(state: S) -> dict[str, Any]:
        return {"steps": [state["last"]]}

    builder = StateGraph(S)
    builder.add_node("a", node)
    builder.add_node("b", node)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    assert builder.compile().invoke({"steps": []}, {"recursion_limit": 2}) == {
        "steps": [False, True]}
