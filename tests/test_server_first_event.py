"""The path from a stream request to its first event, on the real server: a run is
admitted in one transaction of the server's SQLite tables (the assistant, the thread
claimed busy, the run's row), the first thing the request writes; its events are
written later, in batches."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from langgraph_sdk import get_sync_client
from server_harness import GRAPHS, free_port, wait_up

from threadloom.server.config import ServerConfig
from threadloom.server.serve import open_app

pytestmark = pytest.mark.xdist_group("server")


@contextlib.contextmanager
def traced_server(tmp_path) -> Iterator[tuple[str, list[str]]]:
    """The real server with every statement on its own tables recorded, in order."""
    port = free_port()
    app = open_app(ServerConfig(graphs=GRAPHS, db=str(tmp_path / "s.db"), port=port))
    statements: list[str] = []
    app.state.threadloom.db._conn.set_trace_callback(statements.append)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url)
        yield url, statements
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def _transactions(statements: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    for sql in statements:
        if sql.startswith("BEGIN"):
            out.append([])
        elif sql != "COMMIT" and out:
            out[-1].append(" ".join(sql.split()))
    return out


def test_a_run_is_admitted_in_one_transaction(tmp_path):
    with traced_server(tmp_path) as (url, statements):
        client = get_sync_client(url=url, api_key=None)
        tid = client.threads.create()["thread_id"]
        before = len(statements)
        with httpx.stream("POST", f"{url}/threads/{tid}/runs/stream",
                          json={"assistant_id": "echo",
                                "input": {"messages": [["user", "a"]]}}) as answer:
            lines = answer.iter_lines()
            first = next(lines)
            seen = len(statements)  # what the server did before the first event left
            rest = list(lines)
        assert first == "event: metadata"
        assert any("event: values" in line for line in rest)
        admitted = [_head(s) for s in _transactions(statements[before:seen])[0]]
        assert admitted == ["SELECT FROM tl_srv_assistants", "SELECT FROM tl_srv_threads",
                            "UPDATE tl_srv_threads", "INSERT INTO tl_srv_runs"]
        assert "status = 'busy'" in _transactions(statements[before:seen])[0][2]
        assert statements[before].startswith("BEGIN")  # the request's first write is it

        stateless = len(statements)
        client.runs.wait(None, "echo", input={"messages": [("user", "b")]})
        made = next(t for t in ([_head(s) for s in tx] for tx in _transactions(
            statements[stateless:])) if "INSERT INTO tl_srv_runs" in t)
        assert made == ["SELECT FROM tl_srv_assistants", "INSERT INTO tl_srv_threads",
                        "SELECT FROM tl_srv_threads", "UPDATE tl_srv_threads",
                        "INSERT INTO tl_srv_runs"]


def _head(sql: str) -> str:
    """``SELECT FROM table`` / ``UPDATE table`` / ``INSERT INTO table`` of a statement."""
    words = sql.split()
    if words[0] == "SELECT":
        return "SELECT FROM " + words[words.index("FROM") + 1]
    if words[0] == "UPDATE":
        return "UPDATE " + words[1]
    return " ".join(words[:3])
