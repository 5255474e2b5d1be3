"""LangGraph's small ``CompiledStateGraph`` conveniences: ``get_input_jsonschema`` /
``get_output_jsonschema``, ``with_config`` and ``copy``.

The schemas are pydantic's JSON schema of the graph's input / output schema (a
``TypedDict``, dataclass or pydantic model; its reducer annotations are ignored), as
LangGraph builds them: the class name as ``title``, ``required`` from the class's own
rules (``total=``, ``Required``/``NotRequired``, defaults).
"""

from __future__ import annotations

import copy as _copy
import dataclasses
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

import typing_extensions
from pydantic import BaseModel, TypeAdapter, create_model

__all__ = ["GraphApi", "merge_bound_config", "schema_json"]


def schema_json(schema: Any, name: str = "State") -> dict[str, Any]:
    """pydantic's JSON schema of a state schema (``{"type": "object"}`` when pydantic
    cannot describe one of its fields). A dataclass becomes a model named ``name``
    whose fields are optional when they have a default or their type admits None."""
    try:
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return schema.model_json_schema()
        if dataclasses.is_dataclass(schema):
            return _dataclass_model(schema, name).model_json_schema()
        if typing.is_typeddict(schema) and sys.version_info < (3, 12):
            schema = portable_typeddict(schema)  # pydantic's rule before 3.12
        return TypeAdapter(schema).json_schema()
    except Exception:  # noqa: BLE001 - an arbitrary field type has no JSON schema
        return {"title": getattr(schema, "__name__", name), "type": "object"}


def portable_typeddict(schema: Any) -> Any:
    """A ``typing_extensions.TypedDict`` with ``schema``'s keys, types and required keys
    (pydantic takes only those before Python 3.12)."""
    hints = typing.get_type_hints(schema)
    required = schema.__required_keys__
    keys = {k: (typing_extensions.Required[v] if k in required
                else typing_extensions.NotRequired[v]) for k, v in hints.items()}
    made = typing_extensions.TypedDict(schema.__name__, keys)  # type: ignore[misc]
    made.__module__ = schema.__module__
    return made


def _dataclass_model(schema: Any, name: str) -> type[BaseModel]:
    hints = typing.get_type_hints(schema)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(schema):
        default: Any = ...
        if f.default is not dataclasses.MISSING and f.default is not ...:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        elif _admits_none(hints.get(f.name)):
            default = None
        fields[f.name] = (hints.get(f.name, Any), default)
    return create_model(name, **fields)


def _admits_none(tp: Any) -> bool:
    if tp is None or tp is type(None) or tp is Any:
        return tp is not Any
    return any(_admits_none(a) for a in typing.get_args(tp)) if typing.get_origin(
        tp) in (typing.Union, types.UnionType, typing.Annotated) else False


def merge_bound_config(bound: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` over the config bound by ``with_config`` (``configurable``, ``tags``
    and ``metadata`` merged, the rest replaced), as LangChain merges configs."""
    out: dict[str, Any] = {**bound, **given}
    for key in ("configurable", "metadata"):
        if key in bound and key in given:
            out[key] = {**bound[key], **given[key]}
    if "tags" in bound and "tags" in given:
        out["tags"] = [*bound["tags"], *(t for t in given["tags"] if t not in bound["tags"])]
    return out


class GraphApi:
    """Mixed into ``CompiledGraph``."""

    builder: Any
    bound_config: dict[str, Any] = {}  # noqa: RUF012 - replaced, never mutated
    #: Seconds a super-step may take (set on the compiled graph, as LangGraph's
    #: ``graph.step_timeout = 1``); past it the step's running tasks are cancelled and the
    #: run raises ``TimeoutError``. None: no limit.
    step_timeout: float | None = None

    def get_input_jsonschema(self, config: Any = None) -> dict[str, Any]:
        """The JSON schema of the graph's input (its ``input_schema``)."""
        return schema_json(self.builder.input_schema, f"{self._name()}Input")

    def get_output_jsonschema(self, config: Any = None) -> dict[str, Any]:
        """The JSON schema of the graph's output (its ``output_schema``)."""
        return schema_json(self.builder.output_schema, f"{self._name()}Output")

    def _name(self) -> str:
        name = getattr(self, "name", None)
        return "LangGraph" if name in (None, "graph", "LangGraph") else str(name)

    def astream_events(self, input: Any, config: Any = None, *, version: str = "v2",
                       **kwargs: Any) -> Any:
        """LangChain's ``astream_events`` v2 for this graph: an async iterator of event
        dicts (``on_chain_start``/``stream``/``end`` of the graph and its node tasks,
        ``on_chat_model_stream`` per token chunk); see ``threadloom.engine.events``.

        Raises:
            ValueError: ``version`` other than ``"v2"``, or ``stream_mode``/``subgraphs``.
        """
        from threadloom.engine.events import astream_events

        return astream_events(self, input, config, version=version, **kwargs)

    def with_config(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """A copy of the graph that runs with ``config`` (and ``kwargs``, e.g.
        ``run_name=...``) under each call's own config."""
        clone = _copy.copy(self)
        clone.bound_config = merge_bound_config(self.bound_config, {**(config or {}), **kwargs})
        return clone

    def copy(self, update: Mapping[str, Any] | None = None) -> Any:
        """A shallow copy, with the attributes in ``update`` replaced."""
        clone = _copy.copy(self)
        for key, value in (update or {}).items():
            setattr(clone, key, value)
        return clone
