"""``/assistants``: search, count, get, the graph drawing, schemas, subgraphs.

Assistants are the served graphs (see ``graphs.py``); ``/assistants/{id}`` takes the
assistant's UUID (422 for anything else, as LangGraph's server answers), while runs
also take the graph name.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from threadloom.engine.compiled import CompiledGraph
from threadloom.server.graphs import Assistant
from threadloom.server.http import JSON, ApiError, body_as, not_found
from threadloom.server.schemas import AssistantSearch
from threadloom.server.state import server
from threadloom.types import END, START


def _assistant(request: Request) -> Assistant:
    ident = request.path_params["assistant_id"]
    try:
        uuid.UUID(ident)
    except ValueError as exc:
        raise ApiError(422, "Invalid assistant ID: must be a UUID") from exc
    found = server(request).assistants.by_id.get(ident)
    if found is None:
        raise not_found("Assistant", ident)
    return found


async def search(request: Request) -> Response:
    """``POST /assistants/search``."""
    state = server(request)
    body = await body_as(request, AssistantSearch, state.limits.max_body_bytes)
    found = state.assistants.search(body.graph_id, body.name, body.metadata)
    if body.sort_by:
        found.sort(key=lambda a: str(a.json()[body.sort_by]),  # type: ignore[index]
                   reverse=body.sort_order != "asc")
    return JSON([a.json() for a in found[body.offset:body.offset + body.limit]])


async def count(request: Request) -> Response:
    """``POST /assistants/count``."""
    state = server(request)
    body = await body_as(request, AssistantSearch, state.limits.max_body_bytes)
    return JSON(len(state.assistants.search(body.graph_id, body.name, body.metadata)))


async def get(request: Request) -> Response:
    """``GET /assistants/{assistant_id}``."""
    return JSON(_assistant(request).json())


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
    return JSON(graph_json(_assistant(request).graph))


def json_schema(schema: Any) -> dict[str, Any] | None:
    """A JSON schema of a state/context type (None when it has none)."""
    if schema is None:
        return None
    try:
        return TypeAdapter(schema).json_schema()
    except Exception:  # a type pydantic cannot describe: name it, keys unknown
        return {"title": getattr(schema, "__name__", "State"), "type": "object"}


async def get_schemas(request: Request) -> Response:
    """``GET /assistants/{assistant_id}/schemas``."""
    assistant = _assistant(request)
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
    assistant = _assistant(request)
    recurse = request.query_params.get("recurse", "").lower() in ("1", "true")
    found = subgraphs_of(assistant.graph, recurse=True if "namespace" in request.path_params
                         else recurse)
    namespace = request.path_params.get("namespace")
    if namespace is not None:
        found = {k: v for k, v in found.items() if k == namespace or
                 k.startswith(namespace + "|")}
    return JSON(found)


ROUTES = [
    Route("/assistants/search", search, methods=["POST"]),
    Route("/assistants/count", count, methods=["POST"]),
    Route("/assistants/{assistant_id}", get, methods=["GET"]),
    Route("/assistants/{assistant_id}/graph", get_graph, methods=["GET"]),
    Route("/assistants/{assistant_id}/schemas", get_schemas, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs", get_subgraphs, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs/{namespace}", get_subgraphs, methods=["GET"]),
]
