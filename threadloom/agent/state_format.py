"""The stored form of a ``State`` (``State.to_dict`` / ``State.from_dict``).

threadloom writes ``{"schema": {key: {"type": name, "handler": name}}, "data": ...}``:
types by name (``list[int]`` as ``"list"``), the three built-in handlers by bare name
(``merge_lists``, ``replace_values``, ``add_messages``), any other handler by its dotted
path, and the data through the checkpoint codec.

Reading also takes Haystack's ``State.to_dict()`` form: handler paths of Haystack's
``state_utils`` module (``...state_utils.merge_lists`` / ``.replace_values``) are the same
functions as threadloom's and are mapped by name; type strings such as
``"list[haystack.dataclasses.chat_message.ChatMessage]"`` or ``"typing.List[...]"`` are
read as their container (``list``); and ``data`` in Haystack's
``{"serialization_schema", "serialized_data"}`` form is read as JSON values, Haystack
``ChatMessage`` dicts becoming threadloom messages.

Security: a handler path other than those is code, so it is imported only from modules
the caller allows (``allowed_modules``, the rule of ``threadloom.agent.serialize``);
nothing is imported otherwise.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from threadloom.messages.haystack_dict import is_haystack_message_dict, message_from_haystack_dict
from threadloom.reducers import add_messages, merge_lists, replace_values

KNOWN_HANDLERS: dict[str, Callable[[Any, Any], Any]] = {
    "merge_lists": merge_lists,
    "replace_values": replace_values,
    "add_messages": add_messages,
}
KNOWN_TYPES: dict[str, Any] = {
    "str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict,
    "tuple": tuple, "set": set, "NoneType": type(None), "Any": Any,
}
_HAYSTACK_HANDLERS = "haystack.components.agents.state.state_utils."
_TYPING_NAMES = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set"}


def type_name(tp: Any) -> str:
    """The stored name of a schema type: its container's builtin name, else ``"Any"``."""
    origin = typing.get_origin(tp) or tp
    name = getattr(origin, "__name__", None) or getattr(origin, "_name", None)
    return name if name in KNOWN_TYPES else "Any"


def handler_name(handler: Callable[[Any, Any], Any]) -> str:
    """The stored name of a handler: a built-in one's name, else its dotted path."""
    for name, known in KNOWN_HANDLERS.items():
        if handler is known:
            return name
    module = getattr(handler, "__module__", "?")
    return f"{module}.{getattr(handler, '__qualname__', repr(handler))}"


def entry_from_dict(key: str, entry: Mapping[str, Any],
                    allowed_modules: Iterable[str] = ()) -> dict[str, Any]:
    """A schema entry ``{"type": T[, "handler": fn]}`` from its stored form.

    Raises:
        ValueError: a handler path that is not built in, and no ``allowed_modules``.
        SecurityError: a handler path outside ``allowed_modules``.
        SerializationError: a handler path that does not import.
    """
    result: dict[str, Any] = {"type": _type_from_name(entry.get("type"))}
    name = entry.get("handler")
    if name is None:
        return result
    short = name[len(_HAYSTACK_HANDLERS):] if str(name).startswith(_HAYSTACK_HANDLERS) else name
    if short in KNOWN_HANDLERS:
        result["handler"] = KNOWN_HANDLERS[short]
        return result
    allowed = tuple(allowed_modules)
    if not allowed:
        raise ValueError(
            f"State.from_dict: key {key!r} has custom handler {name!r}; pass schema= to give "
            "it, or allowed_modules=[...] naming the module it may be imported from (stored "
            "data never imports code on its own)")
    from threadloom.agent.serialize_refs import load_path

    module, _, attr = str(name).rpartition(".")
    result["handler"] = load_path(f"{module}:{attr}", allowed, f"State handler of {key!r}")
    return result


def data_from_dict(data: Any) -> dict[str, Any]:
    """The values of a stored ``State``: threadloom's codec form, or Haystack's
    ``{"serialization_schema", "serialized_data"}`` form (see the module doc).

    Raises:
        SerializationError: a value the codec refuses.
        ValueError: a Haystack message dict that cannot be read.
    """
    if isinstance(data, Mapping) and "serialized_data" in data:
        values = dict(data.get("serialized_data") or {})
        props = (data.get("serialization_schema") or {}).get("properties") or {}
        return {key: _haystack_value(value, props.get(key)) for key, value in values.items()}
    from threadloom.checkpoint.serde import loads

    return loads(json.dumps(data or {}))  # type: ignore[no-any-return]


def _haystack_value(value: Any, schema: Any) -> Any:
    """A Haystack-serialized value; its ``serialization_schema`` entry says where
    ``ChatMessage`` dicts are (``{"type": "<...>.ChatMessage"}``, also as array items)."""
    schema = schema if isinstance(schema, Mapping) else {}
    kind = str(schema.get("type") or "")
    if kind.endswith("ChatMessage") and is_haystack_message_dict(value):
        return message_from_haystack_dict(value)
    if kind == "array" and isinstance(value, list):
        return [_haystack_value(v, schema.get("items")) for v in value]
    if kind == "object" and isinstance(value, Mapping):
        props = schema.get("properties") or {}
        return {k: _haystack_value(v, props.get(k)) for k, v in value.items()}
    return value


def _type_from_name(name: Any) -> Any:
    text = str(name)
    if text in KNOWN_TYPES:
        return KNOWN_TYPES[text]
    head = text.split("[", 1)[0].removeprefix("typing.")
    head = _TYPING_NAMES.get(head, head)
    return KNOWN_TYPES.get(head, Any) if "[" in text else Any


__all__ = ["KNOWN_HANDLERS", "KNOWN_TYPES", "data_from_dict", "entry_from_dict",
           "handler_name", "type_name"]
