"""The OpenAI-compatible face: ``GET /v1/models``, ``POST /v1/chat/completions``.

Any OpenAI client or chat UI can talk to a served agent: ``model`` names the assistant
(graph name or id); the thread is named by the ``X-Thread-Id`` header, else
``metadata.thread_id``, else ``user`` (made on first use); without one the run is
stateless. A graph needs a ``messages`` state key. On a thread, which already holds the
conversation, only the messages after the request's last assistant message are sent
(OpenAI clients resend the whole history each turn); stateless, all of them.
Streaming (``stream: true``) sends ``chat.completion.chunk`` deltas of the model's
tokens and ``data: [DONE]``; a graph that raises ends the stream with an ``error`` object.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from threadloom.server.http import JSON, ApiError, body_as
from threadloom.server.schemas import ChatCompletion, RunCreate
from threadloom.server.state import ServerState, owner, server
from threadloom.server.wire import dumps, uuid7


async def models(request: Request) -> Response:
    """``GET /v1/models``: one model per served assistant (id: the graph name)."""
    state = server(request)
    data = [{"id": a.graph_id, "object": "model", "created": int(time.time()),
             "owned_by": "threadloom"} for a in state.assistants.by_graph.values()]
    return JSON({"object": "list", "data": data})


def _thread_of(request: Request, body: ChatCompletion) -> str | None:
    header = request.headers.get("x-thread-id")
    if header:
        return header
    meta = body.metadata or {}
    if isinstance(meta.get("thread_id"), str) and meta["thread_id"]:
        return str(meta["thread_id"])
    return body.user or None


def _new_messages(body: ChatCompletion, stateful: bool) -> list[dict[str, Any]]:
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    if not stateful:
        return messages
    last_ai = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return messages[last_ai + 1:] or messages[-1:]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


async def completions(request: Request) -> Response:
    """``POST /v1/chat/completions``."""
    state = server(request)
    body = await body_as(request, ChatCompletion, state.limits.max_body_bytes)
    assistant = await state.manager.assistant(owner(request), body.model)
    if "messages" not in assistant.graph.specs:
        raise ApiError(422, f"model: assistant {body.model!r} has no 'messages' state key")
    thread_id = _thread_of(request, body)
    run_body = RunCreate(assistant_id=assistant.assistant_id,
                         input={"messages": _new_messages(body, thread_id is not None)},
                         stream_mode=["messages-tuple", "values"],
                         if_not_exists="create", multitask_strategy="enqueue")
    run = await state.manager.create(owner(request), thread_id, run_body)
    cid = f"chatcmpl-{uuid7()}"
    headers = {"X-Thread-Id": run["thread_id"], "X-Run-Id": run["run_id"]}
    if body.stream:
        return EventSourceResponse(_chunks(state, run, cid, body.model), headers=headers,
                                   ping=15)
    output = await state.manager.wait_output(run["run_id"])
    if isinstance(output, dict) and "__error__" in output:
        error = output["__error__"]
        return JSON({"detail": error, "error": {"message": error.get("message"),
                                                "type": error.get("error"), "code": None}},
                    status_code=502, headers=headers)
    reply = _last_ai(output)
    return JSON({"id": cid, "object": "chat.completion", "created": int(time.time()),
                 "model": body.model, "choices": [{
                     "index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": _text(reply.get("content")),
                                 **({"tool_calls": _tool_calls(reply)}
                                    if reply.get("tool_calls") else {})}}],
                 "usage": _usage(reply)}, headers=headers)


def _last_ai(output: Any) -> dict[str, Any]:
    messages = output.get("messages") if isinstance(output, dict) else None
    for message in reversed(messages or []):
        if isinstance(message, dict) and message.get("type") in ("ai", "AIMessageChunk"):
            return message
    return {"content": ""}


def _tool_calls(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": c.get("id"), "type": "function", "function": {
        "name": c.get("name"), "arguments": json.dumps(c.get("args") or {})}}
        for c in reply.get("tool_calls") or []]


def _usage(reply: dict[str, Any]) -> dict[str, int]:
    usage = reply.get("usage_metadata") or {}
    return {"prompt_tokens": int(usage.get("input_tokens", 0)),
            "completion_tokens": int(usage.get("output_tokens", 0)),
            "total_tokens": int(usage.get("total_tokens", 0))}


def _chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None = None) -> str:
    return dumps({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                  "model": model, "choices": [{"index": 0, "delta": delta,
                                               "finish_reason": finish}]})


async def _chunks(state: ServerState, run: dict[str, Any], cid: str, model: str
                  ) -> AsyncIterator[dict[str, str]]:
    yield {"data": _chunk(cid, model, {"role": "assistant", "content": ""})}
    async for event in state.log.read(run["run_id"], 0):
        if event.event == "error":
            yield {"data": dumps({"error": json.loads(event.data)})}
            break
        if event.event != "messages":
            continue
        message, _meta = json.loads(event.data)
        text = _text(message.get("content"))
        if text and message.get("type") in ("AIMessageChunk", "ai"):
            yield {"data": _chunk(cid, model, {"content": text})}
    yield {"data": _chunk(cid, model, {}, "stop")}
    yield {"data": "[DONE]"}


ROUTES = [
    Route("/v1/models", models, methods=["GET"]),
    Route("/v1/chat/completions", completions, methods=["POST"]),
]
