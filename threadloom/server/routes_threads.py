"""``/threads``: create, search, count, get, patch, delete, copy, state and history."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from threadloom.server.http import JSON, ApiError, body_as, query_bool, query_int
from threadloom.server.schemas import (
    HistoryQuery,
    StateAtCheckpoint,
    StateUpdate,
    ThreadCreate,
    ThreadPatch,
    ThreadPrune,
    ThreadSearch,
)
from threadloom.server.state import (
    ServerState,
    owner,
    server,
    thread_assistant,
    thread_or_404,
)
from threadloom.server.wire import checkpoint_ref, jsonable, snapshot_json
from threadloom.workers import to_worker

EMPTY_STATE: dict[str, Any] = {
    "values": {}, "next": [], "tasks": [], "metadata": None, "created_at": None,
               "checkpoint": None, "parent_checkpoint": None, "interrupts": [],
               "checkpoint_id": None, "parent_checkpoint_id": None}


async def create_thread(request: Request) -> Response:
    """``POST /threads``: a new thread (``if_exists``: ``raise`` -> 409, ``do_nothing``)."""
    state = server(request)
    body = await body_as(request, ThreadCreate, state.limits.max_body_bytes)
    thread_id = str(body.thread_id) if body.thread_id is not None else None  # checked: a UUID
    try:
        thread, _ = await state.threads.create(owner(request), thread_id, body.metadata,
                                               if_exists=body.if_exists)
    except KeyError as exc:
        raise ApiError(409, f"Thread with ID {thread_id} already exists") from exc
    return JSON(thread)


async def search_threads(request: Request) -> Response:
    """``POST /threads/search``: by metadata, values, ids and status; limit/offset."""
    state = server(request)
    body = await body_as(request, ThreadSearch, state.limits.max_body_bytes)
    found = await state.threads.search(owner(request), metadata=body.metadata,
                                       values=body.values, ids=body.ids, status=body.status,
                                       sort_by=body.sort_by, sort_order=body.sort_order)
    page = found[body.offset:body.offset + body.limit]
    if body.select:
        page = [{k: t.get(k) for k in body.select} for t in page]
    return JSON(page)


async def count_threads(request: Request) -> Response:
    """``POST /threads/count``: how many threads match."""
    state = server(request)
    body = await body_as(request, ThreadSearch, state.limits.max_body_bytes)
    found = await state.threads.search(owner(request), metadata=body.metadata,
                                       values=body.values, ids=body.ids, status=body.status)
    return JSON(len(found))


async def get_thread(request: Request) -> Response:
    """``GET /threads/{thread_id}``."""
    return JSON(await thread_or_404(request, request.path_params["thread_id"]))


async def patch_thread(request: Request) -> Response:
    """``PATCH /threads/{thread_id}``: merge metadata."""
    state = server(request)
    thread_id = request.path_params["thread_id"]
    body = await body_as(request, ThreadPatch, state.limits.max_body_bytes)
    thread = await state.threads.patch(owner(request), thread_id, body.metadata)
    if thread is None:
        raise ApiError(404, f"Thread with ID {thread_id} not found")
    return JSON(thread)


async def delete_thread(request: Request) -> Response:
    """``DELETE /threads/{thread_id}``: its runs (cancelled), events and checkpoints."""
    state = server(request)
    thread_id = request.path_params["thread_id"]
    await thread_or_404(request, thread_id)
    await drop_thread(state, owner(request), thread_id)
    return Response(status_code=204)


async def drop_thread(state: ServerState, who: str, thread_id: str) -> None:
    """Delete one of ``who``'s threads: its runs (cancelled first), their events, its
    checkpoints."""
    for run_id in state.manager.queue.active(thread_id):
        await state.manager.cancel_run(run_id, "interrupt")
    await state.threads.delete(who, thread_id)
    cp = state.checkpointer
    adelete = getattr(cp, "adelete_thread", None)
    if adelete is not None:
        await adelete(thread_id)
    else:
        cp.delete_thread(thread_id)


async def copy_thread(request: Request) -> Response:
    """``POST /threads/{thread_id}/copy``: a new thread with the same metadata, status,
    values and interrupts, and a copy of every checkpoint (every namespace, with the
    same ids, parents and pending writes), so its history is the source's, as
    LangGraph's server copies it."""
    state = server(request)
    source = await thread_or_404(request, request.path_params["thread_id"])
    copy, _ = await state.threads.create(owner(request), None, source["metadata"])
    await to_worker(copy_checkpoints, state.checkpointer, source["thread_id"],
                    copy["thread_id"])
    status = source["status"] if source["status"] != "busy" else "idle"
    await state.threads.set_state(copy["thread_id"], status=status, values=source["values"],
                                  interrupts=source["interrupts"], error=source["error"])
    copy.update(status=status, values=source["values"], interrupts=source["interrupts"],
                error=source["error"])
    return JSON(copy)


async def prune_threads(request: Request) -> Response:
    """``POST /threads/prune`` (``client.threads.prune``): ``strategy`` ``delete`` (the
    default) deletes the caller's threads among ``thread_ids`` as ``DELETE`` does;
    ``keep_latest`` keeps each thread with only its latest checkpoint (per namespace)
    and skips a busy one. Ids that are not the caller's threads are skipped. Answers
    ``{"pruned_count": N}``, as LangGraph's server."""
    state = server(request)
    body = await body_as(request, ThreadPrune, state.limits.max_body_bytes)
    who, count = owner(request), 0
    for thread_id in dict.fromkeys(body.thread_ids):
        thread = await state.threads.get(who, thread_id)
        if thread is None:
            continue
        if body.strategy == "delete":
            await drop_thread(state, who, thread_id)
        elif thread["status"] == "busy":
            continue
        else:
            await to_worker(keep_latest_checkpoints, state.checkpointer, thread_id)
        count += 1
    return JSON({"pruned_count": count})


def keep_latest_checkpoints(cp: Any, thread_id: str) -> None:
    """Leave thread ``thread_id`` with only its latest checkpoint of each namespace
    (and its pending writes), written again without a parent."""
    latest: dict[str, Any] = {}
    for item in cp.list({"configurable": {"thread_id": thread_id}}):
        ns = item.config["configurable"].get("checkpoint_ns", "")
        if ns not in latest or item.checkpoint["id"] > latest[ns].checkpoint["id"]:
            latest[ns] = item
    cp.delete_thread(thread_id)
    for ns, item in latest.items():
        saved = cp.put({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}},
                       item.checkpoint, dict(item.metadata),
                       dict(item.checkpoint.get("channel_versions") or {}))
        _put_pending(cp, saved, item)


def copy_checkpoints(cp: Any, source: str, target: str) -> int:
    """Write every checkpoint of thread ``source`` (oldest first, every namespace, with
    its pending writes) into thread ``target``; returns how many."""
    items = sorted(cp.list({"configurable": {"thread_id": source}}),
                   key=lambda t: t.checkpoint["id"])
    for item in items:
        conf = item.config["configurable"]
        ns = conf.get("checkpoint_ns", "")
        parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        metadata = dict(item.metadata)
        if "thread_id" in metadata:
            metadata["thread_id"] = target
        at = {"configurable": {"thread_id": target, "checkpoint_ns": ns}}
        if parent:
            at["configurable"]["checkpoint_id"] = parent
        saved = cp.put(at, item.checkpoint, metadata,
                       dict(item.checkpoint.get("channel_versions") or {}))
        _put_pending(cp, saved, item)
    return len(items)


def _put_pending(cp: Any, saved: Any, item: Any) -> None:
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for write in item.pending_writes or ():
        by_task.setdefault(write.task_id, []).append((write.channel, write.value))
    for task_id, writes in by_task.items():
        cp.put_writes(saved, writes, task_id)


def _config(thread_id: str, checkpoint_id: str | None, ns: str = "") -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


async def _state_at(request: Request, checkpoint_id: str | None) -> Response:
    state = server(request)
    thread = await thread_or_404(request, request.path_params["thread_id"])
    assistant = thread_assistant(state, thread)
    if assistant is None:
        return JSON(EMPTY_STATE)
    snap = await assistant.graph.aget_state(_config(thread["thread_id"], checkpoint_id))
    if snap.created_at is None:
        if checkpoint_id:
            raise ApiError(404, f"Checkpoint with ID {checkpoint_id} not found")
        return JSON(EMPTY_STATE)
    return JSON(snapshot_json(snap))


async def get_state(request: Request) -> Response:
    """``GET /threads/{thread_id}/state``: the latest snapshot."""
    query_bool(request, "subgraphs")
    return await _state_at(request, None)


async def get_state_at(request: Request) -> Response:
    """``GET /threads/{thread_id}/state/{checkpoint_id}``."""
    query_bool(request, "subgraphs")
    return await _state_at(request, request.path_params["checkpoint_id"])


async def post_state_checkpoint(request: Request) -> Response:
    """``POST /threads/{thread_id}/state/checkpoint``: the snapshot of a checkpoint."""
    body = await body_as(request, StateAtCheckpoint, server(request).limits.max_body_bytes)
    return await _state_at(request, body.checkpoint.checkpoint_id)


async def update_state(request: Request) -> Response:
    """``POST /threads/{thread_id}/state``: write values as ``as_node`` (a fork when a
    checkpoint is named); answers the new checkpoint."""
    state = server(request)
    thread = await thread_or_404(request, request.path_params["thread_id"])
    body = await body_as(request, StateUpdate, state.limits.max_body_bytes)
    assistant = thread_assistant(state, thread)
    if assistant is None:
        raise ApiError(409, f"thread {thread['thread_id']} has not run a graph yet and this "
                            "server serves several: start a run first")
    if state.manager.queue.active(thread["thread_id"]):
        raise ApiError(409, "Thread is busy: wait for its run to finish before updating state")
    checkpoint_id = body.checkpoint_id or (body.checkpoint.checkpoint_id if body.checkpoint
                                           else None)
    try:
        new = await assistant.graph.aupdate_state(
            _config(thread["thread_id"], checkpoint_id), body.values, body.as_node)
    except ValueError as exc:
        raise ApiError(422, f"as_node: {exc}") from exc
    except Exception as exc:
        raise ApiError(422, f"values: {type(exc).__name__}: {exc}") from exc
    snap = await assistant.graph.aget_state(_config(thread["thread_id"], None))
    await state.threads.set_state(thread["thread_id"],
                                  status="interrupted" if snap.next else "idle",
                                  values=jsonable(snap.values),
                                  metadata={"graph_id": assistant.graph_id,
                                            "assistant_id": assistant.assistant_id})
    ref = checkpoint_ref(new)
    return JSON({"checkpoint": ref, "configurable": ref,
                 "checkpoint_id": ref["checkpoint_id"] if ref else None})


async def history(request: Request) -> Response:
    """``GET|POST /threads/{thread_id}/history``: snapshots, newest first."""
    state = server(request)
    thread = await thread_or_404(request, request.path_params["thread_id"])
    if request.method == "POST":
        body = await body_as(request, HistoryQuery, state.limits.max_body_bytes)
    else:
        body = HistoryQuery(limit=query_int(request, "limit", 10, low=1, high=1000))
    assistant = thread_assistant(state, thread)
    if assistant is None:
        return JSON([])
    before_cfg = None
    if body.before is not None:
        cid = body.before if isinstance(body.before, str) else body.before.checkpoint_id
        before_cfg = _config(thread["thread_id"], cid)
    ns = body.checkpoint.checkpoint_ns if body.checkpoint else ""
    items = await _history(assistant.graph, _config(thread["thread_id"], None, ns),
                           body.metadata, before_cfg, body.limit)
    return JSON([snapshot_json(s) for s in items])


async def _history(graph: Any, cfg: dict[str, Any], meta: Any, before: Any, limit: int
                   ) -> list[Any]:
    """The graph's history, through ``aget_state_history`` when the engine has it."""
    ahistory = getattr(graph, "aget_state_history", None)
    if ahistory is not None:
        return [s async for s in ahistory(cfg, filter=meta, before=before, limit=limit)]
    from threadloom.workers import to_worker

    return await to_worker(lambda: list(graph.get_state_history(
        cfg, filter=meta, before=before, limit=limit)))


ROUTES = [
    Route("/threads", create_thread, methods=["POST"]),
    Route("/threads/search", search_threads, methods=["POST"]),
    Route("/threads/count", count_threads, methods=["POST"]),
    Route("/threads/prune", prune_threads, methods=["POST"]),
    Route("/threads/{thread_id}", get_thread, methods=["GET"]),
    Route("/threads/{thread_id}", patch_thread, methods=["PATCH"]),
    Route("/threads/{thread_id}", delete_thread, methods=["DELETE"]),
    Route("/threads/{thread_id}/copy", copy_thread, methods=["POST"]),
    Route("/threads/{thread_id}/state", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/state", update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/checkpoint", post_state_checkpoint, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", get_state_at, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["GET", "POST"]),
]
