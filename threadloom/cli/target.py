"""Loading a user's graph from ``MODULE:ATTR`` (a module path or a ``.py`` file) and
turning what it names (a ``StateGraph``, a ``CompiledGraph``, a factory) into a
``CompiledGraph`` on the command's checkpointer."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from threadloom.cli.common import CliError, describe

__all__ = ["as_graph", "load_target"]


def _import_module(name: str) -> Any:
    if name.endswith(".py") or os.sep in name:
        path = Path(name)
        if not path.is_file():
            raise CliError(f"no Python file at {name!r}", 2)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise CliError(f"cannot load {name!r} as a Python module", 2)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise CliError(f"cannot import module {name!r}: no module named {exc.name!r} "
                           f"(run from the project directory or check PYTHONPATH)", 2) from exc
        raise CliError(f"importing module {name!r} failed: {exc}", 2) from exc
    except Exception as exc:
        raise CliError(f"importing module {name!r} failed: {type(exc).__name__}: {exc}",
                       2) from exc


def load_target(spec: str) -> Any:
    """Import ``MODULE:ATTR`` (``pkg.mod:graph``, ``path/to/file.py:graph``, ``a:obj.attr``).

    Raises:
        CliError: (exit 2) a malformed spec, a module that does not import, or a missing
            attribute.
    """
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"expected MODULE:ATTR (e.g. myapp.graphs:graph), got {spec!r}", 2)
    obj = _import_module(module_name)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CliError(f"module {module_name!r} has no attribute {attr!r}", 2)
        obj = getattr(obj, part)
    return obj


def as_graph(obj: Any, checkpointer: Any = None, spec: str | None = None) -> Any:
    """Turn a loaded object into a ``CompiledGraph`` using ``checkpointer``.

    A ``StateGraph`` is compiled with it; a ``CompiledGraph`` is compiled again from its
    builder with the same interrupts, durability and name but this checkpointer (unless
    ``checkpointer`` is None: then it is used as is); a function without required
    arguments is called and what it returns (which must be a graph) converted. ``spec``
    (``MODULE:ATTR``) names the object in messages.

    Raises:
        CliError: (exit 2) the object is none of those, or a factory returned no graph
            (the message names the factory and what it returned).
    """
    from threadloom.engine.compiled import CompiledGraph
    from threadloom.engine.graph import StateGraph

    if isinstance(obj, CompiledGraph):
        if checkpointer is None:
            return obj
        return obj.builder.compile(
            checkpointer, interrupt_before=sorted(obj.interrupt_before),
            interrupt_after=sorted(obj.interrupt_after), durability=obj.durability,
            name=obj.name)
    if isinstance(obj, StateGraph):
        return obj.compile(checkpointer)
    if callable(obj) and not isinstance(obj, type):
        name = spec or repr(obj)
        made = _call_factory(obj, name)
        if not isinstance(made, CompiledGraph | StateGraph):
            raise CliError(f"the factory {name!r} returned {_a(made)}, not a StateGraph or "
                           "CompiledGraph (return the graph or builder from it)", 2)
        return as_graph(made, checkpointer, spec)
    raise CliError(f"{spec or 'the target'} is {_a(obj)}, not a StateGraph or CompiledGraph",
                   2)


def _a(obj: Any) -> str:
    """``None``, or ``a``/``an`` and the name of ``obj``'s type, for messages."""
    if obj is None:
        return "None"
    kind = type(obj).__name__
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def _call_factory(factory: Callable[..., Any], name: str) -> Any:
    """``factory()``, after checking from its signature that it needs no arguments.

    Raises:
        CliError: (exit 2) it needs arguments, or calling it raised.
    """
    try:
        inspect.signature(factory).bind()
    except TypeError as exc:
        raise CliError(f"{name!r} is a function that needs arguments ({exc}); point at a "
                       "graph or a factory without arguments", 2) from exc
    except ValueError:  # no signature to read (some builtins): calling it will tell
        pass
    try:
        return factory()
    except Exception as exc:
        if os.environ.get("THREADLOOM_DEBUG"):
            raise
        raise CliError(f"the factory {name!r} raised {describe(exc)}", 2) from exc
