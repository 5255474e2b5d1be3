"""Record a real model's exchanges to a cassette file; replay them offline.

As VCR.py / pytest-recording do for HTTP, but at the chat-model boundary, so a cassette
holds messages rather than provider wire bytes and works for every model. A cassette is
JSON::

    {"version": 1, "model": "...", "interactions": [
        {"request": {"messages": [<message_to_dict>...], "tools": [...] | null,
                     "kwargs": {...}},
         "response": <message_to_dict of the AIMessage>}, ...]}

Only messages, tool schemas and generation settings are written: never API keys,
headers or base URLs.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from threadloom.errors import ModelError
from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    message_from_dict,
    message_to_dict,
    to_openai_messages,
)

from .base import BaseChatModel, ChunkAccumulator
from .scripted import ScriptedChatModel

__all__ = ["CassetteMismatchError", "RecordingChatModel", "ReplayChatModel"]

VERSION = 1
_SECRET_KWARGS = frozenset({"api_key", "extra_headers", "headers", "default_headers",
                            "authorization", "extra_query", "organization", "base_url"})


class CassetteMismatchError(ModelError):
    """A request differs from the recorded one, or the cassette has no recording left.

    Attributes:
        path: the cassette file.
        index: the 0-based number of the call.
        field: where the requests first differ (e.g. ``"messages[2].content"``).
    """

    def __init__(self, message: str, *, path: str, index: int, field: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.index = index
        self.field = field


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=_fallback))


def _fallback(value: Any) -> Any:
    if isinstance(value, type) and hasattr(value, "model_json_schema"):
        return {"pydantic_model": value.__name__, "schema": value.model_json_schema()}
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return repr(value)


def _request(msgs: list[BaseMessage], tools: list[dict] | None,
             opts: dict[str, Any]) -> dict[str, Any]:
    kwargs = {k: v for k, v in opts.items() if k.lower() not in _SECRET_KWARGS}
    return _jsonable({"messages": [message_to_dict(m) for m in msgs], "tools": tools,
                      "kwargs": kwargs})


def _wire_view(request: dict[str, Any]) -> dict[str, Any]:
    """What reaches the model: messages in wire format (ids and metadata do not count)."""
    msgs = [message_from_dict(d) for d in request.get("messages", [])]
    return {"messages": to_openai_messages(msgs), "tools": request.get("tools"),
            "kwargs": request.get("kwargs", {})}


def _first_difference(want: Any, got: Any, where: str = "") -> str | None:
    """The path of the first difference between two JSON values, or None when equal."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in list(want) + [k for k in got if k not in want]:
            if key not in got or key not in want:
                return f"{where}.{key}".lstrip(".")
            found = _first_difference(want[key], got[key], f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list):
        for i, (a, b) in enumerate(zip(want, got, strict=False)):
            found = _first_difference(a, b, f"{where}[{i}]")
            if found is not None:
                return found
        return None if len(want) == len(got) else f"{where} (length {len(want)} != {len(got)})"
    return None if want == got else where.lstrip(".") or "<root>"


def _lookup(value: Any, path: str) -> Any:
    for part in path.replace("[", ".[").split("."):
        if not part or " " in part:
            continue
        try:
            value = value[int(part[1:-1])] if part.startswith("[") else value[part]
        except (KeyError, IndexError, TypeError):
            return "<missing>"
    return value


class RecordingChatModel(BaseChatModel):
    """Wraps a model and appends every request and reply to a cassette file.

    Calls go to ``inner``'s own ``invoke``/``ainvoke``/``stream``/``astream`` unchanged
    (so token streaming into a graph run works as without recording); the finished reply
    is recorded after each call.

    Args:
        inner: the model to record (any ``ChatModel``: ``OpenAIChatModel``,
            ``LocalChatModel``...).
        path: the cassette file; created or overwritten on the first call, rewritten
            (atomically) after each call so an interrupted run keeps what it recorded.
    """

    def __init__(self, inner: Any, path: str | os.PathLike[str]) -> None:
        if not callable(getattr(inner, "invoke", None)):
            raise TypeError(f"RecordingChatModel needs a chat model, got {type(inner).__name__}")
        self.inner = inner
        self.path = Path(path)
        self.supports_tools = getattr(inner, "supports_tools", True)
        self.interactions: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _record(self, call: tuple[Any, Any, dict], reply: AIMessage) -> AIMessage:
        msgs, tools, opts = call
        finish = getattr(self.inner, "_finish", None)
        if callable(finish):
            reply = finish(reply, tools)
        entry = {"request": _request(msgs, tools, opts),
                 "response": _jsonable(message_to_dict(reply))}
        with self._lock:
            self.interactions.append(entry)
            data = {"version": VERSION, "model": getattr(self.inner, "model", None)
                    or type(self.inner).__name__, "interactions": self.interactions}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1, ensure_ascii=False)
            os.replace(tmp, self.path)
        return reply

    def invoke(self, messages: Any, *, tools: Sequence[Any] | None = None,
               tool_choice: Any = None, response_format: Any = None,
               **kwargs: Any) -> AIMessage:
        """As ``inner.invoke``; records the exchange."""
        call = self._prepare(messages, tools, tool_choice, response_format, kwargs)
        reply = self.inner.invoke(call[0], tools=tools, tool_choice=tool_choice,
                                  response_format=response_format, **kwargs)
        return self._record(call, reply)

    async def ainvoke(self, messages: Any, *, tools: Sequence[Any] | None = None,
                      tool_choice: Any = None, response_format: Any = None,
                      **kwargs: Any) -> AIMessage:
        """As ``inner.ainvoke``; records the exchange."""
        call = self._prepare(messages, tools, tool_choice, response_format, kwargs)
        reply = await self.inner.ainvoke(call[0], tools=tools, tool_choice=tool_choice,
                                         response_format=response_format, **kwargs)
        return self._record(call, reply)

    def stream(self, messages: Any, *, tools: Sequence[Any] | None = None,
               tool_choice: Any = None, response_format: Any = None,
               **kwargs: Any) -> Iterator[AIMessageChunk]:
        """As ``inner.stream``; records the assembled reply once the stream ends."""
        call = self._prepare(messages, tools, tool_choice, response_format, kwargs)
        acc = ChunkAccumulator.for_model(self.inner)
        for chunk in self.inner.stream(call[0], tools=tools, tool_choice=tool_choice,
                                       response_format=response_format, **kwargs):
            acc.add(chunk)
            yield chunk
        self._record(call, acc.result())

    async def astream(self, messages: Any, *, tools: Sequence[Any] | None = None,
                      tool_choice: Any = None, response_format: Any = None,
                      **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
        """As ``inner.astream``; records the assembled reply once the stream ends."""
        call = self._prepare(messages, tools, tool_choice, response_format, kwargs)
        acc = ChunkAccumulator.for_model(self.inner)
        async for chunk in self.inner.astream(call[0], tools=tools, tool_choice=tool_choice,
                                              response_format=response_format, **kwargs):
            acc.add(chunk)
            yield chunk
        self._record(call, acc.result())


class ReplayChatModel(BaseChatModel):
    """Plays a cassette back, in order, checking each request against the recording.

    Replies stream like ``ScriptedChatModel`` (text word by word, tool-call arguments in
    pieces) and keep the recorded content, tool calls (with their ids), usage and finish
    reason; message ids are fresh. Requests are compared as they would reach the model
    (messages in wire format, tool schemas, generation settings), so message ids and
    response metadata in the history do not count.

    Args:
        path: a cassette written by ``RecordingChatModel``.

    Raises:
        FileNotFoundError: no cassette at ``path``.
        ValueError: the file is not a cassette of a known version.
        CassetteMismatchError: (when called) the request differs from the recording (the
            message names the first differing field and both values), or every recorded
            interaction was used.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        data = json.loads(self.path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError(f"{self.path} is not a version-{VERSION} threadloom cassette")
        self.model = data.get("model")
        self.interactions: list[dict[str, Any]] = data["interactions"]
        replies: list[AIMessage] = []
        for item in self.interactions:
            reply = {k: v for k, v in item["response"].items() if k not in ("type", "id")}
            # type "ai" always reads back as an AIMessage
            replies.append(cast(AIMessage, message_from_dict({**reply, "type": "ai"})))
        self._player = ScriptedChatModel(replies, name=str(self.model))

    @property
    def calls(self) -> list[dict[str, Any]]:
        """What each call received (as ``ScriptedChatModel.calls``)."""
        return self._player.calls

    def _check(self, msgs: list[BaseMessage], tools: list[dict] | None,
               opts: dict[str, Any]) -> None:
        index = self._player.call_count
        if index >= len(self.interactions):
            raise CassetteMismatchError(
                f"cassette {self.path} has {len(self.interactions)} interactions; call "
                f"#{index + 1} has no recording (re-record the cassette)",
                path=str(self.path), index=index)
        want = _wire_view(self.interactions[index]["request"])
        got = _wire_view(_request(msgs, tools, opts))
        field = _first_difference(want, got)
        if field is not None:
            raise CassetteMismatchError(
                f"request #{index + 1} differs from cassette {self.path} at {field}: "
                f"recorded {_lookup(want, field)!r}, got {_lookup(got, field)!r}",
                path=str(self.path), index=index, field=field)

    def _stream(self, msgs: list[BaseMessage], tools: list[dict] | None,
                opts: dict[str, Any]) -> Iterator[AIMessageChunk]:
        self._check(msgs, tools, opts)
        yield from self._player._stream(msgs, tools, opts)

    async def _agenerate(self, msgs: list[BaseMessage], tools: list[dict] | None,
                         opts: dict[str, Any]) -> AIMessage:
        return self._generate(msgs, tools, opts)
