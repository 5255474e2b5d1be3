"""Bad inputs a new user hits: each gets a clear error naming what was wrong and where.

Valid LangGraph programs keep working (the ``valid`` tests: a float recursion limit,
``None`` configs, int thread ids).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import TypedDict

import pytest

from threadloom import END, START, Command, InMemoryCheckpointer, StateGraph
from threadloom.agent import create_agent
from threadloom.checkpoint.sqlite import SqliteCheckpointer
from threadloom.errors import CheckpointError
from threadloom.models import ScriptedChatModel
from threadloom.tools import tool


class S(TypedDict):
    n: int


def _inc(state: S) -> dict:
    return {"n": state["n"] + 1}


def _builder() -> StateGraph:
    b = StateGraph(S)
    b.add_node("inc", _inc)
    b.add_edge(START, "inc")
    b.add_edge("inc", END)
    return b


@tool
def add(a: int, b: int) -> int:
    """Add two ints."""
    return a + b


# -- 1. exit conditions ----------------------------------------------------------------------

def test_unknown_exit_condition_is_reported_at_build(caplog: pytest.LogCaptureFixture) -> None:
    """Haystack (since #11557) keeps an exit condition naming no configured tool (a tool
    may be given at run time), so it is not refused; it is reported at once, by name."""
    with caplog.at_level(logging.WARNING, logger="threadloom.agent"):
        create_agent(ScriptedChatModel(["hi"]), [add], exit_conditions=["nope"])
    text = caplog.text
    assert "'nope'" in text and "'add'" in text and "'text'" in text and "run time" in text


def test_known_exit_conditions_are_quiet(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="threadloom.agent"):
        create_agent(ScriptedChatModel(["hi"]), [add], exit_conditions=["text", "add"])
    assert "exit_conditions" not in caplog.text


def test_exit_condition_of_a_run_time_tool_still_works() -> None:
    """As Haystack's ``test_exit_condition_on_tool_provided_at_runtime``."""
    model = ScriptedChatModel([{"tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}}]}])
    agent = create_agent(model, [], exit_conditions=["add"], max_agent_steps=5)
    out = agent.invoke({"messages": [("user", "1+2?")]}, tools=[add])
    assert out["exit_reason"] == "add"


# -- 2. thread ids ---------------------------------------------------------------------------

@pytest.mark.parametrize("tid", [None, ""])
def test_config_thread_id_none_or_empty_is_refused(tid: object) -> None:
    app = _builder().compile(checkpointer=InMemoryCheckpointer())
    with pytest.raises(CheckpointError, match="every run needs a thread id"):
        app.invoke({"n": 1}, {"configurable": {"thread_id": tid}})
    with pytest.raises(CheckpointError, match="every run needs a thread id"):
        app.invoke({"n": 1}, thread_id=tid)  # type: ignore[arg-type]
    assert app.checkpointer.list_threads() == []  # type: ignore[union-attr]


def test_int_thread_id_still_works() -> None:
    app = _builder().compile(checkpointer=InMemoryCheckpointer())
    assert app.invoke({"n": 1}, {"configurable": {"thread_id": 7}}) == {"n": 2}
    assert app.get_state({"configurable": {"thread_id": "7"}}).values == {"n": 2}


# -- 3. durability ---------------------------------------------------------------------------

def test_bad_durability_at_compile() -> None:
    with pytest.raises(ValueError, match=r"durability='bogus'.*sync.*async.*exit"):
        _builder().compile(durability="bogus")  # type: ignore[arg-type]


def test_bad_durability_at_run() -> None:
    app = _builder().compile(checkpointer=InMemoryCheckpointer())
    with pytest.raises(ValueError, match=r"durability='never'.*sync.*async.*exit"):
        app.invoke({"n": 1}, thread_id="t", durability="never")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"durability='never'"):
        list(app.stream({"n": 1}, thread_id="t", durability="never"))  # type: ignore[arg-type]
    assert app.invoke({"n": 1}, thread_id="t", durability="exit") == {"n": 2}


# -- 4. malformed configs --------------------------------------------------------------------

@pytest.mark.parametrize("config", ["t1", [1, 2], 5])
def test_config_not_a_dict(config: object) -> None:
    app = _builder().compile()
    with pytest.raises(TypeError, match=r"config must be a dict like \{'configurable'"):
        app.invoke({"n": 1}, config)  # type: ignore[arg-type]


def test_configurable_not_a_dict() -> None:
    app = _builder().compile(checkpointer=InMemoryCheckpointer())
    with pytest.raises(TypeError, match=r"config\['configurable'\] must be a dict.*'t1'"):
        app.invoke({"n": 1}, {"configurable": "t1"})


@pytest.mark.parametrize("limit", ["abc", "5", [3]])
def test_recursion_limit_not_a_number(limit: object) -> None:
    """LangGraph raises a bare ``TypeError`` for these too ('<' not supported...)."""
    app = _builder().compile()
    with pytest.raises(TypeError, match=r"recursion_limit must be an int, got " + repr(limit)
                       .replace("[", r"\[").replace("]", r"\]")):
        app.invoke({"n": 1}, {"recursion_limit": limit})
    with pytest.raises(TypeError, match=r"recursion_limit must be an int"):
        app.invoke({"n": 1}, recursion_limit=limit)  # type: ignore[arg-type]


def test_valid_configs_still_work() -> None:
    app = _builder().compile()
    assert app.invoke({"n": 1}, None) == {"n": 2}
    assert app.invoke({"n": 1}, {"configurable": None}) == {"n": 2}
    assert app.invoke({"n": 1}, {"recursion_limit": None}) == {"n": 2}
    assert app.invoke({"n": 1}, {"recursion_limit": 5.0}) == {"n": 2}  # as LangGraph


# -- 5. resume on an unknown thread ----------------------------------------------------------

def test_resume_on_a_thread_without_a_paused_run_names_it() -> None:
    app = _builder().compile(checkpointer=InMemoryCheckpointer())
    with pytest.raises(Exception, match=r"thread 'never'"):
        app.invoke(Command(resume="x"), {"configurable": {"thread_id": "never"}})


# -- 6. corrupt SQLite -----------------------------------------------------------------------

def test_corrupt_sqlite_file_is_named(tmp_path) -> None:
    path = tmp_path / "g.db"
    path.write_bytes(b"x" * 2000)
    with pytest.raises(CheckpointError, match=r"g\.db.* is not a SQLite database") as info:
        SqliteCheckpointer(path)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError) or info.value.__cause__ is None
    with pytest.raises(CheckpointError, match=r"g\.db"):
        SqliteCheckpointer(path, read_only=True)


def test_corrupt_pages_behind_a_good_header_are_named(tmp_path) -> None:
    path = tmp_path / "h.db"
    SqliteCheckpointer(path).close()
    data = bytearray(path.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"h\.db"):
        SqliteCheckpointer(path)


def test_corrupt_blob_names_thread_checkpoint_and_channel(tmp_path) -> None:
    import operator
    from typing import Annotated

    from threadloom.errors import SerializationError

    class L(TypedDict):
        log: Annotated[list, operator.add]

    b = StateGraph(L)
    b.add_node("a", lambda s: {"log": ["x"]})
    b.add_edge(START, "a")
    b.add_edge("a", END)
    path = tmp_path / "b.db"
    cp = SqliteCheckpointer(path)
    b.compile(checkpointer=cp).invoke({"log": []}, thread_id="t1")
    cp.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE tl_blobs SET data = X'7b7b7b'")
    cp = SqliteCheckpointer(path)
    try:
        with pytest.raises(SerializationError) as info:
            b.compile(checkpointer=cp).get_state(thread_id="t1")
        notes = " ".join(info.value.__notes__)
        assert "thread 't1'" in notes and "channel 'log'" in notes and "checkpoint '" in notes
    finally:
        cp.close()


def test_batch_with_a_string_config() -> None:
    app = _builder().compile()
    with pytest.raises(TypeError, match=r"config must be a dict like .*got str 't1'"):
        app.batch([{"n": 1}, {"n": 2}], "t1")  # type: ignore[arg-type]
    assert app.batch([{"n": 1}, {"n": 2}], [None, {"recursion_limit": 5}]) == [{"n": 2}, {"n": 3}]
