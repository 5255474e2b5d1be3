"""The server on PostgreSQL (its own schema, dropped after): a conversation, an
interrupt resumed, a replay by Last-Event-ID."""

from __future__ import annotations

import uuid

import pytest
from conftest import PG_CONNINFO
from langgraph_sdk import get_client
from server_harness import running

pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("server")]


@pytest.fixture
def pg_conninfo():
    psycopg = pytest.importorskip("psycopg")
    schema = f"tl_srv_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in PG_CONNINFO else "?"
    try:
        yield f"{PG_CONNINFO}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # ours, ^tl_srv_


async def test_conversation_on_postgres(tmp_path, pg_conninfo):
    with running(tmp_path, postgres=pg_conninfo) as url:
        client = get_client(url=url, api_key=None)
        thread = await client.threads.create(metadata={"pg": True})
        tid = thread["thread_id"]
        out = await client.runs.wait(tid, "echo", input={"messages": [("user", "hi")]})
        assert out["messages"][-1]["content"] == "echo: hi"
        # another graph on the same thread is refused (it would drop the thread's keys)
        tid = (await client.threads.create())["thread_id"]
        parts = [p async for p in client.runs.stream(tid, "human", input={"text": "p"},
                                                     stream_mode="updates",
                                                     stream_resumable=True)]
        rest = [p async for p in client.runs.join_stream(tid, parts[0].data["run_id"],
                                                         last_event_id=parts[0].id)]
        assert [p.id for p in rest] == [p.id for p in parts[1:]]
        out = await client.runs.wait(tid, "human", command={"resume": "y"})
        assert out["answer"] == "y"
        assert await client.threads.count(metadata={"pg": True}) == 1
