"""What every route reaches: the server's parts, built once per app (``ServerState``),
and the small helpers routes share (the caller's owner id, the thread's graph)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from threadloom.server.assistants_store import Assistants
from threadloom.server.auth import ANONYMOUS, Authenticate, Principal
from threadloom.server.db import Database
from threadloom.server.eventlog import DEFAULT_MAX_EVENT_BYTES, EventLog
from threadloom.server.graphs import Assistant
from threadloom.server.http import DEFAULT_MAX_BODY, ApiError, not_found
from threadloom.server.runs import RunManager
from threadloom.server.runs_store import Runs
from threadloom.server.threads_store import Threads


@dataclass
class Limits:
    """Limits: request bodies and single stream events, in bytes; event age; a run's
    time (seconds; None: no limit), LangGraph's ``BG_JOB_TIMEOUT_SECS`` (one day)."""

    max_body_bytes: int = DEFAULT_MAX_BODY
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    event_ttl_s: float = 7 * 24 * 3600.0
    run_timeout_s: float | None = 86400.0


@dataclass
class ServerState:
    """The parts of one server (see ``app.create_app``)."""

    assistants: Assistants
    db: Database
    checkpointer: Any
    threads: Threads
    runs: Runs
    log: EventLog
    manager: RunManager
    authenticate: Authenticate | None = None
    limits: Limits = field(default_factory=Limits)
    cors_origins: list[str] = field(default_factory=list)


def server(request: Request) -> ServerState:
    """The ``ServerState`` of the app serving ``request``."""
    return request.app.state.threadloom  # type: ignore[no-any-return]


def principal(request: Request) -> Principal:
    """The authenticated caller (set by the auth middleware)."""
    return request.scope.get("threadloom.principal", ANONYMOUS)  # type: ignore[no-any-return]


def owner(request: Request) -> str:
    """The caller's owner id: what it makes is its own."""
    return principal(request).identity


async def thread_or_404(request: Request, thread_id: str) -> dict[str, Any]:
    """The caller's thread.

    Raises:
        ApiError: 404 naming it (also when another principal owns it).
    """
    thread = await server(request).threads.get(owner(request), thread_id)
    if thread is None:
        raise not_found("Thread", thread_id)
    return thread


def thread_assistant(state: ServerState, thread: dict[str, Any]) -> Assistant | None:
    """The assistant whose graph a thread ran (its ``graph_id`` metadata); the only one
    served when the thread never ran; None when that is ambiguous."""
    graph_id = (thread.get("metadata") or {}).get("graph_id")
    if graph_id is not None:
        found = state.assistants.by_graph.get(graph_id)
        if found is None:
            raise ApiError(409, f"thread {thread['thread_id']} belongs to graph {graph_id!r}, "
                                "which this server does not serve")
        return found
    if len(state.assistants.by_graph) == 1:
        return next(iter(state.assistants.by_graph.values()))
    return None
