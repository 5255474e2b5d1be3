"""LangGraph's stateful channel objects, for code that builds and drives a channel by
hand (``channel = BinaryOperatorAggregate(int, operator.add).from_checkpoint(MISSING)``,
``channel.update([1, 2])``, ``channel.get()``, ``channel.checkpoint()``).

The engine itself merges through the stateless ``Channel`` kinds of
``threadloom.engine.channels``; these objects are the LangGraph spelling of the same
rules, and ``Annotated[int, BinaryOperatorAggregate(int, operator.add)]`` in a state
schema is the reducer ``operator.add`` (``UntrackedValue`` instances are markers there).
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Sequence
from typing import Any

from threadloom.engine.channels import MISSING, Reduced, overwrite_of
from threadloom.errors import EmptyChannelError, InvalidUpdateError


class ChannelObject:
    """The protocol: ``ValueType``/``UpdateType``, ``from_checkpoint`` (a fresh copy
    holding a saved value, ``MISSING`` for none), ``update(values) -> changed``,
    ``get()`` (``EmptyChannelError`` when empty), ``checkpoint()`` (``MISSING`` when
    empty), ``is_available()``."""

    typ: Any
    value: Any = MISSING

    @property
    def ValueType(self) -> Any:  # noqa: N802 - LangGraph's name
        """The type of the value held."""
        return self.typ

    @property
    def UpdateType(self) -> Any:  # noqa: N802 - LangGraph's name
        """The type of each update."""
        return self.typ

    def from_checkpoint(self, checkpoint: Any) -> Any:
        """A copy of this channel holding ``checkpoint`` (``MISSING``: its empty value)."""
        made = copy.copy(self)
        made.value = self._empty() if checkpoint is MISSING else checkpoint
        return made

    def _empty(self) -> Any:
        return MISSING

    def get(self) -> Any:
        """The value held.

        Raises:
            EmptyChannelError: nothing was written (nor restored).
        """
        if self.value is MISSING:
            raise EmptyChannelError(f"channel of {self.typ!r} holds no value")
        return self.value

    def is_available(self) -> bool:
        """Whether ``get()`` would return a value."""
        return self.value is not MISSING

    def checkpoint(self) -> Any:
        """What a checkpoint saves of this channel: its value, or ``MISSING``."""
        return self.value


class BinaryOperatorAggregate(ChannelObject, metaclass=abc.ABCMeta):
    """Every update folded in with ``operator(current, update)``, in order, starting
    from ``typ()`` when ``typ`` can be built with no arguments (as LangGraph's); an
    ``Overwrite`` replaces the value. The engine's own channel of a reducer key
    (``graph.channels[key]``, a ``Reduced``) counts as one for ``isinstance``, as
    LangGraph's graphs hold this class there.

    Args:
        typ: the value's type.
        operator: ``(current, update) -> new``.
    """

    def __init__(self, typ: Any, operator: Callable[[Any, Any], Any]) -> None:
        self.typ, self.operator = typ, operator
        self.value = self._empty()

    def _empty(self) -> Any:
        try:
            return self.typ()
        except Exception:  # noqa: BLE001 - a type that needs arguments starts empty
            return MISSING

    def update(self, values: Sequence[Any]) -> bool:
        """Fold ``values`` in; False when there were none.

        Raises:
            InvalidUpdateError: two ``Overwrite`` values in one update.
        """
        if not values:
            return False
        overwritten = False
        for item in values:
            is_new, new = overwrite_of(item)
            if is_new:
                if overwritten:
                    raise InvalidUpdateError("Can receive only one Overwrite value per step.")
                self.value, overwritten = new, True
            elif not overwritten:
                self.value = item if self.value is MISSING else self.operator(self.value, item)
        return True


BinaryOperatorAggregate.register(Reduced)
