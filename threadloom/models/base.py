"""The chat model contract and the one base class every threadloom model builds on.

`ChatModel` is the protocol the agent and nodes code against. `BaseChatModel` implements
`invoke`/`ainvoke`/`stream`/`astream` once, on top of four small hooks a model provides
(`_generate`, `_agenerate`, `_stream`, `_astream`), and holds the two behaviours every
model must share:

- token streaming into the engine: while the running graph streams `messages`
  (`threadloom.engine.runtime.message_stream_active()`), `invoke` streams from the
  provider, hands every chunk to `emit_message_chunk`, and returns the assembled message
  with the chunks' id, so the engine does not emit it twice (as LangChain's chat models
  do with callbacks under LangGraph's `messages` mode);
- the truncated-tool-call guard (case H14): tool calls of a reply cut by the token limit,
  or with arguments that are not a JSON object, are never returned as runnable calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    convert_to_messages,
)
from threadloom.models.bound import Bindings
from threadloom.models.tool_calls import (
    MAX_TOOL_CALLS,
    ChunkAccumulator,
    guard_tool_calls,
    new_message_id,
    tool_to_openai,
)
from threadloom.workers import to_worker

__all__ = [
    "BaseChatModel",
    "ChatModel",
    "ChunkAccumulator",
    "guard_tool_calls",
    "new_message_id",
    "tool_to_openai",
]

_RUNTIME: list[Any] = []  # (message_stream_active, emit_message_chunk) once looked up


def _engine_hooks() -> tuple[Any, Any] | None:
    """``(message_stream_active, emit_message_chunk)`` when the running graph streams
    messages, else None."""
    if not _RUNTIME:
        try:
            from threadloom.engine import runtime
        except ImportError:
            return None
        _RUNTIME.append((getattr(runtime, "message_stream_active", None),
                         getattr(runtime, "emit_message_chunk", None)))
    active, emit = _RUNTIME[0]
    if active is None or emit is None or not active():
        return None
    return active, emit


@runtime_checkable
class ChatModel(Protocol):
    """What the agent and nodes need from a chat model (OpenAI chat-completions semantics).

    ``messages`` is anything ``convert_to_messages`` accepts. ``tools`` holds threadloom
    tools or OpenAI tool dicts; ``tool_choice`` is ``"auto"``/``"none"``/``"required"`` or
    a tool name / OpenAI dict; ``response_format`` an OpenAI ``response_format`` dict.
    Further keyword arguments are generation settings (``temperature``, ``max_tokens``...).
    """

    supports_tools: bool

    def invoke(self, messages: Any, *, tools: Sequence[Any] | None = None,
               tool_choice: Any = None, response_format: Any = None,
               **kwargs: Any) -> AIMessage: ...

    async def ainvoke(self, messages: Any, *, tools: Sequence[Any] | None = None,
                      tool_choice: Any = None, response_format: Any = None,
                      **kwargs: Any) -> AIMessage: ...

    def stream(self, messages: Any, *, tools: Sequence[Any] | None = None,
               tool_choice: Any = None, response_format: Any = None,
               **kwargs: Any) -> Iterator[AIMessageChunk]: ...

    def astream(self, messages: Any, *, tools: Sequence[Any] | None = None,
                tool_choice: Any = None, response_format: Any = None,
                **kwargs: Any) -> AsyncIterator[AIMessageChunk]: ...


class BaseChatModel(Bindings):
    """Implements the ``ChatModel`` entry points once; subclasses provide the hooks.

    Hooks (``msgs`` is a list of ``BaseMessage``; ``tools`` a list of OpenAI tool dicts or
    None; ``opts`` holds ``tool_choice``, ``response_format`` and generation kwargs):
    ``_generate(msgs, tools, opts) -> AIMessage``, ``_stream(msgs, tools, opts) ->
    Iterator[AIMessageChunk]`` (every chunk carrying the same id), and optionally the
    async twins (defaults run the sync hooks in a worker thread / inline).
    """

    supports_tools: bool = True
    #: ``invoke`` streams from the provider even outside a ``messages``-streaming run.
    streaming: bool = False
    #: The most tool calls one reply may hold; a reply with more raises ``ModelError``
    #: and none is run (set it on the instance; None: no cap, as LangGraph).
    max_tool_calls: int | None = MAX_TOOL_CALLS

    # -- hooks ----------------------------------------------------------------------------
    def _generate(self, msgs: list[BaseMessage], tools: list[dict] | None,
                  opts: dict[str, Any]) -> AIMessage:
        acc = self._accumulator()
        for chunk in self._stream(msgs, tools, opts):
            acc.add(chunk)
        return acc.result()

    def _stream(self, msgs: list[BaseMessage], tools: list[dict] | None,
                opts: dict[str, Any]) -> Iterator[AIMessageChunk]:
        raise NotImplementedError(f"{type(self).__name__} does not implement _stream")

    async def _agenerate(self, msgs: list[BaseMessage], tools: list[dict] | None,
                         opts: dict[str, Any]) -> AIMessage:
        return await to_worker(self._generate, msgs, tools, opts)

    async def _astream(self, msgs: list[BaseMessage], tools: list[dict] | None,
                       opts: dict[str, Any]) -> AsyncIterator[AIMessageChunk]:
        for chunk in self._stream(msgs, tools, opts):
            yield chunk

    def _emit_view(self, tools: list[dict] | None) -> Any:
        """A per-reply ``chunk -> chunk | None`` filter for what ``invoke`` emits to the
        ``messages`` stream, or None to emit the raw chunks (the default)."""
        return None

    def _finish(self, message: AIMessage, tools: list[dict] | None) -> AIMessage:
        """Last touch on every reply ``invoke`` returns; the default applies the H14 guard."""
        return guard_tool_calls(message, max_tool_calls=self.max_tool_calls,
                                where=self._where())

    def _where(self) -> str:
        """Names the model in errors (``OpenAIChatModel.where``: model and URL)."""
        return str(getattr(self, "where", None) or type(self).__name__)

    def _accumulator(self) -> ChunkAccumulator:
        return ChunkAccumulator(max_tool_calls=self.max_tool_calls, where=self._where())

    # -- entry points ---------------------------------------------------------------------
    @staticmethod
    def _prepare(messages: Any, tools: Sequence[Any] | None, tool_choice: Any,
                 response_format: Any, kwargs: dict[str, Any]) -> tuple[Any, Any, dict]:
        msgs = convert_to_messages(messages)
        wire_tools = [tool_to_openai(t) for t in tools] if tools else None
        opts = dict(kwargs)
        if tool_choice is not None:
            opts["tool_choice"] = tool_choice
        if response_format is not None:
            opts["response_format"] = response_format
        return msgs, wire_tools, opts

    def invoke(self, messages: Any, *, tools: Sequence[Any] | None = None,
               tool_choice: Any = None, response_format: Any = None,
               **kwargs: Any) -> AIMessage:
        """Call the model once and return its reply.

        Inside a graph run that streams ``messages`` the reply is streamed and each chunk
        is emitted to the engine; the returned message then has the chunks' id. With
        ``streaming = True`` the reply is always streamed (and assembled).

        Raises:
            threadloom.errors.ModelError: and its subclasses, for provider errors.
        """
        msgs, wire_tools, opts = self._prepare(messages, tools, tool_choice,
                                               response_format, kwargs)
        hooks = _engine_hooks()
        if hooks is None and not self.streaming:
            return self._finish(self._generate(msgs, wire_tools, opts), wire_tools)
        acc = self._accumulator()
        view = self._emit_view(wire_tools) if hooks is not None else None
        for chunk in self._stream(msgs, wire_tools, opts):
            if hooks is not None:
                shown = chunk if view is None else view(chunk)
                if shown is not None:
                    hooks[1](shown)
            acc.add(chunk)
        return self._finish(acc.result(), wire_tools)

    async def ainvoke(self, messages: Any, *, tools: Sequence[Any] | None = None,
                      tool_choice: Any = None, response_format: Any = None,
                      **kwargs: Any) -> AIMessage:
        """Async twin of :meth:`invoke`."""
        msgs, wire_tools, opts = self._prepare(messages, tools, tool_choice,
                                               response_format, kwargs)
        hooks = _engine_hooks()
        if hooks is None and not self.streaming:
            return self._finish(await self._agenerate(msgs, wire_tools, opts), wire_tools)
        acc = self._accumulator()
        view = self._emit_view(wire_tools) if hooks is not None else None
        async for chunk in self._astream(msgs, wire_tools, opts):
            if hooks is not None:
                shown = chunk if view is None else view(chunk)
                if shown is not None:
                    hooks[1](shown)
            acc.add(chunk)
        return self._finish(acc.result(), wire_tools)

    def stream(self, messages: Any, *, tools: Sequence[Any] | None = None,
               tool_choice: Any = None, response_format: Any = None,
               **kwargs: Any) -> Iterator[AIMessageChunk]:
        """Yield the reply as ``AIMessageChunk`` s sharing one id.

        Summing the chunks gives the same content, tool calls and usage as ``invoke``
        (usage travels on one chunk only). Inside a ``messages``-streaming run the chunks
        are also emitted to the engine.
        """
        msgs, wire_tools, opts = self._prepare(messages, tools, tool_choice,
                                               response_format, kwargs)
        hooks = _engine_hooks()
        for chunk in self._stream(msgs, wire_tools, opts):
            if hooks is not None:
                hooks[1](chunk)
            yield chunk

    async def astream(self, messages: Any, *, tools: Sequence[Any] | None = None,
                      tool_choice: Any = None, response_format: Any = None,
                      **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
        """Async twin of :meth:`stream`."""
        msgs, wire_tools, opts = self._prepare(messages, tools, tool_choice,
                                               response_format, kwargs)
        hooks = _engine_hooks()
        async for chunk in self._astream(msgs, wire_tools, opts):
            if hooks is not None:
                hooks[1](chunk)
            yield chunk
