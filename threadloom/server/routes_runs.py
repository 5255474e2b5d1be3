"""Runs: on a thread (``/threads/{id}/runs...``) and stateless (``/runs...``).

``POST .../runs`` makes a background run; ``.../runs/stream`` makes one and streams its
events over SSE; ``.../runs/wait`` makes one and answers its output. A stream's
``Location`` header names the run's join stream (``GET .../runs/{run_id}/stream``), which
replays every stored event after ``Last-Event-ID`` and follows the run live.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from threadloom.server.eventlog import parse_last_event_id, sse_frame
from threadloom.server.http import JSON, ApiError, body_as, query_bool, query_int, read_json
from threadloom.server.http import validate as validate_body
from threadloom.server.runs_store import FINISHED
from threadloom.server.schemas import CancelMany, RunCreate
from threadloom.server.sse import SSEStream
from threadloom.server.state import ServerState, owner, server, thread_or_404

PING_S = 15.0


def _paths(run: dict[str, Any]) -> dict[str, str]:
    base = f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return {"Content-Location": base, "Location": base + "/stream"}


def _wanted(modes: list[str]) -> frozenset[str] | None:
    return frozenset(modes) if modes else None


def passes(event: str, wanted: frozenset[str] | None) -> bool:
    """Whether an event belongs to the modes a join stream asked for (None: all)."""
    if wanted is None or event in ("metadata", "error", "end"):
        return True
    base = event.split("|", 1)[0]
    if base == "messages":
        return "messages-tuple" in wanted or "messages" in wanted
    if base.startswith("messages/"):
        return "messages" in wanted
    return base in wanted


async def _frames(state: ServerState, run: dict[str, Any], after: int, ids: bool,
                  wanted: frozenset[str] | None, cancel_on_disconnect: bool
                  ) -> AsyncIterator[bytes]:
    run_id = run["run_id"]
    finished = False
    try:
        async for event in state.log.read(run_id, after):
            if passes(event.event, wanted):
                yield sse_frame(event.event, event.data, event.seq if ids else None)
        finished = True
    finally:
        if not finished and cancel_on_disconnect and state.log.is_live(run_id):
            asyncio.ensure_future(state.manager.cancel_run(run_id, "interrupt"))


def _sse(state: ServerState, run: dict[str, Any], after: int, ids: bool,
         wanted: frozenset[str] | None, cancel_on_disconnect: bool) -> Response:
    return SSEStream(_frames(state, run, after, ids, wanted, cancel_on_disconnect),
                     headers=_paths(run), ping_s=PING_S)


async def _create(request: Request, stateless: bool) -> tuple[ServerState, dict[str, Any],
                                                               RunCreate]:
    state = server(request)
    body = await body_as(request, RunCreate, state.limits.max_body_bytes)
    thread_id = None if stateless else request.path_params["thread_id"]
    run = await state.manager.create(owner(request), thread_id, body)
    return state, run, body


async def create_run(request: Request) -> Response:
    """``POST /threads/{id}/runs`` and ``POST /runs``: a background run."""
    _, run, _ = await _create(request, "thread_id" not in request.path_params)
    return JSON(run, headers={"Content-Location": _paths(run)["Content-Location"]})


async def stream_run(request: Request) -> Response:
    """``POST /threads/{id}/runs/stream`` and ``POST /runs/stream``: run and stream."""
    state, run, body = await _create(request, "thread_id" not in request.path_params)
    cancel = (body.on_disconnect or "continue") == "cancel"
    return _sse(state, run, 0, body.stream_resumable, None, cancel)


async def wait_run(request: Request) -> Response:
    """``POST /threads/{id}/runs/wait`` and ``POST /runs/wait``: run, answer the output
    (the final state; ``{"__error__": ...}`` when the graph raised)."""
    state, run, body = await _create(request, "thread_id" not in request.path_params)
    try:
        output = await state.manager.wait_output(run["run_id"])
    except asyncio.CancelledError:
        if body.on_disconnect == "cancel":
            asyncio.ensure_future(state.manager.cancel_run(run["run_id"], "interrupt"))
        raise
    base = _paths(run)["Content-Location"]
    return JSON(output, headers={"Content-Location": base, "Location": base + "/join"})


async def batch_runs(request: Request) -> Response:
    """``POST /runs/batch``: several stateless background runs."""
    state = server(request)
    data = await read_json(request, state.limits.max_body_bytes)
    if not isinstance(data, list):
        raise ApiError(422, "the request body must be a JSON array of runs")
    bodies = []
    for number, item in enumerate(data[:100]):
        try:
            bodies.append(validate_body(RunCreate, item))
        except ApiError as exc:
            raise ApiError(422, f"[{number}] {exc.detail}") from exc
    runs = [await state.manager.create(owner(request), None, b) for b in bodies]
    return JSON(runs)


async def list_runs(request: Request) -> Response:
    """``GET /threads/{id}/runs``: newest first (``limit``, ``offset``, ``status``)."""
    state = server(request)
    thread = await thread_or_404(request, request.path_params["thread_id"])
    status = request.query_params.get("status") or None
    if status is not None and status not in FINISHED | {"pending", "running"}:
        raise ApiError(422, f"status: unknown run status {status!r}")
    runs = await state.runs.list(owner(request), thread["thread_id"],
                                 limit=query_int(request, "limit", 10, high=1000),
                                 offset=query_int(request, "offset", 0, high=10**9),
                                 status=status)
    return JSON(runs)


async def get_run(request: Request) -> Response:
    """``GET /threads/{id}/runs/{run_id}``."""
    p = request.path_params
    return JSON(await server(request).manager.get_run(owner(request), p["thread_id"],
                                                      p["run_id"]))


async def delete_run(request: Request) -> Response:
    """``DELETE /threads/{id}/runs/{run_id}``: a finished run and its events (409 while
    it is pending or running: cancel it first)."""
    state = server(request)
    p = request.path_params
    run = await state.manager.get_run(owner(request), p["thread_id"], p["run_id"])
    if run["status"] not in FINISHED:
        raise ApiError(409, f"Run {run['run_id']} is {run['status']}: cancel it first")
    await state.runs.delete(owner(request), p["thread_id"], p["run_id"])
    return Response(status_code=204)


async def join_run(request: Request) -> Response:
    """``GET /threads/{id}/runs/{run_id}/join``: wait for the run, answer its output."""
    state = server(request)
    p = request.path_params
    output = await state.manager.join(owner(request), p["thread_id"], p["run_id"])
    return JSON(output, headers={"Location": request.url.path})


async def join_stream(request: Request) -> Response:
    """``GET /threads/{id}/runs/{run_id}/stream``: the run's events after
    ``Last-Event-ID`` (all of them without it), live until the run ends."""
    state = server(request)
    p = request.path_params
    run = await state.manager.get_run(owner(request), p["thread_id"], p["run_id"])
    after = run_cursor(request.headers.get("last-event-id"))
    modes = [m for m in request.query_params.getlist("stream_mode") if m]
    cancel = query_bool(request, "cancel_on_disconnect")
    return _sse(state, run, after, True, _wanted(modes), cancel)


def run_cursor(value: str | None) -> int:
    """The event id a run stream's ``Last-Event-ID`` names (0: none, from the start).

    Raises:
        ApiError: 422 for anything but a decimal id (a thread stream's ``ORD-SEQ``...).
    """
    if value is None or not value.strip():
        return 0
    text = value.strip()
    after = parse_last_event_id(text)
    if after == 0 and text != "0":
        raise ApiError(422, "Last-Event-ID: expected an event id (a non-negative integer) "
                            f"of this run's stream, got {text[:40]!r}")
    return after


THREAD_MODES = frozenset({"run_modes", "lifecycle", "state_update"})
_LIFECYCLE = frozenset({"metadata", "error"})


def thread_cursor(value: str | None) -> tuple[int, int] | None:
    """The ``(run ord, event seq)`` a thread stream's ``Last-Event-ID`` names: ``ORD-SEQ``
    (the ids it sends), ``-`` for the start of the thread's first run; None when absent
    (follow the thread from its unfinished runs on).

    Raises:
        ApiError: 422 for anything else.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text == "-":
        return (0, 0)
    head, sep, tail = text.partition("-")
    if not sep or not head.isdigit() or not tail.isdigit() or len(text) > 40:
        raise ApiError(422, f"Last-Event-ID: expected ORD-SEQ or '-', got {text!r}")
    return (int(head), int(tail))


def _thread_passes(event: str, modes: frozenset[str]) -> bool:
    if "run_modes" in modes:
        return True
    if "lifecycle" in modes and event in _LIFECYCLE:
        return True
    return "state_update" in modes and event.split("|", 1)[0] == "values"


async def _thread_frames(state: ServerState, who: str, thread_id: str,
                         cursor: tuple[int, int], modes: frozenset[str]
                         ) -> AsyncIterator[bytes]:
    ord_, seq = cursor
    while True:
        waiter = state.manager.watch(thread_id)
        try:
            for run_ord, run_id in await state.runs.since(who, thread_id, ord_):
                async for event in state.log.read(run_id, seq if run_ord == ord_ else 0):
                    if _thread_passes(event.event, modes):
                        yield sse_frame(event.event, event.data, f"{run_ord}-{event.seq}")
                ord_, seq = run_ord + 1, 0  # this run is over: on with the next one
            await waiter
        finally:
            state.manager.unwatch(thread_id, waiter)


async def thread_stream(request: Request) -> Response:
    """``GET /threads/{id}/stream``: every run of the thread, one after another, as they
    run (open until the client leaves). Ids are ``ORD-SEQ``; ``Last-Event-ID`` resumes
    after one (``-``: from the thread's first run); without it the stream starts with the
    thread's unfinished runs. ``stream_mode``: ``run_modes`` (every event, the default),
    ``lifecycle`` (each run's ``metadata`` and ``error`` events), ``state_update`` (its
    ``values``)."""
    state = server(request)
    thread = await thread_or_404(request, request.path_params["thread_id"])
    modes = frozenset(m for m in request.query_params.getlist("stream_mode") +
                      request.query_params.getlist("stream_modes") if m) or {"run_modes"}
    unknown = sorted(modes - THREAD_MODES)
    if unknown:
        raise ApiError(422, f"stream_mode: unknown thread stream mode {unknown[0]!r}")
    cursor = thread_cursor(request.headers.get("last-event-id"))
    who = owner(request)
    if cursor is None:
        active = await state.runs.active(thread["thread_id"])
        first = await state.runs.since(who, thread["thread_id"], 0) if active else []
        ids = {r["run_id"] for r in active}
        start = next((o for o, rid in first if rid in ids), None)
        cursor = (start, 0) if start is not None else (time.time_ns(), 0)
    return SSEStream(_thread_frames(state, who, thread["thread_id"], cursor,
                                    frozenset(modes)), ping_s=PING_S)


async def cancel_run(request: Request) -> Response:
    """``POST /threads/{id}/runs/{run_id}/cancel`` (``action=interrupt|rollback``,
    ``wait=1`` to answer when it has stopped)."""
    state = server(request)
    p = request.path_params
    run = await state.manager.get_run(owner(request), p["thread_id"], p["run_id"])
    action = request.query_params.get("action") or "interrupt"
    if action not in ("interrupt", "rollback"):
        raise ApiError(422, f"action: must be 'interrupt' or 'rollback', got {action!r}")
    wait = query_bool(request, "wait")
    task = asyncio.ensure_future(state.manager.cancel_run(run["run_id"], action))
    if not wait:
        return Response(status_code=202)
    await task
    await state.manager.wait(run["run_id"])
    return JSON({}, headers={"Location": f"{_paths(run)['Content-Location']}/join"})


async def cancel_many(request: Request) -> Response:
    """``POST /runs/cancel``: by ``run_ids``, or a thread's ``pending``/``running``/all."""
    state = server(request)
    body = await body_as(request, CancelMany, state.limits.max_body_bytes)
    action = request.query_params.get("action") or "interrupt"
    if action not in ("interrupt", "rollback"):
        raise ApiError(422, f"action: must be 'interrupt' or 'rollback', got {action!r}")
    who = owner(request)
    targets: list[str] = []
    if body.run_ids:
        for run_id in body.run_ids:
            await state.manager.get_run(who, body.thread_id, run_id)
            targets.append(run_id)
    elif body.thread_id:
        await thread_or_404(request, body.thread_id)
        active = await state.runs.active(body.thread_id)
        targets = [r["run_id"] for r in active
                   if body.status in (None, "all") or r["status"] == body.status]
    else:
        raise ApiError(422, "give run_ids or thread_id")
    for run_id in targets:
        await state.manager.cancel_run(run_id, action)
    return Response(status_code=204)


ROUTES = [
    Route("/threads/{thread_id}/runs", create_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs", list_runs, methods=["GET"]),
    Route("/threads/{thread_id}/runs/stream", stream_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs/wait", wait_run, methods=["POST"]),
    Route("/threads/{thread_id}/runs/{run_id}", get_run, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}", delete_run, methods=["DELETE"]),
    Route("/threads/{thread_id}/runs/{run_id}/join", join_run, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/stream", join_stream, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
    Route("/threads/{thread_id}/stream", thread_stream, methods=["GET"]),
    Route("/runs", create_run, methods=["POST"]),
    Route("/runs/stream", stream_run, methods=["POST"]),
    Route("/runs/wait", wait_run, methods=["POST"]),
    Route("/runs/batch", batch_runs, methods=["POST"]),
    Route("/runs/cancel", cancel_many, methods=["POST"]),
]
