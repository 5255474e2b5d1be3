"""Managed values: state keys the engine fills for each node call instead of storing them
(LangGraph's ``RemainingSteps`` and ``IsLastStep``).

``remaining_steps: RemainingSteps`` in a state schema gives every node (and router) that
reads the key the number of super-steps left before ``recursion_limit`` stops the run;
``is_last_step: IsLastStep`` is True in the last one. They are not channels: never
saved, never in the output, and what a node writes to them is dropped.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Annotated, Any, get_args, get_origin, get_type_hints


class ManagedValue:
    """A value computed per node call; subclasses implement ``get``."""

    @staticmethod
    def get(remaining: int) -> Any:
        """The value for a step with ``remaining`` super-steps left (this one included)."""
        raise NotImplementedError


class RemainingStepsManager(ManagedValue):
    """Super-steps left before the recursion limit, this one included."""

    @staticmethod
    def get(remaining: int) -> int:
        """``remaining`` itself."""
        return remaining


class IsLastStepManager(ManagedValue):
    """Whether this super-step is the last the recursion limit allows."""

    @staticmethod
    def get(remaining: int) -> bool:
        """True when one step is left (this one)."""
        return remaining == 1


RemainingSteps = Annotated[int, RemainingStepsManager]
IsLastStep = Annotated[bool, IsLastStepManager]


def manager_of(hint: Any) -> type[ManagedValue] | None:
    """The manager in an annotation (also inside ``Required``/``NotRequired``), or None."""
    while get_origin(hint) is not Annotated and get_args(hint) and get_origin(hint) in (
            typing.Required, typing.NotRequired):
        hint = get_args(hint)[0]
    if get_origin(hint) is not Annotated:
        return None
    for item in hint.__metadata__:
        if isinstance(item, type) and issubclass(item, ManagedValue):
            return item
    return None


def managed_keys(schema: Any, localns: Mapping[str, Any] | None = None
                 ) -> dict[str, type[ManagedValue]]:
    """``{key: manager}`` of a schema's managed keys (empty when its hints cannot be read)."""
    if not isinstance(schema, type):
        return {}
    try:
        hints = get_type_hints(schema, localns=dict(localns or {}), include_extras=True)
    except Exception:  # noqa: BLE001 - channel_specs reports unreadable schemas
        return {}
    return {k: m for k, h in hints.items() if (m := manager_of(h)) is not None}


def with_managed(values: Mapping[str, Any], managed: tuple[tuple[str, Any], ...],
                 remaining: int) -> dict[str, Any]:
    """``values`` plus each managed key's value for a step with ``remaining`` left."""
    out = dict(values)
    for key, manager in managed:
        out[key] = manager.get(remaining)
    return out


__all__ = ["IsLastStep", "IsLastStepManager", "ManagedValue", "RemainingSteps",
           "RemainingStepsManager", "managed_keys", "manager_of", "with_managed"]
