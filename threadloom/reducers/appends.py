"""Which long lists are known to extend another list: how a checkpoint stores a list delta
without comparing the whole list.

A reducer that appends (``operator.add`` on two lists, an append-only ``add_messages``)
calls ``note_append(result, base)`` when ``base`` is long; the blob layer asks
``appended_from(value)`` when it encodes a channel value and, given the list it stored
last for that channel, writes only ``value[len(base):]`` (O(tail), not O(history)).
Entries hold both lists, so an ``id()`` reused after garbage collection never matches;
at most ``_SIZE`` entries are kept (the oldest goes), and an entry is taken out when asked
for, so a run without a checkpointer keeps only the last few lists alive.
"""

from __future__ import annotations

import operator
from typing import Any

LONG = 512
"""Lists shorter than this are not noted: comparing them item by item costs less."""

_SIZE = 8
_APPENDS: dict[int, tuple[list[Any], list[Any]]] = {}


def note_append(result: list[Any], base: list[Any]) -> None:
    """Record that ``result`` starts with exactly ``base``'s items (the same objects, in
    order): ``result`` was built as ``base + tail`` and neither list is changed later."""
    if len(_APPENDS) >= _SIZE:
        try:  # drop the oldest entry; another thread may be changing the dict meanwhile
            _APPENDS.pop(next(iter(_APPENDS)), None)
        except (RuntimeError, StopIteration):
            pass
    _APPENDS[id(result)] = (result, base)


def appended_from(value: Any) -> list[Any] | None:
    """The list ``value`` was noted to extend (taking the note out), or None."""
    entry = _APPENDS.pop(id(value), None)
    if entry is not None and entry[0] is value:
        return entry[1]
    return None


def add(left: Any, right: Any) -> Any:
    """``operator.add``, noting a long list's append for the checkpointer (``note_append``).

    The schema uses it in place of ``operator.add``: the result is the same object
    ``left + right`` gives, and errors are ``operator.add``'s own.
    """
    result = operator.add(left, right)
    if type(left) is list and type(result) is list and len(left) >= LONG:
        note_append(result, left)
    return result


add.__qualname__ = add.__name__ = "add"  # error notes name the reducer the user wrote
