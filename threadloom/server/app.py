"""The ASGI application: routes, auth, CORS, error answers, and the server's lifetime.

``create_app`` wires the parts (assistants, the database and event log, the run manager
on its queue) into a Starlette app. Starting it recovers the runs a crash left behind and
starts pruning old events; stopping it stops the runs (they are recovered at the next
start) and writes the pending events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from threadloom.server import (
    routes_assistants,
    routes_meta,
    routes_openai,
    routes_runs,
    routes_threads,
)
from threadloom.server.assistants_store import Assistants
from threadloom.server.auth import Authenticate, authenticate, scope_for
from threadloom.server.db import Database
from threadloom.server.eventlog import EventLog
from threadloom.server.guard import GuardMiddleware
from threadloom.server.http import JSON, ApiError, error_response
from threadloom.server.queue import LocalRunQueue, RunQueue
from threadloom.server.runs import RunManager
from threadloom.server.runs_store import Runs
from threadloom.server.state import Limits, ServerState
from threadloom.server.threads_store import Threads

log = logging.getLogger("threadloom.server")
PRUNE_EVERY_S = 600.0


class AuthMiddleware:
    """Authenticates each HTTP request and checks the scope its route needs."""

    def __init__(self, app: ASGIApp, hook: Authenticate | None) -> None:
        self.app = app
        self.hook = hook

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.hook is None:
            await self.app(scope, receive, send)
            return
        need = scope_for(scope["method"], scope["path"])
        if need is None or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", ())}
        try:
            who = await authenticate(self.hook, headers)
        except Exception:
            log.exception("the authenticate hook failed")
            who = None
        if who is None:
            answer = JSON({"detail": "Missing or invalid API key"}, status_code=401,
                          headers={"WWW-Authenticate": "Bearer"})
        elif not who.allows(need):
            answer = JSON({"detail": f"this key lacks the scope {need!r}"}, status_code=403)
        else:
            scope["threadloom.principal"] = who
            await self.app(scope, receive, send)
            return
        await answer(scope, receive, send)


async def _api_error(request: Request, exc: Exception) -> Response:
    err = exc if isinstance(exc, ApiError) else ApiError(500, "Internal error")
    return error_response(err)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    detail = getattr(exc, "detail", "error")
    return JSON({"detail": detail}, status_code=status, headers=getattr(exc, "headers", None))


async def _crash(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path,
                  exc_info=exc)
    return JSON({"detail": f"Internal error: {type(exc).__name__}"}, status_code=500)


def create_app(assistants: Assistants, checkpointer: Any, db: Database, *,
               authenticate_hook: Authenticate | None = None, limits: Limits | None = None,
               cors_origins: list[str] | None = None, queue: RunQueue | None = None,
               close_on_exit: bool = True, loopback: bool = False) -> Starlette:
    """The server's ASGI app.

    Args:
        assistants: the served graphs (compiled on ``checkpointer``).
        checkpointer: where threads' checkpoints live.
        db: the server's tables (threads, runs, events).
        authenticate_hook: who is calling (``auth.KeyAuth`` or a custom hook); None
            lets everyone in as the anonymous principal.
        limits: body and event size limits, event retention, the run timeout.
        cors_origins: origins allowed by CORS (none: CORS off).
        queue: the run queue (default: ``LocalRunQueue``).
        close_on_exit: close ``db`` and ``checkpointer`` when the app stops.
        loopback: the server listens on a loopback address: requests whose ``Host`` is
            not a loopback name are refused (DNS rebinding; see ``guard.py``).
    """
    limits = limits or Limits()
    assistants.bind(db)
    log_ = EventLog(db, max_event_bytes=limits.max_event_bytes)
    threads, runs = Threads(db), Runs(db)
    manager = RunManager(assistants, threads, runs, log_, queue or LocalRunQueue(),
                         run_timeout_s=limits.run_timeout_s)
    state = ServerState(assistants, db, checkpointer, threads, runs, log_, manager,
                        authenticate_hook, limits, list(cors_origins or []))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        recovered = await manager.recover()
        if recovered:
            log.warning("recovered %d run(s) left unfinished by the last server", recovered)
        pruner = asyncio.ensure_future(_prune_loop(log_, limits.event_ttl_s))
        try:
            yield
        finally:
            pruner.cancel()
            await manager.close()
            await log_.stop()
            if close_on_exit:
                db.close()
                with contextlib.suppress(Exception):
                    checkpointer.close()

    middleware = [Middleware(GuardMiddleware, origins=list(cors_origins or []),
                             loopback=loopback),
                  Middleware(AuthMiddleware, hook=authenticate_hook)]
    if cors_origins:
        middleware.insert(0, Middleware(CORSMiddleware, allow_origins=list(cors_origins),
                                        allow_methods=["*"], allow_headers=["*"],
                                        expose_headers=["Location", "Content-Location"]))
    # runs first: a stream request is matched without trying every other route first
    routes = [*routes_meta.NOT_SERVED, *routes_runs.ROUTES, *routes_meta.ROUTES,
              *routes_assistants.ROUTES, *routes_threads.ROUTES, *routes_openai.ROUTES]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={ApiError: _api_error, HTTPException: _http_error,
                                        Exception: _crash})
    app.state.threadloom = state
    return app


async def _prune_loop(log_: EventLog, ttl_s: float) -> None:
    while True:
        try:
            await log_.prune(ttl_s)
        except Exception:
            log.exception("pruning old events failed")
        await asyncio.sleep(PRUNE_EVERY_S)
