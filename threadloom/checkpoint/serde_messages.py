"""A direct writer for threadloom messages: the codec's ``msg`` tree without ``model_dump``.

The codec stores a message as ``{"__tl__": "msg", "v": tree}`` where ``tree`` is
``message_to_dict(message)`` (``model_dump(exclude_defaults=True)`` plus ``type`` last)
after the codec's walk. Saving a checkpoint encodes the newest message of a thread every
step, so ``message_tree`` builds that same tree straight from the message's fields for the
everyday shapes: every field holds a value of its declared type made of plain JSON
(``str``, ``int``, finite ``float``, ``bool``, ``None``, ``list``, ``dict`` with ``str``
keys other than the codec's tag), and there are no extra fields. For such a message
pydantic's serializer returns each value unchanged (dicts and lists in their own key
order, no warning) and the codec's walk keeps it as it is, so the two trees are equal
and give the same bytes. Anything else (another type, a tuple, a non-finite float, a
tagged key, an extra field, a value pydantic would warn about) returns None and the
caller takes the general path. ``tests/test_serde_messages.py`` compares both on many
shapes.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from threadloom.checkpoint.serde_builtin import TAG
from threadloom.messages.spellings import ToolCallView as _VIEW

Check = Callable[[Any], bool]
# per class: (field name, the default exclude_defaults compares with, value check)
Plan = tuple[tuple[str, Any, Check], ...]

_isfinite = math.isfinite


def plain(v: Any) -> bool:
    """Whether ``v`` is plain JSON the codec writes as itself (no envelope, no escape)."""
    t = type(v)
    if t is str or t is int or t is bool or v is None:
        return True
    if t is dict:
        return plain_dict(v)
    if t is list:
        for x in v:
            tx = type(x)
            if not (tx is str or tx is int or tx is bool or x is None or plain(x)):
                return False
        return True
    return t is float and _isfinite(v)


def plain_dict(v: Any) -> bool:
    """Whether ``v`` is a ``dict`` with ``str`` keys (never the tag) and plain values."""
    if type(v) is not dict or TAG in v:
        return False
    for k, x in v.items():
        if type(k) is not str:
            return False
        tx = type(x)
        if not (tx is str or tx is int or tx is bool or x is None or plain(x)):
            return False
    return True


def _opt_str(v: Any) -> bool:
    return v is None or type(v) is str


def _str(v: Any) -> bool:
    return type(v) is str


def _content(v: Any) -> bool:
    return type(v) is str or _list_of_dicts(v)


def _list_of_dicts(v: Any) -> bool:
    if type(v) is not list:
        return False
    for x in v:
        if not plain_dict(x):
            return False
    return True


def _tool_calls(v: Any) -> bool:
    """A list of ``ToolCall`` dicts whose keys all have their declared types."""
    if type(v) is not list:
        return False
    for call in v:
        if type(call) is not dict and type(call) is not _VIEW:
            return False
        for k, x in call.items():
            if k == "name" or k == "id":
                if type(x) is not str:
                    return False
            elif k == "args":
                if not plain_dict(x):
                    return False
            elif k != "type" or type(x) is not str or x != "tool_call":
                return False
    return True


_USAGE_INTS = frozenset({"input_tokens", "output_tokens", "total_tokens"})
_USAGE_DETAILS = frozenset({"input_token_details", "output_token_details"})


def _usage(v: Any) -> bool:
    """None, or a ``UsageMetadata`` dict whose keys all have their declared types."""
    if v is None:
        return True
    if type(v) is not dict:
        return False
    for k, x in v.items():
        if k in _USAGE_INTS:
            if type(x) is not int:
                return False
        elif k in _USAGE_DETAILS:
            if type(x) is not dict:
                return False
            for dk, dx in x.items():
                if type(dk) is not str or type(dx) is not int:
                    return False
        else:
            return False
    return True


def _only(default: Any) -> Check:
    """For a field of any other type: only its default (which is then left out) passes."""
    kind = type(default)
    return lambda v: type(v) is kind and v == default


def _literal(values: tuple[Any, ...]) -> Check:
    allowed = frozenset(x for x in values if type(x) is str)
    return lambda v: type(v) is str and v in allowed


def _check_for(annotation: Any, default: Any) -> Check:
    """The value check of a field declared as ``annotation`` (see the module docstring)."""
    from threadloom.messages.records import ToolCall
    from threadloom.messages.types import UsageMetadata

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is str:
        return _str
    if annotation is Any:
        return plain
    if origin is typing.Literal:
        return _literal(args)
    if origin is typing.Union or origin is types.UnionType:
        members = set(args)
        if members == {str, type(None)}:
            return _opt_str
        if members == {UsageMetadata, type(None)}:
            return _usage
        if members == {str, list[dict[str, Any]]}:
            return _content
    if origin is dict and args == (str, Any):
        return plain_dict
    if origin is list and args == (ToolCall,):
        return _tool_calls
    if origin is list and args == (dict[str, Any],):
        return _list_of_dicts
    return _only(default)


_PLANS: dict[type, Plan] = {}


def _plan(cls: type[BaseModel]) -> Plan:
    fields = []
    for name, info in cls.model_fields.items():
        factory = info.default_factory
        default = info.get_default(call_default_factory=True) if factory else info.default
        fields.append((name, default, _check_for(info.annotation, default)))
    plan = _PLANS[cls] = tuple(fields)
    return plan


def message_tree(message: BaseModel) -> dict[str, Any] | None:
    """The codec tree of ``message_to_dict(message)`` for the everyday shapes, else None.

    Equal, key order included, to what ``Codec`` builds through ``model_dump`` whenever
    it returns a tree; None means "take the general path" (never an error). A field
    equal (``==``) to its default is left out unchecked: ``exclude_defaults`` drops it
    with the same comparison before serializing it.
    """
    cls = type(message)
    plan = _PLANS.get(cls) or _plan(cls)
    if message.__pydantic_extra__:
        return None
    values = message.__dict__
    out: dict[str, Any] = {}
    try:
        for name, default, check in plan:
            v = values[name]
            if v == default:  # left out before pydantic serializes it, as here
                continue
            if check is _opt_str or check is _str:  # the common checks, without a call
                if type(v) is not str and (v is not None or check is _str):
                    return None
            elif not check(v):
                return None
            elif check is _tool_calls:  # ``ToolCallView``s: written as the plain dicts
                v = [dict(c) for c in v]
            out[name] = v
    except Exception:  # noqa: BLE001 - a missing field, an odd __eq__, deep nesting
        return None
    kind = values["type"]
    if type(kind) is not str:
        return None
    out["type"] = kind
    return out
