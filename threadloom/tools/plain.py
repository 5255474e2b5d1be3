"""The plan of ``Tool.plain_kwargs``: a tool's keyword arguments made without pydantic
when every argument is a plain ``int``/``str``/``bool``/``float`` (the fast path)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

_MISSING: Any = object()
_PLAIN_TYPES = (int, str, bool, float)
_PlainPlan = tuple[type[BaseModel], tuple[tuple[str, type], ...]]


def _plain_fields(model: type[BaseModel], field_names: dict[str, str]) -> _PlainPlan | None:
    """The plan of ``Tool.plain_kwargs`` for an argument model built from a signature:
    ``(model, ((parameter, type), ...))`` when every field is a required, unconstrained,
    unaliased ``int``/``str``/``bool``/``float`` named as its parameter; else None."""
    if model.model_config.get("strict") or any(
            getattr(model.__pydantic_decorators__, kind)
            for kind in ("validators", "field_validators", "root_validators",
                         "model_validators")):
        return None
    plan: list[tuple[str, type]] = []
    fields = model.model_fields
    for pname, fname in field_names.items():
        info = fields.get(fname)
        if (info is None or fname != pname or info.annotation not in _PLAIN_TYPES
                or info.metadata or not info.is_required() or info.alias is not None
                or info.validation_alias is not None):
            return None
        plan.append((pname, info.annotation))  # type: ignore[arg-type]
    if len(plan) != len(fields):
        return None
    return model, tuple(plan)
