"""Tool calls between threadloom and a provider: tools as OpenAI ``tools[]`` entries, the
guard that keeps malformed calls from running, and the accumulator of streamed chunks.

The guard (case H14): tool calls of a reply cut by the token limit, or with arguments that
are not a JSON object, are never returned as runnable calls; they become
``invalid_tool_calls``.
"""

from __future__ import annotations

import json
from typing import Any

from threadloom.errors import ModelError
from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    InvalidToolCall,
    make_tool_call,
    new_tool_call_id,
)
from threadloom.messages.ids import uuid4_hex
from threadloom.messages.spellings import ToolCallView


def new_message_id() -> str:
    """A fresh, globally unique message id (``"msg_" + 32 hex``)."""
    return "msg_" + uuid4_hex()


_PREVIEW = 200


def tool_to_openai(t: Any) -> dict[str, Any]:
    """Convert a tool to an OpenAI ``tools[]`` entry.

    Args:
        t: an OpenAI tool dict (returned as is), a bare function dict
            (``{"name", "description"?, "parameters"?}``, wrapped), a threadloom ``Tool``
            (``.name``, ``.description``, ``.json_schema()``), any object with ``.name``,
            ``.description`` and ``.args_schema`` (a JSON-schema dict or a pydantic model
            class), or a pydantic model class (its name, docstring and schema).

    Returns:
        ``{"type": "function", "function": {"name", "description", "parameters"}}``.

    Raises:
        TypeError: ``t`` is none of the above.
    """
    if isinstance(t, dict):
        if "function" in t or t.get("type") not in (None, "function"):
            return t
        if "name" in t:
            return {"type": "function", "function": t}
        raise TypeError(f"tool dict has neither 'function' nor 'name': {sorted(t)}")
    if isinstance(t, type) and hasattr(t, "model_json_schema"):
        name, description, schema = t.__name__, (t.__doc__ or "").strip(), t.model_json_schema()
    else:
        found = getattr(t, "name", None)
        if not isinstance(found, str) or not found:
            raise TypeError(f"cannot use {t!r} as a tool: it has no 'name'")
        name = found
        description = getattr(t, "description", "") or ""
        schema = _schema_of(t)
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


def _schema_of(t: Any) -> dict[str, Any]:
    getter = getattr(t, "json_schema", None)
    if callable(getter):
        return dict(getter())
    schema = getattr(t, "args_schema", None)
    if isinstance(schema, dict):
        return schema
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    return {"type": "object", "properties": {}}


def _invalid(call_id: str, name: str | None, raw: Any, why: str) -> InvalidToolCall:
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    preview = text if len(text) <= _PREVIEW else text[:_PREVIEW] + "..."
    error = (
        f"The call to tool {name!r} was {why}, so it was not run. Send the call again "
        f"in full, with complete JSON-object arguments. Received arguments: {preview}"
    )
    return InvalidToolCall(name=name or "", args=None, id=call_id, error=error)


MAX_TOOL_CALLS = 128
"""Default cap on the tool calls of one reply (``BaseChatModel.max_tool_calls``)."""


def guard_tool_calls(message: AIMessage, *, max_tool_calls: int | None = MAX_TOOL_CALLS,
                     where: str = "the model") -> AIMessage:
    """Keep suspect tool calls from running (case H14); give every call its own id.

    When the reply was cut by the token limit (``finish_reason == "length"``) and has tool
    calls, or when any call's arguments are not a JSON object, *all* its calls move to
    ``invalid_tool_calls`` with an error saying the call was truncated/invalid and must be
    sent again in full. The raw arguments survive only inside that error text, so what is
    stored and sent back is never invalid JSON.

    A call without an id, or with the id of an earlier call of the same reply (two calls
    sharing an id would share one result and one idempotency key), gets a fresh id, so
    every call that runs gets its own ``ToolMessage``.

    Args:
        max_tool_calls: the most calls (valid and invalid) one reply may hold; None for
            no cap. LangGraph and Haystack have none: a reply of 10,000 calls would run
            them all.
        where: names the model in the error.

    Returns:
        ``message`` itself when nothing changed, else an updated copy.

    Raises:
        ModelError: the reply holds more than ``max_tool_calls`` calls (none is run).
    """
    count = len(message.tool_calls) + len(message.invalid_tool_calls)
    if max_tool_calls is not None and count > max_tool_calls:
        raise _too_many(count, max_tool_calls, where)
    if not message.invalid_tool_calls:  # the usual reply: nothing to guard
        if not message.tool_calls:
            return message
        if message.finish_reason != "length":
            ids = {call.get("id") for call in message.tool_calls}
            if None not in ids and "" not in ids and len(ids) == count:
                return message
    calls = list(message.tool_calls)
    invalid = list(message.invalid_tool_calls)
    changed = False
    seen: set[str] = set()
    for i, call in enumerate(calls):
        call_id = call.get("id")
        if not call_id or call_id in seen:
            call_id = new_tool_call_id()
            calls[i] = ToolCallView({**call, "id": call_id})  # type: ignore[call-overload]
            changed = True
        seen.add(call_id)
    for i, bad in enumerate(invalid):
        if bad.get("id") in seen:
            invalid[i] = {**bad, "id": None}  # given a fresh id just below
        seen.add(bad.get("id") or "")
    for i, bad in enumerate(invalid):
        if not bad.get("id") or bad.get("args") is not None:
            reason = bad.get("error") or "not valid JSON"
            invalid[i] = _invalid(bad.get("id") or new_tool_call_id(), bad.get("name"),
                                  bad.get("args") or "",
                                  f"invalid or truncated ({reason})")
            changed = True
    truncated = message.finish_reason == "length"
    if calls and (truncated or invalid):
        why = "truncated by the output token limit" if truncated else "part of a reply " \
            "with invalid tool-call arguments (likely truncated)"
        invalid = [_invalid(c["id"], c["name"], c.get("args", {}), why) for c in calls] + invalid
        calls = []
        changed = True
    if not changed:
        return message
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid})


def _too_many(count: int, cap: int, where: str) -> ModelError:
    return ModelError(f"{where}: the reply asks for {count} tool calls, more than "
                      f"max_tool_calls={cap}; none was run (raise the model's "
                      "max_tool_calls to allow more)")


def _add_args(slot: dict[str, Any], delta: str) -> None:
    """Add an argument delta; one that starts with the whole non-empty buffer replaces it
    (case H45: servers that resend the arguments so far, or in full, in later chunks)."""
    pieces = slot["args"]
    size = slot.get("size", 0)
    if size and len(delta) >= size:
        buffer = "".join(pieces)
        if delta.startswith(buffer):
            pieces.clear()
            size = 0
    pieces.append(delta)
    slot["size"] = size + len(delta)


class ChunkAccumulator:
    """Assembles streamed ``AIMessageChunk`` s into one ``AIMessage`` in linear time.

    Text, reasoning and refusal pieces are joined; tool-call chunks are merged by their
    ``index`` (models normalise indexes before emitting), an argument delta that resends
    the whole buffer replacing it (H45); usage is the *last* one seen
    (servers that send running totals on every chunk are not double counted, case H25);
    response metadata is merged, later keys winning. The message id is the first chunk id.
    """

    __slots__ = ("_id", "_text", "_parts", "_reasoning", "_refusal", "_calls", "_usage",
                 "_meta", "_extra", "max_tool_calls", "where")

    def __init__(self, *, max_tool_calls: int | None = MAX_TOOL_CALLS,
                 where: str = "the model") -> None:
        self.max_tool_calls = max_tool_calls
        self.where = where
        self._id: str | None = None
        self._text: list[str] = []
        self._parts: list[Any] | None = None
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: Any = None
        self._meta: dict[str, Any] = {}
        self._extra: dict[str, Any] = {}

    @classmethod
    def for_model(cls, model: Any) -> ChunkAccumulator:
        """An accumulator with ``model``'s own ``max_tool_calls`` cap and error name.

        For code that assembles a model's streamed chunks itself (the agent's
        ``streaming_callback`` path, the cassette): a model without the attribute gets the
        default cap (``MAX_TOOL_CALLS``).
        """
        where = getattr(model, "where", None) or type(model).__name__
        return cls(max_tool_calls=getattr(model, "max_tool_calls", MAX_TOOL_CALLS),
                   where=str(where))

    def add(self, chunk: AIMessageChunk) -> None:
        """Fold one chunk in."""
        if self._id is None and chunk.id:
            self._id = chunk.id
        content = chunk.content
        if isinstance(content, str):
            if content:
                self._text.append(content)
        else:
            self._parts = (self._parts or []) + list(content)
        if chunk.reasoning_content:
            self._reasoning.append(chunk.reasoning_content)
        if chunk.refusal:
            self._refusal.append(chunk.refusal)
        for tc in chunk.tool_call_chunks:
            index = tc.get("index")
            slot = self._calls.setdefault(len(self._calls) if index is None else index,
                                          {"id": None, "name": None, "args": []})
            slot["id"] = slot["id"] or tc.get("id")
            slot["name"] = slot["name"] or tc.get("name")
            delta = tc.get("args")
            if delta:
                _add_args(slot, delta)
        if chunk.usage_metadata is not None:
            self._usage = chunk.usage_metadata
        if chunk.response_metadata:
            self._meta.update(chunk.response_metadata)
        if chunk.additional_kwargs:
            self._extra.update(chunk.additional_kwargs)

    def result(self) -> AIMessage:
        """The assembled message (tool-call arguments decoded, H14 guard applied).

        Raises:
            ModelError: more tool calls than ``max_tool_calls``, or tool-call arguments
                nested too deeply to decode (the message names ``where``).
        """
        calls: list[Any] = []
        invalid: list[Any] = []
        if self.max_tool_calls is not None and len(self._calls) > self.max_tool_calls:
            raise _too_many(len(self._calls), self.max_tool_calls, self.where)
        for index in sorted(self._calls):
            slot = self._calls[index]
            try:
                call = make_tool_call(slot["name"], "".join(slot["args"]), slot["id"])
            except RecursionError:
                raise ModelError(f"{self.where}: the provider sent tool-call arguments "
                                 "nested too deeply to read") from None
            (invalid if "error" in call else calls).append(call)
        text = "".join(self._text)
        content: Any = text if self._parts is None else ([{"type": "text", "text": text}]
                                                          if text else []) + self._parts
        message = AIMessage(
            content=content,
            id=self._id or new_message_id(),
            tool_calls=calls,
            invalid_tool_calls=invalid,
            usage_metadata=self._usage,
            reasoning_content="".join(self._reasoning) or None,
            refusal="".join(self._refusal) or None,
            response_metadata=self._meta,
            additional_kwargs=self._extra,
        )
        return guard_tool_calls(message, max_tool_calls=self.max_tool_calls, where=self.where)
