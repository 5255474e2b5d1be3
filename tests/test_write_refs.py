"""A step's lone task's writes, saved with the step's checkpoint by reference to it
(``checkpoint/write_refs.py``), read back as the values written: on every backend, through
the checkpointer (``pending_writes``), history (``tasks[i].result``) and a replay; a
reference whose checkpoint is gone is left out; a forged one is refused naming the write.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

from threadloom import END, START, StateGraph, add_messages
from threadloom.checkpoint.write_refs import (
    REF_LAST,
    REF_TAIL,
    REF_VALUE,
    parse_ref,
    write_rows,
)
from threadloom.errors import SerializationError
from threadloom.messages import AIMessage, HumanMessage


class State(TypedDict, total=False):
    n: int
    items: list[str]
    messages: Annotated[list[Any], add_messages]


def _chain(cp: Any) -> Any:
    """START -> number -> listed -> reply -> bare -> END: a plain value, a list value, a
    list appended by the reducer and one message appended by it."""

    def number(s: State) -> dict[str, Any]:
        return {"n": 7}

    def listed(s: State) -> dict[str, Any]:
        return {"items": ["a", "b"]}

    def reply(s: State) -> dict[str, Any]:
        return {"messages": [AIMessage(content="two", id="m2"), AIMessage(content="three",
                                                                         id="m3")]}

    def bare(s: State) -> dict[str, Any]:
        return {"messages": AIMessage(content="four", id="m4")}

    g = StateGraph(State)
    for name, fn in (("number", number), ("listed", listed), ("reply", reply), ("bare", bare)):
        g.add_node(name, fn)
    g.add_edge(START, "number")
    g.add_edge("number", "listed")
    g.add_edge("listed", "reply")
    g.add_edge("reply", "bare")
    g.add_edge("bare", END)
    return g.compile(checkpointer=cp)


CFG = {"configurable": {"thread_id": "refs"}}


def _run(cp: Any) -> Any:
    graph = _chain(cp)
    graph.invoke({"messages": [HumanMessage(content="one", id="m1")]}, CFG)
    return graph


def _by_node(cp: Any, graph: Any) -> dict[str, list[tuple[str, Any]]]:
    """node -> the (channel, value) pending writes saved against the checkpoint it ran
    from, read through ``cp.get_tuple``."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for snap in graph.get_state_history(CFG):
        saved = cp.get_tuple(snap.config)
        for task in snap.tasks:
            out[task.name] = [(w.channel, w.value) for w in saved.pending_writes
                              if w.task_id == task.id]
    return out


def test_each_lone_write_reads_back_as_written(any_backend):
    graph = _run(any_backend)
    writes = _by_node(any_backend, graph)
    assert writes["number"] == [("n", 7)]
    assert writes["listed"] == [("items", ["a", "b"])]
    assert writes["reply"] == [("messages", [AIMessage(content="two", id="m2"),
                                             AIMessage(content="three", id="m3")])]
    assert writes["bare"] == [("messages", AIMessage(content="four", id="m4"))]


def test_history_shows_each_task_result(any_backend):
    graph = _run(any_backend)
    results = {t.name: t.result for s in graph.get_state_history(CFG) for t in s.tasks}
    assert results["number"] == {"n": 7}
    assert results["listed"] == {"items": ["a", "b"]}
    assert results["reply"] == {"messages": [AIMessage(content="two", id="m2"),
                                             AIMessage(content="three", id="m3")]}
    assert results["bare"] == {"messages": AIMessage(content="four", id="m4")}


def test_the_writes_are_stored_as_references_not_bytes_again(any_backend):
    graph = _run(any_backend)
    with any_backend._tx(False) as tx:
        rows = tx.ns_writes("refs", "")
    kinds = sorted(data[:2] for found in rows.values() for _, ch, data in found
                   if ch in ("n", "items", "messages"))
    # the input's writes (START's) are saved as bytes; the four lone tasks' by reference
    assert kinds.count(REF_VALUE) == 2 and kinds.count(REF_TAIL) == 1
    assert kinds.count(REF_LAST) == 1
    assert graph.get_state(CFG).values["n"] == 7


def test_a_replay_from_an_older_checkpoint_still_sees_the_writes(any_backend):
    graph = _run(any_backend)
    history = list(graph.get_state_history(CFG))
    before_reply = next(s for s in history if s.next == ("reply",))
    again = graph.invoke(None, before_reply.config)
    assert [m.content for m in again["messages"]] == ["one", "two", "three", "four"]


def test_a_reference_whose_checkpoint_is_gone_is_left_out(any_backend):
    graph = _run(any_backend)
    history = list(graph.get_state_history(CFG))
    parent = next(s for s in history if s.next == ("number",))
    child = next(s for s in history if s.next == ("listed",))
    with any_backend._tx(True) as tx:
        tx.delete_checkpoints("refs", "", [child.config["configurable"]["checkpoint_id"]])
    saved = any_backend.get_tuple(parent.config)
    assert [w.channel for w in saved.pending_writes if w.channel == "n"] == []


def test_a_forged_reference_is_refused_naming_the_write(any_backend):
    graph = _run(any_backend)
    parent = next(s for s in graph.get_state_history(CFG) if s.next == ("number",))
    cid = parent.config["configurable"]["checkpoint_id"]
    with any_backend._tx(True) as tx:
        tx.insert_writes("refs", "", cid, [("forged", 0, "n", b"\x00zbad")])
    with pytest.raises(SerializationError, match="pending write 'n'"):
        any_backend.get_tuple(parent.config)


def _ref(value: Any, current: Any) -> bytes | None:
    """What ``write_rows`` stores for a write of ``value`` to a channel holding
    ``current`` in checkpoint "c", when it is a reference (None: its bytes)."""
    data = write_rows([("ch", value)], "t", {}, lambda v, path="": b"bytes", {"ch": current},
                      "c")[0][3]
    return data if data != b"bytes" else None


def test_a_reference_takes_only_the_very_objects_written():
    msg = AIMessage(content="x", id="1")
    listed = [msg]
    assert _ref(listed, listed) == REF_VALUE + b"c"
    assert _ref([msg], [HumanMessage(content="h"), msg]) == REF_TAIL + b"1:c"
    assert _ref(msg, [msg]) == REF_LAST + b"c"
    assert _ref([AIMessage(content="x", id="1")], [msg]) is None  # equal, not same
    assert _ref(5, 6) is None
    assert _ref([], [msg]) is None
    child, take = parse_ref(REF_TAIL + b"2:abc")
    assert child == "abc" and take([1, 2, 3]) == [2, 3]
    with pytest.raises(ValueError):
        parse_ref(REF_TAIL + b"0:abc")


def test_write_rows_without_values_stores_bytes():
    rows = write_rows([("n", 5), ("__interrupt__", [])], "t", {"__interrupt__": -3},
                      lambda v, path="": repr(v).encode())
    assert rows == [("t", 0, "n", b"5"), ("t", -3, "__interrupt__", b"[]")]


class Kept(TypedDict, total=False):
    objs: list[dict[str, int]]
    messages: Annotated[list[Any], add_messages]
    n: int


def test_an_item_edited_in_place_later_does_not_change_what_history_shows(any_backend):
    """A node that keeps the list it wrote and edits an item of it later (against the
    rules, but it runs): the earlier step's pending write and ``result`` still show the
    value written, as LangGraph's savers (and these writes before they were references)."""
    kept: dict[str, Any] = {}

    def a(s: Kept) -> dict[str, Any]:
        kept["objs"] = [{"x": 1}]
        kept["msg"] = AIMessage(content="first", id="m1")
        return {"objs": kept["objs"], "messages": [kept["msg"]]}

    def b(s: Kept) -> dict[str, Any]:
        kept["objs"][0]["x"] = 99
        kept["msg"].content = "edited"
        return {"n": 1}

    g = StateGraph(Kept)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    graph = g.compile(checkpointer=any_backend)
    graph.invoke({"n": 0}, CFG)
    snap = next(s for s in graph.get_state_history(CFG) if s.next == ("a",))
    result = next(t.result for t in snap.tasks if t.name == "a")
    assert result["objs"] == [{"x": 1}]
    assert [m.content for m in result["messages"]] == ["first"]
    saved = {w.channel: w.value for w in any_backend.get_tuple(snap.config).pending_writes}
    assert saved["objs"] == [{"x": 1}] and saved["messages"][0].content == "first"


def test_in_memory_a_step_of_one_plain_write_adds_no_object_to_the_store():
    """InMemoryCheckpointer keeps such a write as the id of the checkpoint saved with it
    (an existing str) and names task and channel inside that checkpoint's row."""
    from threadloom import InMemoryCheckpointer
    from threadloom.checkpoint.memory_rows import (
        checkpoint_lone,
        pack_checkpoint,
        unpack_checkpoint,
    )

    cp = InMemoryCheckpointer()
    graph = _run(cp)
    space = cp._data["refs"][""]
    number = next(s for s in graph.get_state_history(CFG) if s.next == ("number",))
    parent = number.config["configurable"]["checkpoint_id"]
    child = space.writes[parent]
    assert type(child) is str and child in space.checkpoints
    task = number.tasks[0].id
    assert checkpoint_lone(space.checkpoints[child]) == f"{task}\x00n\x00v".encode()
    # so is a step that appended to a list through its reducer (two messages, then one)
    for node, ref in (("reply", b"t2:"), ("bare", b"l")):
        snap = next(s for s in graph.get_state_history(CFG) if s.next == (node,))
        kept = space.writes[snap.config["configurable"]["checkpoint_id"]]
        assert type(kept) is str
        assert checkpoint_lone(space.checkpoints[kept]) == (
            f"{snap.tasks[0].id}\x00messages\x00".encode() + ref)
    # the input's writes (put_writes) are one tuple of atoms, no dict
    first = next(s for s in graph.get_state_history(CFG) if s.metadata["source"] == "input")
    written = space.writes[first.config["configurable"]["checkpoint_id"]]
    assert type(written) is tuple and written[0] == "" and written[2] == "messages"
    # another write against the same checkpoint keeps the first (the dict form)
    with cp._tx(True) as tx:
        tx.insert_writes("refs", "", parent, [("other", 0, "items", b'["z"]')])
    saved = cp.get_tuple(number.config).pending_writes
    assert [(w.task_id, w.channel, w.value) for w in saved] == [
        (task, "n", 7), ("other", "items", ["z"])]
    # the row layout round-trips, deflated (a large row) or not
    for record in (b"r", b"r" * 5000):
        row = pack_checkpoint("p", record, b"m", b"t\x00c")
        assert unpack_checkpoint(row) == ("p", record, b"m") and checkpoint_lone(row) == b"t\x00c"
    assert checkpoint_lone(pack_checkpoint(None, b"r", b"m")) == b""


def _counting_graph(cp: Any, usage: dict[str, int]) -> Any:
    """One node writing a reducer counter (an int), a dict tally it keeps a handle on, a
    float, a str and one message: several writes, none of them the key's new value."""

    class Tally(TypedDict, total=False):
        steps: Annotated[int, lambda a, b: (a or 10) + b]
        usage: Annotated[dict[str, int], lambda a, b: {**(a or {}), **b}]
        ratio: Annotated[float, lambda a, b: b * 2]
        label: Annotated[str, lambda a, b: (a or "") + b + "!"]
        messages: Annotated[list[Any], add_messages]

    def count(s: Tally) -> dict[str, Any]:
        return {"steps": 1, "usage": usage, "ratio": 0.25, "label": "x",
                "messages": [AIMessage(content="hi", id="a1")]}

    g = StateGraph(Tally)
    g.add_node("count", count)
    g.add_edge(START, "count")
    g.add_edge("count", END)
    return g.compile(checkpointer=cp)


def test_in_memory_other_lone_writes_keep_immutable_values_as_they_are():
    """InMemoryCheckpointer keeps a step's ints, floats, strs and small dicts of them as
    values (a dict copied), encoding them only when read: what is read back is what was
    written, even if the node changes its dict afterwards; with an encrypted codec every
    write is stored as the codec's bytes."""
    from threadloom import InMemoryCheckpointer
    from threadloom.checkpoint.serde import Codec

    for codec, kept in ((None, True), (Codec(encrypt=lambda b: b[::-1],
                                             decrypt=lambda b: b[::-1]), False)):
        cp = InMemoryCheckpointer(codec=codec)
        usage = {"input_tokens": 3}
        graph = _counting_graph(cp, usage)
        graph.invoke({"messages": []}, CFG)
        usage["input_tokens"] = 99  # the node's own dict, changed after its step
        snap = next(s for s in graph.get_state_history(CFG) if s.next == ("count",))
        parent = snap.config["configurable"]["checkpoint_id"]
        found = cp._data["refs"][""].writes[parent]
        child = graph.get_state(CFG).config["configurable"]["checkpoint_id"]
        assert type(found) is tuple and found[:2] == (child, snap.tasks[0].id)
        stored = dict(zip(found[2::2], found[3::2], strict=True))
        assert (stored["steps"] == 1 and stored["usage"] == {"input_tokens": 3}
                and stored["usage"] is not usage) is kept
        assert stored["messages"] == b"\x00t1:"  # a reference, its child named once
        saved = {w.channel: w.value for w in cp.get_tuple(snap.config).pending_writes}
        assert saved["steps"] == 1 and saved["usage"] == {"input_tokens": 3}
        assert saved["ratio"] == 0.25 and saved["label"] == "x"
        assert [m.content for m in saved["messages"]] == ["hi"]
        assert snap.tasks[0].result["usage"] == {"input_tokens": 3}
        # a later put_writes against the same checkpoint adds to the kept writes
        with cp._tx(True) as tx:
            tx.insert_writes("refs", "", parent, [("other", 0, "label", cp.codec.dumps("z"))])
        again = [(w.task_id, w.channel, w.value) for w in cp.get_tuple(snap.config).pending_writes]
        assert again[-1] == ("other", "label", "z") and len(again) == 6
        assert (snap.tasks[0].id, "usage", {"input_tokens": 3}) in again
