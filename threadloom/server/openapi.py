"""``GET /openapi.json``: an OpenAPI 3.1 description of every route the server answers.

Built from one table (method, path, summary, request body model, query parameters);
``tests/test_server_openapi.py`` checks that the table and the app's routes agree, and
fuzzes the server from this description.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from threadloom.server import schemas as s

_Q = dict[str, str]  # query parameter -> JSON type
_T = tuple[str, str, str, type[BaseModel] | None, _Q]

TABLE: list[_T] = [
    ("get", "/ok", "Health check", None, {}),
    ("get", "/info", "Server version and features", None, {}),
    ("get", "/openapi.json", "This description", None, {}),
    ("post", "/assistants", "Create an assistant", s.AssistantCreate, {}),
    ("post", "/assistants/search", "Search assistants", s.AssistantSearch, {}),
    ("post", "/assistants/count", "Count assistants", s.AssistantSearch, {}),
    ("get", "/assistants/{assistant_id}", "Get an assistant", None, {}),
    ("patch", "/assistants/{assistant_id}", "Update an assistant (a new version)",
     s.AssistantPatch, {}),
    ("delete", "/assistants/{assistant_id}", "Delete an assistant", None,
     {"delete_threads": "boolean"}),
    ("post", "/assistants/{assistant_id}/versions", "An assistant's versions",
     s.AssistantVersions, {}),
    ("post", "/assistants/{assistant_id}/latest", "Set the assistant's latest version",
     s.LatestVersion, {}),
    ("get", "/assistants/{assistant_id}/graph", "The assistant's graph", None,
     {"xray": "boolean"}),
    ("get", "/assistants/{assistant_id}/schemas", "The graph's schemas", None, {}),
    ("get", "/assistants/{assistant_id}/subgraphs", "The graph's subgraphs", None,
     {"recurse": "boolean"}),
    ("get", "/assistants/{assistant_id}/subgraphs/{namespace}", "One subgraph", None, {}),
    ("post", "/threads", "Create a thread", s.ThreadCreate, {}),
    ("post", "/threads/search", "Search threads", s.ThreadSearch, {}),
    ("post", "/threads/count", "Count threads", s.ThreadSearch, {}),
    ("post", "/threads/prune", "Delete threads or keep only their latest checkpoint",
     s.ThreadPrune, {}),
    ("get", "/threads/{thread_id}", "Get a thread", None, {}),
    ("patch", "/threads/{thread_id}", "Merge a thread's metadata", s.ThreadPatch, {}),
    ("delete", "/threads/{thread_id}", "Delete a thread", None, {}),
    ("post", "/threads/{thread_id}/copy", "Copy a thread", None, {}),
    ("get", "/threads/{thread_id}/state", "The thread's latest state", None,
     {"subgraphs": "boolean"}),
    ("post", "/threads/{thread_id}/state", "Update the thread's state", s.StateUpdate, {}),
    ("post", "/threads/{thread_id}/state/checkpoint", "The state at a checkpoint",
     s.StateAtCheckpoint, {}),
    ("get", "/threads/{thread_id}/state/{checkpoint_id}", "The state at a checkpoint", None,
     {"subgraphs": "boolean"}),
    ("get", "/threads/{thread_id}/history", "The thread's past states", None,
     {"limit": "integer"}),
    ("post", "/threads/{thread_id}/history", "The thread's past states", s.HistoryQuery, {}),
    ("post", "/threads/{thread_id}/runs", "Create a background run", s.RunCreate, {}),
    ("get", "/threads/{thread_id}/runs", "List the thread's runs", None,
     {"limit": "integer", "offset": "integer", "status": "string"}),
    ("post", "/threads/{thread_id}/runs/stream", "Run and stream (SSE)", s.RunCreate, {}),
    ("post", "/threads/{thread_id}/runs/wait", "Run and wait for the output", s.RunCreate, {}),
    ("get", "/threads/{thread_id}/runs/{run_id}", "Get a run", None, {}),
    ("delete", "/threads/{thread_id}/runs/{run_id}", "Delete a finished run", None, {}),
    ("get", "/threads/{thread_id}/runs/{run_id}/join", "Wait for a run's output", None, {}),
    ("get", "/threads/{thread_id}/runs/{run_id}/stream", "Join a run's stream (SSE)", None,
     {"stream_mode": "string", "cancel_on_disconnect": "boolean"}),
    ("post", "/threads/{thread_id}/runs/{run_id}/cancel", "Cancel a run", None,
     {"wait": "boolean", "action": "string"}),
    ("get", "/threads/{thread_id}/stream", "Follow every run of the thread (SSE)", None,
     {"stream_mode": "string"}),
    ("post", "/runs", "Create a stateless background run", s.RunCreate, {}),
    ("post", "/runs/stream", "Stateless run, streamed (SSE)", s.RunCreate, {}),
    ("post", "/runs/wait", "Stateless run, waited", s.RunCreate, {}),
    ("post", "/runs/batch", "Several stateless runs", None, {}),
    ("post", "/runs/cancel", "Cancel runs", s.CancelMany, {"action": "string"}),
    ("get", "/v1/models", "OpenAI-compatible: the assistants as models", None, {}),
    ("get", "/v1/models/{model}", "OpenAI-compatible: one model", None, {}),
    ("post", "/v1/chat/completions", "OpenAI-compatible chat completion", s.ChatCompletion,
     {}),
]

_SSE = {"/threads/{thread_id}/runs/stream", "/runs/stream",
        "/threads/{thread_id}/runs/{run_id}/stream", "/threads/{thread_id}/stream"}


def _operation(method: str, path: str, summary: str, body: type[BaseModel] | None,
               query: _Q) -> dict[str, Any]:
    params = [{"name": name.strip("{}"), "in": "path", "required": True,
               "schema": {"type": "string"}}
              for name in path.split("/") if name.startswith("{")]
    params += [{"name": name, "in": "query", "required": False, "schema": {"type": kind}}
               for name, kind in query.items()]
    media = "text/event-stream" if path in _SSE else "application/json"
    op: dict[str, Any] = {
        "summary": summary,
        "operationId": method + "_" + "_".join(
            p.strip("{}") for p in path.split("/") if p).replace(".", "_"),
        "parameters": params,
        "responses": {
            "200": {"description": "OK", "content": {media: {}}},
            "404": {"description": "Not found", "content": {"application/json": {}}},
            "422": {"description": "Invalid request", "content": {"application/json": {}}},
        },
    }
    if method == "post" and path.endswith(("/runs", "/runs/stream", "/runs/wait")):
        op["responses"]["409"] = {"description": "Thread busy (reject)"}
    if method == "delete" or path.endswith("/cancel") or path == "/runs/cancel":
        op["responses"]["204"] = {"description": "Done"}
        op["responses"]["202"] = {"description": "Accepted"}
        op["responses"]["409"] = {"description": "Run still active"}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{body.__name__}"}}}}
    elif path == "/runs/batch":
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"type": "array", "items": {"$ref": "#/components/schemas/RunCreate"}}}}}
    return op


def openapi() -> dict[str, Any]:
    """The OpenAPI document."""
    paths: dict[str, dict[str, Any]] = {}
    models: dict[str, type[BaseModel]] = {}
    for method, path, summary, body, query in TABLE:
        paths.setdefault(path, {})[method] = _operation(method, path, summary, body, query)
        if body is not None:
            models[body.__name__] = body
    models["RunCreate"] = s.RunCreate
    components: dict[str, Any] = {}
    for name, model in models.items():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for sub, sub_schema in schema.pop("$defs", {}).items():
            components[sub] = sub_schema
        components[name] = schema
    return {"openapi": "3.1.0",
            "info": {"title": "threadloom serve", "version": _version(),
                     "description": "The agent server API that langgraph_sdk calls."},
            "paths": paths, "components": {"schemas": components}}


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("threadloom")
    except Exception:
        return "0"
