"""Tools written as LangChain ``BaseTool`` subclasses: fields declared on the class,
the work in ``_run`` (sync) and/or ``_arun`` (async).

::

    class Lookup(Tool):
        name: str = "lookup"
        description: str = "Find a record"
        table: str = "users"

        def _run(self, key: str) -> str: ...

    Lookup(table="orders")

``Tool.__init_subclass__`` gives such a class (one that defines ``_run`` or ``_arun``
and no ``__init__``) ``init_from_fields`` as its constructor: keyword arguments set the
declared fields over their class defaults, then the tool is built from ``_run`` /
``_arun`` as ``Tool(name, description, func=..., coroutine=...)`` would build it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["init_from_fields"]

_TOOL_ARGS = ("name", "description", "args_schema", "return_direct")
_REQUIRED: Any = object()


def _declared(cls: type, stop: type) -> dict[str, Any]:
    """Annotated class attributes of ``cls`` and its bases below ``stop``, with their
    defaults (``_REQUIRED`` when none)."""
    fields: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or issubclass(stop, klass):
            continue
        for key in klass.__dict__.get("__annotations__", {}):
            fields[key] = klass.__dict__.get(key, fields.get(key, _REQUIRED))
    return fields


def init_from_fields(self: Any, **given: Any) -> None:
    """Construct a ``Tool`` subclass from its declared fields and ``given`` overrides.

    Raises:
        TypeError: an argument names no declared field, or a field without a default is
            not given.
        ValueError: as ``Tool`` (a bad name, neither ``_run`` nor ``_arun``).
    """
    from threadloom.tools.core import Tool

    cls = type(self)
    fields = _declared(cls, Tool)
    unknown = sorted(set(given) - set(fields) - set(_TOOL_ARGS))
    if unknown:
        raise TypeError(f"{cls.__name__}() got unexpected field(s) {unknown}; "
                        f"declared: {sorted(set(fields) | set(_TOOL_ARGS))}")
    values = {**fields, **given}
    missing = sorted(k for k, v in values.items() if v is _REQUIRED)
    if missing:
        raise TypeError(f"{cls.__name__}() missing field(s) {missing}")
    for key, value in values.items():
        if key not in _TOOL_ARGS:
            setattr(self, key, value)
    run = self._run if _defines(cls, "_run", Tool) else None
    arun = self._arun if _defines(cls, "_arun", Tool) else None
    description = values.get("description")
    if description is None:
        description = (cls.__doc__ or "").strip()
    Tool.__init__(self, values.get("name") or cls.__name__, description, func=run,
                  coroutine=arun, args_schema=values.get("args_schema"),
                  return_direct=bool(values.get("return_direct", False)))


def _defines(cls: type, method: str, stop: type) -> bool:
    return any(method in k.__dict__ for k in cls.__mro__ if k is not stop
               and not issubclass(stop, k))
