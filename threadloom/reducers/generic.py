"""Generic reducers for state fields (Haystack's ``merge_lists`` / ``replace_values``)."""

from __future__ import annotations

from typing import Any


def merge_lists(current: Any, update: Any) -> list[Any]:
    """Append ``update`` to ``current``, as Haystack's ``merge_lists`` state handler.

    Args:
        current: the stored list; ``None`` counts as ``[]``, any other non-list value as a
            one-item list.
        update: a list (its items are appended) or any other value (appended as one item).

    Returns:
        A new list; ``current`` is not mutated.
    """
    if current is None:
        base: list[Any] = []
    elif isinstance(current, list):
        base = current
    else:
        base = [current]
    if isinstance(update, list):
        return base + update
    return [*base, update]


def replace_values(current: Any, update: Any) -> Any:
    """Return ``update``: the last write wins (Haystack's ``replace_values``)."""
    return update


__all__ = ["merge_lists", "replace_values"]
