"""``/ok``, ``/info``, ``/openapi.json``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from threadloom.server.http import JSON
from threadloom.server.openapi import _version, openapi

_SPEC: dict[str, object] = {}


async def ok(request: Request) -> Response:
    """``GET /ok``: the server is up."""
    return JSON({"ok": True})


async def info(request: Request) -> Response:
    """``GET /info``: version and features (no store, no crons yet)."""
    return JSON({"version": _version(), "server": "threadloom",
                 "flags": {"assistants": True, "crons": False, "store": False,
                           "langsmith": False}})


async def spec(request: Request) -> Response:
    """``GET /openapi.json``."""
    if not _SPEC:
        _SPEC.update(openapi())
    return JSON(_SPEC)


async def not_served(request: Request) -> Response:
    """A path of LangGraph's API that threadloom does not serve yet (a thread's crons):
    404 ``{"detail": "Not Found"}``, as every other unknown path (not 405 from the run
    routes whose pattern it matches)."""
    return JSON({"detail": "Not Found"}, status_code=404)


# matched before the run routes; not API routes, so not in the OpenAPI description
NOT_SERVED = [Route("/threads/{thread_id}/runs/crons", not_served,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"])]

ROUTES = [
    Route("/ok", ok, methods=["GET"]),
    Route("/info", info, methods=["GET"]),
    Route("/openapi.json", spec, methods=["GET"]),
]
