"""The two sides of the cost curves (curves.py): threadloom and LangGraph, behind one face.

Both engines spell a graph the same way (``StateGraph``, ``START``, ``END``, ``Send``), so
each curve is written once against a :class:`Side`; only the checkpointers, the streaming
chat model and the PostgreSQL connection differ, and those are the methods here. Peer
packages are imported inside the functions, so this module imports without them.

``PgTrace`` counts what a PostgreSQL connection sends, from libpq's own protocol trace
(``PQtrace``): statements (simple ``Query`` and extended-protocol ``Execute`` messages,
``BEGIN`` and ``COMMIT`` included) and round trips (``ReadyForQuery`` replies: one per
``Sync`` or simple query, so a pipelined batch is one). The counts are deterministic.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PG_URL = os.environ.get("THREADLOOM_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


class PgTrace:
    """libpq protocol trace of one connection, counted (a context manager).

    Args:
        pgconn: a psycopg ``Connection.pgconn``.
    """

    def __init__(self, pgconn: Any) -> None:
        self.pgconn = pgconn
        self.statements = 0
        self.round_trips = 0

    def __enter__(self) -> PgTrace:
        self._file = tempfile.TemporaryFile("w+")
        self.pgconn.trace(self._file.fileno())
        return self

    def __exit__(self, *exc: object) -> None:
        self.pgconn.untrace()
        self._file.flush()
        self._file.seek(0)
        for line in self._file:
            parts = line.split("\t")
            if len(parts) < 4:
                continue
            way, kind = parts[1], parts[3].strip()
            if way == "F" and kind in ("Query", "Execute"):
                self.statements += 1
            elif way == "B" and kind == "ReadyForQuery":
                self.round_trips += 1
        self._file.close()


@dataclass
class Side:
    """One engine's graph API and the checkpointers the curves use."""

    name: str
    StateGraph: Any  # noqa: N815 - the engines' own spelling
    START: str  # noqa: N815
    END: str  # noqa: N815
    Send: Any  # noqa: N815
    memory: Callable[[], Any]
    sqlite: Callable[[str], Any]
    postgres: Callable[[], tuple[Any, Any]]  # (checkpointer, psycopg pgconn to trace)
    apostgres: Callable[[], Any]  # coroutine -> (checkpointer, pgconn, aclose)
    chat_model: Callable[[str], Any]
    run_kwargs: dict[str, Any]


# --- threadloom ------------------------------------------------------------------------


def _tl_postgres() -> tuple[Any, Any]:
    from threadloom.checkpoint.postgres import PostgresCheckpointer

    saver = PostgresCheckpointer(PG_URL, pool_size=1, schema="bench_curves")
    with saver._pool.connection() as conn:  # the pool's one connection, traced by PgTrace
        pgconn = conn.pgconn
    return saver, pgconn


async def _tl_apostgres() -> tuple[Any, Any, Callable[[], Any]]:
    saver, pgconn = _tl_postgres()

    async def aclose() -> None:
        saver.close()

    return saver, pgconn, aclose


def _tl_model(text: str) -> Any:
    from threadloom import ScriptedChatModel

    return ScriptedChatModel(lambda _messages, _tools=None: text, record_calls=False)


def threadloom_side() -> Side:
    """The threadloom side (public API, plus ``PostgresCheckpointer``)."""
    from threadloom import END, START, InMemoryCheckpointer, Send, SqliteCheckpointer, StateGraph

    return Side("threadloom", StateGraph, START, END, Send, InMemoryCheckpointer,
                SqliteCheckpointer, _tl_postgres, _tl_apostgres, _tl_model, {})


# --- LangGraph -------------------------------------------------------------------------


def _lg_postgres() -> tuple[Any, Any]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    conn = psycopg.connect(PG_URL, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = PostgresSaver(conn)
    saver.setup()
    return saver, conn.pgconn


async def _lg_apostgres() -> tuple[Any, Any, Callable[[], Any]]:
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row

    conn = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True, prepare_threshold=0,
                                                 row_factory=dict_row)
    saver = AsyncPostgresSaver(conn)
    await saver.setup()
    return saver, conn.pgconn, conn.close


def _lg_sqlite(path: str) -> Any:
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


def _lg_model(text: str) -> Any:
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(content=text)))


def langgraph_side() -> Side:
    """The LangGraph side: InMemorySaver, SqliteSaver, PostgresSaver, AsyncPostgresSaver,
    LangChain's GenericFakeChatModel; every run with ``durability="sync"`` (threadloom's
    default: each checkpoint written before the next step)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    return Side("LangGraph", StateGraph, START, END, Send, InMemorySaver, _lg_sqlite,
                _lg_postgres, _lg_apostgres, _lg_model, {"durability": "sync"})


def temp_path(name: str) -> str:
    """A path in a temporary folder that lives as long as the process."""
    folder = _TEMP.setdefault("dir", tempfile.mkdtemp(prefix="tl-curves-"))
    return str(Path(folder) / name)


_TEMP: dict[str, str] = {}
