"""Reading a stored ``State`` (``State.from_dict``).

``State.to_dict`` writes Haystack's form (``threadloom.agent.state_haystack``), and this
reads it, whether threadloom or Haystack wrote it: ``{"schema": {key: {"type": name,
"handler": path}}, "data": {"serialization_schema", "serialized_data"}}``. Handler paths
of Haystack's ``state_utils`` module (``...state_utils.merge_lists`` /
``.replace_values``) are the same functions as threadloom's, and
``threadloom.reducers.add_messages`` is threadloom's: all three are mapped by name. Type
strings are read as their builtin container (``"list[...ChatMessage]"`` or
``"typing.List[...]"`` as ``list``; ``ChatMessage`` lists as ``list[BaseMessage]``), any
other class as ``Any``. Data is read as JSON values: Haystack ``ChatMessage`` dicts
become threadloom messages, arrays marked as tuples or sets become those; values of
other classes (pydantic models, objects with ``to_dict``) are left as their dicts.
Older threadloom data (bare handler names, data in the checkpoint codec's form) is read
too.

Security: a handler path other than those is code, so it is imported only from modules
the caller allows (``allowed_modules``, the rule of ``threadloom.agent.serialize``);
nothing is imported otherwise.
"""

from __future__ import annotations

import json
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
    "tuple": tuple, "set": set, "NoneType": type(None), "None": type(None), "Any": Any,
    "typing.Any": Any,
}
_HAYSTACK_HANDLERS = "haystack.components.agents.state.state_utils."
_TYPING_NAMES = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set"}


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
    short = str(name)
    for prefix in (_HAYSTACK_HANDLERS, "threadloom.reducers."):
        short = short.removeprefix(prefix)
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
        per_item = schema.get("prefixItems")
        items = [_haystack_value(v, per_item[i] if isinstance(per_item, list) and i < len(
            per_item) else schema.get("items")) for i, v in enumerate(value)]
        if schema.get("uniqueItems"):
            return frozenset(items) if schema.get("frozen") else set(items)
        if "minItems" in schema and schema.get("minItems") == schema.get("maxItems"):
            return tuple(items)
        return items
    if kind == "object" and isinstance(value, Mapping):
        props = schema.get("properties") or {}
        return {k: _haystack_value(v, props.get(k)) for k, v in value.items()}
    return value


def _type_from_name(name: Any) -> Any:
    text = str(name)
    if text in KNOWN_TYPES:
        return KNOWN_TYPES[text]
    if text.endswith("[haystack.dataclasses.chat_message.ChatMessage]") and text.split(
            "[", 1)[0].removeprefix("typing.") in ("list", "List"):
        from threadloom.messages import BaseMessage

        return list[BaseMessage]
    head = text.split("[", 1)[0].removeprefix("typing.")
    head = _TYPING_NAMES.get(head, head)
    return KNOWN_TYPES.get(head, Any) if "[" in text else Any


__all__ = ["KNOWN_HANDLERS", "KNOWN_TYPES", "data_from_dict", "entry_from_dict"]
