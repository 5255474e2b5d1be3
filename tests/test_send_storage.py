"""``Send`` packets put only their own argument into the checkpoint, never the state.

A fan-out of 20 ``Send`` packets over a state holding 1 MB: the checkpoint that plans the
packets stores each packet's small argument, the state's big value is stored once for the
whole thread, and the workers' saved writes hold only their own updates.
"""

from __future__ import annotations

import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

from threadloom import START, Send, StateGraph
from threadloom.checkpoint.sqlite import SqliteCheckpointer

BIG = 1_000_000
PACKETS = 20


class S(TypedDict):
    big: str
    results: Annotated[list, operator.add]


def fan_out_app(cp: Any, **compile_kw: Any) -> Any:
    g = StateGraph(S)
    g.add_node("fan", lambda s: {"results": ["fanned"]})
    g.add_node("worker", lambda arg: {"results": [arg["i"] * 2]})
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", lambda s: [Send("worker", {"i": i}) for i in range(PACKETS)])
    return g.compile(checkpointer=cp, **compile_kw)


def rows(path: str, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_a_planned_fan_out_stores_only_the_packet_args(tmp_path: Path) -> None:
    path = str(tmp_path / "send.db")
    cp = SqliteCheckpointer(path)
    app = fan_out_app(cp, interrupt_before=["worker"])
    app.invoke({"big": "x" * BIG, "results": []}, thread_id="t")
    saved = cp.get_tuple({"configurable": {"thread_id": "t"}})
    assert saved.checkpoint["next"] == [{"node": "worker", "arg": {"i": i}}
                                        for i in range(PACKETS)]
    # the packets as stored: a few bytes each, nothing of the state
    next_bytes = len(cp.codec.dumps(saved.checkpoint["next"]))
    assert next_bytes < 40 * PACKETS, next_bytes
    cid = saved.config["configurable"]["checkpoint_id"]
    [(record_bytes,)] = rows(path, f"SELECT length(record) FROM tl_checkpoints "  # noqa: S608
                                   f"WHERE checkpoint_id = '{cid}'")
    assert record_bytes < 2_000, record_bytes
    # the big value is stored once (by the input checkpoint), not again for the fan-out
    big_blobs = rows(path, "SELECT bid, length(data) FROM tl_blobs WHERE channel = 'big'")
    assert len(big_blobs) == 1
    total = rows(path, "SELECT (SELECT sum(length(record)) FROM tl_checkpoints) + "
                       "(SELECT sum(length(data)) FROM tl_blobs)")[0][0]
    assert total < big_blobs[0][1] + 10_000, total

    out = app.invoke(None, thread_id="t")
    assert out["results"] == ["fanned", *[i * 2 for i in range(PACKETS)]]
    # the workers' writes (saved one by one as each finished) hold their updates only
    # (the input is kept whole as the START task's pending write, as LangGraph keeps it)
    [(writes_bytes, n_writes)] = rows(
        path, "SELECT sum(length(value)), count(*) FROM tl_writes WHERE channel != 'big'")
    assert n_writes >= PACKETS
    assert writes_bytes < 100 * n_writes, writes_bytes
    cp.close()


def test_a_resumed_fan_out_rebuilds_each_packet_from_its_stored_arg(tmp_path: Path) -> None:
    cp = SqliteCheckpointer(str(tmp_path / "send2.db"))
    fan_out_app(cp, interrupt_before=["worker"]).invoke(
        {"big": "y" * BIG, "results": []}, thread_id="t")
    cp.close()
    cp = SqliteCheckpointer(str(tmp_path / "send2.db"))  # a new process would do the same
    out = fan_out_app(cp).invoke(None, thread_id="t")
    assert out["results"] == ["fanned", *[i * 2 for i in range(PACKETS)]]
    assert len(out["big"]) == BIG
    cp.close()
