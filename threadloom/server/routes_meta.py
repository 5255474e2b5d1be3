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


ROUTES = [
    Route("/ok", ok, methods=["GET"]),
    Route("/info", info, methods=["GET"]),
    Route("/openapi.json", spec, methods=["GET"]),
]
