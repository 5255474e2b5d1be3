"""Leaving ``UntrackedValue`` keys out of everything a run saves.

As LangGraph: a key annotated ``Annotated[T, UntrackedValue]`` holds its value for the run
only. Checkpoints leave it out of ``channel_values``, saved task writes leave out its
writes, and the ``Send`` packets a checkpoint or a saved write keeps lose it from their
argument's top level (a ``Send`` often carries the whole state). Callers check
``graph.untracked_keys`` first, so graphs without such keys pay nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from threadloom.checkpoint.base import SCHEDULED


def tracked_values(untracked: frozenset[str], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` without the untracked keys."""
    return {k: v for k, v in values.items() if k not in untracked}


def tracked_next(untracked: frozenset[str], items: Iterable[Any]) -> list[Any]:
    """A checkpoint's ``next`` (node names and ``{"node", "arg"}`` packets) with each
    packet's dict argument stripped of untracked keys."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get("arg"), Mapping):
            item = {**item, "arg": tracked_values(untracked, item["arg"])}
        out.append(item)
    return out


def tracked_writes(
    untracked: frozenset[str], writes: Iterable[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """A task's writes as saved: untracked keys' writes dropped, the ``Send`` packets of
    its routing stripped of them."""
    out: list[tuple[str, Any]] = []
    for key, value in writes:
        if key in untracked:
            continue
        if key == SCHEDULED and isinstance(value, list):
            value = tracked_next(untracked, value)
        out.append((key, value))
    return out
