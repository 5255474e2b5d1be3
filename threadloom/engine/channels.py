"""Channels: how writes to each state key merge.

A channel is the per-key merge rule of a compiled graph; it holds no value. A run keeps
the whole state in one dict, ``RunLoop.values`` (key -> value; a key without a value is
absent), and applies each super-step's writes through the channels. The contract (as
LangGraph's ``channels/`` modules, with the value moved out of the channel object):

- ``merge(current, values, nodes, step)`` returns the new value after all writes of one
  super-step, given in task order (never completion order); ``current`` is the value
  before, or ``MISSING``; ``values`` is never empty;
- ``ephemeral`` channels are cleared by the run at the end of the first super-step in which
  nobody wrote them, so a value is seen by exactly the step after the one that wrote it
  (as LangChain's ``jump_to``);
- ``initial`` is the value a run starts with (``MISSING`` for none); ``fresh_initial``
  marks a default that is built anew for every run (a mutable container).

Two kinds:

- ``LastValue``: keeps the last write; two writes in one super-step are an error.
- ``Reduced``: merges each write through ``reducer(current, update) -> new``; an
  ``Overwrite`` write (or its JSON form) replaces the value instead, once per step at most.

A key marked ``UntrackedValue`` is a ``LastValue`` whose value lives in the run only:
it is never checkpointed (nor kept in saved writes or ``Send`` packets).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadloom.errors import InvalidUpdateError
from threadloom.types import OVERWRITE, Overwrite

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING", "__slots__": ()})()


class Ephemeral:
    """Marker for ``Annotated[T, Ephemeral]``: the value lives for one super-step.

    A value written in step *s* is visible to the nodes of step *s + 1* (and to the
    routing that follows step *s*), then cleared unless written again.
    """

    def __init__(self) -> None:  # pragma: no cover - used as a class marker only
        raise TypeError("Ephemeral is a marker: write Annotated[T, Ephemeral]")


class UntrackedValue:
    """Marker for ``Annotated[T, UntrackedValue]``: the value is never checkpointed.

    As LangGraph's ``UntrackedValue`` channel: nodes of the run see what was written (a
    lock, a client, a session), but checkpoints, saved writes and the ``Send`` packets
    they keep leave the key out, so ``get_state`` does not show it and a resumed run
    starts without it. ``UntrackedValue(T, guard=False)`` (an instance, as LangGraph
    takes too) keeps the last of several writes in one step instead of refusing them.

    Args:
        typ: the value's type (documentation only).
        guard: refuse two writes in one super-step (``InvalidUpdateError``).
    """

    __slots__ = ("typ", "guard", "value")

    def __init__(self, typ: Any = None, guard: bool = True) -> None:
        self.typ = typ
        self.guard = guard
        self.value: Any = MISSING

    # LangGraph's stateful channel protocol (see threadloom.engine.channel_objects); a
    # checkpoint never holds the value, so a restored channel is always empty
    ValueType = property(lambda self: self.typ)
    UpdateType = property(lambda self: self.typ)

    def from_checkpoint(self, checkpoint: Any) -> UntrackedValue:
        """A fresh, empty copy (nothing of an untracked value is ever saved)."""
        return UntrackedValue(self.typ, self.guard)

    def update(self, values: list[Any]) -> bool:
        """Keep the last of ``values``; False when there were none.

        Raises:
            InvalidUpdateError: several values with ``guard`` on.
        """
        if not values:
            return False
        if self.guard and len(values) > 1:
            raise InvalidUpdateError("UntrackedValue(guard=True) can receive only one value "
                                     "per step. Use guard=False if you want to store any "
                                     "one of multiple values.")
        self.value = values[-1]
        return True

    def get(self) -> Any:
        """The value written this run. Raises ``EmptyChannelError`` when none."""
        if self.value is MISSING:
            from threadloom.errors import EmptyChannelError

            raise EmptyChannelError("UntrackedValue holds no value")
        return self.value

    def checkpoint(self) -> Any:
        """``MISSING``: an untracked value is never saved."""
        return MISSING


def overwrite_of(value: Any) -> tuple[bool, Any]:
    """``(True, new value)`` when ``value`` is an ``Overwrite`` or one of its JSON forms
    (``{"__overwrite__": v}``, ``{"type": "__overwrite__", "value": v}``), else
    ``(False, None)``."""
    if type(value) is Overwrite:
        return True, value.value
    if isinstance(value, dict):
        if len(value) == 1 and OVERWRITE in value:
            return True, value[OVERWRITE]
        if value.get("type") == OVERWRITE and "value" in value:
            return True, value["value"]
    return False, None


class Channel:
    """Base of the channel kinds; see the module docstring for the contract.

    Args:
        key: the state key.
        initial: the value a run starts with, or ``MISSING``.
        ephemeral: cleared one super-step after it was written.
    """

    __slots__ = ("key", "ephemeral", "initial")

    def __init__(self, key: str, initial: Any = MISSING, ephemeral: bool = False) -> None:
        self.key = key
        self.initial = initial
        self.ephemeral = ephemeral

    def merge(self, current: Any, values: list[Any], nodes: list[str], step: int) -> Any:
        """The value after one super-step's ``values`` (written by ``nodes``, in order).

        Raises:
            InvalidUpdateError: the writes break the channel's rule (the message names the
                key, the nodes and the step).
        """
        raise NotImplementedError

    def merge_one(self, current: Any, value: Any, node: str, step: int) -> Any:
        """``merge(current, [value], [node], step)``: the value after a step's only write.

        The run's fast path for a step in which every key is written once; a channel kind
        may override it only with exactly that result (and the same exceptions).
        """
        return self.merge(current, [value], [node], step)


class LastValue(Channel):
    """Keeps the last value written; one write per super-step at most."""

    __slots__ = ()

    def merge(self, current: Any, values: list[Any], nodes: list[str], step: int) -> Any:
        """See ``Channel.merge``; more than one write is an ``InvalidUpdateError``."""
        if len(values) != 1:
            names = ", ".join(repr(n) for n in nodes)
            raise InvalidUpdateError(
                f"At key {self.key!r}: received {len(values)} values in super-step {step} "
                f"(from nodes {names}) but it keeps only one value per step. Give it a reducer, "
                f"e.g. Annotated[list, operator.add], to merge concurrent writes.",
                field=self.key,
                nodes=tuple(nodes),
                step=step,
            )
        return values[0]

    def merge_one(self, current: Any, value: Any, node: str, step: int) -> Any:
        """See ``Channel.merge_one``: one write is always allowed and is the new value."""
        return value


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
        self.initial = initial
        self.ephemeral = ephemeral
        self.reducer = reducer

    def merge(self, current: Any, values: list[Any], nodes: list[str], step: int) -> Any:
        """See ``Channel.merge``; a reducer's exception gets a note naming node, key, step.
        An ``Overwrite`` replaces the value, and later plain writes of the step are
        dropped (as LangGraph's ``BinaryOperatorAggregate``); a second one raises."""
        value = current
        reducer = self.reducer
        if len(values) == 1:  # one write: the usual case
            return self.merge_one(current, values[0], nodes[0] if nodes else "?", step)
        overwritten = False
        for i, update in enumerate(values):
            is_new, new = overwrite_of(update)
            if is_new:
                if overwritten:
                    raise InvalidUpdateError(
                        f"At key {self.key!r}: Can receive only one Overwrite value per "
                        f"super-step. (super-step {step}, from nodes "
                        f"{', '.join(repr(n) for n in nodes)})",
                        field=self.key, nodes=tuple(nodes), step=step,
                    )
                value, overwritten = new, True
            elif overwritten:
                continue
            elif value is MISSING:
                value = update
            else:
                try:
                    value = reducer(value, update)
                except Exception as exc:
                    self._note(exc, nodes[i] if i < len(nodes) else "?", step)
                    raise
        return value

    def merge_one(self, current: Any, value: Any, node: str, step: int) -> Any:
        """See ``Channel.merge_one``: the first value of a key as is, else reduced (an
        ``Overwrite`` is its value)."""
        if type(value) is Overwrite or (isinstance(value, dict) and (
                OVERWRITE in value or "type" in value)):  # overwrite_of's forms, cheaply
            is_new, new = overwrite_of(value)
            if is_new:
                return new
        if current is MISSING:
            return value
        try:
            return self.reducer(current, value)
        except Exception as exc:
            self._note(exc, node, step)
            raise

    def _note(self, exc: Exception, node: str, step: int) -> None:
        exc.add_note(
            f"while merging a write of node {node!r} into state key {self.key!r} "
            f"at super-step {step} with reducer {_name(self.reducer)}"
        )


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
