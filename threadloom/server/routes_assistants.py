"""``/assistants``: create, search, count, get, update (a new version), delete,
versions, set the latest version; the graph drawing, schemas, subgraphs.

Each served graph has its assistant, and ``POST /assistants`` makes more (see
``assistants_store.py``); ``/assistants/{id}`` takes the assistant's UUID (422 for
anything else, as LangGraph's server answers), while runs also take the graph name.
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from threadloom.engine.compiled import CompiledGraph
from threadloom.engine.graph_api import schema_json
from threadloom.server.assistants_store import AssistantExists
from threadloom.server.graphs import Assistant
from threadloom.server.http import JSON, ApiError, body_as, not_found, query_bool
from threadloom.server.schemas import (
    AssistantCreate,
    AssistantPatch,
    AssistantSearch,
    AssistantVersions,
    LatestVersion,
)
from threadloom.server.state import owner, server
from threadloom.types import END, START


def _uuid(ident: str) -> str:
    try:
        uuid.UUID(ident)
    except ValueError as exc:
        raise ApiError(422, "Invalid assistant ID: must be a UUID") from exc
    return ident


async def _assistant(request: Request) -> Assistant:
    """The assistant the path names: its id, or (as ``langgraph dev``) a served graph's
    name for that graph's own assistant."""
    ident = request.path_params["assistant_id"]
    store = server(request).assistants
    if ident in store.by_graph:
        found = await store.resolve(owner(request), ident)
        if found is None:
            raise not_found("Assistant", ident)
        return found
    ident = _uuid(ident)
    found = await store.get(owner(request), ident)
    if found is None:
        raise not_found("Assistant", ident)
    return found


async def _unwritable(request: Request, ident: str) -> ApiError:
    """404 for an assistant the caller does not see; 403 for one it sees but may not
    change (a graph's own, on a server with keys)."""
    if await server(request).assistants.get(owner(request), ident) is not None:
        return ApiError(403, f"Assistant {ident} is its graph's own, shared by every caller: "
                             "create your own with POST /assistants")
    return not_found("Assistant", ident)


def _graph_missing(graph_id: str) -> ApiError:
    return ApiError(404, f"Graph with ID {graph_id} not found")


async def create(request: Request) -> Response:
    """``POST /assistants``: a new assistant on a served graph (409 when the id exists
    under ``if_exists="raise"``, the default; ``do_nothing`` answers the one there)."""
    state = server(request)
    body = await body_as(request, AssistantCreate, state.limits.max_body_bytes)
    if body.assistant_id is not None:
        _uuid(body.assistant_id)
    try:
        made = await state.assistants.create(
            owner(request), body.graph_id, assistant_id=body.assistant_id,
            config=body.config, context=body.context, metadata=body.metadata,
            name=body.name, description=body.description, if_exists=body.if_exists)
    except KeyError as exc:
        raise _graph_missing(body.graph_id) from exc
    except AssistantExists as exc:
        raise ApiError(409, f"Assistant with ID {exc} already exists") from exc
    return JSON(made.json())


async def update(request: Request) -> Response:
    """``PATCH /assistants/{assistant_id}``: a new version, made the latest."""
    state = server(request)
    ident = _uuid(request.path_params["assistant_id"])
    body = await body_as(request, AssistantPatch, state.limits.max_body_bytes)
    try:
        new = await state.assistants.update(owner(request), ident,
                                            body.model_dump(exclude_none=True))
    except KeyError as exc:
        raise _graph_missing(str(body.graph_id)) from exc
    if new is None:
        raise await _unwritable(request, ident)
    return JSON(new.json())


async def delete(request: Request) -> Response:
    """``DELETE /assistants/{assistant_id}`` (``delete_threads``: also the threads whose
    ``metadata.assistant_id`` is this one)."""
    state = server(request)
    ident = _uuid(request.path_params["assistant_id"])
    with_threads = query_bool(request, "delete_threads")
    who = owner(request)
    if not await state.assistants.delete(who, ident):
        raise await _unwritable(request, ident)
    if with_threads:
        from threadloom.server.routes_threads import drop_thread

        for thread in await state.threads.search(who, metadata={"assistant_id": ident}):
            await drop_thread(state, who, thread["thread_id"])
    return Response(status_code=204)


async def versions(request: Request) -> Response:
    """``POST /assistants/{assistant_id}/versions``: newest first."""
    state = server(request)
    ident = _uuid(request.path_params["assistant_id"])
    body = await body_as(request, AssistantVersions, state.limits.max_body_bytes,
                         allow_empty=True)
    found = await state.assistants.versions(owner(request), ident, body.metadata,
                                            body.limit, body.offset)
    if found is None:
        raise not_found("Assistant", ident)
    return JSON(found)


async def set_latest(request: Request) -> Response:
    """``POST /assistants/{assistant_id}/latest``: make ``version`` the current one."""
    state = server(request)
    ident = _uuid(request.path_params["assistant_id"])
    body = await body_as(request, LatestVersion, state.limits.max_body_bytes)
    found = await state.assistants.set_latest(owner(request), ident, body.version)
    if found is False:
        raise ApiError(404, f"Assistant {ident} has no version {body.version}")
    if not isinstance(found, Assistant):
        raise await _unwritable(request, ident)
    return JSON(found.json())


async def search(request: Request) -> Response:
    """``POST /assistants/search``."""
    state = server(request)
    body = await body_as(request, AssistantSearch, state.limits.max_body_bytes)
    found = await state.assistants.search(
        owner(request), graph_id=body.graph_id, name=body.name, metadata=body.metadata,
        sort_by=body.sort_by, sort_order=body.sort_order)
    page = [a.json() for a in found[body.offset:body.offset + body.limit]]
    if body.select:
        page = [{k: a.get(k) for k in body.select} for a in page]
    headers = {}
    if body.offset + body.limit < len(found):
        headers["X-Pagination-Next"] = str(body.offset + body.limit)
    return JSON(page, headers=headers)


async def count(request: Request) -> Response:
    """``POST /assistants/count``."""
    state = server(request)
    body = await body_as(request, AssistantSearch, state.limits.max_body_bytes)
    found = await state.assistants.search(owner(request), graph_id=body.graph_id,
                                          name=body.name, metadata=body.metadata)
    return JSON(len(found))


async def get(request: Request) -> Response:
    """``GET /assistants/{assistant_id}``."""
    return JSON((await _assistant(request)).json())


def graph_json(graph: CompiledGraph) -> dict[str, Any]:
    """The graph as LangGraph's server draws it: ``{"nodes": [...], "edges": [...]}``."""
    drawn = graph.get_graph()
    nodes: list[dict[str, Any]] = []
    for name in drawn.nodes:
        if name == END:
            nodes.append({"id": END})
        else:
            nodes.append({"id": name, "type": "runnable", "data": {"name": name}})
    edges: list[dict[str, Any]] = []
    for edge in drawn.edges:
        item: dict[str, Any] = {"source": edge.source, "target": edge.target}
        if edge.conditional:
            item["conditional"] = True
        if getattr(edge, "label", None):
            item["data"] = edge.label
        edges.append(item)
    linked = {e["source"] for e in edges}
    edges += [{"source": n, "target": END} for n in graph.nodes if n not in linked]
    return {"nodes": nodes, "edges": edges}


async def get_graph(request: Request) -> Response:
    """``GET /assistants/{assistant_id}/graph``."""
    return JSON(graph_json((await _assistant(request)).graph))


def json_schema(schema: Any) -> dict[str, Any] | None:
    """A JSON schema of a state/context type (None when it has none)."""
    if schema is None:
        return None
    return schema_json(schema, getattr(schema, "__name__", "State"))


async def get_schemas(request: Request) -> Response:
    """``GET /assistants/{assistant_id}/schemas``."""
    assistant = await _assistant(request)
    builder = assistant.graph.builder
    return JSON({"graph_id": assistant.graph_id,
                 "input_schema": json_schema(builder.input_schema),
                 "output_schema": json_schema(builder.output_schema),
                 "state_schema": json_schema(builder.state_schema),
                 "config_schema": None,
                 "context_schema": json_schema(builder.context_schema)})


def subgraphs_of(graph: CompiledGraph, prefix: str = "", recurse: bool = False
                 ) -> dict[str, dict[str, Any]]:
    """``{namespace: schemas}`` of the graph's subgraph nodes."""
    out: dict[str, dict[str, Any]] = {}
    for name, spec in graph.nodes.items():
        sub = getattr(spec, "subgraph", None)
        if sub is None or name == START:
            continue
        ns = f"{prefix}|{name}" if prefix else name
        b = sub.builder
        out[ns] = {"graph_id": ns, "input_schema": json_schema(b.input_schema),
                   "output_schema": json_schema(b.output_schema),
                   "state_schema": json_schema(b.state_schema), "config_schema": None,
                   "context_schema": json_schema(b.context_schema)}
        if recurse:
            out.update(subgraphs_of(sub, ns, True))
    return out


async def get_subgraphs(request: Request) -> Response:
    """``GET /assistants/{assistant_id}/subgraphs[/{namespace}]`` (``recurse``)."""
    assistant = await _assistant(request)
    recurse = request.query_params.get("recurse", "").lower() in ("1", "true")
    found = subgraphs_of(assistant.graph, recurse=True if "namespace" in request.path_params
                         else recurse)
    namespace = request.path_params.get("namespace")
    if namespace is not None:
        found = {k: v for k, v in found.items() if k == namespace or
                 k.startswith(namespace + "|")}
    return JSON(found)


ROUTES = [
    Route("/assistants", create, methods=["POST"]),
    Route("/assistants/search", search, methods=["POST"]),
    Route("/assistants/count", count, methods=["POST"]),
    Route("/assistants/{assistant_id}", get, methods=["GET"]),
    Route("/assistants/{assistant_id}", update, methods=["PATCH"]),
    Route("/assistants/{assistant_id}", delete, methods=["DELETE"]),
    Route("/assistants/{assistant_id}/versions", versions, methods=["POST"]),
    Route("/assistants/{assistant_id}/latest", set_latest, methods=["POST"]),
    Route("/assistants/{assistant_id}/graph", get_graph, methods=["GET"]),
    Route("/assistants/{assistant_id}/schemas", get_schemas, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs", get_subgraphs, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs/{namespace}", get_subgraphs, methods=["GET"]),
]
