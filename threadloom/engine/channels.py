"""Channels: where each state key's value lives and how writes to it merge.

The contract every channel keeps (as LangGraph's ``channels/`` modules do):

- ``value`` holds the current value or ``MISSING``;
- ``update(values, nodes, step)`` applies all writes of one super-step, given in task order
  (never completion order), and returns whether the value changed;
- ``end_step(written)`` runs after every super-step's writes are applied and returns whether
  the value changed (an ephemeral channel clears itself there);
- ``reset()`` puts the initial value back.

Three kinds:

- ``LastValue``: keeps the last write; two writes in one super-step are an error.
- ``Reduced``: merges each write through ``reducer(current, update) -> new``.
- any channel built with ``ephemeral=True`` (the ``Ephemeral`` marker) is cleared at the
  end of the first super-step in which nobody wrote it, so a value is seen by exactly the
  step after the one that wrote it (as LangChain's ``jump_to``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadloom.engine.errors import InvalidUpdateError

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING", "__slots__": ()})()


class Ephemeral:
    """Marker for ``Annotated[T, Ephemeral]``: the value lives for one super-step.

    A value written in step *s* is visible to the nodes of step *s + 1* (and to the
    routing that follows step *s*), then cleared unless written again.
    """

    def __init__(self) -> None:  # pragma: no cover - used as a class marker only
        raise TypeError("Ephemeral is a marker: write Annotated[T, Ephemeral]")


class Channel:
    """Base of the channel kinds; see the module docstring for the contract."""

    __slots__ = ("key", "value", "ephemeral", "initial")

    def __init__(self, key: str, initial: Any = MISSING, ephemeral: bool = False) -> None:
        self.key = key
        self.initial = initial
        self.value = initial
        self.ephemeral = ephemeral

    def update(self, values: list[Any], nodes: list[str], step: int) -> bool:
        raise NotImplementedError

    def end_step(self, written: bool) -> bool:
        if self.ephemeral and not written and self.value is not MISSING:
            self.value = MISSING
            return True
        return False

    def reset(self) -> None:
        self.value = self.initial


class LastValue(Channel):
    """Keeps the last value written; one write per super-step at most."""

    __slots__ = ()

    def update(self, values: list[Any], nodes: list[str], step: int) -> bool:
        if len(values) != 1:
            if not values:
                return False
            names = ", ".join(repr(n) for n in nodes)
            raise InvalidUpdateError(
                f"state key {self.key!r} received {len(values)} values in super-step {step} "
                f"(from nodes {names}) but it keeps only one value per step. Give it a reducer, "
                f"e.g. Annotated[list, operator.add], to merge concurrent writes.",
                field=self.key,
                nodes=tuple(nodes),
                step=step,
            )
        self.value = values[0]
        return True


class Reduced(Channel):
    """Merges every write through ``reducer(current, update) -> new``, in task order."""

    __slots__ = ("reducer",)

    def __init__(
        self,
        key: str,
        reducer: Callable[[Any, Any], Any],
        initial: Any = MISSING,
        ephemeral: bool = False,
    ) -> None:
        self.key = key
        self.initial = self.value = initial
        self.ephemeral = ephemeral
        self.reducer = reducer

    def update(self, values: list[Any], nodes: list[str], step: int) -> bool:
        if not values:
            return False
        value = self.value
        reducer = self.reducer
        for i, update in enumerate(values):
            if value is MISSING:
                value = update
                continue
            try:
                value = reducer(value, update)
            except Exception as exc:
                node = nodes[i] if i < len(nodes) else "?"
                exc.add_note(
                    f"while merging a write of node {node!r} into state key {self.key!r} "
                    f"at super-step {step} with reducer {_name(reducer)}"
                )
                raise
        self.value = value
        return True


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
