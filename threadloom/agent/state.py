"""The live ``State`` agent hooks read and write (Haystack's ``State``).

A ``State`` wraps the agent's state dict with a schema of ``{key: {"type": T,
"handler": fn}}``. ``set`` merges a value through the key's handler: ``merge_lists``
for list types (``messages`` included, as Haystack's), ``replace_values`` otherwise. The
``State`` an agent hands its hooks merges ``messages`` with ``add_messages`` instead, as
the agent's graph does (``threadloom.agent.agent_state.hook_schema``).
``changes()`` returns what hooks set, so the agent can turn it into a graph update.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from threadloom.agent.state_format import data_from_dict, entry_from_dict
from threadloom.agent.state_haystack import data_to_haystack, handler_path, type_path
from threadloom.reducers import add_messages, merge_lists, replace_values

Handler = Callable[[Any, Any], Any]
"""A state handler: ``handler(current, update) -> new value`` (``current`` may be None)."""

RESERVED_KEYS = frozenset({
    "messages", "step_count", "token_usage", "tool_call_counts", "exit_reason",
    "continue_run", "stop_run", "jump_to", "tools", "hook_context", "context_tokens",
    "structured_response", "last_message",
})
"""State keys the agent owns; a user ``state_schema`` may not redefine them."""

_ATOMIC = frozenset({str, int, float, bool, bytes})

def _is_list_type(tp: Any) -> bool:
    return tp is list or typing.get_origin(tp) is list


def default_handler(key: str, tp: Any) -> Handler:
    """The handler a schema entry gets when it names none.

    ``merge_lists`` for ``list`` / ``list[T]`` (``messages`` too); ``replace_values``
    for anything else (as Haystack's ``State``).
    """
    return merge_lists if _is_list_type(tp) else replace_values


def is_valid_type(tp: Any) -> bool:
    """Whether ``tp`` can be a State schema ``type``: a class (``str``, a dataclass, a
    generic class), ``Any``, or a parametrized type (``list[int]``, ``dict[str, X]``,
    ``X | None``, ``Optional[X]``). Not a string, an instance, a function or bare ``Union``.
    """
    return isinstance(tp, type) or tp is Any or typing.get_origin(tp) is not None


def validate_schema(schema: Mapping[str, Any]) -> None:
    """Check a State schema as ``State(schema)`` does, without building a ``State``.

    Raises:
        ValueError: an entry without ``type``, a ``type`` that is no type
            (``is_valid_type``), a ``handler`` that is not callable or None, or
            ``messages`` typed as anything but a list of messages.
    """
    _normalize_schema(schema)


def _normalize_schema(schema: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    if not isinstance(schema, Mapping):
        raise TypeError(f"State schema must be a dict, got {type(schema).__name__}")
    result: dict[str, dict[str, Any]] = {}
    for key, entry in schema.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"State schema keys must be non-empty strings, got {key!r}")
        if not isinstance(entry, Mapping) or "type" not in entry:
            raise ValueError(f"State schema entry {key!r} is missing a 'type' entry (each "
                             "entry is a dict with a 'type' key)")
        unknown = set(entry) - {"type", "handler"}
        if unknown:
            raise ValueError(f"State schema entry {key!r} has unknown field(s) {sorted(unknown)}")
        _check_type(key, entry["type"])
        handler = entry.get("handler") or default_handler(key, entry["type"])
        if not callable(handler):
            raise ValueError(f"State schema entry {key!r}: 'handler' must be callable or None, "
                             f"got {handler!r}")
        result[key] = {"type": entry["type"], "handler": handler}
    if "messages" not in result:
        from threadloom.messages import BaseMessage

        result["messages"] = {"type": list[BaseMessage], "handler": merge_lists}
    return result


def _check_type(key: str, tp: Any) -> None:
    """Refuse a schema type that is not a type (as Haystack's ``State``): a string, an
    instance, or ``messages`` typed as anything but a list of messages."""
    from threadloom.messages import BaseMessage

    if isinstance(tp, str):
        raise ValueError(f"State schema entry {key!r}: 'type' must be a Python type, got the "
                         f"string {tp!r} (write {tp} without quotes)")
    if not is_valid_type(tp):
        raise ValueError(f"State schema entry {key!r}: 'type' must be a Python type, got {tp!r}")
    if key != "messages":
        return
    args = typing.get_args(tp)
    item = args[0] if args else None
    items = typing.get_args(item) if typing.get_origin(item) is not None else (item,)
    if not _is_list_type(tp) or not all(
            i is None or i is Any or (isinstance(i, type) and issubclass(i, BaseMessage))
            for i in items):
        raise ValueError(f"State schema entry 'messages' must be typed list[AnyMessage] "
                         f"(a list of messages), got {tp!r}")


class State:
    """The agent state as hooks see it: read, write through handlers, record changes.

    As Haystack's ``State``: ``State(schema, data)`` with ``get``, ``set``, ``has``,
    ``data``, ``to_dict``/``from_dict``. A ``messages`` entry (``list[BaseMessage]``,
    handler ``merge_lists``) is added when the schema lacks one.

    Args:
        schema: ``{key: {"type": T, "handler": fn}}``; ``handler`` is optional (see
            ``default_handler``).
        data: initial values, stored as given (not merged, not recorded as changes).

    Raises:
        ValueError: a malformed schema entry (``data`` is taken as given, as Haystack's:
            a key outside the schema is kept, and only ``set`` checks keys).
    """

    __slots__ = ("_changed", "_data", "_schema")
    __threadloom_injection__ = "live_state"  # a tool parameter typed State receives one

    @classmethod
    def over(cls, values: Mapping[str, Any] | None) -> State:
        """A ``State`` over a copy of ``values`` (a graph state dict), every key typed
        ``Any``: what a tool parameter typed ``State`` gets when the engine has no
        ``State`` to give; the tool's ``set`` calls are written back as a state update."""
        data = dict(values) if isinstance(values, Mapping) else dict(vars(values or {}))
        schema: dict[str, Any] = {k: {"type": Any} for k in data if k != "messages"}
        schema["messages"] = {"type": list, "handler": add_messages}  # as the graph merges
        return cls(schema, data)

    def __init__(self, schema: Mapping[str, Any], data: Mapping[str, Any] | None = None) -> None:
        self._schema = _normalize_schema(schema)
        self._data: dict[str, Any] = {}
        self._changed: dict[str, None] = {}
        self._data.update(data or {})  # as Haystack's: data keys are not checked

    def _require_key(self, key: str) -> None:
        if key not in self._schema:
            raise ValueError(f"Key {key!r} not found in schema: State has no key {key!r}; "
                             f"schema keys: {', '.join(sorted(self._schema))}")

    @property
    def schema(self) -> dict[str, dict[str, Any]]:
        """The normalized schema: every entry has ``type`` and ``handler``."""
        return self._schema

    @property
    def data(self) -> dict[str, Any]:
        """The live dict of values (mutating it in place is not recorded by ``changes``)."""
        return self._data

    def get(self, key: str, default: Any = None) -> Any:
        """A deep copy of the value of ``key`` (or of ``default``), as Haystack's: changing
        it changes nothing until ``set``. A value that cannot be copied (a connection in
        ``hook_context``) is returned as it is; ``data[key]`` is always the live value."""
        value = self._data.get(key, default)
        if value is None or type(value) in _ATOMIC:
            return value
        try:
            return copy.deepcopy(value)
        except Exception:  # noqa: BLE001 - an uncopyable object is returned live
            return value

    def has(self, key: str) -> bool:
        """Whether ``key`` has a value."""
        return key in self._data

    def set(self, key: str, value: Any, handler_override: Handler | None = None) -> None:
        """Merge ``value`` into ``key`` through its handler, and record the change.

        Args:
            key: a schema key.
            value: the update; e.g. a list is appended by ``merge_lists``.
            handler_override: a handler used this time instead of the schema's (e.g.
                ``replace_values`` to overwrite a list).

        Raises:
            ValueError: ``key`` is not in the schema.
        """
        self._require_key(key)
        handler = handler_override or self._schema[key]["handler"]
        self._data[key] = handler(self._data.get(key), value)
        self._changed[key] = None

    def changes(self) -> dict[str, Any]:
        """The current values of every key ``set`` since creation, in first-set order."""
        return {key: self._data[key] for key in self._changed}

    def to_dict(self, skip_keys: Iterable[str] | None = None) -> dict[str, Any]:
        """A JSON-able dict in Haystack's ``State.to_dict()`` form, which Haystack loads:
        ``{"schema": {key: {"type", "handler"}}, "data": {"serialization_schema",
        "serialized_data"}}`` (``threadloom.agent.state_haystack`` says how each part is
        written). A value Haystack's form cannot hold (a datetime, a connection) is left
        out with a warning naming the key, as Haystack leaves it out.

        Args:
            skip_keys: keys left out of both (Haystack's ``to_dict(skip_keys=)``).
        """
        skip = set(skip_keys or ())
        schema = {key: {"type": type_path(e["type"]), "handler": handler_path(e["handler"])}
                  for key, e in self._schema.items() if key not in skip}
        data = {k: v for k, v in self._data.items() if k not in skip}
        return {"schema": schema, "data": data_to_haystack(data)}

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, schema: Mapping[str, Any] | None = None,
        allowed_modules: Iterable[str] = (),
    ) -> State:
        """Rebuild a ``State`` written by ``to_dict``, or by Haystack's ``State.to_dict``
        (``threadloom.agent.state_format`` says what is read and how).

        Built-in handler names (``merge_lists``, ``replace_values``, ``add_messages``, and
        Haystack's paths of the first two) are resolved without importing anything; types
        only among builtins. Any other handler path is imported only from
        ``allowed_modules`` (as ``Agent.from_dict``); or pass ``schema`` to give the
        handlers and exact types yourself.

        Raises:
            ValueError: a custom handler path with neither ``schema`` nor
                ``allowed_modules``; a Haystack message dict that cannot be read.
            SecurityError: a custom handler path outside ``allowed_modules``.
            SerializationError: the data holds a type the codec refuses.
        """
        if schema is None:
            schema = {key: entry_from_dict(key, e, allowed_modules)
                      for key, e in data["schema"].items()}
        return cls(schema, data_from_dict(data.get("data", {})))

    def __copy__(self) -> State:
        return State(self._schema, dict(self._data))

    def __deepcopy__(self, memo: dict[int, Any]) -> State:
        return State(self._schema, copy.deepcopy(self._data, memo))

    def __repr__(self) -> str:
        return f"State(keys={sorted(self._data)}, changed={list(self._changed)})"


def validate_user_schema(schema: Any, *, inherited: Mapping[str, Any] | None = None) -> None:
    """Refuse a user ``state_schema`` that redefines a reserved key.

    Args:
        schema: a Haystack-style dict ``{key: {"type": T, ...}}``, or a TypedDict,
            dataclass or pydantic class (its annotations are read).
        inherited: annotations of ``AgentState``; a reserved key whose type is exactly
            the inherited one (a subclass of ``AgentState``) is accepted.

    Raises:
        ValueError: naming the first reserved key redefined.
    """
    if isinstance(schema, Mapping):
        declared = {k: (v.get("type") if isinstance(v, Mapping) else v) for k, v in schema.items()}
    elif isinstance(schema, type):
        declared = {}
        for klass in reversed(schema.__mro__):
            declared.update(getattr(klass, "__annotations__", {}) or {})
    else:
        raise TypeError(f"state_schema must be a dict or a class, got {type(schema).__name__}")
    inherited = inherited or {}
    for key in sorted(declared):
        if key in RESERVED_KEYS and not (key in inherited and declared[key] == inherited[key]):
            raise ValueError(
                f"state_schema redefines key {key!r}, which is reserved for Agent internal "
                f"state; reserved keys: "
                f"{', '.join(sorted(RESERVED_KEYS))}")


__all__ = [
    "RESERVED_KEYS", "Handler", "State", "default_handler", "is_valid_type", "validate_schema",
    "validate_user_schema",
]
