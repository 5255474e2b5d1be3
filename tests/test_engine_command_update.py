"""``Command(update=..., resume=..., goto=...)`` on a paused thread, as LangGraph 1.2.

Found by a fresh-user trial and checked against LangGraph 1.2.24 on the same graph
(START -> ask (interrupt) -> done -> END, ``log`` summed):
- ``Command(resume="yes", update={"q": "u"})`` returned ``q == "u"`` but saved ``q == "a"``;
- ``Command(goto="done", update=...)`` answered the pending interrupt with ``None`` (so
  ``ask`` ran, and ``done`` twice); LangGraph keeps ``ask`` paused (it asks again) and runs
  ``done`` beside it;
- the same Command on a fresh thread raised; LangGraph starts the run with it.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from threadloom import END, START, Command, StateGraph, interrupt


class S(TypedDict, total=False):
    q: str
    answer: str
    log: Annotated[list[str], operator.add]


def _graph(checkpointer):  # type: ignore[no-untyped-def]
    def ask(state: S) -> S:
        answer = interrupt({"question": f"approve {state.get('q', '?')}?"})
        return {"answer": str(answer), "log": ["asked"]}

    def done(state: S) -> S:
        return {"log": ["done"]}

    g = StateGraph(S)
    g.add_node("ask", ask)
    g.add_node("done", done)
    g.add_edge(START, "ask")
    g.add_edge("ask", "done")
    g.add_edge("done", END)
    return g.compile(checkpointer=checkpointer)


def test_resume_with_an_update_saves_the_update(checkpointer) -> None:  # type: ignore[no-untyped-def]
    app = _graph(checkpointer)
    app.invoke({"q": "a"}, thread_id="t")
    out = app.invoke(Command(resume="yes", update={"q": "u"}), thread_id="t")
    assert out == {"q": "u", "answer": "yes", "log": ["asked", "done"]}
    state = app.get_state(thread_id="t")
    assert state.values == {"q": "u", "answer": "yes", "log": ["asked", "done"]}
    assert state.next == ()


def test_goto_with_an_update_keeps_the_interrupt_pending(checkpointer) -> None:  # type: ignore[no-untyped-def]
    app = _graph(checkpointer)
    app.invoke({"q": "a"}, thread_id="t")
    out = app.invoke(Command(goto="done", update={"q": "u"}), thread_id="t")
    assert out["q"] == "u" and "answer" not in out  # ask was not answered with None
    [pending] = out["__interrupt__"]
    assert pending.value == {"question": "approve u?"}  # ask ran again, on the update
    state = app.get_state(thread_id="t")  # as LangGraph: the update shows, done's write not
    assert state.next == ("ask",)
    assert state.values == {"q": "u", "log": []}
    # done's write, saved while ask paused, joins ask's step; then done runs after ask
    final = app.invoke(Command(resume="ok"), thread_id="t")
    assert final == {"q": "u", "answer": "ok", "log": ["asked", "done", "done"]}
    steps = [(s.metadata["source"], s.metadata["step"], s.values, s.next)
             for s in app.get_state_history(thread_id="t")]
    assert steps[:2] == [
        ("loop", 2, {"q": "u", "answer": "ok", "log": ["asked", "done", "done"]}, ()),
        ("loop", 1, {"q": "u", "answer": "ok", "log": ["asked", "done"]}, ("done",)),
    ]


def test_update_and_goto_on_a_fresh_thread_start_the_run(checkpointer) -> None:  # type: ignore[no-untyped-def]
    app = _graph(checkpointer)
    out = app.invoke(Command(goto="done", update={"q": "u"}), thread_id="fresh")
    assert out["q"] == "u"
    assert out["__interrupt__"][0].value == {"question": "approve u?"}
    final = app.invoke(Command(resume="ok"), thread_id="fresh")
    assert final["answer"] == "ok" and sorted(final["log"]) == ["asked", "done", "done"]
