"""Writing a ``State`` in Haystack's ``State.to_dict()`` form, so Haystack can load it.

Haystack writes ``{"schema": {key: {"type": T, "handler": H}}, "data": D}`` where:

- ``T`` is the type's name with its module (``"int"``, ``"list[mod.Class]"``,
  ``"typing.List[...]"``, ``"typing.Any"``); threadloom's message classes are written as
  Haystack's ``"haystack.dataclasses.chat_message.ChatMessage"``;
- ``H`` is the handler's dotted path; ``merge_lists`` and ``replace_values`` (the same
  functions in both) are written with the paths of Haystack's ``state_utils`` module,
  ``add_messages`` as ``"threadloom.reducers.add_messages"``;
- ``D`` is ``{"serialization_schema": S, "serialized_data": V}``: ``V`` the values as
  JSON and ``S`` a JSON-schema-like tree saying what each one was (``"integer"``,
  ``"object"`` with ``properties``, ``"array"`` with ``items`` or, for mixed lists,
  ``prefixItems``, or a class path: a message is ``ChatMessage`` with Haystack's message
  dict, a pydantic model its ``model_dump()``, an object with ``to_dict()`` that dict).
  A value of any other type (a datetime, a connection) is left out with a warning naming
  the key, as Haystack leaves it out; the other keys are kept.

``threadloom.agent.state_format`` reads this form back (and reads what Haystack wrote).
"""

from __future__ import annotations

import inspect
import logging
import types
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel

from threadloom.errors import SerializationError

HS_MESSAGE = "haystack.dataclasses.chat_message.ChatMessage"
HS_HANDLERS = "haystack.components.agents.state.state_utils."
_PRIMITIVES = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"),
               (str, "string"))
_LOG = logging.getLogger("threadloom.agent")


def _is_message_type(tp: Any) -> bool:
    from threadloom.messages import BaseMessage

    if isinstance(tp, type):
        return issubclass(tp, BaseMessage)
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _is_message_type(args[0])
    if origin is typing.Union or origin is types.UnionType:
        return bool(args) and all(_is_message_type(a) for a in args)
    return False


def type_path(tp: Any) -> str:
    """Haystack's name of a schema type (``serialize_type``'s form)."""
    if tp is type(None):
        return "None"
    if tp is Ellipsis:
        return "..."
    if _is_message_type(tp):
        return HS_MESSAGE
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return f"typing.Literal[{', '.join(repr(a) for a in args)}]"
    if isinstance(tp, types.UnionType):
        return " | ".join(type_path(a) for a in args)
    name = str(getattr(tp, "__name__", None) or getattr(tp, "_name", None) or tp)
    name = name.removeprefix("typing.").split("[")[0]
    module = inspect.getmodule(tp)
    prefix = "" if module is None or module.__name__ == "builtins" else module.__name__ + "."
    if not args:
        return prefix + name
    skip_none = name == "Optional"
    inner = ", ".join(type_path(a) for a in args if not (skip_none and a is type(None)))
    return f"{prefix}{name}[{inner}]"


def handler_path(handler: Callable[..., Any]) -> str:
    """Haystack's path of a handler (``serialize_callable``'s form, see the module doc)."""
    from threadloom.reducers import add_messages, merge_lists, replace_values

    if handler is merge_lists or handler is replace_values:
        return HS_HANDLERS + handler.__name__
    if handler is add_messages:
        return "threadloom.reducers.add_messages"
    module = inspect.getmodule(handler)
    name = getattr(handler, "__qualname__", None) or getattr(handler, "__name__", repr(handler))
    return f"{module.__name__}.{name}" if module is not None else str(name)


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def value_with_schema(value: Any) -> tuple[Any, Any]:
    """``(schema, data)`` of one value in Haystack's form (see the module doc).

    Raises:
        SerializationError: a value of a type Haystack's form cannot hold.
    """
    from threadloom.messages import BaseMessage
    from threadloom.messages.haystack_dict import message_to_haystack_dict

    if isinstance(value, BaseMessage):
        return {"type": HS_MESSAGE}, message_to_haystack_dict(value)
    if isinstance(value, BaseModel):
        return {"type": _class_path(type(value))}, value.model_dump()
    if isinstance(value, Mapping):
        props: dict[str, Any] = {}
        data: dict[str, Any] = {}
        for key, item in value.items():
            props[key], data[key] = value_with_schema(item)
        return {"type": "object", "properties": props}, data
    if isinstance(value, list | tuple | set | frozenset):
        return _array(value)
    if callable(getattr(value, "to_dict", None)) and not isinstance(value, type):
        return {"type": _class_path(type(value))}, value.to_dict()
    if isinstance(value, Enum):
        return {"type": _class_path(type(value))}, value.name
    if callable(value) and not isinstance(value, type):
        return {"type": "typing.Callable"}, handler_path(value)
    for kind, name in _PRIMITIVES:
        if isinstance(value, kind):
            return {"type": name}, value
    raise SerializationError(
        f"cannot serialize a value of type {type(value).__name__!r} in Haystack's form "
        "(primitives, lists, tuples, sets, dicts, messages, pydantic models, Enums, "
        "callables and objects with to_dict())", type_name=type(value).__qualname__)


def _array(value: Any) -> tuple[dict[str, Any], list[Any]]:
    pairs = [value_with_schema(item) for item in value]
    schemas = [p[0] for p in pairs]
    schema: dict[str, Any]
    if not schemas:
        schema = {"type": "array", "items": {}}
    elif all(s == schemas[0] for s in schemas):
        schema = {"type": "array", "items": schemas[0]}
    else:
        schema = {"type": "array", "prefixItems": schemas}
    if isinstance(value, set | frozenset):
        schema["uniqueItems"] = True
        if isinstance(value, frozenset):
            schema["frozen"] = True
    elif isinstance(value, tuple):
        schema["minItems"] = schema["maxItems"] = len(value)
    return schema, [p[1] for p in pairs]


def data_to_haystack(data: Mapping[str, Any], what: str = "the agent's State data"
                     ) -> dict[str, Any]:
    """``{"serialization_schema", "serialized_data"}`` of a State's values; a key whose
    value cannot be written is left out with a warning (as Haystack's field fallback)."""
    props: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for key, value in data.items():
        try:
            props[key], values[key] = value_with_schema(value)
        except Exception as exc:  # noqa: BLE001 - as Haystack: one bad field is omitted
            _LOG.warning("Failed to serialize the '%s' field of %s. The field will be "
                         "omitted from the snapshot. Error: %s", key, what, exc)
    return {"serialization_schema": {"type": "object", "properties": props},
            "serialized_data": values}


__all__ = ["HS_HANDLERS", "HS_MESSAGE", "data_to_haystack", "handler_path", "type_path",
           "value_with_schema"]
