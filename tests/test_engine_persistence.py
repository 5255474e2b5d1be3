"""Threads, checkpoints, time travel, forks, interrupts and resume, on each embedded backend."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadloom import (
    START,
    Command,
    Interrupt,
    StateGraph,
    interrupt,
)
from threadloom.errors import (
    CheckpointError,
    EmptyInputError,
    GraphRunError,
    InvalidRouteError,
)


class S(TypedDict):
    n: int
    log: Annotated[list, operator.add]


def counter_graph():
    g = StateGraph(S)
    g.add_node("inc", lambda s: {"n": s["n"] + 1, "log": ["inc"]})
    g.add_node("double", lambda s: {"n": s["n"] * 2, "log": ["double"]})
    g.add_edge(START, "inc")
    g.add_edge("inc", "double")
    return g


def test_second_invoke_continues_the_thread(checkpointer, thread_id):
    app = counter_graph().compile(checkpointer=checkpointer)
    assert app.invoke({"n": 1}, thread_id=thread_id) == {"n": 4, "log": ["inc", "double"]}
    out = app.invoke({"log": ["again"]}, thread_id=thread_id)
    assert out == {"n": 10, "log": ["inc", "double", "again", "inc", "double"]}
    other = app.invoke({"n": 0}, thread_id=thread_id + "-other")
    assert other["n"] == 2


def test_thread_ids_are_arbitrary_strings(checkpointer):
    app = counter_graph().compile(checkpointer=checkpointer)
    for tid in ["ünï cødé 🧵", "a/b\\c'; DROP TABLE x;--", " ", "x" * 300]:
        assert app.invoke({"n": 1}, thread_id=tid)["n"] == 4
        assert app.get_state(thread_id=tid).values["n"] == 4


def test_missing_thread_id_is_a_clear_error(checkpointer):
    app = counter_graph().compile(checkpointer=checkpointer)
    with pytest.raises(CheckpointError, match="thread_id"):
        app.invoke({"n": 1})


def test_get_state_and_history_newest_first(checkpointer, thread_id):
    app = counter_graph().compile(checkpointer=checkpointer)
    app.invoke({"n": 1}, thread_id=thread_id)
    snap = app.get_state(thread_id=thread_id)
    assert snap.values == {"n": 4, "log": ["inc", "double"]}
    assert snap.next == ()
    assert snap.metadata["source"] == "loop" and snap.metadata["step"] == 2
    history = list(app.get_state_history(thread_id=thread_id))
    # as LangGraph: the input checkpoint (-1, before the input), then the START step (0)
    assert [h.metadata["step"] for h in history] == [2, 1, 0, -1]
    assert [h.metadata["source"] for h in history] == ["loop", "loop", "loop", "input"]
    assert [h.next for h in history] == [(), ("double",), ("inc",), ("__start__",)]
    assert history[1].values["n"] == 2
    assert history[2].values["n"] == 1 and "n" not in history[3].values
    assert [t.name for t in history[3].tasks] == ["__start__"]
    assert history[0].parent_config["configurable"]["checkpoint_id"] == (
        history[1].config["configurable"]["checkpoint_id"])


def test_time_travel_replays_from_a_past_checkpoint(checkpointer, thread_id):
    calls = []
    g = StateGraph(S)
    g.add_node("inc", lambda s: calls.append("inc") or {"n": s["n"] + 1})
    g.add_node("double", lambda s: calls.append("double") or {"n": s["n"] * 2})
    g.add_edge(START, "inc")
    g.add_edge("inc", "double")
    app = g.compile(checkpointer=checkpointer)
    app.invoke({"n": 1}, thread_id=thread_id)
    before_double = [h for h in app.get_state_history(thread_id=thread_id)
                     if h.next == ("double",)][0]
    calls.clear()
    out = app.invoke(None, before_double.config)
    assert out["n"] == 4
    assert calls == ["double"]
    history = list(app.get_state_history(thread_id=thread_id))
    # as LangGraph: the 4 checkpoints of the run, then the replay's "fork" and its step
    assert [(h.metadata["step"], h.metadata["source"]) for h in history[:3]] == [
        (3, "loop"), (2, "fork"), (2, "loop")]
    assert len(history) == 6
    assert history[1].next == ("double",) and history[1].values["n"] == 2


def test_update_state_forks_from_a_past_checkpoint(checkpointer, thread_id):
    app = counter_graph().compile(checkpointer=checkpointer)
    app.invoke({"n": 1}, thread_id=thread_id)
    past = [h for h in app.get_state_history(thread_id=thread_id) if h.next == ("double",)][0]
    fork_config = app.update_state(past.config, {"n": 100})
    fork = app.get_state(fork_config)
    assert fork.values["n"] == 100
    assert fork.next == ("double",)
    assert fork.metadata["source"] == "update"  # as LangGraph (a copy-fork is "fork")
    assert app.invoke(None, thread_id=thread_id)["n"] == 200
    assert app.get_state(thread_id=thread_id).values["log"] == ["inc", "double"]


def test_update_state_as_node_routes_like_that_node(checkpointer, thread_id):
    app = counter_graph().compile(checkpointer=checkpointer)
    app.invoke({"n": 1}, thread_id=thread_id)
    cfg = app.update_state({"configurable": {"thread_id": thread_id}}, {"n": 7}, as_node="inc")
    snap = app.get_state(cfg)
    assert snap.next == ("double",)
    assert snap.metadata["source"] == "update"
    assert app.invoke(None, thread_id=thread_id)["n"] == 14


def test_update_state_unknown_key_and_node(checkpointer, thread_id):
    app = counter_graph().compile(checkpointer=checkpointer)
    app.invoke({"n": 1}, thread_id=thread_id)
    before = app.get_state(thread_id=thread_id).values
    # as LangGraph: a key the state lacks is dropped, the update changes nothing else
    app.update_state({"configurable": {"thread_id": thread_id}}, {"zz": 1})
    assert app.get_state(thread_id=thread_id).values == before
    with pytest.raises(ValueError, match="ghost"):
        app.update_state({"configurable": {"thread_id": thread_id}}, {"n": 1}, as_node="ghost")


def approval_graph(runs):
    class A(TypedDict):
        request: str
        decision: str
        log: Annotated[list, operator.add]

    def ask(s):
        runs.append("ask")
        answer = interrupt({"question": f"approve {s['request']}?"})
        return {"decision": answer, "log": ["asked"]}

    g = StateGraph(A)
    g.add_node("ask", ask)
    g.add_node("act", lambda s: {"log": [f"act:{s['decision']}"]})
    g.add_edge(START, "ask")
    g.add_edge("ask", "act")
    return g


def test_interrupt_and_resume(checkpointer, thread_id):
    runs: list[str] = []
    app = approval_graph(runs).compile(checkpointer=checkpointer)
    out = app.invoke({"request": "refund"}, thread_id=thread_id)
    [pause] = out["__interrupt__"]
    assert isinstance(pause, Interrupt)
    assert pause.value == {"question": "approve refund?"}
    snap = app.get_state(thread_id=thread_id)
    assert snap.next == ("ask",)
    assert snap.interrupts[0].id == pause.id
    assert snap.tasks[0].interrupts[0].value == pause.value
    out = app.invoke(Command(resume="yes"), thread_id=thread_id)
    assert out["log"] == ["asked", "act:yes"]
    assert "__interrupt__" not in out
    assert runs == ["ask", "ask"]


def test_resume_by_interrupt_id(checkpointer, thread_id):
    app = approval_graph([]).compile(checkpointer=checkpointer)
    out = app.invoke({"request": "r"}, thread_id=thread_id)
    pid = out["__interrupt__"][0].id
    assert app.invoke(Command(resume={pid: "ok"}), thread_id=thread_id)["decision"] == "ok"


def test_several_pending_interrupts_need_a_map_of_ids(checkpointer, thread_id):
    # As LangGraph 1.x: one value for two pending interrupts would answer both, in an
    # order that depends on the tasks (reported from the CLI: `resume --value` did that).
    g = StateGraph(S)
    g.add_node("a", lambda s: {"log": [f"a:{interrupt('question A')}"]})
    g.add_node("b", lambda s: {"log": [f"b:{interrupt('question B')}"]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    app = g.compile(checkpointer=checkpointer)
    app.invoke({"n": 0, "log": []}, thread_id=thread_id)
    pending = app.get_state(thread_id=thread_id).interrupts
    assert sorted(i.value for i in pending) == ["question A", "question B"]
    before = app.get_state(thread_id=thread_id).config
    for value in ("yes", {"approve": True}):
        with pytest.raises(GraphRunError, match="2 pending interrupts; resume with a dict"):
            app.invoke(Command(resume=value), thread_id=thread_id)
    assert app.get_state(thread_id=thread_id).config == before  # nothing was written
    answers = {i.id: f"answer to {i.value[-1]}" for i in pending}
    out = app.invoke(Command(resume=answers), thread_id=thread_id)
    assert sorted(out["log"]) == ["a:answer to A", "b:answer to B"]


def test_two_interrupts_in_one_node_resume_in_order(checkpointer, thread_id):
    class T(TypedDict):
        answers: list

    def two(s):
        a = interrupt("first?")
        b = interrupt("second?")
        return {"answers": [a, b]}

    g = StateGraph(T)
    g.add_node("two", two)
    g.add_edge(START, "two")
    app = g.compile(checkpointer=checkpointer)
    assert app.invoke({"answers": []}, thread_id=thread_id)["__interrupt__"][0].value == "first?"
    assert app.invoke(Command(resume=1), thread_id=thread_id)["__interrupt__"][0].value == "second?"
    assert app.invoke(Command(resume=2), thread_id=thread_id)["answers"] == [1, 2]


def test_interrupt_before_and_after(checkpointer, thread_id):
    app = counter_graph().compile(checkpointer=checkpointer, interrupt_before=["double"])
    assert app.invoke({"n": 1}, thread_id=thread_id) == {"n": 2, "log": ["inc"]}
    assert app.get_state(thread_id=thread_id).next == ("double",)
    assert app.invoke(None, thread_id=thread_id)["n"] == 4

    app2 = counter_graph().compile(checkpointer=checkpointer, interrupt_after=["inc"])
    tid = thread_id + "-after"
    assert app2.invoke({"n": 1}, thread_id=tid)["n"] == 2
    assert app2.get_state(thread_id=tid).next == ("double",)
    assert app2.invoke(None, thread_id=tid)["n"] == 4


def test_a_thread_made_by_another_graph_is_refused_not_silently_skipped(checkpointer, thread_id):
    # The thread pauses before ``double``; a graph without that node must not continue it
    # by doing nothing (reported from the CLI: "stopped before: inc", exit 0, no change).
    app = counter_graph().compile(checkpointer=checkpointer, interrupt_before=["double"])
    app.invoke({"n": 1}, thread_id=thread_id)
    other = StateGraph(S)
    other.add_node("inc", lambda s: {"n": s["n"] + 1, "log": ["inc"]})
    other.add_edge(START, "inc")
    foreign = other.compile(checkpointer=checkpointer)
    before = foreign.get_state(thread_id=thread_id).config
    for value in (None, Command(resume="x")):
        with pytest.raises(InvalidRouteError, match="node 'double' to run next") as info:
            foreign.invoke(value, thread_id=thread_id)
        assert info.value.target == "double" and info.value.node == "__checkpoint__"
        assert thread_id in str(info.value) and "['inc']" in str(info.value)
    with pytest.raises(InvalidRouteError, match="'double'"):
        foreign.update_state({"configurable": {"thread_id": thread_id}}, {"n": 5})
    # nothing was written; the right graph still finishes the thread
    assert foreign.get_state(thread_id=thread_id).config == before
    assert app.invoke(None, thread_id=thread_id) == {"n": 4, "log": ["inc", "double"]}
    # new input starts the thread over, as on any thread
    assert foreign.invoke({"n": 0}, thread_id=thread_id)["n"] == 1


def test_invoke_none_without_checkpoint_is_a_clear_error(checkpointer, thread_id):
    app = counter_graph().compile(checkpointer=checkpointer)
    with pytest.raises(EmptyInputError):
        app.invoke(None, thread_id=thread_id)


def test_failed_sibling_keeps_successful_writes_and_resume_does_not_rerun(checkpointer, thread_id):
    calls = {"good": 0, "flaky": 0}
    fail = {"on": True}

    def good(s):
        calls["good"] += 1
        return {"log": ["good"]}

    def flaky(s):
        calls["flaky"] += 1
        if fail["on"]:
            raise RuntimeError("down")
        return {"log": ["flaky"]}

    g = StateGraph(S)
    g.add_node("good", good)
    g.add_node("flaky", flaky)
    g.add_edge(START, "good")
    g.add_edge(START, "flaky")
    app = g.compile(checkpointer=checkpointer)
    with pytest.raises(RuntimeError):
        app.invoke({"n": 0}, thread_id=thread_id)
    snap = app.get_state(thread_id=thread_id)
    # as LangGraph: good's saved write is applied and good is no longer next
    assert snap.next == ("flaky",) and snap.values["log"] == ["good"]
    assert "RuntimeError('down')" in snap.tasks[1].error
    fail["on"] = False
    out = app.invoke(None, thread_id=thread_id)
    assert out["log"] == ["flaky", "good"]  # applied by node name, as LangGraph
    assert calls == {"good": 1, "flaky": 2}
    # the final state equals an uninterrupted run
    fresh = g.compile(checkpointer=checkpointer).invoke({"n": 0}, thread_id=thread_id + "x")
    assert fresh == out


def test_last_good_checkpoint_stays_loadable_after_an_error(checkpointer, thread_id):
    g = StateGraph(S)
    g.add_node("ok", lambda s: {"n": 5})
    g.add_node("bad", lambda s: 42)
    g.add_edge(START, "ok")
    g.add_edge("ok", "bad")
    app = g.compile(checkpointer=checkpointer)
    with pytest.raises(Exception, match="bad"):
        app.invoke({"n": 0}, thread_id=thread_id)
    snap = app.get_state(thread_id=thread_id)
    assert snap.values["n"] == 5
    assert snap.next == ("bad",)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_durability_modes_give_the_same_result(checkpointer, thread_id, durability):
    app = counter_graph().compile(checkpointer=checkpointer, durability=durability)
    assert app.invoke({"n": 1}, thread_id=thread_id)["n"] == 4
    assert app.get_state(thread_id=thread_id).values["n"] == 4
    steps = [h.metadata["step"] for h in app.get_state_history(thread_id=thread_id)]
    assert steps == ([2] if durability == "exit" else [2, 1, 0, -1])


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_interrupt_resume_under_each_durability(checkpointer, thread_id, durability):
    app = approval_graph([]).compile(checkpointer=checkpointer, durability=durability)
    assert "__interrupt__" in app.invoke({"request": "x"}, thread_id=thread_id)
    assert app.invoke(Command(resume="y"), thread_id=thread_id)["log"] == ["asked", "act:y"]


def test_invalid_parallel_writes_commit_nothing_from_that_step(checkpointer, thread_id):
    from threadloom import InvalidUpdateError, Send

    class L(TypedDict):
        last: int
        other: int

    g = StateGraph(L)
    g.add_node("fan", lambda s: {"other": 1})
    g.add_node("worker", lambda arg: {"last": arg["x"]})
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", lambda s: [Send("worker", {"x": i}) for i in (1, 2, 3)])
    app = g.compile(checkpointer=checkpointer)
    with pytest.raises(InvalidUpdateError, match="'last'"):
        app.invoke({"last": 0, "other": 0}, thread_id=thread_id)
    snap = app.get_state(thread_id=thread_id)
    assert snap.values == {"last": 0, "other": 1}
    assert snap.next == ("worker", "worker", "worker")


def test_a_thread_held_by_another_worker_is_busy(tmp_path, thread_id):
    import threading

    from threadloom import ThreadBusyError
    from threadloom.checkpoint.sqlite import SqliteCheckpointer

    cp = SqliteCheckpointer(str(tmp_path / "lease.db"))
    app = counter_graph().compile(checkpointer=cp)
    app.invoke({"n": 1}, thread_id=thread_id)
    token = cp.acquire_lease(thread_id, "other-worker", 30)
    with pytest.raises(ThreadBusyError, match="busy"):
        app.invoke({"n": 1}, thread_id=thread_id)
    assert app.get_state(thread_id=thread_id).values["n"] == 4  # nothing lost
    # with busy_timeout the run waits for the holder to let go
    waiting = counter_graph().compile(checkpointer=cp, busy_timeout=5)
    threading.Timer(0.3, cp.release_lease, (thread_id, token)).start()
    assert waiting.invoke({"n": 2}, thread_id=thread_id)["n"] == 6
    cp.close()


def test_a_run_that_lost_its_lease_cannot_write(tmp_path, thread_id):
    from threadloom import ThreadBusyError
    from threadloom.checkpoint.sqlite import SqliteCheckpointer

    cp = SqliteCheckpointer(str(tmp_path / "fence.db"))

    import threadloom.engine.lease as lease_mod

    old_ttl = lease_mod.LEASE_TTL_S
    lease_mod.LEASE_TTL_S = 0.05
    lease_mod.HEARTBEAT_S = 60  # a stalled process: its heartbeat stalls too
    try:
        def stall_then_write(s):
            import time

            time.sleep(0.2)  # our lease expires while we work
            cp.acquire_lease(thread_id, "thief", 30)
            return {"n": 99}

        g2 = StateGraph(S)
        g2.add_node("stall", stall_then_write)
        g2.add_edge(START, "stall")
        with pytest.raises(ThreadBusyError, match="stale"):
            g2.compile(checkpointer=cp).invoke({"n": 0}, thread_id=thread_id)
    finally:
        lease_mod.LEASE_TTL_S = old_ttl
        lease_mod.HEARTBEAT_S = None
    snap = g2.compile(checkpointer=cp).get_state(thread_id=thread_id)
    assert snap.values.get("n") != 99
    cp.close()


def test_interrupt_without_a_checkpointer_is_a_clear_error():
    from threadloom.errors import GraphRunError

    with pytest.raises(GraphRunError, match="no checkpointer") as info:
        approval_graph([]).compile().invoke({"request": "x"})
    assert "'ask'" in str(info.value)


def test_resume_when_every_task_of_the_step_has_saved_writes(thread_id):
    # Both parallel tasks finish and their writes are saved, then the checkpoint save
    # fails (a crash between the two): the resumed step must use the saved writes and run
    # neither node again.
    from threadloom import InMemoryCheckpointer

    class FailOnce(InMemoryCheckpointer):
        armed = False

        def put(self, config, checkpoint, metadata, new_versions):
            if self.armed and metadata.get("source") == "loop" and metadata["step"] == 1:
                self.armed = False
                raise OSError("disk full")
            return super().put(config, checkpoint, metadata, new_versions)

    calls = {"a": 0, "b": 0}

    def node(name):
        def fn(s):
            calls[name] += 1
            return {"log": [name]}

        return fn

    g = StateGraph(S)
    g.add_node("a", node("a"))
    g.add_node("b", node("b"))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    saver = FailOnce()
    app = g.compile(checkpointer=saver)
    saver.armed = True
    with pytest.raises(OSError, match="disk full"):
        app.invoke({"n": 0}, thread_id=thread_id)
    assert calls == {"a": 1, "b": 1}
    # as LangGraph, the latest state has both tasks' saved writes applied, none left next
    latest = app.get_state(thread_id=thread_id)
    assert latest.next == () and latest.values["log"] == ["a", "b"]
    assert app.get_state(latest.config).next == ("a", "b")  # the checkpoint as saved
    out = app.invoke(None, thread_id=thread_id)
    assert out["log"] == ["a", "b"]
    assert calls == {"a": 1, "b": 1}


def test_snapshot_values_list_keys_in_schema_order_in_every_process(tmp_path):
    from threadloom import SqliteCheckpointer

    class Three(TypedDict):
        a: int
        b: int
        c: int

    g = StateGraph(Three)
    g.add_node("set_a", lambda s: {"a": 1})
    g.add_edge(START, "set_a")
    path = str(tmp_path / "order.sqlite")
    writer = SqliteCheckpointer(path)
    app = g.compile(checkpointer=writer)
    app.invoke({"c": 3, "b": 2}, thread_id="t")
    reader = SqliteCheckpointer(path)  # a fresh cache, as in another process
    try:
        fresh = g.compile(checkpointer=reader)
        for graph in (app, fresh):
            history = list(graph.get_state_history(thread_id="t"))
            assert [list(s.values) for s in history] == [["a", "b", "c"], ["b", "c"], []]
    finally:
        reader.close()
        writer.close()


def test_thread_id_given_twice_must_agree(checkpointer):
    app = counter_graph().compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "c1"}}
    with pytest.raises(ValueError, match=r"thread_id='c2' differs .* 'c1'"):
        app.invoke({"n": 1}, config, thread_id="c2")
    with pytest.raises(ValueError, match="differs"):
        app.get_state(config, thread_id="c2")
    assert app.get_state(thread_id="c2").values == {}  # nothing ran on either thread
    assert app.get_state(thread_id="c1").values == {}
    # the same id twice is fine (a number given in the config is compared as text)
    assert app.invoke({"n": 1}, {"configurable": {"thread_id": 7}}, thread_id="7")["n"] == 4


@pytest.mark.parametrize(("save_error", "note"), [
    ("boom", "(the error could not be recorded in the checkpoint for the same reason)"),
    ("disk full", "(the error could not be recorded in the checkpoint: disk full)"),
])
def test_a_node_error_that_cannot_be_recorded_says_why_once(save_error, note):
    from threadloom import InMemoryCheckpointer

    class Failing(InMemoryCheckpointer):
        def put_writes(self, config, writes, task_id):
            if any(channel == "__error__" for channel, _ in writes):
                raise RuntimeError(save_error)
            return super().put_writes(config, writes, task_id)

    def fails(state):
        raise RuntimeError("boom")

    g = StateGraph(S)
    g.add_node("inc", fails)
    g.add_edge(START, "inc")
    with pytest.raises(RuntimeError, match="boom") as info:
        g.compile(checkpointer=Failing()).invoke({"n": 1}, thread_id="t")
    notes = [n for n in info.value.__notes__ if "recorded" in n]
    assert notes == [note]


def test_a_checkpointers_own_get_next_version_numbers_the_versions_and_its_errors_raise():
    # as LangGraph: the engine asks the checkpointer for each key's next version, so an
    # override is used (and what it raises reaches the caller)
    from threadloom import InMemoryCheckpointer

    class Tens(InMemoryCheckpointer):
        def get_next_version(self, current, channel=None):
            return (current or 0) + 10

    class Faulty(InMemoryCheckpointer):
        def get_next_version(self, current, channel=None):
            raise ValueError("Faulty get_next_version")

    g = StateGraph(S)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    tens = Tens()
    assert g.compile(checkpointer=tens).invoke({"n": 1}, thread_id="t")["n"] == 2
    saved = tens.get_tuple({"configurable": {"thread_id": "t"}})
    assert saved.checkpoint["channel_versions"]["n"] == 20  # the input's 10, then inc's
    with pytest.raises(ValueError, match="Faulty get_next_version"):
        g.compile(checkpointer=Faulty()).invoke({"n": 1}, thread_id="t")
