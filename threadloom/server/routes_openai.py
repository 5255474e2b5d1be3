"""The OpenAI-compatible face: ``GET /v1/models``, ``POST /v1/chat/completions``.

Any OpenAI client or chat UI can talk to a served agent: ``model`` names the assistant
(graph name or id); the thread is the ``X-Thread-Id`` header (a thread id), else it is
named by ``metadata.thread_id``, else by ``user``: a name is the caller's own (each
principal's ``"conv-1"`` is a thread of its own, id ``uuid5(principal, name)``, sent back
in the ``X-Thread-Id`` response header), made on first use; without one the run is
stateless. A graph needs a ``messages`` state key. On a thread, which already holds the
conversation, only the messages after the request's last assistant message are sent
(OpenAI clients resend the whole history each turn); stateless, all of them.
Streaming (``stream: true``) sends ``chat.completion.chunk`` deltas of the model's
tokens (or, when the graph's nodes return whole messages, the reply in one delta) and
``data: [DONE]``; a graph that raises ends the stream with an ``error`` object.

A graph that pauses (``interrupt()``) answers ``finish_reason: "interrupt"``, the
interrupt's value as the message's text (JSON unless it is a string) and the
interrupts in ``message.interrupts``; resume it through the thread API
(``command.resume`` on the ``X-Thread-Id`` thread). Errors have OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``; ``n`` other than 1 is refused (400).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from threadloom.server.http import JSON, ApiError, body_as
from threadloom.server.schemas import ChatCompletion, RunCreate
from threadloom.server.state import ServerState, owner, server
from threadloom.server.wire import dumps, uuid7

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 409: "conflict_error", 413: "invalid_request_error",
          422: "invalid_request_error", 502: "server_error"}
_NAMES = uuid.UUID("6f8e2f0c-3a51-4c0e-9a59-6b1f7b1d2c11")  # thread names -> ids


def openai_error(status: int, message: str, *, param: str | None = None,
                 code: str | None = None, err_type: str | None = None,
                 headers: dict[str, str] | None = None) -> Response:
    """An error answer in OpenAI's shape (its clients show ``error.message``)."""
    return JSON({"error": {"message": message, "type": err_type or _TYPES.get(
        status, "server_error"), "param": param, "code": code}}, status_code=status,
        headers=headers)


def _openai_errors(handler: Callable[[Request], Awaitable[Response]]
                   ) -> Callable[[Request], Awaitable[Response]]:
    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            detail = exc.detail if isinstance(exc.detail, str) else dumps(exc.detail)
            param = detail.split(":", 1)[0] if exc.status == 422 and ":" in detail else None
            code = "model_not_found" if exc.status == 404 and "Assistant" in detail else None
            return openai_error(exc.status, detail, param=param, code=code,
                                headers=exc.headers)
    guarded.__doc__ = handler.__doc__
    return guarded


def _model(assistant: Any) -> dict[str, Any]:
    return {"id": assistant.graph_id, "object": "model", "created": int(time.time()),
            "owned_by": "threadloom"}


async def models(request: Request) -> Response:
    """``GET /v1/models``: one model per served assistant (id: the graph name)."""
    state = server(request)
    data = [_model(a) for a in state.assistants.by_graph.values()]
    return JSON({"object": "list", "data": data})


async def model(request: Request) -> Response:
    """``GET /v1/models/{model}``: the model (assistant) named."""
    state = server(request)
    found = await state.manager.assistant(owner(request), request.path_params["model"])
    return JSON(_model(found))


def thread_of(request: Request, body: ChatCompletion) -> str | None:
    """The thread of a completion: the ``X-Thread-Id`` header as is, or the thread the
    caller's name (``metadata.thread_id``, ``user``) stands for; None: stateless."""
    header = request.headers.get("x-thread-id")
    if header:
        return header
    meta = body.metadata or {}
    name = meta.get("thread_id") if isinstance(meta.get("thread_id"), str) else None
    name = name or body.user
    if not name:
        return None
    return str(uuid.uuid5(_NAMES, f"{owner(request)}\x00{name}"))


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
    if body.n is not None and body.n != 1:
        raise ApiError(400, f"n: only n=1 is supported (one reply per run), got {body.n}")
    assistant = await state.manager.assistant(owner(request), body.model)
    if "messages" not in assistant.graph.specs:
        raise ApiError(422, f"model: assistant {body.model!r} has no 'messages' state key")
    thread_id = thread_of(request, body)
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
        return openai_error(502, str(error.get("message")), code=error.get("error"),
                            err_type="server_error", headers=headers)
    reply = _last_ai(output)
    message: dict[str, Any] = {"role": "assistant", "content": _text(reply.get("content"))}
    if reply.get("tool_calls"):
        message["tool_calls"] = _tool_calls(reply)
    finish = "stop"
    interrupts = output.get("__interrupt__") if isinstance(output, dict) else None
    if interrupts:
        finish, message["content"] = "interrupt", _interrupt_text(interrupts)
        message["interrupts"] = interrupts
    return JSON({"id": cid, "object": "chat.completion", "created": int(time.time()),
                 "model": body.model, "choices": [{
                     "index": 0, "finish_reason": finish, "message": message}],
                 "usage": _usage(reply)}, headers=headers)


def _interrupt_text(interrupts: list[Any]) -> str:
    values = [i.get("value") if isinstance(i, dict) else i for i in interrupts]
    return "\n".join(v if isinstance(v, str) else dumps(v) for v in values)


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
    sent, last_values = False, None
    async for event in state.log.read(run["run_id"], 0):
        if event.event == "error":
            error = json.loads(event.data)
            yield {"data": dumps({"error": {"message": error.get("message"), "type":
                                            "server_error", "param": None,
                                            "code": error.get("error")}})}
            yield {"data": "[DONE]"}
            return
        if event.event == "values":
            last_values = event.data
            continue
        if event.event != "messages":
            continue
        message, _meta = json.loads(event.data)
        text = _text(message.get("content"))
        if text and message.get("type") in ("AIMessageChunk", "ai"):
            sent = True
            yield {"data": _chunk(cid, model, {"content": text})}
    for delta, finish in _ending(json.loads(last_values) if last_values else None, sent):
        yield {"data": _chunk(cid, model, delta, finish)}
    yield {"data": "[DONE]"}


def _ending(values: Any, sent: bool) -> list[tuple[dict[str, Any], str | None]]:
    """The stream's last chunks: the reply when no token was streamed (nodes that return
    whole messages, tuples included, stream none), then the finish reason."""
    interrupts = values.get("__interrupt__") if isinstance(values, dict) else None
    if interrupts:
        return [({"content": _interrupt_text(interrupts)}, None), ({}, "interrupt")]
    messages = values.get("messages") if isinstance(values, dict) else None
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not sent and isinstance(last, dict) and last.get("type") in ("ai", "AIMessageChunk"):
        text = _text(last.get("content"))
        if text:
            return [({"content": text}, None), ({}, "stop")]
    return [({}, "stop")]


ROUTES = [
    Route("/v1/models", _openai_errors(models), methods=["GET"]),
    Route("/v1/models/{model}", _openai_errors(model), methods=["GET"]),
    Route("/v1/chat/completions", _openai_errors(completions), methods=["POST"]),
]
