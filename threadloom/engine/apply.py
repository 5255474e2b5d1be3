"""Applying a super-step's writes to the run's state, through each channel's reducer.

The loop's *apply* verb (``RunLoop`` in scheduler.py calls ``apply_step``). Writes are
applied in a fixed order, never completion order: edge-triggered tasks by node name, then
``Send`` tasks as sent (as LangGraph's ``apply_writes``), so shuffling when tasks finish
gives the same state; a key written more than once in a step
merges all its writes at once (a last-value key then raises ``InvalidUpdateError`` naming
every writer).
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any

from threadloom.checkpoint.base import BaseCheckpointer
from threadloom.engine.channels import MISSING
from threadloom.types import START

if TYPE_CHECKING:
    from threadloom.engine.scheduler import RunLoop
    from threadloom.engine.tasks import Task, TaskResult

_KEY = itemgetter(0)  # the key of a (key, value) write
_NEXT = BaseCheckpointer.get_next_version  # the default version bump (see _applied)


def apply_step(loop: RunLoop, tasks: list[Task], results: list[TaskResult]) -> set[str]:
    """Apply a finished step's writes, task by task; return the keys that changed."""
    if len(tasks) == 1:  # a lone task: its writes, each tagged with its name
        writes = results[0].writes
        updated = apply_from(loop, writes, tasks[0].name, loop.step)
    else:
        writes = []
        nodes = []
        for task, result in _write_order(tasks, results):
            for write in result.writes:
                writes.append(write)
                nodes.append(task.name)
        updated = apply_writes(loop, writes, nodes)
    if loop.namespace:
        for key, value in writes:
            loop.written_keys.setdefault(key, []).append(value)
    return updated


def _write_order(tasks: list[Task], results: list[TaskResult]) -> list[tuple[Task, TaskResult]]:
    """The order a step's writes are applied in, as LangGraph's ``apply_writes``: tasks
    triggered by edges by node name, then the tasks of ``Send`` packets as sent."""
    pairs = list(zip(tasks, results, strict=True))
    if all(task.pushed for task in tasks):  # a fan-out: its packets, as sent
        return pairs
    return sorted(pairs, key=lambda pair: (pair[0].pushed, "" if pair[0].pushed else pair[0].name))


def apply_writes(loop: RunLoop, writes: list[tuple[str, Any]], nodes: list[str]) -> set[str]:
    """Apply ``writes`` (``(key, value)`` pairs, ``nodes[i]`` wrote ``writes[i]``) in
    order; return the keys that changed."""
    step = loop.step + 1 if nodes and nodes[0] == START else loop.step
    values = loop.values
    written = set(map(_KEY, writes))
    if len(written) == len(writes):
        # The usual step: every key is written once. Merging one key at a time, in
        # write order, equals the grouped merge below with one-item groups
        # (``merge_one`` is ``merge`` of one value, exceptions included).
        channels = loop.channels
        for (key, value), node in zip(writes, nodes, strict=True):
            merged = channels[key].merge_one(values.get(key, MISSING), value, node, step)
            if merged is MISSING:
                values.pop(key, None)
            else:
                values[key] = merged
    else:
        _apply_grouped(loop, writes, nodes, step)
    return _applied(loop, written)


def apply_from(loop: RunLoop, writes: list[tuple[str, Any]], node: str, step: int) -> set[str]:
    """``apply_writes(writes, [node] * len(writes))``: the writes of one node."""
    values = loop.values
    written = set(map(_KEY, writes))
    if len(written) == len(writes):  # each key once: as in apply_writes
        channels = loop.channels
        for key, value in writes:
            merged = channels[key].merge_one(values.get(key, MISSING), value, node, step)
            if merged is MISSING:
                values.pop(key, None)
            else:
                values[key] = merged
    else:
        _apply_grouped(loop, writes, [node] * len(writes), step)
    return _applied(loop, written)


def default_bump(cp: Any) -> bool:
    """Whether checkpointer ``cp`` bumps versions as the base does (``_applied`` then
    bumps them itself), not with a ``get_next_version`` of its own (LangGraph's hook)."""
    return getattr(type(cp), "get_next_version", _NEXT) is _NEXT


def _applied(loop: RunLoop, written: set[str]) -> set[str]:
    """End a step's writes: clear ephemeral keys nobody wrote; bump versions. Returns
    the keys that changed (``written`` itself, grown by the cleared keys)."""
    values = loop.values
    for key in loop.graph.ephemeral_keys:
        if key not in written and key in values:
            del values[key]  # seen by one super-step: cleared
            written.add(key)
    cp = loop.cp
    if cp is not None:  # versions feed checkpoints only
        versions = loop.versions
        if loop.plain_bump:  # the default, inlined (default_bump, known for the run)
            for key in written:
                versions[key] = versions.get(key, 0) + 1
        else:  # a checkpointer's own versions (LangGraph's get_next_version), errors too
            bump = cp.get_next_version
            for key in written:
                versions[key] = bump(versions.get(key), None)
    return written


def _apply_grouped(
    loop: RunLoop, writes: list[tuple[str, Any]], nodes: list[str], step: int
) -> None:
    """Apply writes where some key is written more than once: each key's writes merge
    together, in write order (a ``LastValue`` key then raises, naming every writer)."""
    channels = loop.channels
    values = loop.values
    grouped: dict[str, tuple[list[Any], list[str]]] = {}
    for (key, value), node in zip(writes, nodes, strict=True):
        entry = grouped.get(key)
        if entry is None:
            grouped[key] = ([value], [node])
        else:
            entry[0].append(value)
            entry[1].append(node)
    for key, (written, who) in grouped.items():
        merged = channels[key].merge(values.get(key, MISSING), written, who, step)
        if merged is MISSING:
            values.pop(key, None)
        else:
            values[key] = merged
