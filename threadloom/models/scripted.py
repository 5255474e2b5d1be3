"""`ScriptedChatModel`: a deterministic chat model for tests, demos and notebooks.

It replays a script of replies, one per call, and streams each like a real provider:
text word by word, tool-call arguments in several deltas, a closing chunk with the
finish reason and usage. `stream` (and `invoke` inside a run that streams `messages`)
yields those chunks; a plain `invoke` builds the very message the chunks would add up
to without making them (the fast path agents take when nobody streams).
"""

from __future__ import annotations

import json
import math
import re
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from threadloom.errors import ScriptExhaustedError
from threadloom.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    construct_unchecked,
    make_tool_call,
)
from threadloom.messages.build import construct_complete
from threadloom.messages.spellings import ToolCallView

from .base import (
    BaseChatModel,
    ChunkAccumulator,
    _engine_hooks,
    guard_tool_calls,
    new_message_id,
)

__all__ = ["ScriptedChatModel"]

Reply = AIMessage | str | dict[str, Any]
ReplyFn = Callable[[list[BaseMessage], list[dict[str, Any]] | None], Reply]

# CJK ideographs, kana, hangul and full-width punctuation have no spaces between words:
# each such character is a chunk of its own, as a provider streams them (a few per token).
_CJK = ("\u2e80-\u2fff\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
        "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef")
_WORDS = re.compile(rf"\s*[{_CJK}]\s*|\s*[^\s{_CJK}]+\s*|\s+")
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # what json.dumps(ensure_ascii=False) does
_STR = json.encoder.encode_basestring  # how that encoder writes a str (C-accelerated)
# the fields a built reply counts as set (all but ``name`` and ``type``; a frozenset:
# each reply's ``model_fields_set`` is a copy, made fastest from a set)
_REPLY_FIELDS = frozenset({"content", "id", "tool_calls", "invalid_tool_calls",
                           "usage_metadata", "reasoning_content", "refusal",
                           "response_metadata", "additional_kwargs"})
_AI_FIELDS = {"content", "id", "name", "tool_calls", "invalid_tool_calls", "usage_metadata",
              "reasoning_content", "refusal", "response_metadata", "additional_kwargs"}


def _estimate_tokens(text: str) -> int:
    """About four characters per token, at least one for non-empty text."""
    return (len(text) + 3) // 4


def _call_fields(call: dict[str, Any]) -> tuple[str, Any, str | None]:
    """(name, args, id) from our shape ``{"name", "args", "id"}`` or OpenAI's wire shape."""
    fn = call.get("function")
    if isinstance(fn, dict):
        return fn.get("name") or "", fn.get("arguments", ""), call.get("id")
    return call.get("name") or "", call.get("args", {}), call.get("id")


def _id_prefix(msgs: Sequence[BaseMessage], number: int) -> str:
    """``call_<digest>`` of the request a reply answers: the same script and messages give
    the same ids (deterministic tests), and the calls of one thread never share an id,
    even made by several processes or models, since its history grows call by call."""
    last = msgs[-1] if msgs else None
    key = f"{number}:{len(msgs)}:{last.type if last else ''}:{_text(last.content) if last else ''}"
    return f"call_{zlib.crc32(key.encode()):08x}"


def _pieces(text: str, n: int) -> list[str]:
    """``text`` cut into ``n`` (or fewer) non-empty consecutive pieces."""
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


class ScriptedChatModel(BaseChatModel):
    """Replays a fixed script of replies, one per model call.

    Args:
        script: a list whose entries are taken in order, one per call: an ``AIMessage``,
            a string (the reply text), a dict of ``AIMessage`` fields (``content``,
            ``tool_calls`` as ``{"name", "args", "id"?}`` or OpenAI wire dicts, plus the
            shortcuts ``finish_reason`` and ``usage``), or a callable
            ``(messages, tools) -> reply`` of those. A single callable is used for every
            call. Tool-call ``args`` given as a string are sent as raw JSON text, so a
            script can reproduce truncated or invalid arguments.
        name: the ``model_name`` put in ``response_metadata``.
        record_calls: keep every request in ``calls`` (the default, for tests that check
            what the model was sent); False keeps only ``call_count``, so a long-running
            process (a benchmark, a load test) does not hold every request forever.

    Attributes:
        calls: one dict per call, ``{"messages": [...], "tools": [...] | None,
            "kwargs": {...}}`` (tools as OpenAI dicts; kwargs include ``tool_choice`` and
            ``response_format`` when given); empty with ``record_calls=False``.
        call_count: how many calls were made.

    Replies without usage get an estimate (about four characters per token); tool calls
    without an id get ``call_<digest of the request>_<position>``: deterministic, and
    unique within a thread even when several processes or models added to it. Message
    ids are fresh UUIDs. Text streams word by word, CJK text character by character.
    A dict reply may be OpenAI-shaped (``{"role": "assistant", "content": ...,
    "tool_calls": [...]}``).

    Raises:
        ScriptExhaustedError: (when called) the script has no reply left.
    """

    supports_tools = True

    def __init__(self, script: Sequence[Reply | ReplyFn] | ReplyFn, *,
                 name: str = "scripted", record_calls: bool = True) -> None:
        if not callable(script) and isinstance(script, str | dict | AIMessage):
            raise TypeError("script must be a list of replies or a callable, "
                            f"got a single {type(script).__name__}; wrap it in a list")
        self.script = script if callable(script) else list(script)
        self.name = name
        self.calls: list[dict[str, Any]] = []
        self.call_count = 0
        self.record_calls = record_calls
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        size = "callable" if callable(self.script) else f"{len(self.script)} replies"
        return f"ScriptedChatModel({size}, calls={self.call_count})"

    def _next(self, msgs: list[BaseMessage], tools: list[dict] | None,
              opts: dict[str, Any]) -> tuple[int, Reply]:
        with self._lock:
            number = self.call_count
            self.call_count = number + 1
            if self.record_calls:
                # ``msgs`` and ``opts`` are made afresh for each call
                # (``BaseChatModel._prepare``), so the record keeps them without copying.
                self.calls.append({"messages": msgs, "tools": tools, "kwargs": opts})
            entry: Any = self.script
            if not callable(entry):
                if number >= len(entry):
                    raise ScriptExhaustedError(
                        f"ScriptedChatModel was called {number + 1} times but its script "
                        f"has only {len(entry)} replies; add replies to the script")
                entry = entry[number]
        return number, entry(msgs, tools) if callable(entry) else entry

    def _normalise(self, reply: Reply, number: int,
                   msgs: Sequence[BaseMessage] = ()) -> dict[str, Any]:
        if isinstance(reply, str):
            fields: dict[str, Any] = {"content": reply}
        elif isinstance(reply, AIMessage):
            fields = {k: getattr(reply, k) for k in _AI_FIELDS}
        elif isinstance(reply, dict):
            if "role" in reply:  # an OpenAI-shaped assistant message
                if reply["role"] != "assistant":
                    raise ValueError(f"script reply #{number} has role {reply['role']!r}; a "
                                     "model reply is an assistant message")
                reply = {k: v for k, v in reply.items() if k != "role" and (
                    v is not None or k != "content")}
            unknown = set(reply) - _AI_FIELDS - {"finish_reason", "usage"}
            if unknown:
                raise ValueError(f"script reply #{number} has unknown keys {sorted(unknown)}")
            fields = dict(reply)
        else:
            raise TypeError(f"script reply #{number} must be an AIMessage, str or dict, "
                            f"got {type(reply).__name__}")
        calls = []
        for i, call in enumerate(list(fields.get("tool_calls") or [])
                                 + list(fields.get("invalid_tool_calls") or [])):
            name, args, call_id = _call_fields(call)
            raw = args if isinstance(args, str) else _ENCODE(args)
            calls.append((name, raw, call_id or f"{_id_prefix(msgs, number)}_{i}"))
        fields["tool_calls"] = calls
        return fields

    def _usage(self, msgs: list[BaseMessage], fields: dict[str, Any]) -> dict[str, Any]:
        given = fields.get("usage") or fields.get("usage_metadata")
        if given and "input_tokens" in given:
            out = given.get("output_tokens", 0)
            return {**given, "output_tokens": out,
                    "total_tokens": given.get("total_tokens", given["input_tokens"] + out)}
        if given:
            inp = given.get("input_tokens", given.get("prompt_tokens", 0))
            out = given.get("output_tokens", given.get("completion_tokens", 0))
            return {"input_tokens": inp, "output_tokens": out,
                    "total_tokens": given.get("total_tokens", inp + out)}
        return _estimate_usage(msgs, fields.get("content"), [c[1] for c in fields["tool_calls"]])

    def _stream(self, msgs: list[BaseMessage], tools: list[dict] | None,
                opts: dict[str, Any]) -> Iterator[AIMessageChunk]:
        number, reply = self._next(msgs, tools, opts)
        yield from self._chunks(msgs, self._normalise(reply, number, msgs))

    def _generate(self, msgs: list[BaseMessage], tools: list[dict] | None,
                  opts: dict[str, Any]) -> AIMessage:
        """The reply ``_stream``'s chunks add up to, built without making the chunks.

        A reply given as a dict of fields is checked like any user input: it goes through
        the (validated) chunks. A string or an ``AIMessage`` (validated when it was made)
        is assembled directly, exactly as ``ChunkAccumulator`` would assemble its chunks.
        """
        number, reply = self._next(msgs, tools, opts)
        if isinstance(reply, AIMessage):
            made = self._from_message(msgs, reply, number)
            if made is not None:
                return made
        fields = self._normalise(reply, number, msgs)
        if isinstance(reply, dict):
            acc = ChunkAccumulator()
            for chunk in self._chunks(msgs, fields):
                acc.add(chunk)
            return acc.result()
        return self._assemble(msgs, fields)

    def _from_message(self, msgs: list[BaseMessage], reply: AIMessage,
                      number: int) -> AIMessage | None:
        """``_assemble(msgs, _normalise(reply, number))`` for the common reply: an
        ``AIMessage`` whose tool calls all have a name and dict arguments (None otherwise).

        The arguments still make the JSON round trip (the reply gets its own copy, in
        the shape a provider would send), without the intermediate records.
        """
        if reply.invalid_tool_calls:
            return None
        calls: list[Any] = []
        raws: list[str] = []
        for i, call in enumerate(reply.tool_calls):
            args = call.get("args")
            name = call.get("name")
            if type(args) is not dict or not name or isinstance(call.get("function"), dict):
                return None
            flat = _flat_json(args)
            raw, copy = flat if flat is not None else (_ENCODE(args), None)
            raws.append(raw)
            calls.append(ToolCallView(name=name, args=json.loads(raw) if copy is None else copy,
                                      id=call.get("id") or f"{_id_prefix(msgs, number)}_{i}",
                                      type="tool_call"))
        content = reply.content or ""
        meta = dict(reply.response_metadata or {})
        meta.setdefault("finish_reason", "tool_calls" if calls else "stop")
        meta.setdefault("model_name", self.name)
        given = reply.usage_metadata
        message = construct_complete(AIMessage, {  # every field, in declaration order
            "content": [dict(p) for p in content] if isinstance(content, list) else content,
            "id": reply.id or new_message_id(),
            "name": None,
            "additional_kwargs": dict(reply.additional_kwargs or {}),
            "response_metadata": meta,
            "type": "ai",
            "tool_calls": calls,
            "invalid_tool_calls": [],
            "usage_metadata": self._usage(msgs, {"usage_metadata": given, "tool_calls": ()})
            if given else _estimate_usage(msgs, content, raws),
            "reasoning_content": reply.reasoning_content or None,
            "refusal": reply.refusal or None,
        }, _REPLY_FIELDS)
        # The H14 guard changes only a reply cut by the token limit with calls: there are
        # no invalid calls here and every call has an id.
        return guard_tool_calls(message) if calls and meta["finish_reason"] == "length" \
            else message

    def _assemble(self, msgs: list[BaseMessage], fields: dict[str, Any]) -> AIMessage:
        calls: list[Any] = []
        invalid: list[Any] = []
        for name, raw, call_id in fields["tool_calls"]:
            if not name and len(_pieces(raw, 3)) > 1:
                name = None  # what the accumulator keeps of an empty name sent in pieces
            call = make_tool_call(name, raw, call_id)
            (invalid if "error" in call else calls).append(call)
        content = fields.get("content") or ""
        meta = dict(fields.get("response_metadata") or {})
        meta.setdefault("finish_reason", fields.get("finish_reason")
                        or ("tool_calls" if fields["tool_calls"] else "stop"))
        meta.setdefault("model_name", self.name)
        message = construct_unchecked(
            AIMessage,
            content=[dict(p) for p in content] if isinstance(content, list) else content,
            id=fields.get("id") or new_message_id(),
            tool_calls=calls,
            invalid_tool_calls=invalid,
            usage_metadata=self._usage(msgs, fields),
            reasoning_content=fields.get("reasoning_content") or None,
            refusal=fields.get("refusal") or None,
            response_metadata=meta,
            additional_kwargs=dict(fields.get("additional_kwargs") or {}),
        )
        return guard_tool_calls(message)

    def _chunks(self, msgs: list[BaseMessage], fields: dict[str, Any]) -> Iterator[AIMessageChunk]:
        mid = fields.get("id") or new_message_id()
        for piece in _WORDS.findall(fields.get("reasoning_content") or ""):
            yield AIMessageChunk(content="", id=mid, reasoning_content=piece)
        for piece in _WORDS.findall(fields.get("refusal") or ""):
            yield AIMessageChunk(content="", id=mid, refusal=piece)
        content = fields.get("content") or ""
        if isinstance(content, list):
            yield AIMessageChunk(content=content, id=mid)
        else:
            for piece in _WORDS.findall(content):
                yield AIMessageChunk(content=piece, id=mid)
        for index, (name, raw, call_id) in enumerate(fields["tool_calls"]):
            pieces = _pieces(raw, 3) or [""]
            for j, piece in enumerate(pieces):
                head = {"name": name, "id": call_id} if j == 0 else {"name": None, "id": None}
                yield AIMessageChunk(content="", id=mid, tool_call_chunks=[
                    {**head, "args": piece, "index": index}])
        meta = dict(fields.get("response_metadata") or {})
        meta.setdefault("finish_reason", fields.get("finish_reason")
                        or ("tool_calls" if fields["tool_calls"] else "stop"))
        meta.setdefault("model_name", self.name)
        yield AIMessageChunk(content="", id=mid, response_metadata=meta,
                             additional_kwargs=dict(fields.get("additional_kwargs") or {}),
                             usage_metadata=self._usage(msgs, fields))

    async def _agenerate(self, msgs: list[BaseMessage], tools: list[dict] | None,
                         opts: dict[str, Any]) -> AIMessage:
        return self._generate(msgs, tools, opts)

    async def ainvoke(self, messages: Any, *, tools: Sequence[Any] | None = None,
                      tool_choice: Any = None, response_format: Any = None,
                      **kwargs: Any) -> AIMessage:
        """``BaseChatModel.ainvoke``; a reply nobody streams is made right here (what
        ``_agenerate`` would do, one coroutine less)."""
        if (self.streaming or type(self)._agenerate is not ScriptedChatModel._agenerate
                or _engine_hooks() is not None):
            return await super().ainvoke(messages, tools=tools, tool_choice=tool_choice,
                                         response_format=response_format, **kwargs)
        msgs, wire_tools, opts = self._prepare(messages, tools, tool_choice,
                                               response_format, kwargs)
        made = self._generate(msgs, wire_tools, opts)
        if type(self) is ScriptedChatModel:
            # ``_finish`` is the H14 guard, which every reply of ``_generate`` has had
            # already, and the guard is idempotent: a second pass returns it unchanged.
            return made
        return self._finish(made, wire_tools)


def _flat_json(args: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(_ENCODE(args), json.loads(_ENCODE(args)))`` for a non-empty object of ``str``,
    ``int``, finite ``float``, ``bool`` and ``None`` values (the usual arguments), made
    without the encoder's set-up and the decoder; None for anything else."""
    parts = []
    for key, value in args.items():
        kind = type(value)
        if kind is str:
            text = _STR(value)
        elif kind is int:
            text = int.__repr__(value)
        elif kind is bool:
            text = "true" if value else "false"
        elif value is None:
            text = "null"
        elif kind is float and math.isfinite(value):
            text = float.__repr__(value)
        else:
            return None
        if type(key) is not str:
            return None
        parts.append(f"{_STR(key)}: {text}")
    if not parts:
        return None
    return "{" + ", ".join(parts) + "}", dict(args)


def _estimate_usage(msgs: list[BaseMessage], content: Any, raws: list[str]) -> dict[str, int]:
    """Usage estimated at about four characters per token: the request's text in, the
    reply's text and tool-call arguments out."""
    inp = 0
    for m in msgs:
        text = m.content
        inp += (len(text if type(text) is str else m.text) + 3) // 4
    # _estimate_tokens(_text(content) + "".join(raws)), without building the string
    out = (len(content if type(content) is str else _text(content))
           + sum(map(len, raws)) + 3) // 4
    return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""
