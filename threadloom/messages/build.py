"""Building message objects fast: ``construct_unchecked`` and the checked fast constructors.

``construct_unchecked`` fills a pydantic model from values already in shape, without
validation. ``fast_init`` is what the built-in message classes' ``__init__`` tries first:
for the everyday arguments (text content, ids and names as ``str``, tool calls as plain
dicts with ``str`` names and ids and ``dict`` arguments) it checks each value's exact type
itself and builds the very object pydantic's validation builds (fresh lists and dicts,
fields in declaration order, the same ``model_fields_set``); anything else (another type,
an unknown key, a value pydantic would coerce or reject) returns False and the caller
validates with pydantic as before, so no input is accepted that pydantic would refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from threadloom.messages.spellings import ToolCallView

_M = TypeVar("_M", bound=BaseModel)

# ``object.__setattr__(obj, "__dict__", d)``, through the slot's descriptor (cheaper)
_SET_DICT = BaseModel.__dict__["__dict__"].__set__
# ``BaseModel``'s slots, set through their descriptors (cheaper than object.__setattr__)
_SET_FIELDS = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__
_NEW = object.__new__

# cls -> (defaults in field order (None where a factory fills in), factory fields, size)
_PLANS: dict[type, tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...], int]] = {}


def _plan(cls: type[BaseModel]) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...], int]:
    template: dict[str, Any] = {}
    factories: list[tuple[str, Any]] = []
    for name, info in cls.model_fields.items():
        template[name] = info.default if info.default_factory is None else None
        if info.default_factory is not None:
            factories.append((name, info.default_factory))
    plan = _PLANS[cls] = (template, tuple(factories), len(template))
    return plan


def construct_unchecked(cls: type[_M], **values: Any) -> _M:
    """Build a pydantic model from values already in shape, skipping validation.

    Does what pydantic's ``model_construct`` does, without its per-call overhead; used
    on the hot paths (chunk arithmetic, provider chunk conversion, replies and tool
    results built from values known to be valid).

    Args:
        cls: a pydantic model class without private attributes.
        **values: field values, trusted as valid; fields not given take their default
            (or a fresh ``default_factory`` value).

    Returns:
        The instance, with ``model_fields_set`` the names given. Nothing is checked, so a
        wrong value only fails later; use ``cls(...)`` for untrusted input.
    """
    plan = _PLANS.get(cls) or _plan(cls)
    data = plan[0].copy()
    for name, factory in plan[1]:
        if name not in values:
            data[name] = factory()
    data.update(values)
    if len(data) != plan[2]:  # a name that is no field: left out, as model_construct does
        data = {name: data[name] for name in plan[0]}
    obj = _NEW(cls)
    _fill(obj, data, values)
    return obj


def construct_complete(cls: type[_M], data: dict[str, Any], given: Iterable[str]) -> _M:
    """``construct_unchecked(cls, **values)`` where the caller has already written every
    field, in declaration order, into ``data`` (taken over, not copied); ``given`` names
    the fields that count as set. The hot paths build ``data`` as one dict display.
    """
    obj = _NEW(cls)
    _fill(obj, data, given)
    return obj


def _fill(obj: BaseModel, data: dict[str, Any], given: Iterable[str]) -> None:
    _SET_DICT(obj, data)
    _SET_FIELDS(obj, set(given))
    _SET_EXTRA(obj, {})
    _SET_PRIVATE(obj, None)


def _str_dict(value: Any) -> bool:
    """A ``dict`` with ``str`` keys: what ``dict[str, Any]`` validates to a plain copy."""
    if type(value) is not dict:
        return False
    for key in value:
        if type(key) is not str:
            return False
    return True


_COMMON = frozenset({"content", "id", "name", "additional_kwargs", "response_metadata"})
_AI_KEYS = _COMMON | {"tool_calls", "invalid_tool_calls", "reasoning_content", "refusal"}
_TOOL_KEYS = _COMMON | {"tool_call_id", "status", "artifact"}
_CALL_KEYS = frozenset({"name", "args", "id", "type"})
_STATUSES = ("success", "error")


def _common(kwargs: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The base fields in declaration order (copies of the dicts), or None if any needs
    pydantic."""
    content = kwargs["content"]
    mid = kwargs.get("id")
    name = kwargs.get("name")
    if type(content) is not str or not (mid is None or type(mid) is str) or not (
            name is None or type(name) is str):  # None or a str (inlined: hot)
        return None
    extra = kwargs.get("additional_kwargs")
    meta = kwargs.get("response_metadata")
    if extra is None:
        if "additional_kwargs" in kwargs:
            return None  # None is no dict: pydantic says so
        extra = {}
    elif _str_dict(extra):
        extra = dict(extra)
    else:
        return None
    if meta is None:
        if "response_metadata" in kwargs:
            return None
        meta = {}
    elif _str_dict(meta):
        meta = dict(meta)
    else:
        return None
    return {"content": content, "id": mid, "name": name, "additional_kwargs": extra,
            "response_metadata": meta, "type": kind}


def _tool_calls(calls: Any) -> list[dict[str, Any]] | None:
    """Validated copies of ``ToolCall`` dicts (schema key order, as ``ToolCallView``s:
    what pydantic's validation of ``AIMessage`` gives too), or None."""
    if type(calls) is not list:
        return None
    out: list[dict[str, Any]] = []
    for call in calls:
        if (type(call) is not dict and type(call) is not ToolCallView) or not \
                _CALL_KEYS.issuperset(call):
            return None
        name = call.get("name")
        args: Any = call.get("args")
        call_id = call.get("id")
        if type(name) is not str or type(call_id) is not str or not _str_dict(args):
            return None
        if "type" in call and (type(call["type"]) is not str or call["type"] != "tool_call"):
            return None
        # always typed, as LangChain's AIMessage sets "type": "tool_call" on every call
        out.append(ToolCallView(name=name, args=dict(args), id=call_id, type="tool_call"))
    return out


def _plain(kind: str) -> Callable[[BaseModel, dict[str, Any]], bool]:
    def init(obj: BaseModel, kwargs: dict[str, Any]) -> bool:
        if not _COMMON.issuperset(kwargs):
            return False
        data = _common(kwargs, kind)
        if data is None:
            return False
        _fill(obj, data, kwargs)
        return True

    return init


def _ai(obj: BaseModel, kwargs: dict[str, Any], kind: str = "ai") -> bool:
    if not _AI_KEYS.issuperset(kwargs):
        return False
    data = _common(kwargs, kind)
    if data is None:
        return False
    calls = kwargs.get("tool_calls")
    if calls is None:
        if "tool_calls" in kwargs:
            return False
        calls = []
    else:
        calls = _tool_calls(calls)
        if calls is None:
            return False
    invalid = kwargs.get("invalid_tool_calls")
    if invalid is None:
        if "invalid_tool_calls" in kwargs:
            return False
    elif type(invalid) is not list or invalid:
        return False  # invalid calls are rare: pydantic checks them
    reasoning = kwargs.get("reasoning_content")
    refusal = kwargs.get("refusal")
    if not (reasoning is None or type(reasoning) is str) or not (
            refusal is None or type(refusal) is str):  # None or a str (inlined: hot)
        return False
    data["tool_calls"] = calls
    data["invalid_tool_calls"] = []
    data["usage_metadata"] = None
    data["reasoning_content"] = reasoning
    data["refusal"] = refusal
    if kind != "ai":  # a chunk: its own last field (tool-call chunks go to pydantic)
        data["tool_call_chunks"] = []
    _fill(obj, data, kwargs)
    return True


def _ai_chunk(obj: BaseModel, kwargs: dict[str, Any]) -> bool:
    """``AIMessageChunk``'s: a streamed piece of text (or reasoning, or refusal), the
    usual token chunk; one with tool calls or their chunks is validated by pydantic."""
    if "tool_calls" in kwargs:
        return False
    return _ai(obj, kwargs, "AIMessageChunk")


def _tool(obj: BaseModel, kwargs: dict[str, Any]) -> bool:
    if not _TOOL_KEYS.issuperset(kwargs):
        return False
    call_id = kwargs.get("tool_call_id")
    status = kwargs.get("status", "success")
    if type(call_id) is not str or type(status) is not str or status not in _STATUSES:
        return False
    data = _common(kwargs, "tool")
    if data is None:
        return False
    data["tool_call_id"] = call_id
    data["status"] = status
    data["artifact"] = kwargs.get("artifact")
    _fill(obj, data, kwargs)
    return True


def fast_inits(ai: type, tool: type, plain: dict[type, str],
               ai_chunk: type | None = None) -> dict[type, Any]:
    """The fast constructors by class: ``{cls: init(obj, kwargs) -> bool}``.

    Args:
        ai: the ``AIMessage`` class.
        tool: the ``ToolMessage`` class.
        plain: classes with only the base fields, mapped to their ``type`` value.
        ai_chunk: the ``AIMessageChunk`` class (its text chunks), if any.
    """
    inits: dict[type, Any] = {cls: _plain(kind) for cls, kind in plain.items()}
    inits[ai] = _ai
    if ai_chunk is not None:
        inits[ai_chunk] = _ai_chunk
    inits[tool] = _tool
    return inits


__all__ = ["construct_complete", "construct_unchecked", "fast_inits"]
