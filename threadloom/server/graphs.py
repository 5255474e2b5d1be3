"""The graphs a server serves, as assistants.

Each graph (``NAME=MODULE:ATTR`` on the command line, or an entry of ``langgraph.json``'s
``"graphs"``) becomes one assistant whose id is the same UUID that LangGraph's server
gives it (``uuid5`` of the graph name in LangGraph's namespace), so a client that kept an
assistant id from ``langgraph dev`` finds the same assistant here. Runs may name the
assistant by id or by graph name.

Every graph runs on the server's checkpointer: a ``StateGraph`` is compiled with it, a
compiled graph is compiled again from its builder with the same interrupts, durability
and name (a checkpointer it was compiled with is replaced, as LangGraph's server does,
since threads must outlive the process and be shared by every run).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadloom.engine.compiled import CompiledGraph
from threadloom.engine.graph import StateGraph
from threadloom.server.wire import now_iso

NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")  # LangGraph's
THREAD_WAIT_S = 30.0  # a run waits this long for a thread another process holds


class GraphLoadError(Exception):
    """A graph spec that cannot be loaded; the message names the spec and why."""


def assistant_id_of(graph_id: str) -> str:
    """The assistant id of a graph name (as LangGraph's server derives it)."""
    return str(uuid.uuid5(NAMESPACE_GRAPH, graph_id))


def load_object(spec: str, base_dir: Path | None = None) -> Any:
    """Import ``MODULE:ATTR`` or ``path/to/file.py:ATTR`` (relative to ``base_dir``).

    Raises:
        GraphLoadError: a malformed spec, a file or module that does not import, or a
            missing attribute.
    """
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise GraphLoadError(f"expected MODULE:ATTR or path/file.py:ATTR, got {spec!r}")
    if target.endswith(".py") or "/" in target:
        path = Path(target)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise GraphLoadError(f"{spec!r}: no Python file at {str(path)!r}")
        module = _import_file(path, spec)
    else:
        root = str(base_dir or Path.cwd())
        if root not in sys.path:
            sys.path.insert(0, root)
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise GraphLoadError(f"{spec!r}: importing {target!r} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise GraphLoadError(f"{spec!r}: module {target!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _import_file(path: Path, spec: str) -> Any:
    name = f"threadloom_served_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise GraphLoadError(f"{spec!r}: cannot load {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the file's own sibling imports work
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise GraphLoadError(f"{spec!r}: importing {str(path)!r} failed: "
                             f"{type(exc).__name__}: {exc}") from exc
    return module


def as_served_graph(obj: Any, checkpointer: Any, spec: str) -> CompiledGraph:
    """``obj`` (a StateGraph, a CompiledGraph or a factory without arguments returning
    one) compiled on ``checkpointer``.

    Raises:
        GraphLoadError: ``obj`` is none of those.
    """
    if isinstance(obj, CompiledGraph):
        return obj.builder.compile(
            checkpointer, interrupt_before=sorted(obj.interrupt_before),
            interrupt_after=sorted(obj.interrupt_after), durability=obj.durability,
            name=obj.name, busy_timeout=THREAD_WAIT_S)
    if isinstance(obj, StateGraph):
        return obj.compile(checkpointer, busy_timeout=THREAD_WAIT_S)
    if callable(obj) and not isinstance(obj, type):
        try:
            inspect.signature(obj).bind()
        except TypeError as exc:
            raise GraphLoadError(f"{spec!r} is a function that needs arguments ({exc})") from exc
        except ValueError:
            pass
        made = obj()
        if isinstance(made, CompiledGraph | StateGraph):
            return as_served_graph(made, checkpointer, spec)
        raise GraphLoadError(f"the factory {spec!r} returned {type(made).__name__}, not a graph")
    raise GraphLoadError(f"{spec!r} is a {type(obj).__name__}, not a StateGraph or "
                         "CompiledGraph")


@dataclass
class Assistant:
    """One assistant: a served graph with its own config, context and metadata (the body
    of ``GET /assistants/{id}``). The graph's own assistant (``created_by: system``) is
    made at start; others by ``POST /assistants`` (see ``assistants_store.py``)."""

    graph_id: str
    graph: CompiledGraph
    assistant_id: str = ""
    created_at: str = field(default_factory=now_iso)
    config: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=lambda: {"created_by": "system"})
    description: str | None = None
    name: str = ""
    version: int = 1
    updated_at: str = ""

    def __post_init__(self) -> None:
        self.assistant_id = self.assistant_id or assistant_id_of(self.graph_id)
        self.name = self.name or self.graph_id
        self.updated_at = self.updated_at or self.created_at

    def json(self) -> dict[str, Any]:
        """The wire body."""
        return {"assistant_id": self.assistant_id, "graph_id": self.graph_id,
                "config": self.config, "context": self.context, "metadata": self.metadata,
                "name": self.name, "created_at": self.created_at,
                "updated_at": self.updated_at, "version": self.version,
                "description": self.description}


def load_graphs(specs: dict[str, str], checkpointer: Any, base_dir: Path | None = None
                ) -> dict[str, CompiledGraph]:
    """Every ``name -> MODULE:ATTR`` loaded and compiled on ``checkpointer``.

    Raises:
        GraphLoadError: for the first spec that fails, naming it.
    """
    if not specs:
        raise GraphLoadError("no graph to serve: give MODULE:ATTR or a langgraph.json")
    return {name: as_served_graph(load_object(spec, base_dir), checkpointer, spec)
            for name, spec in specs.items()}
