"""H26 through the engine: values written by a node keep their exact types after a reopen."""

from __future__ import annotations

import datetime as dt
import enum
from typing import TypedDict

import pytest
from pydantic import BaseModel

from threadloom import START, StateGraph


class Color(enum.Enum):
    RED = "red"


class Mode(enum.StrEnum):
    FAST = "fast"


class Item(BaseModel):
    when: dt.datetime
    color: Color
    tags: list[str]


class S(TypedDict, total=False):
    mode: Mode
    item: Item
    at: dt.datetime
    d: dt.date


AT = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def write(state: S) -> dict:
    return {"mode": Mode.FAST, "item": Item(when=AT, color=Color.RED, tags=["a"]),
            "at": AT, "d": dt.date(2026, 11, 30)}


def graph(cp):
    g = StateGraph(S)
    g.add_node("write", write)
    g.add_edge(START, "write")
    return g.compile(checkpointer=cp)


def _check(values):
    assert type(values["mode"]) is Mode
    assert type(values["item"]) is Item and values["item"].color is Color.RED
    assert values["at"] == AT and values["at"].utcoffset() == dt.timedelta(0)
    assert type(values["d"]) is dt.date


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_types_survive_a_new_checkpointer_instance(backend, tmp_path, thread_id):
    if backend == "sqlite":
        from threadloom import SqliteCheckpointer

        def make():
            return SqliteCheckpointer(str(tmp_path / "h26.db"))
    else:
        from conftest import PG_CONNINFO

        from threadloom.checkpoint.postgres import PostgresCheckpointer

        schema = "h26_" + thread_id.replace("-", "_")

        def make():
            return PostgresCheckpointer(PG_CONNINFO, schema=schema)

    first = make()
    graph(first).invoke({}, thread_id=thread_id)
    first.close()
    second = make()
    app = graph(second)
    _check(app.get_state(thread_id=thread_id).values)
    app.update_state({"configurable": {"thread_id": thread_id}}, {"mode": Mode.FAST})
    _check(app.get_state(thread_id=thread_id).values)
    if backend == "postgres":
        with second._pool.connection() as conn:  # noqa: SLF001 - clean the test schema
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    second.close()
