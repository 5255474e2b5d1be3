"""The codec's allow-list: which user classes stored data may name, and under what name.

A ``TypeRegistry`` maps a stable name (``module.QualName`` unless given) to a class and
back. It only ever holds classes that code in this process handed to it; nothing here
imports a module or resolves a name through ``sys.modules``.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import typing
from typing import Any

from pydantic import BaseModel

from threadloom.errors import SerializationError


def qualified_name(cls: type) -> str:
    """``module.QualName`` of a class."""
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def is_message_class(cls: type) -> bool:
    """Whether ``cls`` is one of threadloom's message types (stored with the ``msg`` tag)."""
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        return False
    if not cls.__module__.startswith("threadloom."):
        return False
    from threadloom.messages import BaseMessage

    return issubclass(cls, BaseMessage)


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def _registrable(cls: Any) -> bool:
    if not isinstance(cls, type) or is_message_class(cls):
        return False
    return (
        issubclass(cls, enum.Enum | BaseModel)
        or dataclasses.is_dataclass(cls)
        or _is_namedtuple(cls)
    )


class TypeRegistry:
    """Name <-> class allow-list, optionally falling back to a parent registry.

    Args:
        parent: a registry whose entries are also allowed (the module-level global one).
    """

    def __init__(self, parent: TypeRegistry | None = None) -> None:
        self.parent = parent
        self._by_name: dict[str, type] = {}
        self._by_cls: dict[type, str] = {}
        self._lock = threading.Lock()

    def register(self, cls: type, *, name: str | None = None) -> None:
        """Allow ``cls`` and, for models/dataclasses/NamedTuples, the types of its fields.

        Raises:
            SerializationError: ``cls`` is not an Enum, pydantic model, dataclass or
                NamedTuple.
        """
        if not _registrable(cls):
            raise SerializationError(
                f"cannot register {cls!r}: only Enum classes, pydantic models, dataclasses "
                "and NamedTuples can be registered with the checkpoint codec",
                type_name=qualified_name(cls) if isinstance(cls, type) else repr(cls),
            )
        self._add(cls, name)
        self._walk_fields(cls, set())

    def register_annotation(self, tp: Any) -> None:
        """Register every registrable class named anywhere in the annotation ``tp``."""
        self._walk(tp, set())

    def name_of(self, cls: type) -> str | None:
        """The registered name of ``cls``, or None when it is not allowed."""
        name = self._by_cls.get(cls)
        if name is None and self.parent is not None:
            return self.parent.name_of(cls)
        return name

    def lookup(self, name: str) -> type | None:
        """The class registered as ``name``, or None. Never imports anything."""
        cls = self._by_name.get(name)
        if cls is None and self.parent is not None:
            return self.parent.lookup(name)
        return cls

    # -- internals ------------------------------------------------------------------------

    def _add(self, cls: type, name: str | None) -> bool:
        name = name or qualified_name(cls)
        with self._lock:
            if self._by_name.get(name) is cls and self._by_cls.get(cls) == name:
                return False
            old = self._by_name.get(name)
            if old is not None:
                self._by_cls.pop(old, None)
            self._by_name[name] = cls
            self._by_cls[cls] = name
        return True

    def _walk(self, tp: Any, seen: set[int]) -> None:
        if id(tp) in seen:
            return
        seen.add(id(tp))
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            self._walk(typing.get_args(tp)[0], seen)
            return
        if origin is typing.Literal:
            for value in typing.get_args(tp):
                if isinstance(value, enum.Enum):
                    self._walk(type(value), seen)
            return
        if origin is not None:
            self._walk(origin, seen)
            for arg in typing.get_args(tp):
                self._walk(arg, seen)
            return
        if not isinstance(tp, type):
            return
        if _registrable(tp):
            if self.name_of(tp) is None:
                self._add(tp, None)
            self._walk_fields(tp, seen)
        elif typing.is_typeddict(tp):
            for hint in _hints(tp).values():
                self._walk(hint, seen)

    def _walk_fields(self, cls: type, seen: set[int]) -> None:
        seen.add(id(cls))
        if issubclass(cls, BaseModel):
            for info in cls.model_fields.values():
                self._walk(info.annotation, seen)
        elif dataclasses.is_dataclass(cls) or _is_namedtuple(cls):
            for hint in _hints(cls).values():
                self._walk(hint, seen)


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # unresolvable forward references: use what is already a class
        raw = getattr(cls, "__annotations__", {})
        return {k: v for k, v in raw.items() if not isinstance(v, str)}
