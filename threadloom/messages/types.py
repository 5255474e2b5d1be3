"""Message types (as LangChain's) and the arithmetic of streamed ``AIMessageChunk`` s.

The classes are small pydantic v2 models discriminated by ``type``; ``AnyMessage`` is
their union. ``construct_unchecked`` builds a model from already-valid values without
validation (the streaming hot path uses it).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypedDict

from threadloom.messages.build import construct_unchecked, fast_inits
from threadloom.messages.records import InvalidToolCall, ToolCall, ToolCallChunk, make_tool_call
from threadloom.messages.spellings import HaystackSpellings, ToolCallView

REMOVE_ALL_MESSAGES = "__remove_all__"
"""Id of a ``RemoveMessage`` that clears the whole history (as in LangGraph)."""

_DEVELOPER_FLAG = "openai_role"
# exact class -> checked fast constructor (``threadloom.messages.build``); filled below
_FAST_INITS: dict[type, Any] = {}
_M = TypeVar("_M", bound="BaseModel")


class UsageMetadata(TypedDict):
    """Token counts of one model call (``*_details`` map a category to a count)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_token_details: NotRequired[dict[str, int]]
    output_token_details: NotRequired[dict[str, int]]


class BaseMessage(HaystackSpellings, BaseModel):
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
        fast = _FAST_INITS.get(type(self))
        if fast is None or not fast(self, kwargs):  # fast: the usual, plainly valid values
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

    if TYPE_CHECKING:  # type checkers would otherwise give each subclass a keyword-only init

        def __init__(self, content: str | list[dict[str, Any]] = "", /, **kwargs: Any) -> None: ...


class HumanMessage(BaseMessage):
    """A user turn (OpenAI role ``user``)."""

    type: Literal["human"] = "human"

    if TYPE_CHECKING:  # type checkers would otherwise give each subclass a keyword-only init

        def __init__(self, content: str | list[dict[str, Any]] = "", /, **kwargs: Any) -> None: ...


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

    if TYPE_CHECKING:  # type checkers would otherwise give each subclass a keyword-only init

        def __init__(self, content: str | list[dict[str, Any]] = "", /, **kwargs: Any) -> None: ...

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _call_type(cls, calls: Any) -> Any:  # as LangChain: a call's "type" is "tool_call"
        return [{**c, "type": "tool_call"} if isinstance(c, dict) else c
                for c in calls] if isinstance(calls, list) else calls

    @field_validator("tool_calls", mode="after")
    @classmethod
    def _call_views(cls, calls: list[Any]) -> list[Any]:  # also Haystack's ToolCall names
        return [ToolCallView(c) for c in calls]

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
    values win), mirroring LangChain's ``AIMessageChunk.__add__``. As in LangChain, the
    sum's ``tool_calls`` are read from its merged ``tool_call_chunks``: a call whose
    ``args`` are a complete JSON object is in ``tool_calls``; one still arriving (or
    broken) is in ``invalid_tool_calls`` with the parse error, where LangChain would show
    a partly parsed dict. ``to_message()`` gives the same calls.
    """

    type: Literal["AIMessageChunk"] = "AIMessageChunk"  # type: ignore[assignment]
    tool_call_chunks: list[ToolCallChunk] = Field(default_factory=list)

    if TYPE_CHECKING:  # type checkers would otherwise give each subclass a keyword-only init

        def __init__(self, content: str | list[dict[str, Any]] = "", /, **kwargs: Any) -> None: ...

    def __add__(self, other: Any) -> AIMessageChunk:
        if not isinstance(other, AIMessageChunk):
            return NotImplemented
        call_chunks = _merge_tool_call_chunks(self.tool_call_chunks, other.tool_call_chunks)
        if call_chunks:
            tool_calls, invalid = _calls_of(call_chunks)
        else:
            tool_calls = self.tool_calls + other.tool_calls
            invalid = self.invalid_tool_calls + other.invalid_tool_calls
        return construct_unchecked(
            AIMessageChunk,
            content=_add_content(self.content, other.content),
            id=self.id or other.id,
            name=self.name or other.name,
            additional_kwargs=_merge_meta(self.additional_kwargs, other.additional_kwargs),
            response_metadata=_merge_meta(self.response_metadata, other.response_metadata),
            tool_calls=tool_calls,
            invalid_tool_calls=invalid,
            usage_metadata=add_usage(self.usage_metadata, other.usage_metadata),
            reasoning_content=_add_opt(self.reasoning_content, other.reasoning_content),
            refusal=_add_opt(self.refusal, other.refusal),
            tool_call_chunks=call_chunks,
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
        if self.tool_call_chunks:
            tool_calls, invalid = _calls_of(self.tool_call_chunks)
        else:
            tool_calls, invalid = list(self.tool_calls), list(self.invalid_tool_calls)
        return construct_unchecked(
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

    if TYPE_CHECKING:  # type checkers would otherwise give each subclass a keyword-only init

        def __init__(self, content: str | list[dict[str, Any]] = "", /, **kwargs: Any) -> None: ...


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


_FAST_INITS.update(fast_inits(AIMessage, ToolMessage, {
    HumanMessage: "human", SystemMessage: "system"}, AIMessageChunk))

_ROLE_CLASSES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "human": HumanMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "developer": SystemMessage,
    "tool": ToolMessage,
}


# --- chunk arithmetic -------------------------------------------------------------------


@cache
def _field_defaults(cls: type[BaseModel]) -> tuple[tuple[str, Any, Any], ...]:
    return tuple((n, f.default, f.default_factory) for n, f in cls.model_fields.items())


_fast_new = construct_unchecked
"""Former private name of ``construct_unchecked``, kept as an alias."""


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


def _calls_of(chunks: list[ToolCallChunk]) -> tuple[list[Any], list[Any]]:
    """(tool_calls, invalid_tool_calls) parsed from merged tool-call chunks."""
    calls: list[Any] = []
    invalid: list[Any] = []
    for chunk in chunks:
        call = make_tool_call(chunk.get("name"), chunk.get("args"), chunk.get("id"))
        (invalid if "error" in call else calls).append(call)
    return calls, invalid


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
        old, delta = target.get("args"), piece.get("args")
        # a delta that resends the whole buffer (cumulative or full) replaces it (H45)
        target["args"] = delta if (old and delta and delta.startswith(old)) else _add_opt(
            old, delta)
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


__all__ = [
    "REMOVE_ALL_MESSAGES",
    "AIMessage",
    "AIMessageChunk",
    "AnyMessage",
    "BaseMessage",
    "HumanMessage",
    "RemoveMessage",
    "SystemMessage",
    "ToolMessage",
    "UsageMetadata",
    "add_usage",
    "construct_unchecked",
]
