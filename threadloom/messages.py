"""Message types, coercion and the OpenAI chat-completions wire format.

The classes mirror LangChain's message vocabulary (``HumanMessage``, ``AIMessage``,
``ToolMessage``, ...) as small pydantic v2 models, so a user's habits carry over. Every
message dumps to a flat JSON-able dict with a ``type`` key (``message_to_dict``) that
``message_from_dict`` reads back losslessly; ``AnyMessage`` is the discriminated union.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Annotated, Any, Literal, NotRequired, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict

REMOVE_ALL_MESSAGES = "__remove_all__"
"""Id of a ``RemoveMessage`` that clears the whole history (as in LangGraph)."""

_DEVELOPER_FLAG = "openai_role"
_M = TypeVar("_M", bound="BaseModel")


class ToolCall(TypedDict):
    """A parsed tool call: ``{"name": str, "args": dict, "id": str, "type"?: "tool_call"}``."""

    name: str
    args: dict[str, Any]
    id: str
    type: NotRequired[Literal["tool_call"]]


class InvalidToolCall(TypedDict):
    """A tool call whose arguments could not be parsed; ``error`` says why."""

    name: str | None
    args: str | None
    id: str | None
    error: str | None


class ToolCallChunk(TypedDict):
    """A streamed piece of a tool call; pieces with the same ``index`` are concatenated."""

    name: str | None
    args: str | None
    id: str | None
    index: int | None


class UsageMetadata(TypedDict):
    """Token counts of one model call (``*_details`` map a category to a count)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_token_details: NotRequired[dict[str, int]]
    output_token_details: NotRequired[dict[str, int]]


def new_tool_call_id() -> str:
    """Return a fresh tool-call id, ``"call_" + uuid4 hex`` (for providers that send none)."""
    return "call_" + uuid.uuid4().hex


class BaseMessage(BaseModel):
    """Base of every message.

    Args:
        content: text, or a list of content parts (OpenAI-style dicts such as
            ``{"type": "text", "text": ...}``); may be given positionally.
        id: unique id; ``add_messages`` assigns one when missing.
        name: optional participant name.
        additional_kwargs: provider-specific extras.
        response_metadata: provider response details (``finish_reason``, ``model_name``...).
    """

    model_config = ConfigDict(extra="allow")

    content: str | list[dict[str, Any]] = ""
    id: str | None = None
    name: str | None = None
    additional_kwargs: dict[str, Any] = Field(default_factory=dict)
    response_metadata: dict[str, Any] = Field(default_factory=dict)
    type: str = "base"

    def __init__(self, content: str | list[dict[str, Any]] = "", /, **kwargs: Any) -> None:
        if "content" not in kwargs:
            kwargs["content"] = content
        super().__init__(**kwargs)

    @property
    def text(self) -> str:
        """The text of ``content``: the string itself, or the text parts joined."""
        content = self.content
        if isinstance(content, str):
            return content
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)


class SystemMessage(BaseMessage):
    """Instructions for the model (OpenAI role ``system``, or ``developer`` when flagged)."""

    type: Literal["system"] = "system"


class HumanMessage(BaseMessage):
    """A user turn (OpenAI role ``user``)."""

    type: Literal["human"] = "human"


class AIMessage(BaseMessage):
    """An assistant turn, with optional tool calls and token usage (as LangChain's).

    Args:
        tool_calls: parsed calls, ``args`` always a dict.
        invalid_tool_calls: calls whose arguments were not a JSON object.
        usage_metadata: token counts of the call that produced this message.
        reasoning_content: the model's reasoning text, when the provider sends it.
        refusal: the provider's refusal text (OpenAI structured outputs).
    """

    type: Literal["ai"] = "ai"
    tool_calls: list[ToolCall] = Field(default_factory=list)
    invalid_tool_calls: list[InvalidToolCall] = Field(default_factory=list)
    usage_metadata: UsageMetadata | None = None
    reasoning_content: str | None = None
    refusal: str | None = None

    @property
    def usage(self) -> UsageMetadata | None:
        """Alias of ``usage_metadata``."""
        return self.usage_metadata

    @property
    def finish_reason(self) -> str | None:
        """``response_metadata["finish_reason"]``: ``"stop"``, ``"tool_calls"``, ``"length"``..."""
        return self.response_metadata.get("finish_reason")


class AIMessageChunk(AIMessage):
    """A streamed piece of an assistant turn; ``chunk + chunk`` merges, ``to_message()`` ends.

    Adding concatenates text, reasoning and refusal, merges ``tool_call_chunks`` by
    ``index`` (concatenating ``args``), sums usage and merges metadata (later non-null
    values win), mirroring LangChain's ``AIMessageChunk.__add__``.
    """

    type: Literal["AIMessageChunk"] = "AIMessageChunk"  # type: ignore[assignment]
    tool_call_chunks: list[ToolCallChunk] = Field(default_factory=list)

    def __add__(self, other: Any) -> AIMessageChunk:
        if not isinstance(other, AIMessageChunk):
            return NotImplemented
        return _fast_new(
            AIMessageChunk,
            content=_add_content(self.content, other.content),
            id=self.id or other.id,
            name=self.name or other.name,
            additional_kwargs=_merge_meta(self.additional_kwargs, other.additional_kwargs),
            response_metadata=_merge_meta(self.response_metadata, other.response_metadata),
            tool_calls=self.tool_calls + other.tool_calls,
            invalid_tool_calls=self.invalid_tool_calls + other.invalid_tool_calls,
            usage_metadata=add_usage(self.usage_metadata, other.usage_metadata),
            reasoning_content=_add_opt(self.reasoning_content, other.reasoning_content),
            refusal=_add_opt(self.refusal, other.refusal),
            tool_call_chunks=_merge_tool_call_chunks(self.tool_call_chunks, other.tool_call_chunks),
        )

    def __radd__(self, other: Any) -> AIMessageChunk:
        if other == 0:  # lets sum(chunks) work
            return self
        return NotImplemented

    def to_message(self) -> AIMessage:
        """Return the finished ``AIMessage``.

        Each tool-call chunk's ``args`` string is parsed as JSON (an empty string means
        ``{}``; a double-encoded object is decoded); a chunk that does not give a JSON
        object, or has no name, becomes an ``invalid_tool_calls`` entry with the error.
        Chunks without an id get one (``new_tool_call_id``). Without chunks, the chunk's
        own ``tool_calls`` are kept.
        """
        tool_calls = list(self.tool_calls)
        invalid = list(self.invalid_tool_calls)
        if self.tool_call_chunks:
            tool_calls = []
            for chunk in self.tool_call_chunks:
                call = make_tool_call(chunk.get("name"), chunk.get("args"), chunk.get("id"))
                (invalid if "error" in call else tool_calls).append(call)  # type: ignore[arg-type]
        return _fast_new(
            AIMessage,
            content=self.content,
            id=self.id,
            name=self.name,
            additional_kwargs=dict(self.additional_kwargs),
            response_metadata=dict(self.response_metadata),
            tool_calls=tool_calls,
            invalid_tool_calls=invalid,
            usage_metadata=self.usage_metadata,
            reasoning_content=self.reasoning_content,
            refusal=self.refusal,
        )


class ToolMessage(BaseMessage):
    """The result of one tool call (OpenAI role ``tool``).

    Args:
        tool_call_id: id of the ``ToolCall`` this answers.
        status: ``"success"`` or ``"error"`` (an error the model can read and recover from).
        artifact: a value kept for the application, never sent to the model.
    """

    type: Literal["tool"] = "tool"
    tool_call_id: str
    status: Literal["success", "error"] = "success"
    artifact: Any = None


class RemoveMessage(BaseMessage):
    """A marker for ``add_messages``: delete the message with this ``id``.

    ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` clears the history. It is never stored.
    """

    type: Literal["remove"] = "remove"
    id: str

    def __init__(self, id: str | None = None, /, **kwargs: Any) -> None:  # noqa: A002
        if id is not None:
            kwargs["id"] = id
        super().__init__(**kwargs)


AnyMessage = Annotated[
    Union[  # noqa: UP007
        SystemMessage, HumanMessage, AIMessage, AIMessageChunk, ToolMessage, RemoveMessage
    ],
    Field(discriminator="type"),
]
"""Any message, discriminated by ``type``."""

_ANY_MESSAGE: TypeAdapter[Any] = TypeAdapter(AnyMessage)


# --- chunk arithmetic -------------------------------------------------------------------


@cache
def _field_defaults(cls: type[BaseModel]) -> tuple[tuple[str, Any, Any], ...]:
    return tuple((n, f.default, f.default_factory) for n, f in cls.model_fields.items())


def _fast_new(cls: type[_M], **values: Any) -> _M:
    """Build ``cls`` from already-valid values without validation (what ``model_construct``
    does, without its per-call overhead; used on the streaming hot path)."""
    data: dict[str, Any] = {}
    for name, default, factory in _field_defaults(cls):
        if name in values:
            data[name] = values[name]
        else:
            data[name] = factory() if factory is not None else default
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", data)
    object.__setattr__(obj, "__pydantic_fields_set__", set(values))
    object.__setattr__(obj, "__pydantic_extra__", {})
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def _add_opt(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _add_content(
    a: str | list[dict[str, Any]], b: str | list[dict[str, Any]]
) -> str | list[dict[str, Any]]:
    if isinstance(a, str) and isinstance(b, str):
        return a + b
    left = [{"type": "text", "text": a}] if isinstance(a, str) and a else list(a or [])
    right = [{"type": "text", "text": b}] if isinstance(b, str) and b else list(b or [])
    return left + right


def _merge_meta(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    if not b:
        return dict(a)
    merged = dict(a)
    for key, value in b.items():
        if value is not None:
            merged[key] = value
    return merged


def add_usage(a: UsageMetadata | None, b: UsageMetadata | None) -> UsageMetadata | None:
    """Sum two usage records field by field (details per category); ``None`` is zero."""
    if a is None:
        return b
    if b is None:
        return a
    total: dict[str, Any] = {
        "input_tokens": a["input_tokens"] + b["input_tokens"],
        "output_tokens": a["output_tokens"] + b["output_tokens"],
        "total_tokens": a["total_tokens"] + b["total_tokens"],
    }
    for key in ("input_token_details", "output_token_details"):
        da: dict[str, int] = a.get(key) or {}  # type: ignore[assignment]
        db: dict[str, int] = b.get(key) or {}  # type: ignore[assignment]
        if da or db:
            merged = dict(da)
            for k, v in db.items():
                merged[k] = merged.get(k, 0) + v
            total[key] = merged
    return total  # type: ignore[return-value]


def _merge_tool_call_chunks(
    left: list[ToolCallChunk], right: list[ToolCallChunk]
) -> list[ToolCallChunk]:
    if not right:
        return list(left)
    merged = [dict(c) for c in left]
    for piece in right:
        target = _find_chunk(merged, piece)
        if target is None:
            merged.append(dict(piece))
            continue
        target["name"] = target.get("name") or piece.get("name")
        target["id"] = target.get("id") or piece.get("id")
        target["args"] = _add_opt(target.get("args"), piece.get("args"))
        if target.get("index") is None:
            target["index"] = piece.get("index")
    return merged  # type: ignore[return-value]


def _find_chunk(merged: list[dict[str, Any]], piece: ToolCallChunk) -> dict[str, Any] | None:
    index = piece.get("index")
    if index is not None:
        return next((c for c in merged if c.get("index") == index), None)
    # Servers that omit the index: match by id, else continue the last call.
    pid = piece.get("id")
    if pid:
        return next((c for c in merged if c.get("id") == pid), None)
    if merged and not piece.get("name"):
        return merged[-1]
    return None


# --- tool-call arguments ---------------------------------------------------------------


def parse_tool_args(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Parse tool-call arguments as providers send them.

    Args:
        raw: a JSON string (the spec), a dict (Ollama), a string holding a JSON string of
            an object (double-encoded), ``""`` or ``None`` (no arguments).

    Returns:
        ``(args, None)`` with ``args`` a dict, or ``(None, error)`` when the arguments are
        not valid JSON or do not decode to a JSON object.
    """
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return None, f"tool arguments must be a JSON object, got {type(raw).__name__}"
    value: Any = raw
    for _ in range(2):  # spec string, then once more for double-encoded arguments
        try:
            value = json.loads(value)
        except ValueError as exc:
            return None, f"tool arguments are not valid JSON: {exc}"
        if not isinstance(value, str):
            break
    if isinstance(value, dict):
        return value, None
    return None, f"tool arguments must be a JSON object, got {type(value).__name__}"


def make_tool_call(
    name: str | None, raw_args: Any, call_id: str | None
) -> ToolCall | InvalidToolCall:
    """Build a ``ToolCall``, or an ``InvalidToolCall`` (it has an ``error`` key) when the
    arguments are unusable or the name is missing. A missing or empty id is synthesized."""
    call_id = call_id or new_tool_call_id()
    args, error = parse_tool_args(raw_args)
    if error is None and not name:
        error = "tool call has no function name"
    if error is not None:
        text = raw_args if isinstance(raw_args, str) or raw_args is None else json.dumps(raw_args)
        return {"name": name, "args": text, "id": call_id, "error": error}
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}  # type: ignore[typeddict-item]


# --- coercion --------------------------------------------------------------------------

_ROLE_CLASSES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "human": HumanMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "developer": SystemMessage,
    "tool": ToolMessage,
}


def coerce_message(value: Any) -> BaseMessage:
    """Turn one message-like value into a message (as LangChain's ``convert_to_messages``).

    Accepted: a ``BaseMessage`` (returned as is); a ``str`` (a ``HumanMessage``); a
    ``(role, content)`` tuple with role user/human/assistant/ai/system/developer, or
    ``("tool", content, tool_call_id)``; an OpenAI role dict (``{"role": ..., ...}``);
    a dict from ``message_to_dict`` (with ``"type"``).

    Raises:
        TypeError: the value has none of these shapes.
        ValueError: an unknown role, or a tool message without ``tool_call_id``.
    """
    if isinstance(value, BaseMessage):
        return value
    if isinstance(value, str):
        return HumanMessage(content=value)
    if isinstance(value, dict):
        if "role" in value:
            return message_from_openai(value)
        if "type" in value:
            return message_from_dict(value)
        raise TypeError(f"cannot convert dict {sorted(value)!r} to a message: no 'role' or 'type'")
    if isinstance(value, (tuple, list)) and len(value) in (2, 3) and isinstance(value[0], str):
        return _from_tuple(value)
    raise TypeError(
        f"cannot convert {type(value).__name__} to a message; expected a message, a str, "
        "a (role, content) tuple or a role dict"
    )


def _from_tuple(value: Sequence[Any]) -> BaseMessage:
    role, content = value[0], value[1]
    cls = _ROLE_CLASSES.get(role.lower())
    if cls is None:
        raise ValueError(f"unknown message role {role!r}; expected one of {sorted(_ROLE_CLASSES)}")
    if cls is ToolMessage:
        if len(value) != 3:
            raise ValueError("a tool message tuple needs 3 items: ('tool', content, tool_call_id)")
        return ToolMessage(content=content, tool_call_id=value[2])
    if len(value) != 2:
        raise ValueError(f"a {role!r} message tuple needs 2 items: (role, content)")
    if role.lower() == "developer":
        return SystemMessage(content=content, additional_kwargs={_DEVELOPER_FLAG: "developer"})
    return cls(content=content)


def convert_to_messages(values: Any) -> list[BaseMessage]:
    """Coerce a list of message-likes (or a single one; ``None`` gives ``[]``) to a new list.

    Raises:
        TypeError, ValueError: as ``coerce_message``.
    """
    if values is None:
        return []
    if isinstance(values, list):
        return [v if isinstance(v, BaseMessage) else coerce_message(v) for v in values]
    return [coerce_message(values)]


# --- our own dumps ---------------------------------------------------------------------


def message_to_dict(message: BaseMessage) -> dict[str, Any]:
    """Dump a message to a flat dict with its ``type`` (fields left at their default are
    omitted); ``message_from_dict`` reads it back equal. Values stay as given, so a
    non-JSON ``artifact`` is left to the caller's codec."""
    data = message.model_dump(exclude_defaults=True)
    data["type"] = message.type
    return data


def message_from_dict(data: dict[str, Any]) -> BaseMessage:
    """Read a dict written by ``message_to_dict``.

    Raises:
        ValueError: the ``type`` is unknown or a field is invalid (the message says which).
    """
    try:
        return _ANY_MESSAGE.validate_python(data)  # type: ignore[no-any-return]
    except ValidationError as exc:
        raise ValueError(f"invalid message dict (type={data.get('type')!r}): {exc}") from exc


# --- OpenAI wire format ----------------------------------------------------------------


def message_from_openai(data: dict[str, Any]) -> BaseMessage:
    """Read one OpenAI chat-completions message dict (a request or response message, or a
    whole ``choice`` with ``message`` and ``finish_reason``).

    ``content: null`` becomes ``""``; tool-call ``arguments`` may be a JSON string, an
    object or a double-encoded string (all give dict ``args``; anything that is not a
    JSON object goes to ``invalid_tool_calls`` with an error); a missing or empty call id
    is synthesized; ``reasoning_content`` (or ``reasoning``) and ``refusal`` are kept.

    Raises:
        ValueError: unknown role, or a tool message without ``tool_call_id``.
    """
    finish_reason = None
    if "message" in data and "role" not in data:
        finish_reason = data.get("finish_reason")
        data = data["message"]
    role = data.get("role") or "assistant"
    content = data.get("content")
    if content is None:
        content = ""
    common: dict[str, Any] = {"content": content}
    for key in ("id", "name"):
        if data.get(key) is not None:
            common[key] = data[key]
    if role in ("assistant", "ai"):
        return _ai_from_openai(data, common, finish_reason)
    if role in ("user", "human"):
        return HumanMessage(**common)
    if role == "system":
        return SystemMessage(**common)
    if role == "developer":
        return SystemMessage(**common, additional_kwargs={_DEVELOPER_FLAG: "developer"})
    if role == "tool":
        if not data.get("tool_call_id"):
            raise ValueError("tool message dict has no 'tool_call_id'")
        status = data.get("status", "success")
        return ToolMessage(**common, tool_call_id=data["tool_call_id"], status=status)
    raise ValueError(f"unknown message role {role!r}; expected one of {sorted(_ROLE_CLASSES)}")


def _ai_from_openai(
    data: dict[str, Any], common: dict[str, Any], finish_reason: str | None
) -> AIMessage:
    tool_calls: list[Any] = []
    invalid: list[Any] = []
    for raw in data.get("tool_calls") or ():
        fn = raw.get("function")
        if fn is None:  # our own / LangChain shape: {"name", "args", "id"}
            call = make_tool_call(raw.get("name"), raw.get("args"), raw.get("id"))
        else:
            call = make_tool_call(fn.get("name"), fn.get("arguments"), raw.get("id"))
        (invalid if "error" in call else tool_calls).append(call)
    invalid.extend(data.get("invalid_tool_calls") or ())
    reasoning = data.get("reasoning_content")
    if reasoning is None:
        reasoning = data.get("reasoning")
    extra = {"extra_content": data["extra_content"]} if data.get("extra_content") else {}
    meta = {"finish_reason": finish_reason} if finish_reason else {}
    return AIMessage(
        **common,
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
        refusal=data.get("refusal"),
        additional_kwargs=extra,
        response_metadata=meta,
    )


def to_openai_messages(
    messages: Iterable[Any],
    *,
    empty_content: str | None = "",
    include_reasoning: bool = False,
) -> list[dict[str, Any]]:
    """Serialize messages to the chat-completions request format.

    Args:
        messages: messages or message-likes (coerced with ``coerce_message``).
        empty_content: ``content`` of an assistant message without text. ``""`` (default)
            is accepted by every server seen (LM Studio rejects ``null``, llama.cpp a
            missing key); pass ``None`` for strict-OpenAI ``null``.
        include_reasoning: echo ``reasoning_content`` on assistant turns (DeepSeek
            thinking mode with tools expects it).

    Returns:
        One dict per message: roles ``system``/``developer``, ``user``, ``assistant``
        (always with a ``content`` key; ``tool_calls`` with ``arguments`` as a JSON string,
        invalid calls sent back with their raw text), ``tool`` (with ``tool_call_id``).
        Content lists pass through.

    Raises:
        ValueError: a ``RemoveMessage`` (it is a reducer marker, never a turn).
    """
    out: list[dict[str, Any]] = []
    for value in messages:
        msg = value if isinstance(value, BaseMessage) else coerce_message(value)
        if isinstance(msg, AIMessage):
            out.append(_ai_to_openai(msg, empty_content, include_reasoning))
            continue
        if isinstance(msg, RemoveMessage):
            raise ValueError(f"RemoveMessage(id={msg.id!r}) cannot be sent to a model")
        if isinstance(msg, ToolMessage):
            item = {"role": "tool", "tool_call_id": msg.tool_call_id, "content": msg.content}
        elif isinstance(msg, SystemMessage):
            item = {
                "role": msg.additional_kwargs.get(_DEVELOPER_FLAG, "system"),
                "content": msg.content,
            }
        else:
            item = {"role": "user", "content": msg.content}
        if msg.name and not isinstance(msg, ToolMessage):
            item["name"] = msg.name
        out.append(item)
    return out


def _ai_to_openai(msg: AIMessage, empty_content: str | None, reasoning: bool) -> dict[str, Any]:
    if isinstance(msg, AIMessageChunk) and msg.tool_call_chunks:
        msg = msg.to_message()
    content: Any = msg.content
    if not content:
        content = msg.refusal or empty_content
    item: dict[str, Any] = {"role": "assistant", "content": content}
    if msg.name:
        item["name"] = msg.name
    calls = [
        _wire_call(c["id"], c["name"], json.dumps(c["args"], ensure_ascii=False))
        for c in msg.tool_calls
    ]
    # An invalid call's raw arguments live only in its error tool message; the history
    # sent back always carries valid JSON (case H14).
    calls.extend(
        _wire_call(c.get("id") or "", c.get("name") or "", "{}") for c in msg.invalid_tool_calls
    )
    if calls:
        item["tool_calls"] = calls
    if reasoning and msg.reasoning_content is not None:
        item["reasoning_content"] = msg.reasoning_content
    if msg.additional_kwargs.get("extra_content"):
        item["extra_content"] = msg.additional_kwargs["extra_content"]
    return item


def _wire_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


__all__ = [
    "REMOVE_ALL_MESSAGES",
    "AIMessage",
    "AIMessageChunk",
    "AnyMessage",
    "BaseMessage",
    "HumanMessage",
    "InvalidToolCall",
    "RemoveMessage",
    "SystemMessage",
    "ToolCall",
    "ToolCallChunk",
    "ToolMessage",
    "UsageMetadata",
    "add_usage",
    "coerce_message",
    "convert_to_messages",
    "make_tool_call",
    "message_from_dict",
    "message_from_openai",
    "message_to_dict",
    "new_tool_call_id",
    "parse_tool_args",
    "to_openai_messages",
]
