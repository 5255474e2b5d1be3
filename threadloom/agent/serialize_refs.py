"""Code and types as data: ``"module:qualname"`` import paths, checked both ways.

Writing (``import_path``) checks that a path imports back to the very object, so only
module-level functions, classes and ``@tool`` objects are written. Reading (``load_path``)
imports a module only when the caller allows it: a config file is data, maybe from someone
else, and importing a module runs its code. ``threadloom`` is always allowed; an object
found through an allowed module must also have been *defined* in an allowed one (so
``myapp.tools:os.system`` is refused), and names starting with ``_`` are never followed.
Nothing is evaluated or unpickled.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from threadloom.errors import SecurityError, SerializationError

ALWAYS_ALLOWED = ("threadloom",)
"""Module prefixes ``load_path`` always allows."""
TYPE_MODULES = ("builtins", "typing", "datetime", "decimal", "uuid")
"""Extra module prefixes allowed when a path names a type (``type_from_data``)."""


def import_path(obj: Any, what: str) -> str:
    """``"module:qualname"`` of a module-level object, checked to import back to ``obj``.

    Raises:
        SerializationError: ``obj`` is a lambda, a local or otherwise not importable.
    """
    target = getattr(obj, "__wrapped__", None) or obj
    if hasattr(obj, "func") and hasattr(obj, "coroutine"):  # a Tool: its function's place
        target = obj.func or obj.coroutine
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise SerializationError(
            f"cannot serialize {what} {obj!r}: only module-level functions, classes and "
            "@tool objects can be written by import path (no lambdas or local functions)")
    path = f"{module}:{qualname}"
    try:
        found = _resolve(module, qualname)
    except (ImportError, AttributeError) as exc:
        raise SerializationError(f"cannot serialize {what} {obj!r}: {path} does not import "
                                 f"({exc})") from exc
    if found is not obj:
        raise SerializationError(
            f"cannot serialize {what} {obj!r}: {path} names a different object; define it "
            "at module level under its own name")
    return path


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = sys.modules.get(module) or importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _allowed(module: str, prefixes: Iterable[str]) -> bool:
    for prefix in prefixes:
        base = prefix.rstrip(".")
        if base and (module == base or module.startswith(base + ".")):
            return True
    return False


def load_path(path: Any, allowed_modules: Iterable[str], what: str, *,
              extra: Iterable[str] = ()) -> Any:
    """Import the object at ``"module:qualname"`` if its module is allowed.

    Args:
        path: the import path.
        allowed_modules: module prefixes the caller allows (``threadloom`` always is).
        what: what the path is for, in error messages.
        extra: more allowed prefixes for this lookup (e.g. ``builtins`` for types).

    Raises:
        SecurityError: the module, or the module the object was defined in, is not allowed,
            or the path follows a private name.
        SerializationError: a malformed path, or one that does not import.
    """
    if not isinstance(path, str) or path.count(":") != 1:
        raise SerializationError(f"{what}: expected an import path 'module:name', got {path!r}")
    module, qualname = path.split(":")
    prefixes = (*ALWAYS_ALLOWED, *allowed_modules, *extra)
    if not module or not qualname or any(p.startswith("_") for p in qualname.split(".")):
        raise SecurityError(f"{what}: import path {path!r} is malformed or names a private "
                            "attribute")
    if not _allowed(module, prefixes):
        raise SecurityError(
            f"{what}: module {module!r} is not allowed; loading imports only modules under "
            f"{', '.join(prefixes)} (pass allowed_modules=[...] to Agent.from_dict, "
            "agent_from_dict or from_yaml to allow more)")
    try:
        obj = _resolve(module, qualname)
    except (ImportError, AttributeError) as exc:
        raise SerializationError(f"{what}: cannot import {path!r}: {exc}") from exc
    origin = _origin_module(obj)
    if origin is not None and not _allowed(origin, prefixes):
        raise SecurityError(f"{what}: {path!r} is {origin}.{qualname.split('.')[-1]}, defined "
                            f"in a module that is not allowed")
    return obj


def _origin_module(obj: Any) -> str | None:
    if hasattr(obj, "func") and hasattr(obj, "coroutine"):
        obj = obj.func or obj.coroutine
    if not isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType) and \
            not hasattr(obj, "__qualname__"):
        obj = type(obj)
    return getattr(obj, "__module__", None)


def type_to_data(tp: Any) -> Any:
    """A type as data: ``"module:Name"``, or ``{"origin": ..., "args": [...]}`` for
    generics such as ``list[int]`` or ``int | None``; ``None`` for ``NoneType``/``Any``
    is written as its path.

    Raises:
        SerializationError: a type that is neither a class nor a supported generic.
    """
    if tp is None or tp is type(None):
        return "builtins:NoneType"
    if tp is typing.Any:
        return "typing:Any"
    origin = typing.get_origin(tp)
    if origin is not None:
        if origin is types.UnionType:
            origin = typing.Union
        if origin is typing.Literal:
            raise SerializationError(f"cannot serialize the type {tp!r} (Literal)")
        origin_path = "typing:Union" if origin is typing.Union else type_to_data(origin)
        return {"origin": origin_path, "args": [type_to_data(a) for a in typing.get_args(tp)]}
    if isinstance(tp, type):
        if tp.__module__ == "builtins":
            return f"builtins:{tp.__qualname__}"
        return import_path(tp, "type")
    raise SerializationError(f"cannot serialize the type {tp!r}")


def type_from_data(data: Any, allowed_modules: Iterable[str]) -> Any:
    """Inverse of ``type_to_data`` (builtins/typing/datetime/decimal/uuid always allowed)."""
    if data == "builtins:NoneType":
        return type(None)
    if isinstance(data, Mapping):
        origin = type_from_data(data.get("origin"), allowed_modules)
        args = tuple(type_from_data(a, allowed_modules) for a in data.get("args", []))
        return origin[args] if args else origin
    found = load_path(data, allowed_modules, "type", extra=TYPE_MODULES)
    if not (isinstance(found, type) or found is typing.Any or found is typing.Union):
        raise SecurityError(f"type {data!r} is not a class")
    return found



def tool_to_data(tool: Any) -> str | dict[str, Any]:
    """A tool as data: the import path of a module-level ``@tool`` object or function, else
    (a ``Tool(name, description, func=...)`` built in code, as Haystack's ``Tool``)
    ``{"type": "threadloom.tools:Tool", "init_parameters": {name, description, func and/or
    coroutine paths, return_direct}}``.

    Raises:
        SerializationError: neither works (a lambda, or a tool given an ``args_schema``).
    """
    try:
        return import_path(tool, "tool")
    except SerializationError:
        model = getattr(tool, "args_model", None)
        if not (hasattr(tool, "func") and hasattr(tool, "coroutine")) or getattr(
                model, "__name__", None) != f"{tool.name}_args":
            raise
    params: dict[str, Any] = {"name": tool.name, "description": tool.description,
                              "return_direct": tool.return_direct}
    for key in ("func", "coroutine"):
        fn = getattr(tool, key)
        if fn is not None:
            params[key] = import_path(fn, f"tool {tool.name!r} {key}")
    return {"type": "threadloom.tools:Tool", "init_parameters": params}


def tool_from_data(item: Any, allowed_modules: Iterable[str]) -> Any:
    """The tool ``tool_to_data`` wrote (functions imported only from allowed modules).

    Raises:
        SecurityError / SerializationError: see ``load_path``; a dict of another type.
    """
    from threadloom.tools import Tool

    if not isinstance(item, Mapping):
        obj = load_path(item, allowed_modules, "tool")
        if not (isinstance(obj, Tool) or inspect.isfunction(obj)):
            raise SecurityError(f"tool: {item!r} is not a Tool or a function")
        return obj
    if item.get("type") != "threadloom.tools:Tool":
        raise SerializationError(f"tool: expected type 'threadloom.tools:Tool', got "
                                 f"{item.get('type')!r}")
    params = dict(item.get("init_parameters") or {})
    for key in ("func", "coroutine"):
        if params.get(key) is not None:
            fn = load_path(params[key], allowed_modules, f"tool {key}")
            if not inspect.isfunction(fn):
                raise SecurityError(f"tool {key}: {params[key]!r} is not a function")
            params[key] = fn
    return Tool(**params)

__all__ = [
    "ALWAYS_ALLOWED", "TYPE_MODULES", "import_path", "load_path", "tool_from_data",
    "tool_to_data", "type_from_data", "type_to_data",
]
